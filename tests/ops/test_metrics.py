"""`/metrics` carries the process's own CPU and memory beside Quiver's counters."""

from __future__ import annotations

import httpx


async def test_metrics_include_process_cpu_and_memory(anon_client: httpx.AsyncClient) -> None:
    response = await anon_client.get("/metrics")
    assert response.status_code == 200
    values = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in response.text.splitlines()
        if line and not line.startswith("#") and "{" not in line
    }
    assert values["process_resident_memory_bytes"] > 50 * 2**20
    assert values["process_cpu_seconds_total"] > 0
    assert "quiver_runs_total" in response.text
