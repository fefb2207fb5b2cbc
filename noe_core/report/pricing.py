"""What requested capacity costs per architecture: ``--prices`` and ``--memory-prices``, read once, exact.

A price is per *requested* vCPU-hour (``--prices amd64=0.0464,arm64=0.0368``)
and per requested GiB-hour of memory (``--memory-prices``; an architecture
without one pays nothing for memory). A month is 730 hours, the figure cloud
price lists use. Amounts are :class:`~fractions.Fraction` from the decimal
text the user wrote, so totals are exact sums of unrounded values and the same
whatever the order they are added in; only output rounds, to cents
(:func:`money`, half away from zero). Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from noe_core.errors import InvalidSettings
from noe_core.image.platform import normalize_arch_name
from noe_core.name.kubernetes import is_arch_name
from noe_core.util.comma_list import parse_comma_list

HOURS_PER_MONTH = 730
GIB = 2**30
MAX_PRICE = Fraction(1_000_000)
"""A price above this per hour is a typo (a price per month, or in the wrong unit), not a price."""
NO_PRICES: Mapping[str, Fraction] = {}


def parse_prices(text: str) -> dict[str, Fraction]:
    """``amd64=0.0464,arm64=0.0368`` → ``{"amd64": Fraction(...), ...}``; raises :class:`InvalidSettings`.

    Architecture aliases are normalised (``aarch64`` → ``arm64``); an architecture
    priced twice, a negative, non-finite or absurd price is refused.
    """
    out: dict[str, Fraction] = {}
    for entry in parse_comma_list(text):
        name, sep, amount = entry.partition("=")
        if not sep or not name.strip() or not amount.strip():
            raise InvalidSettings(f"{entry!r} is not ARCH=PRICE (e.g. arm64=0.0368)")
        arch = normalize_arch_name(name.strip())
        if not is_arch_name(arch):
            raise InvalidSettings(f"{name.strip()!r} is not an architecture name such as amd64 or arm64")
        if arch in out:
            raise InvalidSettings(f"{arch} is priced twice")
        out[arch] = _price(amount.strip(), arch)
    return out


def _price(text: str, arch: str) -> Fraction:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise InvalidSettings(f"the price of {arch}, {text!r}, is not a number") from None
    if not value.is_finite() or value < 0:
        raise InvalidSettings(f"the price of {arch}, {text!r}, must be a number of at least 0")
    price = Fraction(value)
    if price > MAX_PRICE:
        raise InvalidSettings(f"the price of {arch}, {text!r}, is more than {MAX_PRICE} an hour")
    return price


def money(amount: Fraction) -> float:
    """An exact amount rounded to cents, half away from zero, as a JSON number (``12.345`` → ``12.35``)."""
    cents = math.floor(abs(amount) * 100 + Fraction(1, 2))
    return math.copysign(cents / 100, amount) if cents else 0.0


@dataclass(frozen=True)
class Prices:
    """Per requested vCPU-hour (``cpu``) and GiB-hour (``memory``), by architecture; the priced ones are ``cpu``'s."""

    cpu: Mapping[str, Fraction]
    memory: Mapping[str, Fraction] = field(default_factory=lambda: NO_PRICES)

    def __post_init__(self) -> None:
        unpriced = sorted(set(self.memory) - set(self.cpu))
        if unpriced:
            raise InvalidSettings(
                f"--memory-prices names {', '.join(unpriced)}, which --prices does not price: "
                "give each architecture a vCPU price"
            )

    @property
    def architectures(self) -> tuple[str, ...]:
        return tuple(sorted(self.cpu))

    def cheapest(self) -> str:
        """The architecture with the lowest vCPU price, then memory price, then name."""
        return min(self.cpu, key=lambda arch: (self.cpu[arch], self.memory.get(arch, Fraction(0)), arch))

    def monthly(self, cpu_millis: int, memory_bytes: int, arch: str) -> Fraction:
        """What these requests cost a month on ``arch`` (which must be priced)."""
        hourly = Fraction(cpu_millis, 1000) * self.cpu[arch] + Fraction(memory_bytes, GIB) * self.memory.get(
            arch, Fraction(0)
        )
        return hourly * HOURS_PER_MONTH

    def costs(self, cpu_millis: int, memory_bytes: int, runnable: Collection[str]) -> dict[str, Fraction]:
        """The monthly cost on each priced architecture among ``runnable``, by architecture name."""
        return {arch: self.monthly(cpu_millis, memory_bytes, arch) for arch in self.architectures if arch in runnable}

    def saving(self, cpu_millis: int, memory_bytes: int, runnable: Collection[str], target: str) -> Fraction:
        """The cost on the dearest other priced architecture in ``runnable``, less the cost on ``target``.

        Zero when no other priced architecture is runnable: there is nothing to move away from.
        """
        others = [cost for arch, cost in self.costs(cpu_millis, memory_bytes, runnable).items() if arch != target]
        if not others:
            return Fraction(0)
        return max(others) - self.monthly(cpu_millis, memory_bytes, target)
