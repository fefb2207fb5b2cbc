"""``noe serve``: validate the configuration, prepare TLS and metrics, run gunicorn.

Start-up order, in the master process:

1. flags → :class:`~noe_web.config.ServeConfig` (an invalid one: one line, exit 2);
2. TLS: the given pair, ``--cert-dir``'s ``tls.crt``/``tls.key``, or a
   self-signed CA and localhost certificate in ``--state-dir`` (printed);
3. Kubernetes API: ``--kubeconfig``, in-cluster, or none (said once);
4. metrics: an empty ``PROMETHEUS_MULTIPROC_DIR`` set *before*
   ``prometheus_client`` is imported, and the ``/metrics`` server;
5. one JSON start-up line, then gunicorn forks the workers, each of which
   builds its own services in :func:`build_app`.
"""

from __future__ import annotations

import argparse
import contextvars
import datetime as dt
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from noe_core.errors import InvalidSettings
from noe_web.config import ServeConfig, add_serve_arguments

log = logging.getLogger("noe.serve")

ADMISSION_UID: contextvars.ContextVar[str | None] = contextvars.ContextVar("noe_admission_uid", default=None)
"""The uid of the admission being answered; set by ``AdmissionService.review``, copied into lookup threads."""

LOG_FORMATS = ("json", "text")


def _base(record: logging.LogRecord) -> dict[str, Any]:
    """The keys every line has, then the admission uid and the record's ``fields``."""
    out: dict[str, Any] = {
        "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
        "level": record.levelname.lower(),
        "logger": record.name,
        "msg": record.getMessage(),
    }
    uid = getattr(record, "uid", None)
    if uid is not None:
        out["uid"] = uid
    fields = getattr(record, "fields", None)
    if isinstance(fields, dict):
        out.update(fields)
    return out


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, msg, the admission uid and the record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        out = _base(record)
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    """``time level logger msg key=value…`` on one line, for people at a terminal (``--log-format text``)."""

    def format(self, record: logging.LogRecord) -> str:
        out = _base(record)
        head = " ".join(str(out.pop(key)) for key in ("time", "level", "logger"))
        msg = " ".join(str(out.pop("msg")).split())
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        pairs = " ".join(f"{key}={_text_value(value)}" for key, value in out.items() if value is not None)
        return f"{head} {msg}" + (f" {pairs}" if pairs else "")


def _text_value(value: object) -> str:
    if isinstance(value, str) and value and not any(c.isspace() or c in '"=' for c in value):
        return value
    return json.dumps(value, default=str, separators=(",", ":"))


class UidFilter(logging.Filter):
    """Adds the uid of the admission being answered (if any) to each record, in the thread that logs it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "uid", None) is None:
            record.uid = ADMISSION_UID.get()
        return True


class AccessFields(logging.Filter):
    """gunicorn's access-log atoms as fields (method, path without query, status, duration, peer).

    The query string and headers are left out: they are not needed to operate
    the webhook and may carry what should not be logged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        atoms = record.args
        if isinstance(atoms, Mapping):
            try:
                fields: dict[str, Any] = {
                    "event": "access",
                    "method": atoms["m"],
                    "path": atoms["U"],
                    "status": int(str(atoms["s"])),
                    "duration_ms": round(int(str(atoms["D"])) / 1000, 2),
                    "remote": atoms["h"],
                }
            except (KeyError, TypeError, ValueError):
                return True
            record.msg, record.args = "%s %s %s", (fields["method"], fields["path"], fields["status"])
            record.fields = fields
        return True


class ConfigDump(logging.Filter):
    """gunicorn's ``--log-level debug`` configuration block (one ``  name: value`` line per setting) as one
    ``config`` field, so the dump is one line like every other."""

    HEAD = "Current configuration:\n"

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(self.HEAD) and not record.args:
            settings = dict(
                line.strip().partition(": ")[::2] for line in record.msg[len(self.HEAD) :].splitlines() if line.strip()
            )
            record.msg = "gunicorn configuration"
            record.fields = {"event": "gunicorn-config", "config": settings}
        return True


class LineHandler(logging.Handler):
    """Each record as one ``write(2)`` on stdout: lines of concurrent workers never interleave.

    Since each line is a single write, the handler needs no lock: with one, the
    request threads of a worker queued behind each other's log line, which took
    more time than the admission itself under load.
    """

    def __init__(self, level: int | str = logging.NOTSET, log_format: str = "json") -> None:
        super().__init__(level)
        self.setFormatter(TextFormatter() if log_format == "text" else JsonFormatter())
        self.addFilter(UidFilter())

    def createLock(self) -> None:
        self.lock = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            data = (self.format(record) + "\n").encode("utf-8", "replace")
            fd = sys.stdout.fileno()
            while data:
                data = data[os.write(fd, data) :]
        except Exception:
            self.handleError(record)


def configure_logging(level: str, log_format: str = "json") -> None:
    """noe's, noe_core's, Python warnings' and other libraries' records: one line each through :class:`LineHandler`."""
    handler = LineHandler(log_format=log_format)
    for name, logger_level in (("noe", level), ("noe_core", level), ("", "WARNING")):
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(logger_level)
        logger.propagate = name == ""
    logging.captureWarnings(True)  # warnings.warn → the "py.warnings" logger → the root's handler


