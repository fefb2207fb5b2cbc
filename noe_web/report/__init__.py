"""``noe report``: how much of the cluster could run on each architecture, and what blocks the rest.

The answer itself is computed by :mod:`noe_core.report`, with no I/O.

* :mod:`.command` — the subcommand: the run, exit status
* :mod:`.flags` — ``noe report``'s own flags (input, output, prices, hints)
* :mod:`.inventory` — the pods, from files or the live cluster, with their top owners
* :mod:`.lookups` — each distinct image looked up once, with a progress bar
* :mod:`.hints` — newer-tag hints for the plan's images
* :mod:`.table` — the terminal table and the number formats
* :mod:`.spreadsheet` — ``-o csv``: one row per workload
* :mod:`.html` — the self-contained HTML page (``templates/report.html.j2``)
* :mod:`.why` — ``noe why POD``: one pod read from the live cluster and explained
"""
