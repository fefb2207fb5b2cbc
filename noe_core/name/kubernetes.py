"""Kubernetes names: label keys and values, DNS subdomains, and the names ``kubernetes.io/arch`` can hold.

Pure syntax checks, as the API server applies them; the settings, label
selectors and rule 4's reading of image entries (an entry whose OS,
architecture or variant is not a label value is never used) share them.
"""

from __future__ import annotations

import re

_ARCH_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def is_label_key(key: str) -> bool:
    """True for a Kubernetes label key: optional DNS-subdomain prefix and a ≤63-char name."""
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return False
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.fullmatch(name))


def is_arch_name(name: str) -> bool:
    """True for a name that can be an architecture or OS in ``kubernetes.io/arch`` / ``kubernetes.io/os``."""
    return bool(_ARCH_NAME.fullmatch(name))


def is_dns_subdomain(name: str) -> bool:
    """True for a DNS subdomain (RFC 1123) such as a namespace or Secret name."""
    return bool(_DNS_SUBDOMAIN.fullmatch(name))


def is_label_value(value: str) -> bool:
    """True for a Kubernetes label value (≤63 chars, may be empty)."""
    return len(value) <= 63 and bool(_LABEL_VALUE.fullmatch(value))
