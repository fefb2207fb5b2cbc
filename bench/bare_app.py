"""The baseline for ``bench_throughput.py``: a bare Flask app answering one fixed AdmissionReview.

Run by the benchmark, not by hand: ``python bench/bare_app.py BIND CERT KEY WORKERS THREADS ANSWER``.
It is served by *plain* gunicorn: the stock gthread worker
(``gunicorn.workers.gthread.ThreadWorker``), gunicorn's own TLS from the same
certificate and key, the same workers, threads and keep-alive as ``noe serve``.
What the benchmark measures is then everything noe adds — its worker (TLS
handshakes and request reads in the event loop, slow-client protection)
and the admission work — over what any gthread-served Flask webhook pays.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from flask import Flask, Response, request
from gunicorn.app.base import BaseApplication


def create_bare_app(answer: bytes) -> Flask:
    app = Flask("bare")

    @app.post("/mutate")
    def mutate() -> Response:
        request.get_data()  # read the body, as any webhook must
        return Response(answer, mimetype="application/json")

    @app.get("/livez")
    def livez() -> Response:
        return Response(b"ok")

    return app


class PlainGthread(BaseApplication):  # type: ignore[misc]
    """Stock gunicorn, gthread worker, TLS from a certificate file."""

    def __init__(self, app: Flask, settings: dict[str, Any]) -> None:
        self._app, self._settings = app, settings
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._settings.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        return self._app


def main() -> None:
    bind, cert, key, workers, threads, answer_file = sys.argv[1:7]
    answer = Path(answer_file).read_bytes()
    PlainGthread(
        create_bare_app(answer),
        {
            "bind": [bind],
            "workers": int(workers),
            "threads": int(threads),
            "worker_class": "gthread",
            "certfile": cert,
            "keyfile": key,
            "keepalive": 30,  # as noe serve: the API server keeps webhook connections open
            "loglevel": "warning",
            "control_socket_disable": True,
        },
    ).run()


if __name__ == "__main__":
    main()
