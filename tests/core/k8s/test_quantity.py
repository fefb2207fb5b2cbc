"""Kubernetes quantities read exactly, in every unit the API server accepts; bad ones named."""

from __future__ import annotations

from decimal import Decimal

import pytest

from noe_core.errors import InvalidObject
from noe_core.k8s.quantity import millis, parse_quantity, units


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100m", Decimal("0.1")),
        ("0.5", Decimal("0.5")),
        ("2", Decimal(2)),
        (".5", Decimal("0.5")),
        ("1.", Decimal(1)),
        ("250u", Decimal("0.00025")),
        ("5n", Decimal("0.000000005")),
        ("1Ki", Decimal(1024)),
        ("1Gi", Decimal(1024**3)),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("512M", Decimal(512_000_000)),
        ("1k", Decimal(1000)),
        ("2E", Decimal(2 * 10**18)),
        ("1Ei", Decimal(2**60)),
        ("1e3", Decimal(1000)),
        ("12E-1", Decimal("1.2")),
        ("+3", Decimal(3)),
        (1, Decimal(1)),
        (0.25, Decimal("0.25")),
    ],
)
def test_units(text: object, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "m", "1mi", "1 Gi", "1GiB", "-1", "1e", "0x10", "1e999", "abc", "1..2"])
def test_bad_quantities_are_named(text: str) -> None:
    with pytest.raises(InvalidObject, match=r"requests\.cpu"):
        parse_quantity(text, "requests.cpu")


@pytest.mark.parametrize("value", [True, None, [], float("nan"), float("inf")])
def test_wrong_types(value: object) -> None:
    with pytest.raises(InvalidObject):
        parse_quantity(value)


def test_rounding_up_as_the_scheduler_does() -> None:
    assert millis(parse_quantity("100m")) == 100
    assert millis(parse_quantity("0.0001")) == 1
    assert millis(parse_quantity("1")) == 1000
    assert units(parse_quantity("1.5")) == 2
    assert units(parse_quantity("100m")) == 1
    assert units(parse_quantity("1Mi")) == 1048576
