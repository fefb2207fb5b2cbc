"""Credentials, static and combined keychains, and files re-read when they change."""

from __future__ import annotations

import base64
import logging
import os
import pickle
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from noe_core.credentials.keychain import (
    ANONYMOUS,
    Credential,
    FileKeychain,
    Keychain,
    MultiKeychain,
    StaticKeychain,
    unique,
)
from noe_core.errors import CredentialError, InvalidSettings
from noe_core.name.reference import Reference, parse_reference

SECRET = "s3cr3t-Pa55w0rd-zzz"
TOKEN = "refresh-T0ken-yyy"


def cred(username: str = "robot", password: str = SECRET, source: str = "test") -> Credential:
    return Credential(username, password, source)


def test_basic_header() -> None:
    header = Credential("user", "p:ss", "x").basic_header()
    assert header.startswith("Basic ")
    assert base64.b64decode(header[6:]) == b"user:p:ss"


def test_repr_and_str_never_show_secrets() -> None:
    for credential in (cred(), Credential("", "", "docker config x", identity_token=TOKEN)):
        for text in (
            repr(credential),
            str(credential),
            credential.identity,
            credential.fingerprint,
            repr([credential]),
            f"{credential}",
            repr(StaticKeychain([("reg.corp", credential)])),
        ):
            assert SECRET not in text
            assert TOKEN not in text
    assert "robot" in repr(cred()) and "test" in repr(cred())
    assert "identitytoken=<redacted>" in repr(Credential("", "", "x", identity_token=TOKEN))


def test_identity_is_stable_and_changes_with_the_secret() -> None:
    assert cred().identity == cred().identity
    assert cred().identity != cred(password="rotated").identity
    assert cred().identity != cred(source="other").identity
    assert cred().fingerprint == cred(source="other").fingerprint
    assert cred().identity.startswith("test|robot|")


def test_refresh_token_credential() -> None:
    credential = Credential("00000000-0000-0000-0000-000000000000", "", "acr", identity_token=TOKEN)
    assert credential.is_refresh_token
    assert not cred().is_refresh_token


def test_credential_is_frozen_hashable_picklable() -> None:
    credential = cred()
    with pytest.raises(AttributeError):
        credential.password = "x"  # type: ignore[misc]
    assert {credential, cred()} == {credential}
    assert pickle.loads(pickle.dumps(credential)) == credential


def test_bad_credentials() -> None:
    with pytest.raises(CredentialError, match="':'"):
        Credential("a:b", SECRET, "src")
    with pytest.raises(CredentialError) as info:
        Credential("a", 12, "src")  # type: ignore[arg-type]
    assert SECRET not in str(info.value)


def test_anonymous_keychain() -> None:
    assert ANONYMOUS.resolve(parse_reference("nginx")) == ()
    assert isinstance(ANONYMOUS, Keychain)


def test_static_keychain_orders_most_specific_first() -> None:
    broad, host, team = cred("broad", "1"), cred("host", "2"), cred("team", "3")
    keychain = StaticKeychain([("*.corp", broad), ("reg.corp", host), ("reg.corp/team", team)])
    assert list(keychain.resolve(parse_reference("reg.corp/team/app:1"))) == [team, host, broad]
    assert list(keychain.resolve(parse_reference("reg.corp/other"))) == [host, broad]
    assert list(keychain.resolve(parse_reference("x.corp/other"))) == [broad]
    assert keychain.resolve(parse_reference("reg.corp:5000/team/app")) == ()
    assert keychain.resolve(parse_reference("nginx")) == ()
    assert len(keychain) == 3
    assert isinstance(keychain, Keychain)


def test_static_keychain_ties_keep_given_order() -> None:
    first, second = cred("first", "1"), cred("second", "2")
    keychain = StaticKeychain([("reg.corp", first), ("reg.corp", second)])
    assert list(keychain.resolve(parse_reference("reg.corp/app"))) == [first, second]


def test_static_keychain_docker_hub() -> None:
    hub = cred("hub")
    keychain = StaticKeychain([("index.docker.io", hub)])
    assert list(keychain.resolve(parse_reference("nginx"))) == [hub]
    assert list(keychain.resolve(Reference("registry-1.docker.io", "library/nginx"))) == [hub]


