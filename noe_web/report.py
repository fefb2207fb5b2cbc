"""``noe report``: how much of the cluster could run on each architecture today, and what blocks the rest.

Input: the live cluster through the Kubernetes API (``--kubeconfig``, else
``$KUBECONFIG`` or ``~/.kube/config``, else the in-cluster service account),
listing Pods page by page and the ReplicaSets and Jobs that own them; or ``-f
FILE`` with what ``kubectl get pods -A -o json`` prints (a List, or several
YAML/JSON documents; ``-`` for standard input). ReplicaSets and Jobs in the file
are used to find top owners; other kinds are skipped.

Images: ``--platforms FILE`` (the ``noe mutate`` format) keeps it offline;
otherwise each image is read once from its registry with the registry flags of
``noe serve``, in parallel (``--concurrency``), with the pull secrets of the
pods that use it (live cluster). A progress bar goes to standard error when it
is a terminal.

Architectures of interest: ``--cluster-schedulable-archs`` (default amd64,arm64);
image platforms are filtered as the webhook filters them (``--system-os``,
attestations and ``unknown`` entries ignored). The other placement flags are
accepted, so the webhook's ``NOE_*`` environment works unchanged, and ignored.

Output: a table (default), ``-o json`` or ``-o yaml`` (shape in docs/report.md), and ``--html
FILE``, one self-contained page. Exit status: 0 success (whatever the cluster's
state), 2 bad input or usage, 1 when the Kubernetes API or every registry lookup fails.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from noe_core import (
    CredentialError,
    Deadline,
    ImageInspector,
    InvalidObject,
    InvalidSettings,
    Keychain,
    Lookup,
    LookupFailure,
    MultiKeychain,
    NoeError,
    PolicySettings,
    StaticPlatforms,
)
from noe_core.cli.flags import LOOKUP_TIMEOUT, PLATFORMS, add_flags, require
from noe_core.cli.output import dump
from noe_core.cli.policy_options import add_policy_arguments, policy_settings_from_args
from noe_core.owners import INTERMEDIATE_KINDS, Owners
from noe_core.report import DEFAULT_ARCHITECTURES, PodEntry, Report, build_report, cores, read_pod
from noe_web.flags import (
    API_TIMEOUT,
    CONCURRENCY,
    HTML,
    KUBECONFIG,
    REPORT_FILENAME,
    REPORT_NAMESPACE,
    REPORT_OUTPUT,
    TOP,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
REPORT_EXTRA_MODULES = frozenset({"tqdm", "pygal", "jinja2"})
_MAX_NOTES = 10

Progress = Callable[[int], None]


def add_report_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "report",
        help="how much of the cluster could run on each architecture, and which images block the rest",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(parser.add_argument_group("input"), (REPORT_FILENAME, KUBECONFIG, REPORT_NAMESPACE, API_TIMEOUT))
    add_flags(parser.add_argument_group("images"), (PLATFORMS, LOOKUP_TIMEOUT, CONCURRENCY))
    add_flags(parser.add_argument_group("output"), (REPORT_OUTPUT, HTML, TOP))
    add_policy_arguments(parser)
    # The registry client is part of noe_core; its flags are the ones noe serve takes.
    from noe_core.cli.registry_options import add_registry_arguments  # noqa: PLC0415

    add_registry_arguments(parser)
    parser.set_defaults(run=run_report)


# ---------------------------------------------------------------------------------------- input


@dataclass(frozen=True)
class Inventory:
    """The pods to report on, where they came from, and what was said about reading them."""

    pods: tuple[PodEntry, ...]
    source: str
    notes: tuple[str, ...] = ()


def _objects(docs: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    """Documents and the items of ``List``/``PodList``… documents, each given its kind."""
    for doc in docs:
        if not isinstance(doc, Mapping):
            raise InvalidObject(f"expected Kubernetes objects, found a {type(doc).__name__}")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
            item_kind = kind[: -len("List")] or None
            for item in doc["items"]:
                if not isinstance(item, Mapping):
                    raise InvalidObject(f"{kind} items must be objects, found a {type(item).__name__}")
                yield item if "kind" in item or item_kind is None else {**item, "kind": item_kind}
        else:
            yield doc


def pods_from_documents(docs: Iterable[Any], source: str) -> Inventory:
    """Pods from decoded documents; ReplicaSets and Jobs among them tell top owners."""
    pods: list[Mapping[str, Any]] = []
    parents: list[Mapping[str, Any]] = []
    skipped: Counter[str] = Counter()
    for obj in _objects(docs):
        kind = obj.get("kind")
        if kind == "Pod":
            pods.append(obj)
        elif kind in INTERMEDIATE_KINDS:
            parents.append(obj)
        else:
            skipped[str(kind or "(no kind)")] += 1
    owners = Owners.from_objects(parents)
    notes = []
    if skipped:
        listed = ", ".join(f"{kind}: {count}" for kind, count in sorted(skipped.items()))
        notes.append(f"skipped {sum(skipped.values())} objects that are not Pods, ReplicaSets or Jobs ({listed})")
    return Inventory(tuple(read_pod(pod, owners) for pod in pods), source, tuple(notes))


def pods_from_file(filename: str, stdin: TextIO) -> Inventory:
    from noe_core.cli.mutate import load_documents  # noqa: PLC0415 - the one YAML/JSON document reader

    label = "standard input" if filename == "-" else filename
    return pods_from_documents(load_documents(filename, stdin), label)


def _kubeconfig(ns: argparse.Namespace, environ: Mapping[str, str]) -> Path | None:
    """``--kubeconfig``, else the first ``$KUBECONFIG`` entry, else ``~/.kube/config`` when it exists."""
    given = require(ns, KUBECONFIG)
    if given is not None:
        return given.expanduser()
    first = next((p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p), "")
    if first:
        return Path(first).expanduser()
    default = Path(environ.get("HOME") or Path.home()) / ".kube" / "config"
    return default if default.is_file() else None


@dataclass
class ClusterReader:
    """Lists what the report needs from the API and reads the pull secrets, each once."""

    client: Any  # noe_web.kube.KubeClient
    namespace: str = ""
    _secrets: dict[tuple[str, str], Keychain | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def _path(self, prefix: str, resource: str) -> str:
        from urllib.parse import quote  # noqa: PLC0415

        return (
            f"{prefix}/namespaces/{quote(self.namespace, safe='')}/{resource}"
            if self.namespace
            else (f"{prefix}/{resource}")
        )

    def inventory(self) -> Inventory:
        pods = [{**p, "kind": "Pod"} for p in self.client.list_objects(self._path("/api/v1", "pods"))]
        owned_by = {
            ref.get("kind")
            for p in pods
            for ref in (p.get("metadata") or {}).get("ownerReferences") or ()
            if isinstance(ref, Mapping)
        }
        parents: list[Mapping[str, Any]] = []
        if "ReplicaSet" in owned_by:
            parents += (
                {**o, "kind": "ReplicaSet"}
                for o in self.client.list_objects(self._path("/apis/apps/v1", "replicasets"))
            )
        if "Job" in owned_by:
            parents += ({**o, "kind": "Job"} for o in self.client.list_objects(self._path("/apis/batch/v1", "jobs")))
        owners = Owners.from_objects(parents)
        return Inventory(tuple(read_pod(pod, owners) for pod in pods), f"cluster {self.client.config.server}")

    def keychain(self, namespace: str, name: str) -> Keychain | None:
        """The pull secret ``namespace/name`` as a keychain; a note and ``None`` when it cannot be used."""
        key = (namespace, name)
        if key in self._secrets:
            return self._secrets[key]
        from noe_core.credentials.docker_config import keychain_from_pull_secret  # noqa: PLC0415
        from noe_web.kube import KubeError, NotFound  # noqa: PLC0415

        where = f"imagePullSecret {namespace}/{name}"
        chain: Keychain | None = None
        try:
            chain = keychain_from_pull_secret(self.client.get_secret(namespace, name), where)
        except NotFound:
            self.notes.append(f"{where} not found; its images are read without it")
        except KubeError as exc:
            self.notes.append(f"{where}: {exc}; its images are read without it")
        except CredentialError as exc:
            self.notes.append(str(exc))
        self._secrets[key] = chain
        return chain


# ---------------------------------------------------------------------------------------- images


@dataclass(frozen=True)
class Lookups:
    """Each image's answer, and how many asked a registry and how many of those failed."""

    answers: dict[str, Lookup]
    registry_lookups: int = 0
    registry_failures: int = 0


