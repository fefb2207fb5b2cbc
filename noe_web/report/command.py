"""``noe report``: how much of the cluster could run on each architecture today, and what blocks the rest.

Input: the live cluster through the Kubernetes API, found as kubectl finds it
(``--kubeconfig``, else the files of ``$KUBECONFIG`` merged, else ``~/.kube/config``,
else the in-cluster service account; ``--context`` picks the context), listing
every namespace's Pods (``-n``: one namespace's) page by page and the ReplicaSets and Jobs that own them; or ``-f
FILE`` with what ``kubectl get pods -A -o json`` prints (a List, or several
YAML/JSON documents; ``-`` for standard input). ReplicaSets and Jobs in the file
are used to find top owners; other kinds are skipped.

Images: ``--platforms FILE`` (the ``noe mutate`` format) keeps it offline;
otherwise each image is read once from its registry with the registry flags of
``noe serve``, in parallel (``--concurrency``), with the pull secrets of the
pods that use it (live cluster). A progress bar goes to standard error when it
is a terminal.

Architectures of interest: ``--cluster-schedulable-archs`` (default amd64,arm64,
plus any architecture priced or targeted); image platforms are filtered as the
webhook filters them (``--system-os``, attestations and ``unknown`` entries
ignored). The other placement flags are accepted, so the webhook's ``NOE_*``
environment works unchanged, and ignored.

Migration: ``--prices`` (per requested vCPU-hour) and ``--memory-prices`` (per
GiB-hour) give each workload's monthly cost and today's saving on the target;
``--target`` (default: the cheapest priced architecture, else arm64) gets the
rebuild plan, every blocking image in the order that unlocks the most CPU first,
with newer tags that already offer the target (``--no-upgrade-hints`` skips them).

Output: a table (default), ``-o json`` or ``-o yaml`` (shape in docs/report.md),
``-o csv``, ``-o policyreport`` (PolicyReports for ``kubectl apply``), and
``--html FILE``, one self-contained page. Exit status: 0 success (whatever the
cluster's state), 2 bad input or usage, 1 when the Kubernetes API or every
registry lookup fails.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from noe_core import (
    InvalidSettings,
    NoeError,
    PolicySettings,
)
from noe_core.cli.flags import LEARNED, LOOKUP_TIMEOUT, PLATFORMS, POLICY_FILE, add_flags, require
from noe_core.cli.mutate import policy_files
from noe_core.cli.output import dump
from noe_core.cli.policy_options import add_policy_arguments, policy_settings_from_args
from noe_core.image.image_platforms import LookupResult, Lookups
from noe_core.image.learned import LearnedPlatforms, load_learned
from noe_core.placement.decider import Decider, FixedLearned, KnownAnswers
from noe_core.policies.merge import Policies
from noe_core.report.build import DEFAULT_ARCHITECTURES, Report, build_report
from noe_core.report.planner import choose_target, with_plan
from noe_core.report.pods import PodEntry
from noe_core.report.pricing import Prices
from noe_web.flags import CONTEXT, KUBECONFIG, NOE_NAMESPACE, SHARED_CACHE_BOUNDED_FLAGS, TARGET
from noe_web.registry_cache import shared_cache_config
from noe_web.report.flags import (
    API_TIMEOUT,
    CONCURRENCY,
    HTML,
    MEMORY_PRICES,
    PRICES,
    REPORT_FILENAME,
    REPORT_NAMESPACE,
    REPORT_OUTPUT,
    TOP,
    UPGRADE_HINTS,
)
from noe_web.report.hints import hint_pull_secrets, upgrade_hints
from noe_web.report.inventory import ClusterReader, pods_from_file
from noe_web.report.lookups import image_pull_secrets, lookup_each, progress_bar, report_service
from noe_web.report.table import render_table

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
REPORT_EXTRA_MODULES = frozenset({"tqdm", "pygal", "jinja2"})
_MAX_NOTES = 10


def add_report_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "report",
        help="how much of the cluster could run on each architecture, and which images block the rest",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(
        parser.add_argument_group("input"),
        (REPORT_FILENAME, KUBECONFIG, CONTEXT, REPORT_NAMESPACE, API_TIMEOUT, NOE_NAMESPACE),
    )
    add_flags(parser.add_argument_group("images"), (PLATFORMS, LOOKUP_TIMEOUT, CONCURRENCY))
    # the cluster's own (live), or given offline: each pod is decided as the webhook decides it
    add_flags(parser.add_argument_group("placement policies and learned platforms"), (POLICY_FILE, LEARNED))
    add_flags(parser.add_argument_group("cache shared with noe serve"), SHARED_CACHE_BOUNDED_FLAGS)
    add_flags(parser.add_argument_group("migration"), (PRICES, MEMORY_PRICES, TARGET, UPGRADE_HINTS))
    add_flags(parser.add_argument_group("output"), (REPORT_OUTPUT, HTML, TOP))
    add_policy_arguments(parser)
    # The registry client is part of noe_core; its flags are the ones noe serve takes.
    from noe_core.cli.registry_options import add_registry_arguments  # noqa: PLC0415

    add_registry_arguments(parser)
    parser.set_defaults(run=run_report)


# ---------------------------------------------------------------------------------------- command


def _settings(ns: argparse.Namespace, prices: Prices | None) -> tuple[PolicySettings, tuple[str, ...]]:
    """The policy flags as the webhook reads them, and the architectures of interest.

    Without ``--cluster-schedulable-archs``, an architecture priced or targeted is of interest too.
    """
    # The preference decides nothing here: a preferred arch outside a narrower list must not stop the report.
    settings = policy_settings_from_args(argparse.Namespace(**{**vars(ns), "preferred_arch": ""}))
    if settings.schedulable_archs:
        return settings, tuple(sorted(settings.schedulable_archs))
    wanted = {*DEFAULT_ARCHITECTURES, *(prices.cpu if prices is not None else ()), *([ns.target] if ns.target else [])}
    return settings, tuple(sorted(wanted))


def _say(stream: TextIO, notes: Sequence[str]) -> None:
    for note in notes[:_MAX_NOTES]:
        print(f"noe report: {note}", file=stream)
    if len(notes) > _MAX_NOTES:
        print(f"noe report: ... and {len(notes) - _MAX_NOTES} more like these", file=stream)


def run_report(
    ns: argparse.Namespace,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    from noe_web.kube.errors import KubeError  # noqa: PLC0415

    try:
        return _run(ns, stdin or sys.stdin, out, err, os.environ if environ is None else environ)
    except NoeError as exc:
        print(f"noe report: {exc}", file=err)
        return EXIT_BAD_INPUT
    except KubeError as exc:
        print(f"noe report: Kubernetes API: {exc}", file=err)
        return EXIT_FAILED
    except ModuleNotFoundError as exc:
        if exc.name not in REPORT_EXTRA_MODULES:
            raise
        print(
            f"noe report: needs the report extra: pip install 'noe-webhook[report]' (module {exc.name} is missing)",
            file=err,
        )
        return EXIT_BAD_INPUT


def _run(ns: argparse.Namespace, stdin: TextIO, out: TextIO, err: TextIO, environ: Mapping[str, str]) -> int:
    prices = Prices(ns.prices, ns.memory_prices) if ns.prices or ns.memory_prices else None
    settings, archs = _settings(ns, prices)
    # Checked now, before any lookup: a target or price that cannot be used is a usage error.
    if choose_target(archs, prices, ns.target) is None and ns.output == "policyreport":
        raise InvalidSettings("-o policyreport needs a target architecture: give --target")
    timeout: float = ns.lookup_timeout
    concurrency: int = ns.concurrency
    require(ns, KUBECONFIG)  # a bad one is an error even when -f means it is not read
    shared = shared_cache_config(ns)
    if ns.html:
        from noe_web.report.html import render_html  # noqa: PLC0415 - fail on a missing extra before any work
    reader: ClusterReader | None = None
    if ns.filename:
        inventory = pods_from_file(ns.filename, stdin)
    else:
        from noe_web.kube.client import KubeClient  # noqa: PLC0415
        from noe_web.kube.config import discover  # noqa: PLC0415

        config = discover(require(ns, KUBECONFIG), environ, context=ns.context or None, home=True)
        if config is None:
            raise InvalidSettings("no Kubernetes API: give --kubeconfig, set $KUBECONFIG, or read a file with -f")
        reader = ClusterReader(KubeClient(config, timeout=ns.api_timeout), ns.namespace)
        inventory = reader.inventory()
    _say(err, inventory.notes)
    images = list(dict.fromkeys(image for pod in inventory.pods for image in pod.images))
    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="noe-lookup") as pool:
        # The webhook's Secret reader, each Secret read once for the run (only for images needing a registry).
        secrets = None
        if reader is not None:
            from noe_web.kube.pull_secrets import KubePullSecrets  # noqa: PLC0415

            secrets = KubePullSecrets(reader.client, pool, remember=True)
        service = report_service(ns, pool, secrets, shared)
        pull_secrets = image_pull_secrets(inventory.pods) if secrets is not None else {}
        update, close = progress_bar(len(images), err)
        try:
            lookups = lookup_each(
                images,
                service,
                pull_secrets=pull_secrets,
                timeout=timeout,
                concurrency=concurrency,
                progress=update,
            )
        finally:
            close()
        _say(err, lookups.notes)
        # each pod decided by the pipeline every path calls: its placement policies' declared platforms
        # first, then these answers, less what exec format errors proved (as the webhook reads them)
        policies, learned = _cluster_facts(ns, reader, err)
        decider = Decider(settings, service, policies, FixedLearned(learned))
        known = KnownAnswers(decider, lookups.answers, lookups.sources)
        built = build_report(
            inventory.pods, lookups.answers, settings, archs, pod_lookups=lambda pod: _decided(known, pod)
        )
        report = with_plan(built, prices=prices, target=ns.target)
        report = replace(report, learned=learned.apply(LookupResult(lookups.answers)).warnings)
        if report.plan is not None and ns.upgrade_hints:
            hints = upgrade_hints(
                [step.image for step in report.plan.steps],
                report.plan.target,
                service=service,
                settings=settings,
                pull_secrets=hint_pull_secrets(pull_secrets),
                timeout=timeout,
                concurrency=concurrency,
            )
            report = replace(report, plan=report.plan.with_upgrades(hints.upgrades))
            _say(err, hints.notes)
    out.write(_render(report, ns.output, ns.top))
    if ns.html:
        generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        page = render_html(report, source=inventory.source, generated=generated, top=ns.top)
        try:
            Path(ns.html).write_text(page, encoding="utf-8")
        except OSError as exc:
            raise InvalidSettings(f"--html {ns.html}: cannot write it ({exc.strerror})") from None
    if lookups.registry_lookups and lookups.registry_failures == lookups.registry_lookups:
        print(
            f"noe report: every registry lookup failed ({lookups.registry_failures} images); "
            "check the registry flags and credentials",
            file=err,
        )
        return EXIT_FAILED
    return EXIT_OK


def _cluster_facts(
    ns: argparse.Namespace, reader: ClusterReader | None, err: TextIO
) -> tuple[Policies | None, LearnedPlatforms]:
    """The placement policies and learned platforms: the cluster's (live), else ``--policy`` and ``--learned``."""
    files = policy_files(ns, err)
    policies = files.as_policies() if files is not None else None
    learned_file = require(ns, LEARNED)
    learned = load_learned(learned_file) if learned_file else LearnedPlatforms()
    if reader is not None:
        from noe_web.kube.namespace import own_namespace  # noqa: PLC0415

        if policies is None:
            policies, notes = reader.policies()
            _say(err, notes)
        if not learned_file:
            learned, notes = reader.learned(ns.noe_namespace or own_namespace())
            _say(err, notes)
    return policies, learned


def _decided(known: KnownAnswers, pod: PodEntry) -> Lookups:
    """The pod's lookups as the pipeline decided them."""
    if pod.view is None:
        return known.answers
    return known.decision(pod.view, pod.namespace).lookups


def _render(report: Report, output: str, top: int) -> str:
    """Standard output in the chosen format."""
    if output == "table":
        return render_table(report, top=top)
    if output == "csv":
        from noe_web.report.spreadsheet import render_csv  # noqa: PLC0415

        return render_csv(report)
    if output == "policyreport":
        from noe_core.report.policy_reports import policy_reports  # noqa: PLC0415

        assert report.plan is not None  # a target was required before the lookups
        reports = policy_reports(report, report.plan.target, seconds=int(time.time()))
        return "".join("---\n" + dump(doc, "yaml") for doc in reports)
    return dump(report.to_json(), output)
