"""Database URLs: one parser for everything that reads them (engines, masking, redaction).

SQLAlchemy's `make_url` is the parser the engines use, so what is masked is exactly what is
sent to the driver. The password runs from the first `:` after the user name to the next `@`
(a raw `/`, `?`, `#` or `:` in it is fine); `@` and `%` inside it are written percent-encoded.
"""

from __future__ import annotations

import re

from sqlalchemy.engine import URL, make_url

_USERINFO = re.compile(r"[\w+]+://(?P<user>[^:/]*)(?::(?P<password>[^@]*))?@")
"""The userinfo part as `make_url` reads it, to find the password as written in the URL."""
_CREDENTIAL_QUERY = re.compile(r"(?i)pass|secret|token|key|auth|credential")


class InvalidDatabaseUrl(ValueError):
    """The URL cannot be parsed; the message never contains the URL or a part of it."""


def parse_database_url(url: str) -> URL:
    try:
        return make_url(url)
    except Exception:  # ArgumentError, or ValueError for a bad port; both quote the input
        raise InvalidDatabaseUrl(
            "not a valid database URL; expected scheme://user:password@host:port/database "
            "(percent-encode '@' and '%' inside the user name or password)"
        ) from None


def url_secrets(url: str) -> list[str]:
    """The secret parts of a database URL: the password (decoded and as written) and the values
    of credential-like query parameters. Empty for anything that is not such a URL."""
    if "://" not in url:
        return []
    try:
        parsed = parse_database_url(url)
    except InvalidDatabaseUrl:
        return []
    found: list[str] = []
    if parsed.password is not None:
        found.append(str(parsed.password))
        written = _USERINFO.match(url)
        if written and written["password"]:
            found.append(written["password"])
    for key, value in parsed.query.items():
        if _CREDENTIAL_QUERY.search(key):
            found.extend([value] if isinstance(value, str) else list(value))
    return found