def _progress_bar(total: int, stream: TextIO) -> tuple[Progress, Callable[[], None]]:
    """tqdm on a terminal; nothing at all when standard error is piped or a file."""
    if total == 0 or not stream.isatty():
        return (lambda _n: None), (lambda: None)
    from tqdm import tqdm  # noqa: PLC0415

    bar = tqdm(total=total, file=stream, unit="image", desc="noe report: images", leave=False)

    def update(count: int) -> None:
        bar.update(count)

    return update, bar.close


def inspect_images(
    images: Sequence[str],
    inspector: ImageInspector,
    *,
    keychains: Mapping[str, Keychain | None],
    timeout: float,
    concurrency: int,
    progress: Progress,
) -> Lookups:
    """One lookup per image, ``concurrency`` at a time; each answer ticks ``progress``."""
    static = inspector.static
    declared = {image for image in images if static is not None and static.get(image) is not None}
    answers: dict[str, Lookup] = {}

    def one(image: str) -> Lookup:
        deadline = Deadline.after(timeout)
        return inspector.inspect([image], deadline=deadline, keychain=keychains.get(image)).lookups[image]

    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="noe-report") as pool:
        futures = {pool.submit(one, image): image for image in images}
        for future in concurrent.futures.as_completed(futures):
            answers[futures[future]] = future.result()
            progress(1)
    remote = [image for image in images if image not in declared] if inspector.resolver is not None else []
    failed = sum(1 for image in remote if isinstance(answers[image], LookupFailure))
    return Lookups({image: answers[image] for image in images}, len(remote), failed)


