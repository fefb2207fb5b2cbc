"""Reading fields of decoded JSON/YAML at the border, with messages that name the field.

Everything noe reads from outside (AdmissionReviews, pods, manifests, docker
configs, kubeconfigs, credential-provider answers) arrives as ``json.loads`` or
``yaml.safe_load`` output: any value may have any type. These readers turn one
value into the type the caller needs or raise the caller's error type (an
``InvalidObject`` becomes a 400, an ``InvalidSettings`` stops start-up, a
``ManifestError`` fails one lookup) with the field's path in the message, so a
wrong type never travels on as a ``KeyError`` or ``TypeError`` deep inside.

``None`` (JSON ``null`` or an absent key) reads as empty unless ``required``;
``missing`` replaces the default ``"<path> is missing"`` message for it, for
callers whose messages users and tests already know.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from noe_core.errors import InvalidObject, NoeError

ErrorType: TypeAlias = Callable[[str], NoeError]
"""Builds the error to raise from a message (an exception class taking one message)."""


def json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for messages users read."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def mapping(
    value: object, path: str, *, required: bool = False, missing: str = "", error: ErrorType = InvalidObject
) -> Mapping[str, Any]:
    """``value`` as an object; ``None`` reads as empty unless ``required``."""
    if type(value) is dict:  # decoded JSON; the Mapping ABC check below is slow
        return value
    if value is None:
        if required:
            raise error(missing or f"{path} is missing")
        return {}
    if not isinstance(value, Mapping):
        raise error(f"{path} must be an object, not {json_type(value)}")
    return value


def lenient_mapping(value: object) -> Mapping[str, Any]:
    """``value`` as an object, anything else as empty: for reads that report what they find and never
    refuse (a Node's or a live pod's status for ``noe why`` and the controller)."""
    return value if isinstance(value, Mapping) else {}


def array(
    value: object, path: str, *, required: bool = False, missing: str = "", error: ErrorType = InvalidObject
) -> list[Any]:
    """``value`` as an array; ``None`` reads as empty unless ``required``."""
    if value is None:
        if required:
            raise error(missing or f"{path} is missing")
        return []
    if not isinstance(value, list):
        raise error(f"{path} must be an array, not {json_type(value)}")
    return value


def string(
    value: object,
    path: str,
    *,
    required: bool = False,
    non_empty: bool = False,
    missing: str = "",
    error: ErrorType = InvalidObject,
) -> str:
    """``value`` as a string; ``None`` reads as ``""`` unless ``required``; ``non_empty`` refuses ``""``."""
    if value is None:
        if required:
            raise error(missing or f"{path} is missing")
        value = ""
    if not isinstance(value, str):
        raise error(f"{path} must be a string, not {json_type(value)}")
    if non_empty and not value:
        raise error(f"{path} must be a non-empty string")
    return value


def integer(value: object, path: str, *, error: ErrorType = InvalidObject) -> int | None:
    """``value`` as an integer (booleans are not integers); ``None`` when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{path} must be an integer, not {json_type(value)}")
    return value


def boolean(value: object, path: str, *, error: ErrorType = InvalidObject) -> bool | None:
    """``value`` as a boolean (a quoted ``"false"`` is not one); ``None`` when absent."""
    if value is None:
        return None
    if not isinstance(value, bool):
        raise error(f"{path} must be a boolean, not {json_type(value)}")
    return value


def string_map(value: object, path: str, *, error: ErrorType = InvalidObject) -> dict[str, str]:
    """An object of strings to strings (labels, annotations, nodeSelector)."""
    out: dict[str, str] = {}
    for key, item in mapping(value, path, error=error).items():
        if not isinstance(key, str):
            raise error(f"{path} keys must be strings")
        if item is None:
            raise error(f"{path}[{key!r}] must be a string, not null")
        out[key] = string(item, f"{path}[{key!r}]", error=error)
    return out
