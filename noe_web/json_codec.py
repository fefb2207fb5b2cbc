"""JSON on the request path: orjson's speed, the standard library's behaviour wherever the two differ.

Why: decoding the AdmissionReview, encoding the answer and the admission's log
line with the standard library cost ~40 us of an admission that costs ~250 us in
all; orjson does the same work in under 10. What orjson refuses but the
standard library accepts — integers beyond 64 bits, NaN, UTF-16 and UTF-32
bodies, lone surrogates in strings — goes through the standard library, so
what is accepted, and the message a refused body gets, do not change.

orjson is compiled, and only the ``web`` extra installs it: without it (``pip
install noe-webhook``, the single-file ``kubectl-noe``) both functions are the
standard library's, with the same output byte for byte — only slower.
"""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ModuleNotFoundError as exc:  # not the web extra: the standard library does all of it
    if exc.name != "orjson":
        raise
    orjson = None  # type: ignore[assignment]

_COMPACT = (",", ":")


def loads(data: bytes) -> Any:
    """Decode ``data``; raises what ``json.loads`` raises (``JSONDecodeError``, ``RecursionError``)."""
    if orjson is None:
        return json.loads(data)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)  # orjson's limits are not the standard library's; its messages are the known ones


def _standard(doc: Any, default: Any) -> bytes:
    """What orjson writes, by the standard library: non-ASCII as UTF-8 where it can be, escapes where it cannot."""
    try:
        return json.dumps(doc, default=default, separators=_COMPACT, ensure_ascii=False).encode() + b"\n"
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form: escaped, as the orjson path's fallback does
        return json.dumps(doc, default=default, separators=_COMPACT).encode() + b"\n"


def dumps(doc: Any, *, default: Any = None) -> bytes:
    """``doc`` as compact JSON and a newline (orjson writes non-ASCII as UTF-8, not as escapes)."""
    if orjson is None:
        return _standard(doc, default)
    try:
        return orjson.dumps(doc, default=default, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(doc, default=default, separators=_COMPACT).encode() + b"\n"


def compact(doc: Any) -> bytes:
    """``doc`` as compact JSON, no newline: a JSON Patch's bytes (base64'd into the AdmissionReview answer)."""
    try:
        return orjson.dumps(doc)
    except orjson.JSONEncodeError:
        return json.dumps(doc, separators=_COMPACT).encode()