def _inspector(ns: argparse.Namespace, pool: concurrent.futures.Executor) -> ImageInspector:
    from noe_core import Resolver  # noqa: PLC0415
    from noe_core.cli.registry_options import node_keychain_from_args, registry_settings_from_args  # noqa: PLC0415
    from noe_core.registry.transport import make_session  # noqa: PLC0415

    # Registry flags are checked even with --platforms: a bad one is an error, never silently ignored.
    settings = registry_settings_from_args(ns)
    keychain = node_keychain_from_args(ns)
    platforms = require(ns, PLATFORMS)
    if platforms is not None:
        return ImageInspector(static=StaticPlatforms.load(platforms))
    resolver = Resolver(make_session(settings), settings=settings, keychain=keychain)
    return ImageInspector(resolver=resolver, executor=pool)


def _image_keychains(pods: Iterable[PodEntry], reader: ClusterReader | None) -> dict[str, Keychain | None]:
    """Per image, the pull secrets of every pod that uses it (live cluster only)."""
    if reader is None:
        return {}
    secrets: dict[str, dict[tuple[str, str], None]] = {}
    for pod in pods:
        for image in pod.images:
            bucket = secrets.setdefault(image, {})
            for name in pod.pull_secrets:
                bucket.setdefault((pod.namespace, name), None)
    out: dict[str, Keychain | None] = {}
    for image, keys in secrets.items():
        chains = [c for c in (reader.keychain(*key) for key in keys) if c is not None]
        out[image] = None if not chains else chains[0] if len(chains) == 1 else MultiKeychain(*chains)
    return out


# ---------------------------------------------------------------------------------------- output


def human_bytes(value: int) -> str:
    """``1610612736`` → ``1.5Gi`` (binary units, as memory requests are usually written)."""
    amount = float(value)
    for unit in ("", "Ki", "Mi", "Gi", "Ti", "Pi"):
        if amount < 1024 or unit == "Pi":
            return f"{amount:.0f}{unit}" if amount == int(amount) else f"{amount:.1f}{unit}"
        amount /= 1024
    return f"{value}"  # pragma: no cover - the loop always returns


def human_cores(cpu_millis: int) -> str:
    return f"{cores(cpu_millis):g}"


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


_MARK = {"runnable": "yes", "blocked": "no", "unknown": "?"}


def _table(rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset()) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return lines