def gunicorn_logconfig(level: str, log_format: str) -> dict[str, Any]:
    """gunicorn's ``logconfig_dict``: its error and access logs through noe's handler and formatter.

    Access lines are written at ``--log-level debug`` only: each admission already has its own line,
    and a second line per request cost about a tenth of the served throughput.
    """
    handler = {"()": LineHandler, "log_format": log_format}
    access_level = "INFO" if level.upper() == "DEBUG" else "WARNING"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "root": {"level": "WARNING", "handlers": ["noe"]},
        "loggers": {
            "gunicorn.error": {"level": level.upper(), "handlers": ["noe"], "propagate": False},
            "gunicorn.access": {"level": access_level, "handlers": ["access"], "propagate": False},
        },
        "filters": {"access": {"()": AccessFields}, "config": {"()": ConfigDump}},
        "handlers": {"noe": {**handler, "filters": ["config"]}, "access": {**handler, "filters": ["access"]}},
        "formatters": {},
    }


def add_serve_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the admission webhook (TLS, gunicorn)",
        description="Run the mutating admission webhook over TLS. Every flag is also a NOE_* variable.",
    )
    _add_arguments(parser)
    parser.set_defaults(run=run_serve)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    from noe_core.cli.flags import add_flags  # noqa: PLC0415
    from noe_web.flags import NOE_COMPAT_FLAGS  # noqa: PLC0415

    add_serve_arguments(parser)
    add_flags(
        parser.add_argument_group("accepted for the Go Noe's command line (see 'noe_web/noe_compat.py')"),
        NOE_COMPAT_FLAGS,
    )


def _emit(doc: dict[str, Any]) -> None:
    """A start-up line: the document's ``msg`` as the message, the rest as fields."""
    fields = dict(doc)
    log.info(str(fields.pop("msg")), extra={"fields": fields})


def build_app(config: ServeConfig, api: Any) -> Any:
    """Everything one worker needs, and the Flask app around it (called after the fork)."""
    from noe_core.platforms_file import StaticPlatforms  # noqa: PLC0415
    from noe_core.registry.resolver import Resolver  # noqa: PLC0415
    from noe_core.registry.transport import make_session  # noqa: PLC0415
    from noe_web.admission_service import AdmissionService, ObserverTee  # noqa: PLC0415
    from noe_web.app import Services, create_app  # noqa: PLC0415
    from noe_web.events import EventRecorder  # noqa: PLC0415
    from noe_web.kube import KubeClient  # noqa: PLC0415
    from noe_web.metrics import Metrics  # noqa: PLC0415

    configure_logging(config.log_level, config.log_format)
    metrics = Metrics()
    static = StaticPlatforms.load(config.image_platforms) if config.image_platforms else None
    from noe_web.registry_cache import open_cache, sized  # noqa: PLC0415

    settings = sized(config.registry, config.args)
    session = make_session(settings)
    metrics.instrument_session(session)
    resolver = Resolver(
        session,
        settings=settings,
        keychain=config.node_keychain,
        observer=ObserverTee(metrics),
        store=open_cache(config.args, on_evict=lambda table, n: metrics.cache_evictions.labels(table).inc(n)),
    )
    kube = events = None
    if api is not None:
        kube = KubeClient(
            api, secret_cache_ttl=config.pull_secret_cache_ttl, timeout=max(1.0, config.admission_deadline)
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
        metrics=metrics,
        deadline_seconds=config.admission_deadline,
        static=static,
        resolver=resolver,
        kube=kube,
        events=events,
        pool_size=max(16, config.threads * 4),
        on_lookup_failure="gate" if config.on_lookup_failure == "gate" else "allow",
    )
    info = {
        "kubernetes_api": api is not None,
        "image_platforms": len(static) if static is not None else 0,
        "admission_deadline": config.admission_deadline,
    }
    return create_app(Services(admission, max_body_bytes=config.max_body_bytes, info=info))


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
    from noe_web.noe_compat import apply_compat_flags  # noqa: PLC0415

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
            "no Kubernetes API access (no --kubeconfig, not in a cluster): "
            "imagePullSecrets are not read and no Events are written"
        )
    _check_cache(config)
    cleanup: Callable[[], None] = lambda: None  # noqa: E731
    metrics_server = None
    if config.metrics_enabled:
        directory, cleanup = _metrics_dir()
        from noe_web.server import MetricsServer  # noqa: PLC0415

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
    from noe_web.server import NoeServer  # noqa: PLC0415

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
    (and warned about) here, once, rather than by workers racing each other."""
    from noe_web.registry_cache import open_cache  # noqa: PLC0415

    store = open_cache(config.args)
    if store is not None:
        store.close()


def _tls(config: ServeConfig) -> tuple[Path, Path, Path | None, bool]:
    if config.tls_cert_file is not None and config.tls_key_file is not None:
        return config.tls_cert_file, config.tls_key_file, None, False
    from noe_web.tls import ensure_self_signed  # noqa: PLC0415

    files = ensure_self_signed(config.state_dir)
    return files.cert_file, files.key_file, files.ca_file, files.created


def _api(config: ServeConfig) -> Any:
    from noe_web.kube import build_ssl_context, discover  # noqa: PLC0415

    api = discover(config.kubeconfig)
    if api is not None:
        build_ssl_context(api)  # a CA or client certificate that does not load stops start-up, not each worker
    return api


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m noe_web.serve [flags]``: the serve subcommand alone."""
    from noe_core.cli.flags import NoeArgumentParser  # noqa: PLC0415
    from noe_core.cli.options import go_style_argv  # noqa: PLC0415

    parser = NoeArgumentParser(prog="noe serve")
    _add_arguments(parser)
    ns = parser.parse_args(go_style_argv(list(sys.argv[1:] if argv is None else argv), parser))
    return run_serve(ns)


if __name__ == "__main__":
    sys.exit(main())
