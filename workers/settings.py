"""Worker and CLI configuration (environment, ``COMPACTOR_*`` prefix).

Only the worker/CLI layer reads settings. Activities receive what they need in their
constructors and workflows receive it in their input, because payloads are recorded in
history and environment values are not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AliasChoices, Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from activities.defaults import DEFAULT_MODEL  # (not contracts: the CLI would build every payload model at start)

if TYPE_CHECKING:
    from compactor.importers import ImportLimits
    from compactor.store.gc import GcSettings


SUMMARIZERS = ("auto", "structured", "anthropic", "anthropic-native")


class Settings(BaseSettings):
    """Everything a compactor worker or CLI process is configured with."""

    model_config = SettingsConfigDict(env_prefix="COMPACTOR_", extra="ignore", populate_by_name=True)
    _summarizer_why: str = PrivateAttr(default="")

    store: str = Field(
        default="file://./.compactor",
        description="Object store URL: file://DIR (local directory) or s3://BUCKET/PREFIX "
        "(AWS, MinIO or any S3 endpoint via AWS_ENDPOINT_URL).",
    )
    tenant: str = Field(
        default="default",
        description="Default tenant id for CLI commands and clients; with COMPACTOR_TENANTS set "
        "and this unset, the first bound tenant.",
    )
    tenants: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Tenant allow-list (comma-separated). A worker with it refuses, "
        "non-retryably and before any store I/O, every workflow and activity of another tenant; "
        "a client and the CLI refuse requests for other tenants. Empty = unbound (all tenants).",
    )
    task_queue: str = Field(
        default="compactor", description="Task queue of the workflow and the store activities."
    )
    llm_task_queue: str = Field(
        default="compactor-llm",
        description="Task queue of the LLM summarizer activities (rate limited separately).",
    )
    llm_rate_limit: float = Field(
        default=2.0,
        description="Max LLM summarizer activities started per second across the whole LLM "
        "task queue (all workers): the provider's rate limit, enforced by Temporal.",
    )
    llm_concurrency: int = Field(
        default=8, description="Max concurrent LLM activities on one worker."
    )
    model: str = Field(default=DEFAULT_MODEL, description="Model of the LLM summarizers.")
    summarizer: str = Field(
        default="auto",
        description="Default summarizer: auto (anthropic when an Anthropic API key is configured, "
        "else structured), structured (offline), anthropic, anthropic-native. auto is the default "
        "because the model path is the best compaction measured (README, Benchmarks) and needs a "
        "key; without one nothing changes. Resolved when the settings load.",
    )
    policy: str = Field(default="default", description="Default policy preset.")
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("ANTHROPIC_API_KEY", "COMPACTOR_ANTHROPIC_API_KEY"),
        description="Anthropic API key; without it only the structured summarizer runs.",
    )
    temporal_address: str | None = Field(
        default=None,
        validation_alias=AliasChoices("TEMPORAL_ADDRESS", "COMPACTOR_TEMPORAL_ADDRESS"),
        description="host:port of the Temporal frontend; unset = start an embedded dev server.",
    )
    temporal_namespace: str = Field(
        default="default",
        validation_alias=AliasChoices("TEMPORAL_NAMESPACE", "COMPACTOR_TEMPORAL_NAMESPACE"),
        description="Temporal namespace.",
    )
    temporal_tls_cert: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CERT", "COMPACTOR_TEMPORAL_TLS_CERT"
        ),
        description="Path of the mTLS client certificate (PEM); set with the key to enable TLS.",
    )
    temporal_tls_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_KEY", "COMPACTOR_TEMPORAL_TLS_KEY"
        ),
        description="Path of the mTLS client private key (PEM).",
    )
    temporal_tls_ca: str | None = Field(
        default=None,
        validation_alias=AliasChoices("TEMPORAL_TLS_SERVER_CA_CERT_PATH", "COMPACTOR_TEMPORAL_TLS_CA"),
        description="Path of the CA certificate (PEM) that signed the Temporal frontend's "
        "certificate, when it is a private CA; unset = the system's roots.",
    )
    temporal_tls: bool = Field(
        default=False,
        validation_alias=AliasChoices("TEMPORAL_TLS", "COMPACTOR_TEMPORAL_TLS"),
        description="Use TLS without a client certificate (e.g. API-key auth).",
    )
    temporal_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("TEMPORAL_API_KEY", "COMPACTOR_TEMPORAL_API_KEY"),
        description="Temporal Cloud API key (implies TLS).",
    )
    otlp_endpoint: str | None = Field(
        default=None,
        validation_alias=AliasChoices("COMPACTOR_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
        description="OTLP/HTTP endpoint (e.g. http://localhost:4318); unset = no export.",
    )
    otlp_timeout_s: float = Field(
        default=2.0,
        gt=0,
        description="Timeout of one OTLP export request (background threads; a CLI command waits "
        "at most 0.2 s for its spans whatever this is).",
    )
    otlp_metrics_interval_s: float = Field(
        default=30.0, gt=0, description="How often a worker pushes metrics by OTLP (when an endpoint is set)."
    )
    metrics_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="Port of the worker's HTTP endpoint: /metrics (Prometheus: compactor and Temporal "
        "SDK metrics), /healthz, /readyz. Unset = no endpoint; 0 = any free port.",
    )
    metrics_host: str = Field(
        default="0.0.0.0", description="Address the metrics/health endpoint binds (127.0.0.1 for local only)."
    )
    graceful_shutdown_s: float = Field(
        default=45.0,
        ge=0,
        description="On SIGTERM, how long a worker lets in-flight activities finish before cancelling "
        "them. The model-call worker waits at least one model call (COMPACTOR_ANTHROPIC_TIMEOUT_S "
        "+ connect timeout + 15 s: 145 s by default); keep both below the pod's "
        "terminationGracePeriodSeconds.",
    )
    log_format: str = Field(
        default="auto",
        description="Worker log lines on stderr: json (one object per line), text, or auto = text on "
        "a TTY and json otherwise (containers). Never conversation text (workers/logs.py).",
    )
    log_level: str = Field(default="INFO", description="Log level: DEBUG, INFO, WARNING, ERROR.")
    metrics_tenants: int = Field(
        default=20,
        ge=0,
        description="Tenant label of the compaction, token and cost metrics: with COMPACTOR_TENANTS "
        "set, those tenants; otherwise the first this-many tenants a worker sees keep their name "
        "and the rest are counted as `other` (bounded cardinality).",
    )
    sweep_every: str = Field(
        default="10m",
        description="`compactor setup`: interval of each tenant's sweep schedule (30s, 10m, 1h), "
        "or `off` for none.",
    )
    sweep_tenants: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="`compactor setup`: tenants that get a sweep schedule (comma-separated; `*` = "
        "every tenant in the store). Empty = COMPACTOR_TENANTS, else every tenant in the store.",
    )
    sweep_window: int = Field(default=200_000, gt=0, description="`compactor setup`: window of the swept sessions' model.")
    sweep_max_output: int = Field(default=32_000, gt=0, description="`compactor setup`: max output of the swept sessions' model.")
    payload_bucket: str | None = Field(
        default=None,
        description="S3 bucket for Temporal external payload storage; default: the store's "
        "bucket when the store is S3, otherwise payloads stay inline.",
    )
    payload_threshold: int = Field(
        default=256 * 1024,
        description="Payloads at or above this many bytes go to external storage.",
    )
    max_concurrent_activities: int = Field(
        default=64, description="Max concurrent store activities on one worker."
    )
    io_threads: int = Field(default=16, description="Threads for blocking store I/O.")
    workflow_sandbox: bool = Field(
        default=False,
        description="Run workflow code in Temporal's sandbox on this worker. Off by default: the "
        "sandbox re-creates the workflow module per run and proxies every payload's serialization "
        "context through exec(), ~60 ms of CPU per compaction (a quarter of the worker's CPU; "
        "docs/bench-perf.md). Determinism is still checked under the sandbox by every replay "
        "(`compactor replay`, tests/histories).",
    )

    codec_keys: SecretStr | None = Field(
        default=None,
        description="Payload encryption keys, e.g. `k2:BASE64,k1:BASE64` (AES, 16/24/32 bytes, "
        "base64; make one with `compactor codec-key`). Setting it turns the payload codec on: "
        "every Temporal payload and failure message is AES-GCM ciphertext; the first key "
        "encrypts, every key decrypts (rotate by adding a key in front). `TENANT/ID:BASE64` is a "
        "key of that tenant only. Unset (default): payloads are plain JSON.",
    )
    codec_key_file: str | None = Field(
        default=None,
        description="File holding codec keys in the same format (one per line, `#` comments); "
        "combined with COMPACTOR_CODEC_KEYS when both are set.",
    )

    max_line_bytes: int = Field(
        default=16 << 20,
        gt=0,
        description="Import: longest JSONL / Markdown line read (bytes); a longer line is an "
        "error naming the file and line, and nothing is imported.",
    )
    max_json_depth: int = Field(
        default=200, gt=0, description="Import: deepest JSON nesting accepted; deeper is an error."
    )
    max_inline_tool_output: int = Field(
        default=1 << 20,
        gt=0,
        description="Import: tool outputs above this many bytes go to the artifact store (the "
        "event keeps a reference with previews); with no store (compact --inline) they are cut "
        "to head + tail with a marker, and the import report says so.",
    )
    max_document_bytes: int = Field(
        default=256 << 20,
        gt=0,
        description="Import: largest whole-document transcript (.traj, Gemini chat JSON, "
        "OpenCode export, message lists), which is read at once rather than line by line.",
    )

    # storage lifecycle (compactor gc; compactor/store/gc.py)
    gc_grace_s: float = Field(
        default=900.0,
        ge=0,
        description="gc: an unreferenced object younger than this (seconds) stays: a segment or "
        "checkpoint just written and not yet in the head, a superseded segment a reader may "
        "still be reading, an artifact an import is about to reference.",
    )
    work_ttl_s: float = Field(
        default=172_800.0,
        ge=0,
        description="gc: work objects of a run that no record closes (a held compaction, a run "
        "whose worker died) are removed after this many seconds; set it above the longest run "
        "(approval_timeout_s included). Finished runs' work objects go after the grace period.",
    )
    retain_checkpoints: int = Field(
        default=0,
        ge=0,
        description="gc: 0 keeps every checkpoint the head or a record names (rollback to any "
        "of them works). N keeps the head's, the N most recently recorded and the ones those "
        "are based on; older checkpoints are removed, their records stay.",
    )

    def gc_settings(self) -> "GcSettings":
        """The gc bounds as compactor.store.gc takes them."""
        from compactor.store.gc import GcSettings

        return GcSettings(grace_s=self.gc_grace_s, work_ttl_s=self.work_ttl_s,
                          retain_checkpoints=self.retain_checkpoints)

    @field_validator("log_format")
    @classmethod
    def _log_format(cls, value: str) -> str:
        v = (value or "auto").strip().lower()
        if v not in ("auto", "json", "text"):
            raise ValueError(f"COMPACTOR_LOG_FORMAT {value!r}: expected json, text or auto")
        return v

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        v = (value or "INFO").strip().upper()
        if v not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError(f"COMPACTOR_LOG_LEVEL {value!r}: expected DEBUG, INFO, WARNING or ERROR")
        return v

    @field_validator("tenants", mode="before")
    @classmethod
    def _split_tenants(cls, value: Any) -> list[str]:
        from compactor.errors import InvalidInput
        from compactor.tenancy import parse_tenants

        try:
            return list(parse_tenants(value))
        except InvalidInput as exc:  # -> a ValidationError naming COMPACTOR_TENANTS (blank too)
            raise ValueError(str(exc)) from None

    @field_validator("sweep_tenants", mode="before")
    @classmethod
    def _split_sweep_tenants(cls, value: Any) -> list[str]:
        if isinstance(value, str):
            return [t.strip() for t in value.split(",") if t.strip()]
        return list(value or [])

    @model_validator(mode="after")
    def _tenant_in_tenants(self) -> "Settings":
        if not self.tenants:
            return self
        if "tenant" not in self.model_fields_set:
            self.tenant = self.tenants[0]
        elif self.tenant not in self.tenants:
            raise ValueError(
                f"COMPACTOR_TENANT {self.tenant!r} is not in COMPACTOR_TENANTS ({', '.join(self.tenants)})"
            )
        return self

    @field_validator("summarizer")
    @classmethod
    def _known_summarizer(cls, value: str) -> str:
        if value not in SUMMARIZERS:
            raise ValueError(f"{value!r} is not one of {', '.join(SUMMARIZERS)}")
        return value

    @model_validator(mode="after")
    def _resolve_auto_summarizer(self) -> "Settings":
        if self.summarizer == "auto":
            key = self.anthropic_api_key.get_secret_value() if self.anthropic_api_key is not None else ""
            self.summarizer = "anthropic" if key else "structured"
            self._summarizer_why = ("auto: ANTHROPIC_API_KEY is set" if key
                                    else "auto: no ANTHROPIC_API_KEY, the structured summarizer needs none")
        return self

    @property
    def summarizer_why(self) -> str:
        """Why ``summarizer`` is what it is, when COMPACTOR_SUMMARIZER=auto chose it ("" otherwise)."""
        return self._summarizer_why

    def import_limits(self) -> "ImportLimits":
        """The import bounds as the importers take them."""
        from compactor.importers import ImportLimits

        return ImportLimits(
            max_line_bytes=self.max_line_bytes,
            max_json_depth=self.max_json_depth,
            max_inline_tool_output=self.max_inline_tool_output,
            max_document_bytes=self.max_document_bytes,
        )

    @property
    def tls_enabled(self) -> bool:
        return bool(self.temporal_tls_cert or self.temporal_tls or self.temporal_api_key or self.temporal_tls_ca)


def s3_bucket_of(store_url: str) -> str | None:
    """Bucket name of an ``s3://BUCKET/PREFIX`` store URL, else None."""
    if not store_url.startswith("s3://"):
        return None
    return store_url[len("s3://") :].split("/", 1)[0] or None