def render_table(report: Report, *, top: int = 10) -> str:
    """The terminal report: workloads, totals per namespace and architecture, the top blocking images."""
    archs = report.architectures
    out: list[str] = []
    rows: list[list[str]] = [
        ["NAMESPACE", "KIND", "NAME", "PODS", "CPU", "MEMORY", *(a.upper() for a in archs), "BLOCKED BY / ERROR"]
    ]
    for item in report.workloads:
        why = item.error or "; ".join(
            f"{arch}: {', '.join(item.blocking[arch])}" for arch in archs if item.blocking.get(arch)
        )
        rows.append(
            [
                item.workload.namespace,
                item.workload.kind,
                item.workload.name,
                str(item.pods),
                human_cores(item.requests.cpu_millis),
                human_bytes(item.requests.memory_bytes),
                *(_MARK[item.status(arch)] for arch in archs),
                why,
            ]
        )
    out += _table(rows, frozenset({3, 4, 5}))
    out.append("")
    total = report.totals.all
    rows = [["ARCH", "WORKLOADS", "PODS", "CPU", "CPU%", "MEMORY", "BLOCKED CPU", "UNKNOWN CPU"]]
    for arch in archs:
        ok = report.totals.runnable[arch]
        rows.append(
            [
                arch,
                f"{ok.workloads}/{total.workloads}",
                f"{ok.pods}/{total.pods}",
                f"{human_cores(ok.cpu_millis)}/{human_cores(total.cpu_millis)}",
                percent(ok.cpu_millis, total.cpu_millis),
                human_bytes(ok.memory_bytes),
                human_cores(report.totals.blocked[arch].cpu_millis),
                human_cores(report.totals.unknown.cpu_millis),
            ]
        )
    out.append("Runnable today, cluster totals (CPU in cores):")
    out += _table(rows, frozenset({1, 2, 3, 4, 5, 6, 7}))
    out.append("")
    rows = [["NAMESPACE", "WORKLOADS", "PODS", "CPU", *(f"{a.upper()} CPU" for a in archs), "UNKNOWN CPU"]]
    for name, totals in report.namespaces.items():
        shares = [
            f"{human_cores(totals.runnable[a].cpu_millis)} "
            f"({percent(totals.runnable[a].cpu_millis, totals.all.cpu_millis)})"
            for a in archs
        ]
        rows.append(
            [
                name,
                str(totals.all.workloads),
                str(totals.all.pods),
                human_cores(totals.all.cpu_millis),
                *shares,
                human_cores(totals.unknown.cpu_millis),
            ]
        )
    out.append("Per namespace (CPU that can run on each architecture):")
    out += _table(rows, frozenset(range(1, 5 + len(archs))))
    for arch in archs:
        blockers = report.top_blockers(arch, top)
        if not blockers:
            continue
        out.append("")
        out.append(f"Images that block the most CPU from {arch}:")
        rows = [["IMAGE", "CPU", "WORKLOADS", "PODS", "OFFERS"]]
        for image in blockers:
            figures = image.blocking[arch]
            offers = ", ".join(sorted(image.support.architectures or ())) or "none usable"
            rows.append(
                [image.image, human_cores(figures.cpu_millis), str(figures.workloads), str(figures.pods), offers]
            )
        out += _table(rows, frozenset({1, 2, 3}))
    failed = [image for image in report.images if image.support.architectures is None]
    if failed:
        out.append("")
        out.append(f"Images that could not be inspected ({len(failed)}):")
        out += [f"  {image.image}: {image.support.error}" for image in failed]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------- command


def _settings(ns: argparse.Namespace) -> tuple[PolicySettings, tuple[str, ...]]:
    """The policy flags as the webhook reads them, and the architectures of interest."""
    # The preference decides nothing here: a preferred arch outside a narrower list must not stop the report.
    settings = policy_settings_from_args(argparse.Namespace(**{**vars(ns), "preferred_arch": ""}))
    return settings, tuple(sorted(settings.schedulable_archs)) or DEFAULT_ARCHITECTURES


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
    from noe_web.kube import KubeError  # noqa: PLC0415

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
    settings, archs = _settings(ns)
    timeout: float = ns.lookup_timeout
    concurrency: int = ns.concurrency
    require(ns, KUBECONFIG)  # a bad one is an error even when -f means it is not read
    if ns.html:
        from noe_web.report_html import render_html  # noqa: PLC0415 - fail on a missing extra before any work
    reader: ClusterReader | None = None
    if ns.filename:
        inventory = pods_from_file(ns.filename, stdin)
    else:
        from noe_web.kube import KubeClient, discover  # noqa: PLC0415

        config = discover(_kubeconfig(ns, environ), environ)
        if config is None:
            raise InvalidSettings("no Kubernetes API: give --kubeconfig, set $KUBECONFIG, or read a file with -f")
        reader = ClusterReader(KubeClient(config, timeout=ns.api_timeout), ns.namespace)
        inventory = reader.inventory()
    _say(err, inventory.notes)
    images = list(dict.fromkeys(image for pod in inventory.pods for image in pod.images))
    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="noe-lookup") as pool:
        inspector = _inspector(ns, pool)
        # Pull secrets matter only to registry lookups: with --platforms none is read.
        keychains = _image_keychains(inventory.pods, reader if inspector.resolver is not None else None)
        if reader is not None:
            _say(err, reader.notes)
        update, close = _progress_bar(len(images), err)
        try:
            lookups = inspect_images(
                images, inspector, keychains=keychains, timeout=timeout, concurrency=concurrency, progress=update
            )
        finally:
            close()
    report = build_report(inventory.pods, lookups.answers, settings, archs)
    if ns.output != "table":
        out.write(dump(report.to_json(), ns.output))
    else:
        out.write(render_table(report, top=ns.top))
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
