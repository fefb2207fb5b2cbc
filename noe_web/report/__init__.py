"""``noe report``: how much of the cluster could run on each architecture, and what blocks the rest.

* :mod:`.command` — the subcommand: flags, the run, exit status;
* :mod:`.inventory` — the pods, from files or the live cluster, with their top owners;
* :mod:`.lookups` — each distinct image looked up once, with a progress bar;
* :mod:`.table` — the terminal table and the number formats;
* :mod:`.html` — the self-contained HTML page (``templates/report.html.j2``).

The answer itself is computed by :mod:`noe_core.report.build`, with no I/O.
"""
