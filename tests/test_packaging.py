"""The installed (non-editable) package serves: the Docker image's install step in a fresh venv.

`scripts/install.sh` is the one install step the Dockerfile runs; here it installs into a new
virtual environment (no access to the source tree or the dev venv), and the installed `quiver serve`
must apply its migrations and answer /readyz on SQLite and on Postgres.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import venv
from pathlib import Path

import httpx
import pytest

from tests.fixtures.database import create_database, drop_database
from tests.fixtures.served import clean_env, quiver_serve

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(600)  # a fresh install: ~1 min alone, ~3 min on a loaded machine


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding Quiver as `pip install .` puts it there; yields its `bin/`."""
    target = tmp_path_factory.mktemp("installed") / "venv"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(target)
    python = target / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYTHON=str(python), PIP_NO_COMPILE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    done = subprocess.run(
        ["sh", str(ROOT / "scripts" / "install.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return target / "bin"


def where_app_lives(bin_dir: Path, cwd: Path) -> Path:
    out = subprocess.run(
        [str(bin_dir / "python"), "-c", "import app; print(app.__file__)"],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return Path(out.strip())


def test_the_install_is_a_real_copy_with_its_migrations(installed: Path, tmp_path: Path) -> None:
    package = where_app_lives(installed, tmp_path).parent
    assert ROOT not in package.parents, "imported from the source tree, not the install"
    assert "site-packages" in package.parts
    assert (package / "migrations" / "env.py").is_file()
    assert list((package / "migrations" / "versions").glob("0001_*.py"))
    assert (package / "migrations" / "script.py.mako").is_file()


def readyz_and_agents(base_url: str, token: str) -> tuple[int, int]:
    with httpx.Client(base_url=base_url, timeout=10) as http:
        ready = http.get("/readyz").status_code
        agents = http.get("/api/v1/agents", headers={"Authorization": f"Bearer {token}"})
        return ready, agents.status_code


def test_installed_quiver_serves_on_sqlite(installed: Path, tmp_path: Path) -> None:
    from tests.fixtures.served import ADMIN_TOKEN

    env = clean_env(
        QUIVER_DATABASE_URL=f"sqlite:///{tmp_path / 'quiver.db'}", QUIVER_DATA_DIR=str(tmp_path)
    )
    with quiver_serve([str(installed / "quiver"), "serve"], env=env, cwd=tmp_path) as served:
        assert readyz_and_agents(served.base_url, ADMIN_TOKEN) == (200, 200)
    assert (tmp_path / "quiver.db").is_file()


def test_installed_quiver_serves_on_postgres(installed: Path, tmp_path: Path) -> None:
    from tests.fixtures.served import ADMIN_TOKEN

    name = asyncio.run(create_database("quiver_packaging"))
    try:
        env = clean_env(
            QUIVER_DATABASE_URL=f"postgresql://postgres@127.0.0.1:5432/{name}",
            QUIVER_DATA_DIR=str(tmp_path),
        )
        with quiver_serve([str(installed / "quiver"), "serve"], env=env, cwd=tmp_path) as served:
            assert readyz_and_agents(served.base_url, ADMIN_TOKEN) == (200, 200)
    finally:
        asyncio.run(drop_database(name))


def test_the_dockerfile_installs_with_the_tested_script() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    run_lines = [line for line in dockerfile.splitlines() if line.startswith("RUN ")]
    assert any("scripts/install.sh" in line for line in run_lines), run_lines
    assert not any("pip install ." in line for line in run_lines), "one install step, tested"
