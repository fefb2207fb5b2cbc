"""Prices (noe_core.report.pricing): read once from the flag's text, exact arithmetic, cents only on output."""

from __future__ import annotations

from fractions import Fraction

import pytest

from noe_core.errors import InvalidSettings
from noe_core.report.pricing import HOURS_PER_MONTH, Prices, money, parse_prices


def test_prices_read_as_exact_fractions_with_aliases() -> None:
    assert parse_prices("amd64=0.0464, aarch64=0.0368") == {
        "amd64": Fraction(464, 10_000),
        "arm64": Fraction(368, 10_000),
    }
    assert parse_prices("") == {}
    assert parse_prices("riscv64=0") == {"riscv64": Fraction(0)}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("arm64", "'arm64' is not ARCH=PRICE"),
        ("arm64=", "is not ARCH=PRICE"),
        ("arm 64=1", "is not an architecture name"),
        ("arm64=abc", "the price of arm64, 'abc', is not a number"),
        ("arm64=-1", "must be a number of at least 0"),
        ("arm64=nan", "must be a number of at least 0"),
        ("arm64=inf", "must be a number of at least 0"),
        ("arm64=1e9", "is more than 1000000 an hour"),
        ("arm64=1,aarch64=2", "arm64 is priced twice"),
    ],
)
def test_bad_prices_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(InvalidSettings, match=message):
        parse_prices(text)


def test_a_memory_price_needs_a_vcpu_price() -> None:
    with pytest.raises(InvalidSettings, match="--memory-prices names arm64, which --prices does not price"):
        Prices(parse_prices("amd64=1"), parse_prices("arm64=1"))


def test_monthly_cost_is_730_hours_of_requests() -> None:
    prices = Prices(parse_prices("amd64=0.04,arm64=0.032"), parse_prices("amd64=0.005"))
    # 1.5 cores and 2 GiB: amd64 pays for memory, arm64 has no memory price (0)
    assert prices.monthly(1500, 2 * 2**30, "amd64") == Fraction(HOURS_PER_MONTH) * (
        Fraction(3, 2) * Fraction(4, 100) + 2 * Fraction(5, 1000)
    )
    assert prices.monthly(1500, 2 * 2**30, "arm64") == 730 * Fraction(3, 2) * Fraction(32, 1000)
    assert prices.costs(1000, 0, ["arm64", "riscv64"]) == {"arm64": Fraction(2336, 100)}


def test_saving_is_the_dearest_other_runnable_architecture_less_the_target() -> None:
    prices = Prices(parse_prices("amd64=0.04,arm64=0.03,s390x=0.1"))
    assert prices.saving(1000, 0, ["amd64", "arm64", "s390x"], "arm64") == 730 * (Fraction(1, 10) - Fraction(3, 100))
    assert prices.saving(1000, 0, ["amd64", "arm64"], "arm64") == 730 * Fraction(1, 100)
    # blocked on the target today: the saving it would bring once rebuilt
    assert prices.saving(1000, 0, ["amd64"], "arm64") == 730 * Fraction(1, 100)
    assert prices.saving(1000, 0, ["arm64"], "arm64") == 0  # runs only on the target
    assert prices.saving(1000, 0, [], "arm64") == 0  # runs nowhere priced
    # a dearer target is a negative saving, said as it is
    assert prices.saving(1000, 0, ["arm64", "amd64"], "amd64") == -730 * Fraction(1, 100)


def test_cheapest_by_vcpu_then_memory_then_name() -> None:
    assert Prices(parse_prices("amd64=0.04,arm64=0.03")).cheapest() == "arm64"
    tie = parse_prices("amd64=0.03,arm64=0.03")
    assert Prices(tie, parse_prices("amd64=0.001,arm64=0.002")).cheapest() == "amd64"
    assert Prices(tie, parse_prices("arm64=0.001")).cheapest() == "amd64"  # amd64 pays 0 for memory
    assert Prices(tie).cheapest() == "amd64"  # then the name


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (Fraction(12345, 1000), 12.35),  # half away from zero, not half to even
        (Fraction(12355, 1000), 12.36),
        (Fraction(-12345, 1000), -12.35),
        (Fraction(1, 1000), 0.0),
        (Fraction(0), 0.0),
        (Fraction(1, 3), 0.33),
    ],
)
def test_money_rounds_to_cents_half_away_from_zero(amount: Fraction, shown: float) -> None:
    assert money(amount) == shown
