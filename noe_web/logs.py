"""The one log schema of every noe process: one line per record, JSON or text, the admission uid on each.

``noe serve`` (its workers and gunicorn's error and access logs, through
:func:`gunicorn_logconfig`), ``noe controller`` and Python warnings all write
through :class:`LineHandler`. A JSON line has ``time``, ``level``, ``logger``,
``msg``, the ``uid`` of the admission being answered (:data:`ADMISSION_UID`,
which lookup threads inherit through a copied context) and the record's
``fields``; ``text`` writes the same as ``time level logger msg key=value…``.
``auto`` (the default) is text when the lines go to a terminal and JSON
otherwise: people at a terminal read, log collectors (and ``noe serve | jq``)
parse. Lines go to standard output, so that is the stream ``auto`` looks at.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, TextIO

ADMISSION_UID: contextvars.ContextVar[str | None] = contextvars.ContextVar("noe_admission_uid", default=None)
"""The uid of the admission being answered; set by ``AdmissionService.review``, copied into lookup threads."""

LOG_FORMATS = ("auto", "json", "text")


def resolve_format(log_format: str, stream: TextIO | None = None) -> str:
    """``json`` or ``text``: ``auto`` is text when ``stream`` (standard output, where lines go) is a terminal."""
    if log_format != "auto":
        return log_format
    stream = sys.stdout if stream is None else stream
    try:
        return "text" if stream.isatty() else "json"
    except (AttributeError, ValueError):  # closed or not a real stream
        return "json"


class FieldsRecord(logging.LogRecord):
    """A record of the schema's own making (the admission line): what every formatter reads, without the
    source-file and process lookups a :class:`logging.LogRecord` makes (the schema names no source line).
    Written once per admission, where those lookups cost more than the rest of the line."""

    def __init__(self, name: str, level: int, msg: str, fields: dict[str, Any]) -> None:
        self.name, self.msg, self.args, self.levelno = name, msg, (), level
        self.levelname = logging.getLevelName(level)
        self.pathname = self.filename = self.module = self.funcName = ""
        self.lineno = 0
        self.exc_info = self.exc_text = self.stack_info = None
        self.created = now = time.time()
        self.msecs = int(now * 1000) % 1000
        self.relativeCreated = (now - _STARTED) * 1000
        self.thread, self.threadName = threading.get_ident(), None
        self.process, self.processName = _PID, None
        self.taskName = None
        self.fields = fields


_STARTED = time.time()
_PID = os.getpid()


def log_fields(logger: logging.Logger, level: int, msg: str, fields: dict[str, Any]) -> None:
    """Log one line of the schema with ``fields`` (the caller has checked ``logger.isEnabledFor(level)``)."""
    logger.handle(FieldsRecord(logger.name, level, msg, fields))


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

    def __init__(self) -> None:
        super().__init__()
        # imported here: every noe command imports this module, only those that log JSON lines need orjson
        from noe_web.json_codec import dumps  # noqa: PLC0415

        self._dumps = dumps

    def format(self, record: logging.LogRecord) -> str:
        return self.line(record)[:-1].decode()

    def line(self, record: logging.LogRecord) -> bytes:
        """The line, newline included, as :class:`LineHandler` writes it (encoded once, by orjson)."""
        out = _base(record)
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return self._dumps(out, default=str)


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

    def __init__(self, level: int | str = logging.NOTSET, log_format: str = "auto") -> None:
        super().__init__(level)
        self.setFormatter(TextFormatter() if resolve_format(log_format) == "text" else JsonFormatter())
        self.addFilter(UidFilter())

    def createLock(self) -> None:
        self.lock = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            formatter = self.formatter
            if isinstance(formatter, JsonFormatter):
                data = formatter.line(record)
            else:
                data = (self.format(record) + "\n").encode("utf-8", "replace")
            fd = sys.stdout.fileno()
            while data:
                data = data[os.write(fd, data) :]
        except Exception:
            self.handleError(record)


def configure_logging(level: str, log_format: str = "auto") -> None:
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
