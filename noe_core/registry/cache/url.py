"""Where the registry cache shared by every replica lives: ``--cache-url``, read once into :class:`CacheURL`.

``redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`` or ``rediss://…`` (TLS). The URL usually
carries a password, so nothing built from it may show it: :meth:`CacheURL.redacted` and
``repr`` replace it with ``***``, and every error :func:`parse_cache_url` raises describes
the problem without quoting the text it was given (a usage error prints the value through
:meth:`redact`, never as typed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import unquote

from noe_core.errors import InvalidSettings

SCHEMES = ("redis", "rediss")
DEFAULT_PORT = 6379
MAX_DB = 15  # Redis' and Valkey's default "databases 16"
_URL = re.compile(
    r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://"
    r"(?:(?P<userinfo>[^@/]*)@)?"
    r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/?#\[\]@]*)"
    r"(?::(?P<port>[^/?#]*))?"
    r"(?:/(?P<db>[^?#]*))?"
    r"(?P<rest>[?#].*)?$",
    re.DOTALL,
)
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?)$")


@dataclass(frozen=True)
class CacheURL:
    """A parsed ``--cache-url``; the password is kept out of ``repr`` and :meth:`redacted`."""

    host: str
    port: int = DEFAULT_PORT
    db: int = 0
    tls: bool = False
    username: str = ""
    password: str = field(default="", repr=False)

    @property
    def scheme(self) -> str:
        return "rediss" if self.tls else "redis"

    @property
    def address(self) -> str:
        """``host:port`` (brackets around an IPv6 host): for log lines and metrics."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def redacted(self) -> str:
        """The URL as it may be logged: ``redis://:***@host:6379/0``."""
        auth = f"{self.username}:***@" if self.password else (f"{self.username}@" if self.username else "")
        return f"{self.scheme}://{auth}{self.address}/{self.db}"

    def __str__(self) -> str:
        return self.redacted()


def redact(text: str) -> str:
    """``text`` with the password of anything that looks like a URL's userinfo replaced by ``***``."""
    return re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)


def parse_cache_url(text: str) -> CacheURL:
    """Read ``redis://`` / ``rediss://`` URLs; raises :class:`InvalidSettings` that never quotes ``text``."""
    match = _URL.match(text.strip())
    if match is None:
        raise InvalidSettings("must be redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or rediss://… (TLS)")
    scheme = match["scheme"].lower()
    if scheme not in SCHEMES:
        raise InvalidSettings(f"has scheme {scheme!r}: only redis:// and rediss:// (TLS) are understood")
    if match["rest"]:
        raise InvalidSettings("has a query or fragment: options are flags here (--cache-ca-file, --cache-timeout)")
    host = match["host"]
    if not host:
        raise InvalidSettings("has no host: redis://[:PASSWORD@]HOST[:PORT][/DB]")
    if not _HOST.match(host):
        raise InvalidSettings("has a host that is not a DNS name or an IP address")
    port = DEFAULT_PORT
    if match["port"] is not None:
        if not match["port"].isdigit() or not 1 <= int(match["port"]) <= 65535:
            raise InvalidSettings("has a port that is not a number from 1 to 65535")
        port = int(match["port"])
    db = 0
    if match["db"]:
        if not match["db"].isdigit() or int(match["db"]) > MAX_DB:
            raise InvalidSettings(f"has a database that is not a number from 0 to {MAX_DB}")
        db = int(match["db"])
    username = password = ""
    if match["userinfo"] is not None:
        user, colon, secret = match["userinfo"].partition(":")
        username, password = unquote(user), unquote(secret) if colon else ""
        if not colon and username:
            # redis://SECRET@host is how some clients spell a password alone; refuse rather than guess.
            raise InvalidSettings("has user information without ':': write the password as redis://:PASSWORD@HOST")
    return CacheURL(host.strip("[]"), port, db, scheme == "rediss", username, password)
