"""``noe serve``: validate the configuration, prepare TLS and metrics, run gunicorn.

Start-up order, in the master process:

1. flags → :class:`~noe_web.commands.config.ServeConfig` (an invalid one: one line, exit 2);
2. TLS: the given pair, ``--cert-dir``'s ``tls.crt``/``tls.key``, or a
   self-signed CA and localhost certificate in ``--state-dir`` (printed);
3. Kubernetes API: ``--kubeconfig``, else ``$KUBECONFIG``'s files merged (``--context`` picks the
   context), else in-cluster, else none (said once) — never ``~/.kube/config``;
4. metrics: an empty ``PROMETHEUS_MULTIPROC_DIR`` set *before*
   ``prometheus_client`` is imported, and the ``/metrics`` server;
5. one JSON start-up line, then gunicorn forks the workers, each of which
   builds its own services in :func:`build_app`.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from noe_core.errors import InvalidSettings
from noe_web.commands.config import ServeConfig, add_serve_arguments
from noe_web.logs import configure_logging, gunicorn_logconfig

log = logging.getLogger("noe.serve")


def add_serve_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the admission webhook (TLS, gunicorn)",
        description="Run the mutating admission webhook over TLS. Every flag is also a NOE_* variable.",
    )
    _add_arguments(parser)
    parser.set_defaults(run=run_serve)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    from noe_core.cli.parser import add_flags  # noqa: PLC0415
    from noe_web.commands.flags import NOE_COMPAT_FLAGS  # noqa: PLC0415

    add_serve_arguments(parser)
    add_flags(
        parser.add_argument_group("accepted for the Go Noe's command line (see 'noe_web/commands/noe_compat.py')"),
        NOE_COMPAT_FLAGS,
    )


def _emit(doc: dict[str, Any]) -> None:
    """A start-up line: the document's ``msg`` as the message, the rest as fields."""
    fields = dict(doc)
    log.info(str(fields.pop("msg")), extra={"fields": fields})


def build_app(config: ServeConfig, api: Any) -> Any:
    """Everything one worker needs, and the Flask app around it (called after the fork)."""
    from noe_core.image.declared import StaticPlatforms  # noqa: PLC0415
    from noe_core.registry.resolver import Resolver  # noqa: PLC0415
    from noe_core.registry.transport import make_session  # noqa: PLC0415
    from noe_web.kube.client import KubeClient  # noqa: PLC0415
    from noe_web.kube.events import EventRecorder  # noqa: PLC0415
    from noe_web.metrics import Metrics  # noqa: PLC0415
    from noe_web.tracing.config import open_tracing  # noqa: PLC0415
    from noe_web.webhook.admission import AdmissionService, ObserverTee  # noqa: PLC0415
    from noe_web.webhook.app import Services, create_app  # noqa: PLC0415

    configure_logging(config.log_level, config.log_format)
    metrics = Metrics()
    tracing = open_tracing(config.tracing)  # after the fork: each worker exports its own spans
    static = StaticPlatforms.load(config.image_platforms) if config.image_platforms else None
    from noe_web.commands.cache import open_cache  # noqa: PLC0415
    from noe_web.registry_cache import open_shared, sized  # noqa: PLC0415

    settings = sized(config.registry, config.args)
    session = make_session(settings)
    metrics.instrument_session(session)
    resolver = Resolver(
        session,
        settings=settings,
        keychain=config.node_keychain,
        observer=ObserverTee(metrics),
        tracer=tracing,
        store=open_cache(config.args, on_evict=lambda table, n: metrics.cache_evictions.labels(table).inc(n)),
        # The master said whether Redis answered at start (_check_cache): workers warn only on a change.
        shared=open_shared(config.shared_cache, settings, observer=metrics, warn_at_start=False),
    )
    kube = events = None
    if api is not None:
        kube = KubeClient(
            api,
            secret_cache_ttl=config.pull_secret_cache_ttl,
            timeout=max(1.0, config.admission_deadline),
            tracer=tracing,
        )
        events = EventRecorder(
            kube,
            maxsize=config.event_queue_size,
            on_drop=lambda reason: metrics.events.labels("dropped").inc(),
            on_written=lambda outcome: metrics.events.labels(outcome).inc(),
        )
        events.start()
    admission = AdmissionService(
        policy=config.policy,
        policies=_policies(config, api, metrics),
        learned=_learned(config, api),
        metrics=metrics,
        deadline_seconds=config.admission_deadline,
        static=static,
        resolver=resolver,
        tracing=tracing,
        kube=kube,
        events=events,
        pool_size=max(16, config.threads * 4),
        on_lookup_failure="gate" if config.on_lookup_failure == "gate" else "allow",
        pull_secrets_hint=config.pull_secrets_hint,
    )
    info = {
        "kubernetes_api": api is not None,
        "placement_policies": _policy_source(config, api),
        "image_platforms": len(static) if static is not None else 0,
        "admission_deadline": config.admission_deadline,
    }
    return create_app(Services(admission, max_body_bytes=config.max_body_bytes, info=info))


