"""The settings of the model summarizer's client (``activities.llm``), in a module of their
own: ``compactor config`` shows them without importing the ``anthropic`` SDK (about 3,800
modules, ~2.5 s of CPU)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from activities.defaults import DEFAULT_MODEL


def _native_instructions() -> str:
    from compactor.summarize.prompting import NATIVE_INSTRUCTIONS

    return NATIVE_INSTRUCTIONS


class AnthropicSettings(BaseModel):
    """How the summarizer activities call the API. Worker-side only, never in payloads."""

    model_config = ConfigDict(frozen=True)

    model: str = Field(default=DEFAULT_MODEL, description="Model when the input names none.")
    timeout_s: float = Field(
        default=120.0,
        description="Client timeout per request (read/write/pool); must stay below the "
        "activity's start-to-close so a hung call becomes a retry, not a lost attempt.",
    )
    connect_timeout_s: float = Field(default=10.0, description="Client connect timeout.")
    max_output_tokens: int = Field(default=8_192, description="Cap on max_tokens of a summary.")
    max_input_tokens: int = Field(
        default=180_000,
        description="Shrink before calling when count_tokens says the prompt is above this.",
    )
    heartbeat_s: float = Field(default=5.0, description="Heartbeat interval during calls.")
    stream: bool = Field(default=True, description="Stream template summaries (SSE).")
    count_tokens: bool = Field(default=True, description="Ask count_tokens before each call.")
    native_instructions: str | None = Field(
        default_factory=_native_instructions,
        description="Instructions for native compaction (replace the server's prompt); "
        "None = the server's own.",
    )

    @classmethod
    def from_settings(cls, settings: Any | None) -> AnthropicSettings:
        """From the environment (``COMPACTOR_ANTHROPIC_*``), then the worker's ``Settings``
        (``model`` and any ``anthropic_*`` field it has) on top."""
        if isinstance(settings, cls):
            return settings
        values: dict[str, Any] = _AnthropicEnv().model_dump(exclude_none=True)
        if settings is not None:
            if getattr(settings, "model", None):
                values["model"] = settings.model
            for f in _TUNABLE:
                v = getattr(settings, f"anthropic_{f}", None)
                if v is not None:
                    values[f] = v
        return cls(**values)


_TUNABLE = ("model", "timeout_s", "connect_timeout_s", "max_output_tokens", "max_input_tokens",
            "heartbeat_s", "stream", "count_tokens")


class _AnthropicEnv(BaseSettings):
    """``COMPACTOR_ANTHROPIC_<FIELD>`` environment overrides (worker-side only)."""

    model_config = SettingsConfigDict(env_prefix="COMPACTOR_ANTHROPIC_", extra="ignore")

    model: str | None = None
    timeout_s: float | None = None
    connect_timeout_s: float | None = None
    max_output_tokens: int | None = None
    max_input_tokens: int | None = None
    heartbeat_s: float | None = None
    stream: bool | None = None
    count_tokens: bool | None = None
