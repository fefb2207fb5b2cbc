"""The reference grammar: tables of good and bad inputs, and a print/parse round trip."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from noe_core.errors import InvalidInput, InvalidReference
from noe_core.name.reference import Reference, parse_reference

D = "sha256:" + "0123456789abcdef" * 4
D2 = "sha256:" + "f" * 64

GOOD = [
    # text, registry, repository, tag, digest
    ("nginx", "docker.io", "library/nginx", "latest", None),
    ("library/nginx", "docker.io", "library/nginx", "latest", None),
    ("docker.io/library/x", "docker.io", "library/x", "latest", None),
    ("docker.io/x", "docker.io", "library/x", "latest", None),
    ("index.docker.io/x:1", "docker.io", "library/x", "1", None),
    ("index.docker.io/org/x", "docker.io", "org/x", "latest", None),
    ("org/img", "docker.io", "org/img", "latest", None),
    ("nginx:1.25-alpine", "docker.io", "library/nginx", "1.25-alpine", None),
    ("ghcr.io/org/img:1.2", "ghcr.io", "org/img", "1.2", None),
    ("ghcr.io/org/sub/img", "ghcr.io", "org/sub/img", "latest", None),
    ("ghcr.io/img", "ghcr.io", "img", "latest", None),  # no library/ outside Docker Hub
    ("localhost:5000/a", "localhost:5000", "a", "latest", None),
    ("localhost/a", "localhost", "a", "latest", None),
    ("a:5000/b:c", "a:5000", "b", "c", None),
    ("127.0.0.1:5000/a/b:v1", "127.0.0.1:5000", "a/b", "v1", None),
    ("[::1]:5000/x", "[::1]:5000", "x", "latest", None),
    ("[fe80::1]/x:t", "[fe80::1]", "x", "t", None),
    ("Registry.Corp/team/app", "Registry.Corp", "team/app", "latest", None),  # host is not lower-cased
    ("Corp/app", "Corp", "app", "latest", None),  # upper case can only be a host (distribution)
    (
        "my-reg.example.com/a_b/c__d/e-f/g.h/i---j:T_a.g-1",
        "my-reg.example.com",
        "a_b/c__d/e-f/g.h/i---j",
        "T_a.g-1",
        None,
    ),
    (f"x@{D}", "docker.io", "library/x", None, D),
    (f"x:tag@{D}", "docker.io", "library/x", "tag", D),
    (f"localhost:5000/a:b@{D}", "localhost:5000", "a", "b", D),
    ("localhost:5000", "docker.io", "library/localhost", "5000", None),  # no '/', so ':5000' is a tag
    ("x:" + "a" * 128, "docker.io", "library/x", "a" * 128, None),
    ("x:_", "docker.io", "library/x", "_", None),
]


@pytest.mark.parametrize(("text", "registry", "repository", "tag", "digest"), GOOD)
def test_good_references(text: str, registry: str, repository: str, tag: str | None, digest: str | None) -> None:
    ref = parse_reference(text)
    assert ref == Reference(registry, repository, tag, digest)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (registry, repository, tag, digest)
    assert parse_reference(str(ref)) == ref


BAD = [
    # text, a fragment of the reason
    ("", "empty"),
    (" ", "whitespace"),
    ("nginx ", "whitespace"),
    ("ngi\tnx", "whitespace"),
    ("a/b c", "whitespace"),
    ("Nginx", "lower case"),
    ("library/Nginx", "lower case"),
    ("docker.io/Org/img", "lower case"),
    ("ghcr.io/org/Img:1", "lower case"),
    ("a//b", "empty path component"),
    ("a/", "empty path component"),
    ("/a", "empty path component"),
    ("ghcr.io/", "empty repository"),
    ("ghcr.io//a", "empty path component"),
    (":tag", "empty repository"),
    ("a:", "empty tag"),
    ("a@", "empty digest"),
    ("@" + D, "empty repository"),
    (f"a@{D}@{D}", "more than one '@'"),
    ("x@sha512:" + "a" * 128, "sha512"),
    ("x@md5:" + "a" * 32, "md5"),
    ("x@sha256:abc", "64 hex characters, not 3"),
    ("x@sha256:" + "a" * 65, "not 65"),
    ("x@sha256:" + "A" * 64, "lower-case hexadecimal"),
    ("x@sha256:" + "g" * 64, "lower-case hexadecimal"),
    ("x@" + "a" * 64, "must be 'sha256:'"),
    ("x:" + "a" * 129, "at most 128"),
    ("x:-a", "tag '-a'"),
    ("x:.a", "tag '.a'"),
    ("x:a+b", "tag 'a+b'"),
    ("a_/b", "repository component 'a_'"),
    ("-a/b", "repository component '-a'"),
    ("a...b", "repository component 'a...b'"),
    ("a___b", "repository component 'a___b'"),
    ("ex_ample.com/a", "registry 'ex_ample.com'"),
    ("-bad.com/a", "registry '-bad.com'"),
    ("host.com:port/a", "registry 'host.com:port'"),
    ("[::1]:5000", "repository component '[::1]'"),
    ("[zz::1]:5000/x", "registry '[zz::1]:5000'"),
    ("caf\u00e9/x", "repository component"),
    ("ghcr.io/" + "a" * 250, "longer than 255"),
    ("a" * 250, "longer than 255"),  # docker.io/library/ counts towards the limit
]


@pytest.mark.parametrize(("text", "reason"), BAD)
def test_bad_references(text: str, reason: str) -> None:
    with pytest.raises(InvalidReference) as info:
        parse_reference(text)
    assert reason in info.value.reason
    assert info.value.reference == text
    assert repr(text) in str(info.value)


def test_invalid_reference_is_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        parse_reference("UPPER")
    with pytest.raises(ValueError, match="invalid image reference"):
        parse_reference("UPPER")


def test_not_a_string() -> None:
    with pytest.raises(InvalidReference, match="must be a string"):
        parse_reference(42)  # type: ignore[arg-type]


def test_name_length_limit_is_inclusive() -> None:
    name = "ghcr.io/" + "a" * (255 - len("ghcr.io/"))
    assert len(parse_reference(name).context) == 255


def test_identifier_prefers_the_digest() -> None:
    assert parse_reference(f"x:tag@{D}").identifier == D
    assert parse_reference(f"x@{D}").identifier == D
    assert parse_reference("x:tag").identifier == "tag"
    assert parse_reference("x").identifier == "latest"


def test_digest_only_keeps_tag_none() -> None:
    ref = parse_reference(f"x@{D}")
    assert ref.tag is None
    assert str(ref) == f"docker.io/library/x@{D}"


def test_api_host_and_context() -> None:
    hub = parse_reference("nginx")
    assert hub.api_host == "registry-1.docker.io"
    assert hub.context == "docker.io/library/nginx"
    assert parse_reference("index.docker.io/library/nginx").api_host == "registry-1.docker.io"
    local = parse_reference("localhost:5000/a/b:c")
    assert local.api_host == "localhost:5000"
    assert local.context == "localhost:5000/a/b"


def test_str_is_canonical() -> None:
    assert str(parse_reference("nginx")) == "docker.io/library/nginx:latest"
    assert str(parse_reference(f"a:5000/b:c@{D}")) == f"a:5000/b:c@{D}"


def test_with_registry_for_mirrors() -> None:
    ref = parse_reference(f"nginx:1@{D}")
    mirrored = ref.with_registry("mirror.corp:5000")
    assert mirrored == Reference("mirror.corp:5000", "library/nginx", "1", D)
    assert mirrored.api_host == "mirror.corp:5000"
    # moving a one-component repository onto Docker Hub makes it an official image
    assert parse_reference("ghcr.io/x").with_registry("index.docker.io").repository == "library/x"
    with pytest.raises(InvalidReference, match="registry"):
        ref.with_registry("not a host")
    with pytest.raises(InvalidReference, match="empty registry"):
        ref.with_registry("")
    # a bare word would print as "mirror/library/nginx" and read back as a Docker Hub repository
    with pytest.raises(InvalidReference, match="Docker Hub namespace"):
        ref.with_registry("mirror")
    assert str(ref.with_registry("mirror:80")) == f"mirror:80/library/nginx:1@{D}"


def test_with_digest() -> None:
    ref = parse_reference("ghcr.io/a:1").with_digest(D2)
    assert (ref.tag, ref.digest, ref.identifier) == ("1", D2, D2)
    with pytest.raises(InvalidReference, match="sha256"):
        ref.with_digest("sha256:short")


def test_direct_construction_is_validated_and_normalised() -> None:
    assert Reference("index.docker.io", "nginx") == parse_reference("nginx")
    with pytest.raises(InvalidReference, match="lower case"):
        Reference("ghcr.io", "A")
    with pytest.raises(InvalidReference, match="tag"):
        Reference("ghcr.io", "a", "-x")
    with pytest.raises(InvalidReference, match="empty repository"):
        Reference("ghcr.io", "")


def test_frozen_and_hashable() -> None:
    ref = parse_reference("nginx")
    with pytest.raises(AttributeError):
        ref.tag = "x"  # type: ignore[misc]
    assert len({ref, parse_reference("docker.io/library/nginx:latest")}) == 1


# --- property tests ---------------------------------------------------------------------------

_alnum = st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True)
_sep = st.sampled_from([".", "_", "__", "-", "--"])
_component = st.builds(
    lambda first, rest: first + "".join(s + a for s, a in rest),
    _alnum,
    st.lists(st.tuples(_sep, _alnum), max_size=2),
)
_repository = st.lists(_component, min_size=1, max_size=3).map("/".join)
_label = st.from_regex(r"[a-zA-Z0-9]([a-zA-Z0-9-]{0,5}[a-zA-Z0-9])?", fullmatch=True)
_domain = st.lists(_label, min_size=2, max_size=3).map(".".join)
_ipv6 = st.sampled_from(["[::1]", "[fe80::1]", "[2001:db8::a:B]"])
_port = st.integers(0, 65535).map(lambda p: f":{p}")
_host = st.one_of(
    st.tuples(_domain, st.one_of(st.just(""), _port)).map("".join),
    st.tuples(_label, _port).map("".join),
    st.tuples(_ipv6, st.one_of(st.just(""), _port)).map("".join),
    st.sampled_from(["docker.io", "index.docker.io", "localhost", "localhost:5000"]),
)
_tag = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True)
_digest = st.from_regex(r"[0-9a-f]{64}", fullmatch=True).map(lambda h: "sha256:" + h)


@given(host=_host, repository=_repository, tag=st.none() | _tag, digest=st.none() | _digest)
def test_str_parses_back_to_the_same_reference(host: str, repository: str, tag: str | None, digest: str | None) -> None:
    ref = Reference(host, repository, tag, digest)
    assert parse_reference(str(ref)) == ref
    assert str(parse_reference(str(ref))) == str(ref)


@given(
    host=st.none() | _host,
    repository=_repository,
    tag=st.none() | _tag,
    digest=st.none() | _digest,
)
@example(host=None, repository="nginx", tag=None, digest=None)
def test_parsing_written_forms_is_idempotent(
    host: str | None, repository: str, tag: str | None, digest: str | None
) -> None:
    text = repository if host is None else f"{host}/{repository}"
    if tag is not None:
        text += f":{tag}"
    if digest is not None:
        text += f"@{digest}"
    try:
        ref = parse_reference(text)
    except InvalidReference as exc:
        # without a host, a first path component with a '.' (such as "a_b.c") is read as a host,
        # as distribution does, and then fails the host grammar; anything else must parse
        assert host is None
        assert "." in repository.split("/", maxsplit=1)[0]
        assert "registry" in exc.reason
        return
    assert parse_reference(str(ref)) == ref
    assert ref.identifier == (digest or tag or "latest")
    assert ref.context.endswith(repository)


@given(st.text(max_size=80))
def test_arbitrary_text_raises_only_invalid_reference(text: str) -> None:
    try:
        ref = parse_reference(text)
    except InvalidReference:
        return
    assert parse_reference(str(ref)) == ref


def test_a_reference_is_parsed_once_and_a_bad_one_refused_every_time() -> None:
    first = parse_reference("registry.example.com/team/app:v1.2")
    assert parse_reference("registry.example.com/team/app:v1.2") is first  # remembered: the same value
    for text in ("Registry.Example/UPPER:v1", "r.example.com/" + "a/" * 300 + "x:v1"):
        for _ in range(2):  # never remembered as good
            with pytest.raises(InvalidReference):
                parse_reference(text)
