"""What an image offers: entries that fit no node are left out, and pair offers intersect as sets of nodes."""

from __future__ import annotations

import pytest

from noe_core.image.image_platforms import ImagePlatforms
from noe_core.image.offer import ANYWHERE, PairOffer, PlatformScope

BOTH = PlatformScope(("linux", "windows"), levels=True)


def test_malformed_windows_versions_and_unknown_variants_fit_no_node() -> None:
    found = ImagePlatforms.of("windows(10.0)/amd64", "linux/amd64/v9", "linux/arm64")
    assert found.bad_versions == ("windows(10.0)/amd64",)
    assert found.offer(BOTH) == {("linux", "arm64"): ANYWHERE}
    assert found.offer(PlatformScope(("linux",))).pairs == {("linux", "amd64"), ("linux", "arm64")}


@pytest.mark.parametrize(
    ("a", "b", "both"),
    [
        (PairOffer(1), PairOffer(3), PairOffer(3)),
        (PairOffer(None, (("b1", 2),)), PairOffer(1), PairOffer(None, (("b1", 2),))),
        (PairOffer(None, (("b1", 1),)), PairOffer(None, (("b2", 1),)), PairOffer(None)),
        (PairOffer(3, (("b1", 1),)), PairOffer(2), PairOffer(3, (("b1", 2),))),
        (PairOffer(2, (("b1", 1),)), PairOffer(2), PairOffer(2)),
    ],
)
def test_pair_offers_intersect(a: PairOffer, b: PairOffer, both: PairOffer) -> None:
    assert a & b == both == b & a
    assert (a & b).empty == (both.any_build is None and not both.builds)
