"""`quiver` command line: serve, migrate, create-key, rotate-secrets."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from sqlalchemy.exc import DBAPIError

from app.config import ConfigError, Settings, load_settings


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    from app.db.migrate import upgrade
    from app.ops.logging import configure_logging

    workers = args.workers or 1
    if workers < 1:
        sys.stderr.write("quiver: --workers must be at least 1\n")
        return 2
    if workers > 1 and settings.is_sqlite:
        sys.stderr.write(
            "quiver: --workers > 1 needs PostgreSQL (QUIVER_DATABASE_URL=postgresql://...): "
            "worker processes share runs, cancels, approvals and limits through the database "
            "and its LISTEN/NOTIFY, which SQLite does not have\n"
        )
        return 2
    configure_logging(settings.log_level)
    upgrade(settings)  # before importing the app (~2.5 s): an unusable database fails at once
    import uvicorn

    from app.main import create_app

    options: dict[str, object] = {
        "host": args.host or settings.host,
        "port": args.port or settings.port,
        "log_config": None,
        "proxy_headers": True,
        "timeout_keep_alive": settings.keep_alive_s,
        "timeout_graceful_shutdown": settings.drain_timeout_s,
    }
    if workers == 1:
        uvicorn.run(create_app(settings, freeze_gc=True, drain=True), **options)  # type: ignore[arg-type]
        return 0
    # Done once here, not racing in every worker: the key file and the seeded admin key.
    from app.security.crypto import configure_from_settings

    configure_from_settings(settings)
    generated = asyncio.run(_seed_admin(settings))
    if generated:
        _out(
            f"\nNo QUIVER_ADMIN_TOKEN configured: created an admin API key (shown once):\n"
            f"    {generated}\n"
        )
    sys.stdout.flush()
    # Each worker process builds its app from the same environment (`app.main:app_from_env`).
    uvicorn.run("app.main:app_from_env", factory=True, workers=workers, **options)  # type: ignore[arg-type]
    return 0


async def _seed_admin(settings: Settings) -> str | None:
    from app.apikeys.service import api_key_service
    from app.db.engine import create_engine, create_sessionmaker

    engine = create_engine(settings)
    try:
        async with create_sessionmaker(engine)() as session:
            token = settings.admin_token.get_secret_value() if settings.admin_token else None
            created = await api_key_service.seed_admin(session, token)
            await session.commit()
            return created
    finally:
        await engine.dispose()


def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from app.db.migrate import downgrade, upgrade

    if args.down:
        downgrade(settings, args.revision or "base")
    else:
        upgrade(settings, args.revision or "head")
    _out("migrations applied")
    return 0


async def _create_key(settings: Settings, name: str, scopes: list[str]) -> str:
    from app.apikeys.schemas import ApiKeyCreate
    from app.apikeys.service import api_key_service
    from app.db.engine import create_engine, create_sessionmaker

    engine = create_engine(settings)
    try:
        async with create_sessionmaker(engine)() as session:
            _, key = await api_key_service.create(
                session, ApiKeyCreate.model_validate({"name": name, "scopes": scopes})
            )
            await session.commit()
            return key
    finally:
        await engine.dispose()


def cmd_create_key(settings: Settings, args: argparse.Namespace) -> int:
    from app.db.migrate import upgrade

    upgrade(settings)
    key = asyncio.run(_create_key(settings, args.name, args.scope or ["chat"]))
    _out(key)
    return 0


def cmd_rotate_secrets(settings: Settings, args: argparse.Namespace) -> int:
    from app.security.rotate import rotate_all

    counts = asyncio.run(rotate_all(settings))
    _out("re-encrypted under the first key: " + ", ".join(f"{t}={n}" for t, n in counts.items()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quiver", description="Quiver tool gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="apply migrations, then serve the API")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument(
        "--workers",
        type=int,
        help="worker processes sharing the port (PostgreSQL only; default 1)",
    )
    serve.set_defaults(func=cmd_serve)
    migrate = sub.add_parser("migrate", help="apply (or with --down revert) migrations")
    migrate.add_argument("--down", action="store_true")
    migrate.add_argument("--revision")
    migrate.set_defaults(func=cmd_migrate)
    key = sub.add_parser("create-key", help="create an API key and print it once")
    key.add_argument("--name", default="cli")
    key.add_argument("--scope", action="append", choices=["admin", "chat"])
    key.set_defaults(func=cmd_create_key)
    rotate = sub.add_parser("rotate-secrets", help="re-encrypt every secret under the first key")
    rotate.set_defaults(func=cmd_rotate_secrets)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        sys.stderr.write(f"quiver: {exc}\n")
        return 2
    try:
        result: int = args.func(settings, args)
    except (DBAPIError, OSError) as exc:
        # A database that does not exist, refuses the connection or rejects the login: one
        # line naming it (password hidden) instead of a driver traceback.
        reason = _first_line(exc.orig or exc if isinstance(exc, DBAPIError) else exc)
        sys.stderr.write(f"quiver: cannot use the database {_safe_url(settings)}: {reason}\n")
        return 1
    return result


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _safe_url(settings: Settings) -> str:
    from sqlalchemy.engine import make_url

    try:
        url = make_url(settings.database_url or settings.async_database_url)
        return url.render_as_string(hide_password=True)
    except Exception:
        return "(unparsable URL)"


if __name__ == "__main__":
    raise SystemExit(main())