def _policy_source(config: ServeConfig, api: Any) -> str:
    """Where placement policies come from: ``files`` (``--policy``), ``cluster`` (watched), or ``none``."""
    if config.policy_documents is not None:
        return "files"
    return "cluster" if api is not None else "none"


def _policies(config: ServeConfig, api: Any, metrics: Any) -> Any:
    """This worker's placement policies: the ``--policy`` files, else the cluster's, watched (threads started)."""
    if config.policy_documents is not None:
        return config.policy_documents.as_policies()
    if api is None:
        return None
    from noe_web.kube.client import KubeClient  # noqa: PLC0415
    from noe_web.kube.policy_watch import PolicyWatch  # noqa: PLC0415

    # its own client: three long watches do not take the connections Secret reads use
    watch = PolicyWatch(KubeClient(api, secret_cache_size=0, timeout=10.0), on_stale=metrics.policy_watch_stale.set)
    watch.start()
    return watch


def _learned(config: ServeConfig, api: Any) -> Any:
    """This worker's watch of ``noe-learned-platforms`` in noe's namespace (``None`` without an API)."""
    if api is None:
        return None
    from noe_web.kube.client import KubeClient  # noqa: PLC0415
    from noe_web.kube.learned_watch import LearnedWatch  # noqa: PLC0415
    from noe_web.kube.namespace import own_namespace  # noqa: PLC0415

    watch = LearnedWatch(KubeClient(api, secret_cache_size=0, timeout=10.0), config.noe_namespace or own_namespace())
    watch.start()
    return watch