def test_static_keychain_rejects_bad_patterns() -> None:
    with pytest.raises(InvalidSettings):
        StaticKeychain([("reg.corp:*", cred())])


def test_multi_keychain_concatenates_and_deduplicates() -> None:
    a, b, c = cred("a", "1", "s1"), cred("b", "2", "s1"), cred("c", "3", "s2")
    same_as_a = cred("a", "1", "s3")
    first = StaticKeychain([("reg.corp", a), ("reg.corp", b)])
    second = StaticKeychain([("reg.corp", same_as_a), ("*.corp", c)])
    multi = MultiKeychain(first, ANONYMOUS, second)
    assert list(multi.resolve(parse_reference("reg.corp/x"))) == [a, b, c]
    assert multi.resolve(parse_reference("quay.io/x")) == ()
    assert isinstance(multi, Keychain)
    assert MultiKeychain().resolve(parse_reference("nginx")) == ()


class Recording:
    def __init__(self) -> None:
        self.timeouts: list[float | None] = []

    def resolve(self, reference: Reference, *, timeout: float | None = None) -> Sequence[Credential]:
        self.timeouts.append(timeout)
        return ()


def test_multi_keychain_passes_the_remaining_time() -> None:
    one, two = Recording(), Recording()
    MultiKeychain(one, two).resolve(parse_reference("nginx"), timeout=5.0)
    assert one.timeouts[0] is not None and 4.5 < one.timeouts[0] <= 5.0
    assert two.timeouts[0] is not None and two.timeouts[0] <= one.timeouts[0]
    MultiKeychain(one).resolve(parse_reference("nginx"))
    assert one.timeouts[-1] is None


def test_multi_keychain_stops_when_no_time_is_left() -> None:
    one = Recording()
    assert MultiKeychain(one).resolve(parse_reference("nginx"), timeout=0) == ()
    assert one.timeouts == []


def test_unique_keeps_first() -> None:
    a, a2 = cred("a", "1", "s1"), cred("a", "1", "s2")
    assert unique([a, a2, a]) == (a,)


def _loader(calls: list[bytes]) -> Callable[[bytes, str], Keychain]:
    def load(data: bytes, source: str) -> Keychain:
        calls.append(data)
        text = data.decode()
        if text.startswith("bad"):
            raise CredentialError(f"{source}: malformed")
        username, _, password = text.partition(":")
        return StaticKeychain([("reg.corp", Credential(username, password, source))])

    return load


def test_file_keychain_reloads_when_the_file_changes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "creds"
    path.write_text("alice:one")
    calls: list[bytes] = []
    keychain = FileKeychain(path, _loader(calls), f"test file {path}")
    image = parse_reference("reg.corp/app")
    assert [c.username for c in keychain.resolve(image)] == ["alice"]
    assert [c.username for c in keychain.resolve(image)] == ["alice"]
    assert len(calls) == 1

    path.write_text("bob:two-longer")
    os.utime(path, ns=(1, 10**18))
    assert [c.username for c in keychain.resolve(image)] == ["bob"]
    assert len(calls) == 2

    # a malformed rotation keeps the last good credentials, logged once
    caplog.set_level(logging.WARNING)
    path.write_text("bad content " + SECRET)
    os.utime(path, ns=(1, 2 * 10**18))
    assert [c.username for c in keychain.resolve(image)] == ["bob"]
    assert [c.username for c in keychain.resolve(image)] == ["bob"]
    assert len(calls) == 3
    assert "cannot reload" in caplog.text
    assert SECRET not in caplog.text

    # a file removed for a moment keeps them too
    path.unlink()
    assert [c.username for c in keychain.resolve(image)] == ["bob"]
    path.write_text("carol:three")
    assert [c.username for c in keychain.resolve(image)] == ["carol"]


def test_file_keychain_first_read_must_work(tmp_path: Path) -> None:
    with pytest.raises(InvalidSettings, match="missing"):
        FileKeychain(tmp_path / "missing", _loader([]), f"file {tmp_path / 'missing'}")
    bad = tmp_path / "bad"
    bad.write_text("bad")
    with pytest.raises(InvalidSettings, match="malformed"):
        FileKeychain(bad, _loader([]), "file bad")
