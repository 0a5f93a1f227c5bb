"""`quiver rotate-secrets`: re-encrypt every stored secret under the first key."""

from __future__ import annotations

from sqlalchemy import Column, MetaData, Table, Text, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.config import Settings
from app.db.engine import create_engine
from app.security.crypto import configure_from_settings, rotate

# table -> secret columns (stored as Fernet tokens in Text columns)
SECRET_COLUMNS: dict[str, tuple[str, ...]] = {
    "connectors": ("credentials",),
    "database_connectors": ("url",),
    "mcp_servers": ("env", "headers"),
}


async def _rotate_table(conn: AsyncConnection, table_name: str, columns: tuple[str, ...]) -> int:
    table = Table(table_name, MetaData(), Column("id"), *(Column(c, Text) for c in columns))
    rows = (await conn.execute(select(table))).all()
    for row in rows:
        values = {c: rotate(getattr(row, c)) for c in columns if getattr(row, c) is not None}
        if values:
            await conn.execute(update(table).where(table.c.id == row.id).values(**values))
    return len(rows)


async def rotate_all(settings: Settings) -> dict[str, int]:
    """Raw tokens are rotated without decoding the JSON: one transaction, all or nothing."""
    configure_from_settings(settings)
    engine = create_engine(settings)
    try:
        async with engine.begin() as conn:
            return {t: await _rotate_table(conn, t, cols) for t, cols in SECRET_COLUMNS.items()}
    finally:
        await engine.dispose()
