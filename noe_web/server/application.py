"""gunicorn, run programmatically: noe's workers (:mod:`noe_web.server.worker`) serving the Flask app over TLS.

The master process binds the TLS listener, starts the plain-HTTP metrics
server (which sums every worker's multiprocess files) and forks the workers;
each worker builds its own services (registry session, caches, Kubernetes
client, Event thread) after the fork, so no thread or socket is shared across
processes. TLS contexts come from a :class:`~noe_web.server.tls.ReloadingContext` per
worker: a renewed certificate is used by the next handshake, connections
already established are left alone.
"""

from __future__ import annotations

import logging
import math
import os
import ssl
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger

from noe_web.server.tls import ReloadingContext
from noe_web.server.worker import WORKER_CONNECTIONS, GuardedThreadWorker

log = logging.getLogger("noe.server")

WSGIApp = Callable[..., Any]


class _PerProcessContext:
    """One :class:`ReloadingContext` per process (built lazily after the fork)."""

    def __init__(self, cert_file: Path, key_file: Path) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self._pid = -1
        self._context: ReloadingContext | None = None
        self._lock = threading.Lock()

    def __call__(self, conf: Any, default_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        pid = os.getpid()
        if self._context is None or self._pid != pid:
            with self._lock:
                if self._context is None or self._pid != pid:
                    self._context = ReloadingContext(self.cert_file, self.key_file)
                    self._pid = pid
        return self._context.get()


class _Logger(Logger):  # type: ignore[misc]
    """gunicorn's logger, formatting an access line only when the access log would write it.

    With a ``logconfig_dict``, gunicorn builds every request's access-log fields
    even when its ``gunicorn.access`` logger is off (noe's default below debug).
    """

    def access(self, resp: Any, req: Any, environ: Any, request_time: Any) -> None:
        if self.access_log.isEnabledFor(logging.INFO):
            super().access(resp, req, environ, request_time)


class MetricsServer:
    """The master's ``/metrics`` over plain HTTP, reading the multiprocess directory."""

    def __init__(self, host: str, port: int, directory: Path) -> None:
        from prometheus_client import start_http_server  # noqa: PLC0415

        from noe_web.metrics import multiprocess_registry  # noqa: PLC0415

        self.httpd, self.thread = start_http_server(
            port,
            addr=host or "0.0.0.0",  # noqa: S104 - an empty --metrics-addr host means every interface
            registry=multiprocess_registry(directory),
        )
        self.port = int(self.httpd.server_address[1])

    def close_in_child(self) -> None:
        """A forked worker does not serve metrics: drop its copy of the listening socket."""
        self.httpd.socket.close()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class NoeServer(BaseApplication):  # type: ignore[misc]
    """gunicorn's arbiter configured from a :class:`~noe_web.commands.config.ServeConfig`."""

    def __init__(
        self,
        *,
        bind: str,
        workers: int,
        threads: int,
        cert_file: Path,
        key_file: Path,
        app_factory: Callable[[], WSGIApp],
        graceful_timeout: float,
        request_timeout: float,
        control_socket: str = "",
        log_level: str = "info",
        logconfig: dict[str, Any] | None = None,
        metrics: MetricsServer | None = None,
        on_exit: Callable[[], None] | None = None,
    ) -> None:
        self._settings: dict[str, Any] = {
            "bind": [bind],
            "workers": workers,
            "threads": threads,
            "worker_class": GuardedThreadWorker,  # reads requests in its event loop, answers on threads
            "worker_connections": WORKER_CONNECTIONS,
            "certfile": str(cert_file),
            "keyfile": str(key_file),
            "ssl_context": _PerProcessContext(cert_file, key_file),
            "graceful_timeout": math.ceil(graceful_timeout),
            "timeout": math.ceil(request_timeout),
            "keepalive": 30,  # the API server keeps webhook connections open
            "proc_name": "noe-webhook",
            # noe's JSON (or text) lines for gunicorn's error and access logs; the access log is on
            # because a logconfig_dict is given.
            "accesslog": None,
            "errorlog": "-",
            "logconfig_dict": logconfig or {},
            "logger_class": _Logger,
            "loglevel": log_level.lower(),
            "child_exit": self._child_exit,
            "post_fork": self._post_fork,
            "worker_exit": self._worker_exit,
            "on_exit": self._on_exit,
        }
        if control_socket:
            self._settings["control_socket"] = control_socket
        else:
            self._settings["control_socket_disable"] = True
        self._factory = app_factory
        self._metrics = metrics
        self._exit = on_exit
        super().__init__()

    # gunicorn's BaseApplication interface
    def load_config(self) -> None:
        for key, value in self._settings.items():
            self.cfg.set(key, value)

    def load(self) -> WSGIApp:
        return self._factory()

    # hooks
    def _post_fork(self, server: Any, worker: Any) -> None:
        if self._metrics is not None:
            self._metrics.close_in_child()

    def _child_exit(self, server: Any, worker: Any) -> None:
        if self._metrics is not None:
            from noe_web.metrics import mark_process_dead  # noqa: PLC0415

            mark_process_dead(worker.pid)

    def _worker_exit(self, server: Any, worker: Any) -> None:
        app = getattr(worker, "wsgi", None)
        extensions = getattr(app, "extensions", None)
        services = extensions.get("noe") if isinstance(extensions, dict) else None
        close = getattr(services, "close", None)
        if callable(close):
            close()

    def _on_exit(self, server: Any) -> None:
        if self._metrics is not None:
            self._metrics.stop()
        if self._exit is not None:
            self._exit()
