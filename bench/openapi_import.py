"""OpenAPI import time for real descriptions (GitHub, Twilio, Stripe) and a generated
10,000-operation document: `POST /api/v1/connectors/import` through the app (ASGI, embedded
SQLite in a temporary directory), wall time from request to 201 including the database
writes. Each document is imported `REPEAT` times; the table shows the median.

Run: `.venv/bin/python -m bench.openapi_import`
"""

from __future__ import annotations

import asyncio
import gzip
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from cryptography.fernet import Fernet

from app.config import Settings
from app.db.migrate import upgrade
from app.main import create_app
from app.security.crypto import configure_keys
from bench.common import print_table
from tests.connectors.big_spec import big_document

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "openapi"
REPEAT = 3
TOKEN = "qv_bench_admin_token_0123456789"


def documents() -> list[tuple[str, Any, dict[str, Any]]]:
    def real(name: str) -> str:
        return gzip.decompress((DATA / f"{name}.json.gz").read_bytes()).decode()

    bearer = {"auth_type": "bearer", "credentials": {"token": "bench-token-1234"}}
    return [
        ("GitHub (@octokit/openapi)", real("github_api"), bearer),
        ("Twilio api_v2010", real("twilio_api_v2010"), {}),
        # the token chooses bearer among the schemes Stripe offers (basic or bearer)
        ("Stripe spec3", real("stripe_api"), {"credentials": {"token": "sk_bench_1234"}}),
        ("generated, 10,000 operations", big_document(10_000), {}),
    ]


async def measure(client: httpx.AsyncClient, document: Any, extra: dict[str, Any]) -> list[Any]:
    times, body = [], {}
    for i in range(REPEAT):
        started = time.perf_counter()
        resp = await client.post(
            "/api/v1/connectors/import", json={"document": document, "name": f"b{i}", **extra}
        )
        times.append(time.perf_counter() - started)
        assert resp.status_code == 201, resp.text[:300]
        body = resp.json()
        await client.delete(f"/api/v1/connectors/{body['id']}")
    size = len(document) if isinstance(document, str) else 0
    return [
        f"{size / 1e6:.1f} MB" if size else "-",
        len(body["actions"]),
        len(body["warnings"]),
        f"{statistics.median(times):.2f}",
    ]


async def run() -> list[list[Any]]:
    key = Fernet.generate_key().decode()
    configure_keys([key])
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), secret_keys=[key], admin_token=TOKEN)
        await asyncio.to_thread(upgrade, settings)
        app = create_app(settings)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app),
                base_url="http://quiver.test",
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=600,
            ) as client,
        ):
            return [[name, *await measure(client, doc, extra)] for name, doc, extra in documents()]


if __name__ == "__main__":
    rows = asyncio.run(run())
    print_table(rows, ["document", "text", "actions", "warnings", "import s (median)"])
