"""Structured output of the ``noe`` commands (``-o json|yaml``): one way to print data, the same in every command.

JSON is indented and ends with a newline; YAML keeps the keys in the order the
command built them, as ``kubectl -o yaml`` does, so the two read alike.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

FORMATS = ("json", "yaml")


def dump(data: Any, fmt: str) -> str:
    """``data`` as ``fmt`` (``json`` or ``yaml``) text, ending with a newline."""
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=False) + "\n"
    if fmt == "yaml":
        text: str = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
        return text
    raise ValueError(f"unknown output format {fmt!r}: use one of {', '.join(FORMATS)}")
