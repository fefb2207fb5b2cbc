"""Hypothesis strategies for decoded JSON: what a careless or hostile client may put wherever noe reads a document."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def text(max_size: int = 40) -> st.SearchStrategy[str]:
    """Text with control, bidi and astral characters (no lone surrogates: JSON cannot carry them as UTF-8)."""
    return st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=max_size)


def json_values(*, max_text: int = 40, max_size: int = 4, max_leaves: int = 20) -> st.SearchStrategy[Any]:
    """Any JSON value: null, booleans, integers beyond 64 bits, floats, text, and arrays and objects of them."""
    words = text(max_text)
    scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | words
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=max_size) | st.dictionaries(words, children, max_size=max_size),
        max_leaves=max_leaves,
    )


TEXT = text()
JSON_VALUES = json_values()
