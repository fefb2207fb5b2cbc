"""Warnings and deny messages within the sizes the API server and kubectl accept."""

from __future__ import annotations

from noe_core.placement.messages import (
    MAX_MESSAGE,
    MAX_WARNING,
    MAX_WARNINGS,
    Notes,
    cap_warnings,
    joined,
    limit_warning,
)


def test_a_warning_is_one_printable_line_the_api_server_accepts() -> None:
    warning = limit_warning("cannot inspect\n  \x1b[31mimg:1\u202e " + "y" * 300)
    assert len(warning) == MAX_WARNING and warning.endswith("...")
    assert "\n" not in warning and "\x1b" not in warning and "\u202e" not in warning
    assert warning.startswith("cannot inspect \\x1b[31mimg:1\\u202e y")


def test_warnings_are_capped_and_the_last_counts_the_rest() -> None:
    assert cap_warnings(["a", "b"]) == ("a", "b")
    capped = cap_warnings([f"w{i}" for i in range(100)])
    assert (
        len(capped) == MAX_WARNINGS
        and capped[-1] == f"... and {100 - MAX_WARNINGS + 1} more warnings (noe's log has every image)"
    )


def test_joined_lists_what_fits_and_counts_the_rest() -> None:
    assert joined("head: ", ["a", "b"], "images") == "head: a; b"
    long = joined("head: ", [f"part-{i:05d}" for i in range(1000)], "images")
    assert len(long) <= MAX_MESSAGE and long.endswith("more images") and long.startswith("head: part-00000; part-00001")


def test_notes_shape_each_warning_and_drop_repeats_in_order() -> None:
    notes = Notes()
    for text in ("b", "a\nb", "b", "a  b"):
        notes.warn(text)
    notes.reasons.append("why")
    assert notes.warning_list() == ("b", "a b") and notes.reasons == ["why"]
