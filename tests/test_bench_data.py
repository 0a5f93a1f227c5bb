"""The benchmarks say where their datasets are expected and stop when they are missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import bench_data_dir

ROOT = Path(__file__).resolve().parents[1]


def test_the_env_variable_names_the_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "selection").mkdir()
    monkeypatch.setenv("QUIVER_BENCH_DATA", str(tmp_path))
    assert bench_data_dir("selection") == tmp_path


def test_a_missing_dataset_is_one_line_and_exit_status_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("QUIVER_BENCH_DATA", str(tmp_path))
    with pytest.raises(SystemExit) as info:
        bench_data_dir("selection")
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{tmp_path / 'selection'}" in err
    assert "QUIVER_BENCH_DATA" in err


def test_the_selection_bench_exits_non_zero_without_data(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.selection"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "QUIVER_BENCH_DATA": str(tmp_path / "nowhere")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "dataset not found" in done.stderr
    assert "Traceback" not in done.stderr