def _metrics_dir() -> tuple[Path, Callable[[], None]]:
    """An empty multiprocess directory (the user's, emptied, or a fresh one removed at exit)."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink(missing_ok=True)
        return path, lambda: None
    path = Path(tempfile.mkdtemp(prefix="noe-metrics-"))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    return path, lambda: shutil.rmtree(path, ignore_errors=True)


def run_serve(ns: argparse.Namespace) -> int:
    from noe_web.commands.noe_compat import apply_compat_flags  # noqa: PLC0415

    notes = apply_compat_flags(ns)
    configure_logging(ns.log_level, ns.log_format)
    for note in notes:
        log.warning(note)
    try:
        config = ServeConfig.from_args(ns)
        tls = _tls(config)
        api = _api(config)
    except InvalidSettings as exc:
        print(f"noe serve: {exc}", file=sys.stderr, flush=True)
        return 2
    configure_logging(config.log_level, config.log_format)
    if api is None:
        log.warning(
            "no Kubernetes API access (no --kubeconfig, no $KUBECONFIG, not in a cluster): "
            "imagePullSecrets are not read, no Events are written and no placement policy is watched"
        )
    if config.policy_documents is not None:
        for rejected in config.policy_documents.rejected:
            log.warning(
                "placement policy ignored: %s",
                rejected,
                extra={"fields": {"event": "policy_rejected", "policy": str(rejected.ref or rejected.where)}},
            )
    _check_cache(config)
    if config.tracing.problem:
        log.warning(config.tracing.problem)
    cleanup: Callable[[], None] = lambda: None  # noqa: E731
    metrics_server = None
    if config.metrics_enabled:
        directory, cleanup = _metrics_dir()
        from noe_web.server.application import MetricsServer  # noqa: PLC0415

        try:
            metrics_server = MetricsServer(config.metrics_host or "", config.metrics_port or 0, directory)
        except OSError as exc:
            cleanup()
            print(
                f"noe serve: --metrics-addr {config.metrics_host or ''}:{config.metrics_port}: "
                f"cannot listen ({exc.strerror})",
                file=sys.stderr,
                flush=True,
            )
            return 2
    cert_file, key_file, ca_file, created = tls
    _emit(
        {
            "event": "startup",
            "msg": "noe webhook starting",
            "config": config.describe(),
            "tls": {
                "cert_file": str(cert_file),
                "key_file": str(key_file),
                "ca_file": str(ca_file) if ca_file else None,
                "self_signed": ca_file is not None,
                "created": created,
            },
            "kubernetes_api": api.describe() if api is not None else None,
            "metrics_port": metrics_server.port if metrics_server is not None else None,
        }
    )
    if ca_file is not None:
        port = config.bind_port
        _emit(
            {
                "event": "self-signed",
                "msg": "no certificate given: serving a self-signed localhost certificate; trust this CA",
                "ca_file": str(ca_file),
                "try": f"curl --cacert {ca_file} -H 'Content-Type: application/json' "
                f"-d @examples/admission-review.json https://localhost:{port}/mutate",
            }
        )
    from noe_web.server.application import NoeServer  # noqa: PLC0415

    server = NoeServer(
        bind=config.bind,
        workers=config.workers,
        threads=config.threads,
        cert_file=cert_file,
        key_file=key_file,
        app_factory=lambda: build_app(config, api),
        graceful_timeout=config.graceful_timeout,
        request_timeout=max(30.0, config.admission_deadline * 4),
        control_socket=config.control_socket,
        log_level=config.log_level,
        logconfig=gunicorn_logconfig(config.log_level, config.log_format),
        metrics=metrics_server,
        on_exit=cleanup,
    )
    master_pid = os.getpid()
    try:
        server.run()
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        # Workers are forked inside run() and leave through here too: only the master cleans up.
        if os.getpid() == master_pid:
            cleanup()  # also when the arbiter stops before its on_exit hook
    return 0


def _check_cache(config: ServeConfig) -> None:
    """Open the shared registry cache once before the workers fork: a damaged file is moved aside
    (and warned about) here, once, rather than by workers racing each other; a Redis that does
    not answer is warned about here, once, too."""
    from noe_web.commands.cache import open_cache  # noqa: PLC0415
    from noe_web.registry_cache import open_shared, sized  # noqa: PLC0415

    store = open_cache(config.args)
    if store is not None:
        store.close()
    shared = open_shared(config.shared_cache, sized(config.registry, config.args))
    if shared is not None:
        shared.close()


def _tls(config: ServeConfig) -> tuple[Path, Path, Path | None, bool]:
    if config.tls_cert_file is not None and config.tls_key_file is not None:
        return config.tls_cert_file, config.tls_key_file, None, False
    from noe_web.server.tls import ensure_self_signed  # noqa: PLC0415

    files = ensure_self_signed(config.state_dir)
    return files.cert_file, files.key_file, files.ca_file, files.created


def _api(config: ServeConfig) -> Any:
    from noe_web.kube.config import build_ssl_context, discover  # noqa: PLC0415

    api = discover(config.kubeconfig, context=config.context or None)
    if api is not None:
        build_ssl_context(api)  # a CA or client certificate that does not load stops start-up, not each worker
    return api


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m noe_web.commands.serve [flags]``: the serve subcommand alone."""
    from noe_core.cli.options import go_style_argv  # noqa: PLC0415
    from noe_core.cli.parser import NoeArgumentParser  # noqa: PLC0415

    parser = NoeArgumentParser(prog="noe serve")
    _add_arguments(parser)
    ns = parser.parse_args(go_style_argv(list(sys.argv[1:] if argv is None else argv), parser))
    return run_serve(ns)


if __name__ == "__main__":
    sys.exit(main())
