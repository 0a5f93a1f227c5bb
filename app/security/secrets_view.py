"""How write-only secrets appear in responses: never the value.

A read schema declares a secret column with one of the `Masked…` types below; the mask is
applied where the schema serializes, so a schema never has to list its other columns.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import PlainSerializer

from app.security.db_url import InvalidDatabaseUrl, parse_database_url
from app.security.redact import MASK


def mask_values(value: dict[str, Any] | None) -> dict[str, str]:
    """`{"TOKEN": "abc"}` → `{"TOKEN": "***"}`: keys stay visible so admins know what is set."""
    return dict.fromkeys(value or {}, MASK)


def mask_url(url: str) -> str:
    """`postgresql://u:pw@h:5432/db?sslpassword=x` → `postgresql://u:***@h:5432/db?***`.

    Parsed like the engines parse it; the password and the whole query string are masked, and
    a URL that does not parse is masked entirely.
    """
    try:
        parsed = parse_database_url(url)
    except InvalidDatabaseUrl:
        return MASK
    shown = parsed.set(query={}).render_as_string(hide_password=True)
    return f"{shown}?{MASK}" if parsed.query else shown


MaskedUrl = Annotated[str, PlainSerializer(mask_url, return_type=str)]
"""A database URL: shown with its password and query string masked."""
MaskedValues = Annotated[
    dict[str, Any] | None, PlainSerializer(mask_values, return_type=dict[str, str])
]
"""Secret values by name (`env`, `headers`): the names stay visible, the values never do."""
