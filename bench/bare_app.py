"""The baseline for ``bench_throughput.py``: a bare Flask app answering one fixed AdmissionReview.

Run by the benchmark, not by hand: ``python bench/bare_app.py BIND CERT KEY WORKERS THREADS ANSWER``.
It is served by the same gunicorn application class as ``noe serve`` (gthread
workers, the same TLS context per process, keep-alive), so the difference the
benchmark measures is the admission work alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flask import Flask, Response, request

from noe_web.server import NoeServer


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


def main() -> None:
    bind, cert, key, workers, threads, answer_file = sys.argv[1:7]
    answer = Path(answer_file).read_bytes()
    NoeServer(
        bind=bind,
        workers=int(workers),
        threads=int(threads),
        cert_file=Path(cert),
        key_file=Path(key),
        app_factory=lambda: create_bare_app(answer),
        graceful_timeout=5,
        request_timeout=30,
        log_level="warning",
    ).run()


if __name__ == "__main__":
    main()
