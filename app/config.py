"""The one settings object: the only reader of the environment (docs/contract.md §1)."""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_DATA_DIR = Path(".quiver")


class SkillMode(StrEnum):
    PROGRESSIVE = "progressive"
    INLINE = "inline"


class ToolMode(StrEnum):
    PROGRESSIVE = "progressive"
    LEGACY = "legacy"


class SelectionStrategy(StrEnum):
    HYBRID = "hybrid"
    LEXICAL = "lexical"
    LLM = "llm"


def _seed(name: str) -> AliasChoices:
    """Accept both `NAME` (the spelling gateway users know) and `QUIVER_NAME`."""
    return AliasChoices(f"QUIVER_{name}", name)


def _csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="QUIVER_",
        extra="ignore",
        populate_by_name=True,
        validate_default=True,
    )

    # --- the six seed variables (both spellings) ---
    skill_tool_mode: SkillMode = Field(
        SkillMode.PROGRESSIVE, validation_alias=_seed("SKILL_TOOL_MODE")
    )
    connector_tool_mode: ToolMode = Field(
        ToolMode.PROGRESSIVE, validation_alias=_seed("CONNECTOR_TOOL_MODE")
    )
    database_tool_mode: ToolMode = Field(
        ToolMode.PROGRESSIVE, validation_alias=_seed("DATABASE_TOOL_MODE")
    )
    mcp_tool_mode: ToolMode = Field(ToolMode.PROGRESSIVE, validation_alias=_seed("MCP_TOOL_MODE"))
    tool_selection_threshold: int = Field(
        12, ge=1, validation_alias=_seed("REACT_TOOL_SELECTION_THRESHOLD")
    )
    tool_selection_max: int = Field(6, ge=1, validation_alias=_seed("REACT_TOOL_SELECTION_MAX"))

    # --- storage and secrets ---
    data_dir: Path = DEFAULT_DATA_DIR
    database_url: str = ""
    database_direct_url: str = ""
    """PostgreSQL itself when `database_url` goes through a transaction pooler (PgBouncer):
    migrations and LISTEN/NOTIFY use it, and statement caches are off on pooled connections
    (docs/operations.md, "Poolers")."""
    """Empty means the embedded default: a SQLite file under `data_dir`."""
    db_pool_size: int = Field(20, ge=1, le=500)
    """Postgres connections kept open per process (each live run writes its journal through it)."""
    db_max_overflow: int = Field(30, ge=0, le=1000)
    db_pool_timeout_s: float = Field(30.0, gt=0)
    journal_retry_s: float = Field(60.0, gt=0)
    """How long storing a run event is retried (storage restarting) before the run fails
    with `journal_unavailable`."""
    worker_heartbeat_s: float = Field(10.0, gt=0)
    """How often each gateway process records that it is alive and closes lost runs."""
    worker_lost_after_s: float = Field(30.0, gt=0)
    """A process silent this long is dead: its runs are closed as `run_lost`."""
    secret_keys: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    """Comma-separated Fernet keys: the first encrypts, all decrypt."""
    admin_token: SecretStr | None = None

    # --- LLM ---
    llm_base_url: str = ""
    llm_api_key: SecretStr | None = None
    llm_model: str = "gpt-4o-mini"
    llm_timeout_s: float = Field(120.0, gt=0)
    llm_max_retries: int = Field(3, ge=0, le=10)
    llm_context_tokens: int = Field(128_000, ge=1024)
    llm_output_reserve_tokens: int = Field(4_096, ge=0)
    tool_selection_strategy: SelectionStrategy = SelectionStrategy.HYBRID
    tool_selection_prewarm: bool = True
    """Build recently changed agents' tool rankers in the background (pipeline/warm.py)."""
    tool_index_inline_max: int = Field(300, ge=0)
    """Tool sets up to this size get a missing ranker built on the request that needs it;
    a larger one is built in the background while that request is ranked by a quick word
    match (pipeline/index_builds.py)."""

    # --- safety ---
    mcp_stdio_commands: Annotated[list[str], NoDecode] = Field(default_factory=list)
    egress_allow_cidrs: Annotated[list[str], NoDecode] = Field(default_factory=list)
    tool_timeout_s: float = Field(60.0, gt=0)
    delegation_timeout_s: float = Field(600.0, gt=0, le=86_400)
    """How long one `call_agent` child run may take (approval waits inside it included)."""
    http_timeout_s: float = Field(30.0, gt=0)
    http_max_response_bytes: int = Field(2_000_000, ge=1024)
    mcp_connect_timeout_s: float = Field(20.0, gt=0)
    mcp_call_timeout_s: float = Field(60.0, gt=0)
    mcp_tools_ttl_s: float = Field(3600.0, gt=0)
    mcp_session_idle_s: float = Field(1800.0, gt=0)
    """An MCP session at `/mcp/agents/{name}` with no request for this long ends (its run
    finishes)."""
    mcp_session_lease_s: float = Field(10.0, ge=1, le=600)
    """How long a worker's hold on an MCP session lasts once taken or renewed (Postgres, every
    worker): within it the worker serves the session's requests without reading who owns it,
    and another worker waits for it to be released (asked through the database) or to run out
    (its holder died). See docs/mcp-endpoint.md."""
    mcp_sessions_per_key: int = Field(32, ge=1, le=100_000)
    """Open MCP endpoint sessions one API key may hold (across workers); opening one more
    answers 429 until one ends (DELETE) or goes idle."""

    # --- server ---
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    log_level: str = "INFO"
    sse_ping_s: float = Field(15.0, gt=0)
    keep_alive_s: int = Field(75, ge=1, le=3600)
    """Idle keep-alive: above typical load-balancer idle timeouts (60 s), so a client never
    reuses a connection the server is closing at that moment."""
    drain_timeout_s: float = Field(30.0, ge=0, le=3600)
    """On SIGTERM: how long open requests and running runs get to finish before they are
    cancelled (runs then end `cancelled`, journaled); keep it below the orchestrator's grace
    period (Kubernetes: `terminationGracePeriodSeconds`)."""
    history_retention_days: int = Field(0, ge=0, le=36_500)
    """Conversations (messages, runs, journals) idle for this many days are deleted (hourly
    sweep); 0 keeps them until `DELETE /conversations/{id}`. Deleting an agent or a tool
    source never removes history."""
    auth_fail_limit: int = Field(30, ge=0)
    """Failed key attempts (API bearer, MCP endpoint, console sign-in) one client address may
    make per `auth_fail_window_s`; beyond, a failed attempt answers 429 (a valid key always
    passes). 0: no limit."""
    auth_fail_window_s: float = Field(60.0, gt=0, le=86_400)
    max_body_bytes: int = Field(10_000_000, ge=1024)
    """Request bodies above this answer 413 before they are parsed (chunked ones too)."""
    max_import_bytes: int = Field(64_000_000, ge=1024)
    """The same limit for document imports (`…/import`, knowledge documents): real API
    descriptions such as GitHub's (13 MB) are larger than an ordinary request."""

    # --- conversion of pages and documents (app/convert) ---
    convert_workers: int = Field(2, ge=1, le=64)
    """Worker processes that parse HTML and convert documents (never the event loop)."""
    convert_timeout_s: float = Field(60.0, gt=0)
    """A page or document not converted within this is stopped (its worker is killed)."""
    convert_memory_mb: int = Field(2048, ge=256)
    """Address-space limit of each conversion worker (a decompression bomb fails cleanly)."""
    knowledge_async_bytes: int = Field(2_000_000, ge=1024)
    """Knowledge documents larger than this answer 202 and are ingested in the background
    (`status`: `pending`, then `ready` or `failed`)."""

    # --- tracing (OpenTelemetry's own variable names; docs/operations.md) ---
    otel_exporter_otlp_endpoint: str = Field("", validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    otel_exporter_otlp_traces_endpoint: str = Field(
        "", validation_alias="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    otel_traces_exporter: str = Field("", validation_alias="OTEL_TRACES_EXPORTER")
    """`none` turns tracing off even with an endpoint set (as in the SDK)."""
    otel_service_name: str = Field("quiver", validation_alias="OTEL_SERVICE_NAME")
    otel_capture_message_content: bool = Field(
        False, validation_alias="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
    )
    """Message text, tool arguments and results in spans (redacted); off by default."""
    # --- approval notifications (docs/notifications.md) ---
    approval_webhook_url: str = ""
    """Each new approval is POSTed here as signed JSON; empty: no notifications."""
    approval_webhook_secret: SecretStr | None = None
    """The HMAC-SHA256 key of `X-Quiver-Signature` (required with the URL)."""
    approval_webhook_timeout_s: float = Field(10.0, gt=0, le=300)
    approval_webhook_attempts: int = Field(5, ge=1, le=20)
    """Deliveries tried per approval (the first and the retries) before it is dropped."""
    approval_webhook_backoff_s: float = Field(1.0, gt=0, le=600)
    """The first retry's delay; each next one waits twice as long (with jitter)."""
    approval_webhook_queue: int = Field(1000, ge=1, le=100_000)
    """Notifications waiting to be sent; beyond it new ones are dropped (and logged), the runs
    go on."""

    # --- OAuth for the MCP endpoint (docs/oauth.md) ---
    public_url: str = ""
    """The gateway's external base URL (`https://quiver.example.com`): the OAuth metadata and
    the audience of issued tokens, and console links in approval notifications. Empty: OAuth
    takes it from each request (the Host header, and the scheme a trusted proxy reports),
    notifications use `http://<host>:<port>`."""
    oauth_access_token_ttl_s: int = Field(3600, ge=60, le=86_400)
    oauth_refresh_token_ttl_s: int = Field(30 * 86_400, ge=300, le=365 * 86_400)
    oauth_code_ttl_s: int = Field(300, ge=1, le=600)
    """An authorization code must be redeemed this soon (RFC 6749 recommends at most 10 min)."""

    @field_validator("secret_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        return _csv(value)

    @field_validator("mcp_stdio_commands", "egress_allow_cidrs", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        return _csv(value)

    @field_validator("egress_allow_cidrs")
    @classmethod
    def _check_cidrs(cls, value: list[str]) -> list[str]:
        for cidr in value:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError as exc:
                raise ValueError(f"not a CIDR network: {cidr!r}") from exc
        return value

    @field_validator("secret_keys")
    @classmethod
    def _check_keys(cls, value: list[SecretStr]) -> list[SecretStr]:
        from cryptography.fernet import Fernet

        for i, key in enumerate(value):
            try:
                Fernet(key.get_secret_value())
            except (ValueError, TypeError) as exc:
                raise ValueError(f"key #{i + 1} is not a valid Fernet key") from exc
        return value

    @field_validator("approval_webhook_url")
    @classmethod
    def _check_http_url(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("approval_webhook_secret")
    @classmethod
    def _check_webhook_secret(
        cls, value: SecretStr | None, info: ValidationInfo
    ) -> SecretStr | None:
        if info.data.get("approval_webhook_url") and not (value and value.get_secret_value()):
            raise ValueError(
                "required when QUIVER_APPROVAL_WEBHOOK_URL is set (receivers verify it)"
            )
        return value

    @property
    def console_base_url(self) -> str:
        """Where links to the console point (`public_url`, or this server's address)."""
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    @field_validator("database_url", "database_direct_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        allowed = ("postgresql", "postgres", "sqlite")
        if value and value.split(":", 1)[0].split("+", 1)[0] not in allowed:
            raise ValueError("must be a postgresql:// or sqlite:// URL")
        return value

    @field_validator("public_url")
    @classmethod
    def _check_public_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value and (
            value.split("://", 1)[0] not in ("http", "https") or "?" in value or "#" in value
        ):
            raise ValueError("must be an http(s):// base URL without query or fragment")
        return value

    @field_validator("log_level")
    @classmethod
    def _check_level(cls, value: str) -> str:
        if value.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return value.upper()

    @cached_property
    def async_database_url(self) -> str:
        """The SQLAlchemy async URL: asyncpg for Postgres, aiosqlite for SQLite."""
        url = self.database_url or f"sqlite:///{(self.data_dir / 'quiver.db').resolve()}"
        scheme, rest = url.split(":", 1)
        base = scheme.split("+", 1)[0]
        if base in ("postgresql", "postgres"):
            return f"postgresql+asyncpg:{rest}"
        return f"sqlite+aiosqlite:{rest}"

    @property
    def behind_pooler(self) -> bool:
        """`database_url` is a transaction pooler: no prepared statement outlives its use."""
        return bool(self.database_direct_url) and not self.is_sqlite

    @property
    def direct_dsn(self) -> str:
        """The asyncpg DSN of PostgreSQL itself (the direct URL, else the database URL)."""
        url = self.database_direct_url or self.database_url
        scheme, rest = url.split(":", 1)
        postgres = scheme.split("+", 1)[0] in ("postgresql", "postgres")
        return f"postgresql:{rest}" if postgres else url

    def direct(self) -> Settings:
        """These settings with `database_url` pointing at PostgreSQL itself (migrations)."""
        if not self.database_direct_url:
            return self
        copy = self.model_copy(
            update={"database_url": self.database_direct_url, "database_direct_url": ""}
        )
        copy.__dict__.pop("async_database_url", None)  # derived from the URL: derive it again
        return copy

    @property
    def is_sqlite(self) -> bool:
        return self.async_database_url.startswith("sqlite")

    @property
    def tracing_enabled(self) -> bool:
        """Traces are exported when an OTLP endpoint is set (unless `OTEL_TRACES_EXPORTER=none`)."""
        endpoint = self.otel_exporter_otlp_traces_endpoint or self.otel_exporter_otlp_endpoint
        return bool(endpoint) and self.otel_traces_exporter.strip().lower() != "none"

    @property
    def llm_configured(self) -> bool:
        return bool(self.llm_base_url)


class ConfigError(Exception):
    """Start-up configuration is invalid; the message names the variable."""


def load_settings() -> Settings:
    """Read the environment once; turn validation errors into a message naming the variable."""
    from pydantic import ValidationError

    try:
        return Settings()
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "?"
            lines.append(f"{_env_name(field)}: {err['msg']}")
        raise ConfigError("invalid configuration: " + "; ".join(lines)) from exc


_SEED_NAMES = {
    "skill_tool_mode": "SKILL_TOOL_MODE",
    "connector_tool_mode": "CONNECTOR_TOOL_MODE",
    "database_tool_mode": "DATABASE_TOOL_MODE",
    "mcp_tool_mode": "MCP_TOOL_MODE",
    "tool_selection_threshold": "REACT_TOOL_SELECTION_THRESHOLD",
    "tool_selection_max": "REACT_TOOL_SELECTION_MAX",
}


def _env_name(field: str) -> str:
    bare = field.upper().removeprefix("QUIVER_")
    seed = _SEED_NAMES.get(bare.lower(), bare if bare in _SEED_NAMES.values() else None)
    if seed:
        return f"{seed} (or QUIVER_{seed})"
    if bare.startswith("OTEL_"):  # OpenTelemetry's own names, read as they are
        return bare
    return f"QUIVER_{bare}"
