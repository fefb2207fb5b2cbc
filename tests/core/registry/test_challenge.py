"""WWW-Authenticate parsing: a table of real and awkward headers, and fuzzing for clean failures."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noe_core.errors import AuthError, RegistryError
from noe_core.registry.challenge import ChallengeError, parse_challenges, preferred

GOOD = [
    (
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull"',
        [
            (
                "bearer",
                {
                    "realm": "https://auth.docker.io/token",
                    "service": "registry.docker.io",
                    "scope": "repository:library/nginx:pull",
                },
            )
        ],
    ),
    (
        'Bearer realm="https://a/t",scope="repository:a/b:pull,push"',
        [("bearer", {"realm": "https://a/t", "scope": "repository:a/b:pull,push"})],
    ),
    ('Basic realm="Registry Realm"', [("basic", {"realm": "Registry Realm"})]),
    ('basic realm="a \\"quoted\\" name, with comma"', [("basic", {"realm": 'a "quoted" name, with comma'})]),
    ('Bearer realm="x", Basic realm="y"', [("bearer", {"realm": "x"}), ("basic", {"realm": "y"})]),
    ("Basic, Bearer realm=x", [("basic", {}), ("bearer", {"realm": "x"})]),
    (
        "Bearer realm=https://auth.example/token,service=reg.example",
        [("bearer", {"realm": "https://auth.example/token", "service": "reg.example"})],
    ),
    ('Bearer  realm = "x" ,  service="y"', [("bearer", {"realm": "x", "service": "y"})]),
    ('Bearer REALM="x",Error="insufficient_scope"', [("bearer", {"realm": "x", "error": "insufficient_scope"})]),
    ("Basic", [("basic", {})]),
    ("Negotiate abc==, Basic realm=r", [("negotiate", {}), ("basic", {"realm": "r"})]),
]

BAD = [
    "",
    "   ",
    ",,",
    "=",
    '"Bearer"',
    'Bearer realm="x',
    'Bearer realm="x\\',
    'Bearer realm="x" junk',
    "Bearer realm=x,realm=y",
    "Bearer =x",
    "Bearer realm=a\x01b",
    'Bearer realm="a\nb"',
]


@pytest.mark.parametrize(("header", "want"), GOOD)
def test_good_headers(header: str, want: list[tuple[str, dict[str, str]]]) -> None:
    got = [(c.scheme, dict(c.params)) for c in parse_challenges(header)]
    assert got == want


@pytest.mark.parametrize("header", BAD)
def test_bad_headers_raise_a_clean_auth_error(header: str) -> None:
    with pytest.raises(ChallengeError) as caught:
        parse_challenges(header, registry="reg.example")
    assert isinstance(caught.value, AuthError)
    assert caught.value.registry == "reg.example"
    assert "reg.example" in str(caught.value)


def test_preferred_is_bearer_then_basic() -> None:
    assert preferred(parse_challenges('Basic realm="b", Bearer realm="t"')).scheme == "bearer"  # type: ignore[union-attr]
    assert preferred(parse_challenges('Basic realm="b"')).scheme == "basic"  # type: ignore[union-attr]
    assert preferred(parse_challenges("Negotiate abc")) is None


def test_bearer_accessors() -> None:
    (c,) = parse_challenges('Bearer realm="r",service="s",scope="repository:a:pull"')
    assert (c.realm, c.service, c.scope, c.error) == ("r", "s", "repository:a:pull", "")


@given(st.text(max_size=200))
def test_any_text_parses_or_raises_challenge_error(header: str) -> None:
    with contextlib.suppress(ChallengeError):
        parse_challenges(header)


_token = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789-._~", min_size=1, max_size=12)
_value = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30)


@given(
    st.lists(
        st.tuples(st.sampled_from(["Bearer", "Basic"]), st.dictionaries(_token, _value, min_size=1, max_size=4)),
        min_size=1,
        max_size=3,
    )
)
def test_quoted_round_trip(challenges: list[tuple[str, dict[str, str]]]) -> None:
    def quote(v: str) -> str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'

    header = ", ".join(
        f"{scheme} " + ",".join(f"{k}={quote(v)}" for k, v in params.items()) for scheme, params in challenges
    )
    lowered = [{k.lower(): v for k, v in p.items()} for _, p in challenges]
    if any(len(low) != len(p) for low, (_, p) in zip(lowered, challenges, strict=True)):
        with pytest.raises(ChallengeError):
            parse_challenges(header)
        return
    got = parse_challenges(header)
    assert [(c.scheme, dict(c.params)) for c in got] == [
        (s.lower(), low) for (s, _), low in zip(challenges, lowered, strict=True)
    ]


def test_error_tree() -> None:
    assert issubclass(ChallengeError, RegistryError)
