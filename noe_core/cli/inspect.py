"""``noe inspect IMAGE``: what the registry says about an image, as the webhook sees it.

Prints the canonical reference, the digest of the index or manifest (the one
``docker manifest inspect`` does not show), its media type and each platform
with its manifest digest, in containerd's spelling (``windows(10.0.20348.2340)/amd64``,
``linux/amd64/v3``); an OCI artifact (rule 17) is said to be one, with its type,
instead. ``-o json|yaml`` (``--json``: ``-o json``) prints the same as one document.

The answer is the one a pod's decision reads (the placement pipeline,
:mod:`noe_core.pipeline`): ``--image-platforms`` and the ``imagePlatforms`` of
the ``--policy`` files that match a pod of ``--namespace`` with ``--labels``
answer before the registry, and ``--learned`` (the ``noe-learned-platforms``
ConfigMap) takes out what ``exec format error`` disproved; ``Source`` says
which (``declared``, ``registry``, ``learned``), so a cluster's answer can be
reproduced offline.

Exit status: 0 success; 1 registry or authentication failure (one line on
stderr: registry, HTTP status, what to check — never a secret); 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import TextIO

from noe_core.cli.flags import (
    IMAGE_PLATFORMS,
    INSPECT_LABELS,
    INSPECT_NAMESPACE,
    INSPECT_OUTPUT,
    INSPECT_TIMEOUT,
    JSON,
    LEARNED,
    POLICY_FILE,
    VERBOSE,
)
from noe_core.cli.output import dump
from noe_core.cli.parser import NoeArgumentParser, add_flags, require
from noe_core.cli.registry_options import (
    add_registry_arguments,
    node_keychain_from_args,
    registry_settings_from_args,
)
from noe_core.errors import InvalidInput, ManifestError, NoeError, RegistryError
from noe_core.image.declared import StaticPlatforms
from noe_core.image.image_platforms import ImagePlatforms, LookupFailure
from noe_core.image.learned import LearnedPlatforms, load_learned
from noe_core.k8s.workload import POD, read_workload
from noe_core.name.reference import Reference, parse_reference
from noe_core.placement.decider import Decider, FixedLearned
from noe_core.placement.rules import Decision
from noe_core.policies.documents import read_files
from noe_core.policies.settings import PolicySettings
from noe_core.registry.lookup_service import LookupService
from noe_core.registry.observer import CountingObserver
from noe_core.registry.resolver import Resolver
from noe_core.registry.transport import make_session
from noe_core.util.deadline import Deadline

EXIT_OK = 0
EXIT_REGISTRY = 1
EXIT_BAD_INPUT = 2


def add_inspect_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "inspect",
        help="show an image's digest and platforms as read from its registry",
        description="Read an image's manifest (and config blob for single-platform images) from its "
        "registry and print its digest, media type and platforms.",
    )
    configure_inspect_parser(parser)
    return parser


def configure_inspect_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("image", metavar="IMAGE", help="image reference, e.g. nginx:1.27 or reg.corp/a@sha256:…")
    add_flags(parser.add_mutually_exclusive_group(), (INSPECT_OUTPUT, JSON))
    add_flags(parser, (INSPECT_TIMEOUT, VERBOSE))
    add_flags(
        parser.add_argument_group("as a pod's decision reads it"),
        (IMAGE_PLATFORMS, POLICY_FILE, INSPECT_NAMESPACE, INSPECT_LABELS, LEARNED),
    )
    add_registry_arguments(parser)
    parser.set_defaults(run=run_inspect)


def _json(reference: Reference, found: ImagePlatforms, source: str, warnings: tuple[str, ...]) -> dict[str, object]:
    """The ``noe inspect -o json`` shape."""
    doc: dict[str, object] = {
        "reference": str(reference),
        "digest": found.digest,
        "mediaType": found.media_type,
        "platforms": [{**p.platform.to_json(), "digest": p.digest} for p in found.resolved],
        "source": source,
    }
    if found.is_artifact:
        doc["artifactType"] = found.artifact_type
    if warnings:
        doc["warnings"] = list(warnings)
    return doc


def _human(reference: Reference, found: ImagePlatforms, source: str, warnings: tuple[str, ...], out: TextIO) -> None:
    out.write(f"Reference:  {reference}\n")
    out.write(f"Digest:     {found.digest}\n")
    out.write(f"Media type: {found.media_type}\n")
    if found.is_artifact:
        out.write(
            f"Artifact:   {found.artifact_type} (not a container image: runs nowhere, constrains no image volume)\n"
        )
        return
    rows = [(str(p.platform), p.digest) for p in found.resolved]
    width = max([len("PLATFORM"), *(len(r[0]) for r in rows)])
    out.write(f"\n{'PLATFORM'.ljust(width)}  DIGEST\n")
    for platform, digest in rows:
        out.write(f"{platform.ljust(width)}  {digest}\n")
    if source != "registry":  # what the registry said is the usual answer; anything else is named
        out.write(f"\nSource:     {source}\n")
    for warning in warnings:
        out.write(f"Warning:    {warning}\n")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _inspected_pod(image: str, namespace: str, labels: dict[str, str]) -> dict[str, object]:
    """The pod a decision about ``image`` reads: one container, in ``namespace``, with ``labels``."""
    meta: dict[str, object] = {"name": "noe-inspect", "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": image}]},
    }


def _decide(ns: argparse.Namespace, resolver: Resolver, reference: Reference) -> Decision:
    """The image as a pod's decision reads it: declared platforms first, else the registry (its own error,
    as ever, when it cannot answer), less the learned architectures."""
    platforms = require(ns, IMAGE_PLATFORMS)
    static = StaticPlatforms.load(platforms) if platforms else None
    documents = read_files(ns.policy) if ns.policy else None
    learned_file = require(ns, LEARNED)
    learned = load_learned(learned_file) if learned_file else LearnedPlatforms()
    policies = documents.as_policies() if documents is not None else None
    decider = Decider(PolicySettings(), LookupService(static), policies, FixedLearned(learned))
    namespace = ns.namespace or "default"
    workload = read_workload(_inspected_pod(ns.image, namespace, dict(ns.labels or {})), POD)
    decision = decider.known(workload, namespace, {}, {})
    if ns.image in decision.lookups:
        return decision  # declared by --image-platforms or a matching policy
    found = resolver.resolve(reference, deadline=Deadline.after(ns.timeout))
    return decider.known(workload, namespace, {ns.image: found}, {ns.image: "registry"})


def run_inspect(ns: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    stdout = sys.stdout if out is None else out
    stderr = sys.stderr if err is None else err
    try:
        reference = parse_reference(ns.image)
        settings = registry_settings_from_args(ns)
        keychain = node_keychain_from_args(ns)
    except InvalidInput as exc:
        stderr.write(f"noe inspect: {_one_line(str(exc))}\n")
        return EXIT_BAD_INPUT
    observer = CountingObserver()
    session = make_session(settings)
    try:
        with Resolver(session, settings=settings, keychain=keychain, observer=observer) as resolver:
            decision = _decide(ns, resolver, reference)
    except (RegistryError, ManifestError) as exc:
        stderr.write(f"noe inspect: {_one_line(str(exc))}\n")
        return EXIT_REGISTRY
    except NoeError as exc:
        stderr.write(f"noe inspect: {_one_line(str(exc))}\n")
        return EXIT_BAD_INPUT
    finally:
        session.close()
        if getattr(ns, "verbose", False):
            stderr.write(json.dumps(observer.summary(), indent=2) + "\n")
    info = decision.lookups.get(ns.image)
    if not isinstance(info, ImagePlatforms):
        reason = info.reason if isinstance(info, LookupFailure) else "not inspected"
        stderr.write(f"noe inspect: {_one_line(reason)}\n")
        return EXIT_REGISTRY
    source = decision.sources.get(ns.image, "registry")
    fmt = "json" if ns.json else ns.output
    if fmt != "text":
        stdout.write(dump(_json(reference, info, source, decision.warnings), fmt))
    else:
        _human(reference, info, source, decision.warnings, stdout)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """``python -m noe_core.cli.inspect IMAGE …`` (the ``noe`` command wires the same parser)."""
    from noe_core.cli.options import go_style_argv  # noqa: PLC0415

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = NoeArgumentParser(prog="noe inspect")
    configure_inspect_parser(parser)
    ns = parser.parse_args(go_style_argv(sys.argv[1:] if argv is None else argv, parser))
    return run_inspect(ns)


if __name__ == "__main__":
    sys.exit(main())
