"""A settings file (placement policies, declared or learned platforms) read as UTF-8 text, or as one document.

Every failure stops the command with :class:`~noe_core.errors.InvalidSettings` naming the file;
the reading and its messages are written here once.
"""

from __future__ import annotations

from typing import Any

import yaml

from noe_core.errors import InvalidSettings
from noe_core.util.safe_load import load_json, load_yaml


def read_text(path: str, label: str) -> str:
    """The UTF-8 text of ``path``; ``InvalidSettings("cannot read LABEL: …")`` or ``("LABEL is not UTF-8 text")``."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise InvalidSettings(f"cannot read {label}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidSettings(f"{label} is not UTF-8 text") from None


def read_document(path: str, label: str) -> Any:
    """``path`` read as one document: JSON when it ends in ``.json``, else YAML (a superset of JSON), with
    bounded nesting and aliases; ``InvalidSettings("LABEL is not valid JSON/YAML: …")`` otherwise."""
    text = read_text(path, label)
    try:
        return load_json(text) if path.endswith(".json") else load_yaml(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise InvalidSettings(f"{label} is not valid JSON/YAML: {exc}") from None
