"""Kubernetes resource quantities (``100m``, ``0.5``, ``1Gi``, ``512M``, ``1e3``), read exactly.

The grammar is the API server's (``k8s.io/apimachinery`` ``resource.Quantity``):
a decimal number, then a binary suffix (``Ki`` … ``Ei``), a decimal suffix
(``n u m k M G T P E``) or an exponent (``e3``, ``E-2``). Values are kept as
:class:`~decimal.Decimal` so ``0.1 + 0.2`` CPU is ``0.3`` and sums do not drift;
:func:`millis` and :func:`units` round up, as the scheduler's ``MilliValue`` and
``Value`` do. Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from noe_core.errors import InvalidObject

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?|[eE](?P<exponent>[+-]?[0-9]+))$"
)
_MAX_EXPONENT = 40  # beyond any real request; keeps Decimal arithmetic small


def parse_quantity(value: object, what: str = "quantity") -> Decimal:
    """The quantity ``value`` (a string, or a number as YAML may give it) as an exact decimal.

    Raises :class:`InvalidObject` naming ``what`` for anything the API server would refuse,
    negative values included (requests cannot be negative).
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidObject(f"{what} must be a quantity such as 100m or 1Gi, not {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidObject(f"{what} {value!r} is not a finite quantity")
    text = value if isinstance(value, str) else repr(value)
    match = _QUANTITY.match(text.strip())
    if not match:
        raise InvalidObject(f"{what} {text!r} is not a quantity (e.g. 100m, 0.5, 1Gi, 512M)")
    try:
        number = Decimal(match["number"])
    except InvalidOperation:  # pragma: no cover - the pattern only lets decimals through
        raise InvalidObject(f"{what} {text!r} is not a quantity") from None
    if match["exponent"] is not None:
        exponent = int(match["exponent"])
        if abs(exponent) > _MAX_EXPONENT:
            raise InvalidObject(f"{what} {text!r}: exponent out of range")
        result = number.scaleb(exponent)
    elif match["suffix"] in _BINARY:
        result = number * _BINARY[match["suffix"]]
    else:
        result = number * _DECIMAL[match["suffix"] or ""]
    if result < 0:
        raise InvalidObject(f"{what} {text!r} is negative")
    return result


def millis(quantity: Decimal) -> int:
    """Thousandths, rounded up (a CPU request in millicores, as the scheduler counts it)."""
    return math.ceil(quantity * 1000)


def units(quantity: Decimal) -> int:
    """Whole units, rounded up (a memory request in bytes)."""
    return math.ceil(quantity)
