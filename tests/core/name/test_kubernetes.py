"""Kubernetes names, as the API server checks them: label keys and values, DNS subdomains, architecture names."""

from __future__ import annotations

import pytest

from noe_core.name.kubernetes import is_arch_name, is_dns_subdomain, is_label_key, is_label_value


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("app", True),
        ("example.com/app", True),
        ("my_app.v1-2", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("", False),
        ("example.com/", False),
        ("a/b/c", False),
        ("Example.com/app", False),
        ("-app", False),
        ("app-", False),
        ("a" * 254 + "/app", False),
    ],
)
def test_label_keys(key: str, valid: bool) -> None:
    assert is_label_key(key) is valid


@pytest.mark.parametrize(
    ("value", "valid"),
    [("", True), ("arm64", True), ("a.b_c-d", True), ("x" * 63, True), ("x" * 64, False), ("a b", False),
     ("-a", False), ("arm64;reboot", False)],
)  # fmt: skip
def test_label_values(value: str, valid: bool) -> None:
    assert is_label_value(value) is valid


@pytest.mark.parametrize(
    ("name", "valid"),
    [("default", True), ("kube-system", True), ("a.b", True), ("A", False), ("-a", False), ("a_b", False),
     ("a..b", False), ("", False)],
)  # fmt: skip
def test_dns_subdomains(name: str, valid: bool) -> None:
    assert is_dns_subdomain(name) is valid


@pytest.mark.parametrize(
    ("name", "valid"),
    [("amd64", True), ("arm64", True), ("x86_64", True), ("ppc64le", True), ("AMD64", False), ("", False),
     ("-arm", False), ("arm;x", False)],
)  # fmt: skip
def test_architecture_names(name: str, valid: bool) -> None:
    assert is_arch_name(name) is valid
