"""Compaction policies: (window W, max output O, usage) -> thresholds, budgets, tool-output limits.

The presets reproduce the published behaviour of the agents we learn from (DESIGN §6) and
double as test vectors: every number in that table is reproduced by ``make_policy`` and
checked in ``tests/unit/test_policy.py``. Pure: no I/O.

Reading of the sources where DESIGN §6 gives only the result:

- claude-code *predictive*: fire when the next tool result (one 15,000-token result) would
  cross the warning line, which sits ``max(buffer, 20,000)`` below the effective window
  (Claude Code's ``WARNING_THRESHOLD_BUFFER_TOKENS`` is 20,000):
  ``effective - max(buffer, 20,000) - 15,000`` (W=200,000 -> 145,000). Using the larger of
  the two keeps predictive below the auto threshold for the 1M tier too.
- claude-code *hard*: the blocking limit, 3,000 below the effective window
  (``MANUAL_COMPACT_BUFFER_TOKENS``).
- Presets with no published hard limit use ``max(trigger, W - O)``: past that the model has no
  room left for its own answer.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from compactor.errors import PolicyError
from compactor.engine.presets import PRESETS

CompactionNeed = Literal["none", "soft", "hard"]

POST_COMPACT_SHARE = 75
"""Percent of the soft threshold a compaction aims for by default (room for a few turns)."""
REGROW_MIN_TOKENS = 500
REGROW_SHARE = 5
"""A view marked unshrinkable is compacted again once it has grown by this percent (at least
REGROW_MIN_TOKENS): a turn or two of new events, not every appended byte."""

# claude-code constants (autoCompact.ts / sessionMemoryCompact.ts as published)
CC_MAX_SUMMARY_OUTPUT = 20_000
CC_WARNING_BUFFER = 20_000
CC_BLOCKING_BUFFER = 3_000
CC_PREDICTIVE_TOOL_RESULT = 15_000
CC_MCP_OUTPUT_TOKENS = 25_000  # MAX_MCP_OUTPUT_TOKENS default: larger outputs are not kept inline


def claude_code_buffer(window: int) -> int:
    """Auto-compact buffer by window tier: 13,000 (<400K), 30,000 (400K-800K), 50,000 above."""
    if window < 400_000:
        return 13_000
    if window <= 800_000:
        return 30_000
    return 50_000


def opencode_reserve(window: int) -> int:
    """OpenCode's reserve: max(0.1 W, 16,000), but only 0.1 W for windows under 32K."""
    tenth = window // 10
    if window < 32_000:
        return tenth
    return max(tenth, 16_000)


class Policy(BaseModel):
    """Thresholds and budgets for one (preset, window, max output). Values, frozen."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="Preset name this policy was made from.")
    window: int = Field(gt=0, description="Model context window W, in tokens.")
    max_output: int = Field(ge=0, description="Maximum output tokens O the model may produce.")
    trigger_tokens: int = Field(
        description="Soft threshold: compact (in the background) once the context reaches it."
    )
    hard_tokens: int = Field(
        description="Hard threshold: the next request cannot be sent until the context is below it."
    )
    predictive_tokens: int | None = Field(
        default=None,
        description="Earlier soft threshold that reserves room for one large tool result "
        "(claude-code); None where the preset has none.",
    )
    tail_budget_tokens: int = Field(
        description="Tokens of recent events kept verbatim (the tail) when the target allows."
    )
    tail_min_tokens: int = Field(
        default=0, description="Grow the tail to at least this many tokens (if under tail_max)."
    )
    tail_max_tokens: int = Field(description="Never keep more than this many tail tokens by choice.")
    min_tail_text_messages: int = Field(
        default=0, description="Grow the tail until it holds this many messages with text."
    )
    tail_cut_on_user: bool = Field(
        default=False,
        description="Prefer a tail that starts on a user message (opencode cuts on a user turn).",
    )
    tool_result_token_limit: int | None = Field(
        default=None, description="Tool results above this many tokens are externalized."
    )
    tool_result_char_limit: int | None = Field(
        default=None, description="Tool results above this many characters are externalized."
    )
    tool_result_line_limit: int | None = Field(
        default=None, description="Tool results above this many lines are externalized."
    )
    tool_result_byte_limit: int | None = Field(
        default=None, description="Tool results above this many UTF-8 bytes are externalized."
    )
    preview_head_chars: int = Field(
        default=2_000, ge=0, description="Characters of an externalized result kept at its head."
    )
    preview_tail_chars: int = Field(
        default=1_000, ge=0, description="Characters of an externalized result kept at its tail."
    )
    keep_recent_tool_results: int = Field(
        default=5, ge=0, description="Clearing old tool results keeps this many newest ones."
    )
    clear_tool_results_after: int = Field(
        default=10, ge=0, description="Old tool results are cleared only once more than this many exist."
    )
    shrink_ladder: list[float] = Field(
        default_factory=lambda: [1.0, 0.7, 0.5, 0.35],
        description="Tail-budget factors tried in turn when a candidate view misses the target.",
    )
    summary_max_tokens: int = Field(
        default=CC_MAX_SUMMARY_OUTPUT, gt=0, description="Upper bound on the summary's own size."
    )
    summary_must_shrink: bool = Field(
        default=True, description="A summary must be smaller than the range it replaces."
    )
    derived: dict[str, int] = Field(
        default_factory=dict,
        description="Intermediate numbers of the preset's formula (effective window, buffer, "
        "reserve, retain...) for display.",
    )

    @model_validator(mode="after")
    def _check(self) -> Policy:
        if self.max_output >= self.window:
            raise ValueError("max_output must be smaller than the window")
        if self.tail_min_tokens > self.tail_max_tokens:
            raise ValueError("tail_min_tokens must not exceed tail_max_tokens")
        if not self.shrink_ladder or any(not 0 <= f <= 1 for f in self.shrink_ladder):
            raise ValueError("shrink_ladder factors must lie in [0, 1]")
        return self

    @property
    def soft_tokens(self) -> int:
        """Where a background compaction starts: the trigger, or the predictive threshold."""
        if self.predictive_tokens is None:
            return self.trigger_tokens
        return min(self.trigger_tokens, self.predictive_tokens)

    @property
    def post_compact_tokens(self) -> int:
        """Default target after a compaction when the caller gives none: tail + summary room,
        and at most ``POST_COMPACT_SHARE`` of the soft threshold.

        Consistent with the trigger on purpose: a target at or above the threshold that
        starts a compaction would make every run started between the two end ``noop`` (seen
        at W=40,000: predictive 17,250, target 23,000), and a view just under the threshold
        after a run would trigger again on the next turn.
        """
        return min(self.soft_tokens * POST_COMPACT_SHARE // 100, self.tail_max_tokens + self.summary_max_tokens)


def make_policy(
    preset: str = "default",
    window: int = 200_000,
    max_output: int = 32_000,
    configured: int | None = None,
) -> Policy:
    """Build the policy of ``preset`` for a model with ``window`` and ``max_output`` tokens.

    ``configured`` is a user-configured auto-compact limit (codex's
    ``model_auto_compact_token_limit``); other presets cap their trigger with it too.

    Raises:
        PolicyError: unknown preset, or numbers that leave no usable context.
    """
    if preset not in PRESETS:
        raise PolicyError(
            f"unknown policy preset {preset!r}; choose one of: {', '.join(PRESETS)}", preset=preset
        )
    if window <= 0 or max_output < 0:
        raise PolicyError("window must be positive and max_output non-negative", window=window)
    if max_output >= window:
        raise PolicyError(
            f"max_output ({max_output:,}) must be smaller than the window ({window:,})",
            window=window,
            max_output=max_output,
        )
    if configured is not None and configured <= 0:
        raise PolicyError("configured limit must be positive", configured=configured)
    build = _BUILDERS[preset]
    try:
        pol = build(window, max_output, configured)
    except ValueError as exc:  # pydantic validation of derived numbers
        raise PolicyError(f"policy {preset} does not fit W={window:,}, O={max_output:,}: {exc}") from exc
    if pol.trigger_tokens <= 0:
        raise PolicyError(
            f"policy {preset} leaves no usable context at W={window:,}, O={max_output:,}",
            trigger=pol.trigger_tokens,
        )
    return pol


def _cap(trigger: int, configured: int | None) -> int:
    return trigger if configured is None else min(configured, trigger)


def _claude_code(w: int, o: int, configured: int | None) -> Policy:
    reserved = min(o, CC_MAX_SUMMARY_OUTPUT)
    effective = w - reserved
    buffer = claude_code_buffer(w)
    trigger = _cap(effective - buffer, configured)
    predictive: int | None = min(
        trigger, effective - max(buffer, CC_WARNING_BUFFER) - CC_PREDICTIVE_TOOL_RESULT
    )
    if predictive is not None and predictive <= 0:
        predictive = None  # small windows: no room to reserve a whole tool result; auto only
    return Policy(
        name="claude-code",
        window=w,
        max_output=o,
        trigger_tokens=trigger,
        hard_tokens=effective - CC_BLOCKING_BUFFER,
        predictive_tokens=predictive,
        tail_budget_tokens=10_000,
        tail_min_tokens=10_000,
        tail_max_tokens=40_000,
        min_tail_text_messages=5,
        tool_result_token_limit=CC_MCP_OUTPUT_TOKENS,
        keep_recent_tool_results=5,
        clear_tool_results_after=10,
        summary_max_tokens=CC_MAX_SUMMARY_OUTPUT,
        derived={"effective": effective, "buffer": buffer, "reserved_output": reserved},
    )


def _codex(w: int, o: int, configured: int | None) -> Policy:
    auto = (w * 9) // 10
    trigger = _cap(auto, configured)
    hard = (w * 95) // 100
    return Policy(
        name="codex",
        window=w,
        max_output=o,
        trigger_tokens=trigger,
        hard_tokens=max(hard, trigger),
        tail_budget_tokens=20_000,
        tail_min_tokens=0,
        tail_max_tokens=20_000,
        # Codex keeps only user messages (newest first, up to 20K); our tail is contiguous,
        # so it keeps whole recent turns under the same 20K cap.
        tool_result_token_limit=None,
        keep_recent_tool_results=5,
        clear_tool_results_after=10,
        derived={"auto_limit": auto, "hard_limit": hard},
    )


def _opencode(w: int, o: int, configured: int | None) -> Policy:
    reserve = opencode_reserve(w)
    usable = w - reserve
    trigger = _cap(usable, configured)
    return Policy(
        name="opencode",
        window=w,
        max_output=o,
        trigger_tokens=trigger,
        hard_tokens=max(trigger, w - o),
        tail_budget_tokens=15_000,
        tail_min_tokens=0,
        tail_max_tokens=15_000,
        tail_cut_on_user=True,
        tool_result_line_limit=2_000,
        tool_result_byte_limit=50 * 1024,
        shrink_ladder=[1.0, 0.7, 0.5, 0.35],
        derived={"reserve": reserve, "usable": usable},
    )


def _deepseek(w: int, o: int, configured: int | None) -> Policy:
    trigger = _cap(min((w * 8) // 10, w - o - 65_536), configured)
    retain = (16 * (w - o)) // 100
    return Policy(
        name="deepseek",
        window=w,
        max_output=o,
        trigger_tokens=trigger,
        hard_tokens=max(trigger, w - o),
        tail_budget_tokens=retain,
        tail_min_tokens=0,
        tail_max_tokens=retain,
        tool_result_token_limit=12_500,
        tool_result_char_limit=8_192,
        preview_head_chars=4_096,
        preview_tail_chars=1_024,
        summary_must_shrink=True,
        derived={"retain": retain},
    )


def _default(w: int, o: int, configured: int | None) -> Policy:
    """Ours: the best of each preset, chosen for the fidelity benchmark.

    - Trigger and hard limit: claude-code's (room for the summary output and a blocking
      line), with its predictive threshold, because it is the only preset that accounts for
      the next large tool result.
    - Tail: up to 20,000 tokens (codex), grown to 10,000 tokens and 5 text messages when the
      target allows (claude-code), capped at 40,000; cut on whole tool pairs (deepseek).
    - Tool output: deepseek's 12,500-token / 8,192-character limits with 4,096 + 1,024 previews
      (the full text stays recoverable as an artifact), plus opencode's 2,000 lines / 50 KiB.
    - Clearing old results: claude-code's keep-5-once-more-than-10; shrink ladder: opencode's.
    """
    cc = _claude_code(w, o, configured)
    return Policy(
        name="default",
        window=w,
        max_output=o,
        trigger_tokens=cc.trigger_tokens,
        hard_tokens=cc.hard_tokens,
        # Never predict so early that a small window compacts all the time: at least 3/4 of
        # the auto threshold (W=200,000 keeps claude-code's 145,000).
        predictive_tokens=max(cc.predictive_tokens or 0, cc.trigger_tokens * 3 // 4),
        tail_budget_tokens=20_000,
        tail_min_tokens=10_000,
        tail_max_tokens=40_000,
        min_tail_text_messages=5,
        tool_result_token_limit=12_500,
        tool_result_char_limit=8_192,
        tool_result_line_limit=2_000,
        tool_result_byte_limit=50 * 1024,
        preview_head_chars=4_096,
        preview_tail_chars=1_024,
        keep_recent_tool_results=5,
        clear_tool_results_after=10,
        shrink_ladder=[1.0, 0.7, 0.5, 0.35],
        summary_max_tokens=CC_MAX_SUMMARY_OUTPUT,
        derived=dict(cc.derived),
    )


_BUILDERS = {
    "default": _default,
    "claude-code": _claude_code,
    "codex": _codex,
    "opencode": _opencode,
    "deepseek": _deepseek,
}


def should_compact(
    policy: Policy, tokens: int, provider_usage: int | None = None
) -> CompactionNeed:
    """Is compaction needed for a context of ``tokens`` (our count)?

    ``provider_usage`` is the context size the model provider reported for the latest request;
    when given it is what we trigger on (it is the provider's own tokenizer).

    Returns ``"hard"`` at or above the hard limit, ``"soft"`` at or above the trigger (or the
    predictive threshold), ``"none"`` otherwise.
    """
    used = provider_usage if provider_usage is not None else tokens
    if used >= policy.hard_tokens:
        return "hard"
    soft = policy.trigger_tokens
    if policy.predictive_tokens is not None:
        soft = min(soft, policy.predictive_tokens)
    if used >= soft:
        return "soft"
    return "none"


def has_grown(noop_view_tokens: int | None, tokens: int) -> bool:
    """Has a view grown enough since a compaction could not shrink it at ``noop_view_tokens``?"""
    if noop_view_tokens is None:
        return True
    margin = max(REGROW_MIN_TOKENS, noop_view_tokens * REGROW_SHARE // 100)
    return tokens > noop_view_tokens + margin


StartDecision = Literal["none", "start", "within_target", "unshrinkable"]


def start_decision(
    policy: Policy,
    need: CompactionNeed,
    tokens: int,
    *,
    target_tokens: int | None = None,
    noop_view_tokens: int | None = None,
) -> StartDecision:
    """Should a compaction be started for a view of ``tokens`` (our measure) whose trigger
    verdict is ``need``? Never one that is known to end ``noop``: a view within the run's
    target (the plan would do nothing), or one a run could not shrink and that has not grown
    since (``noop_view_tokens``, from the session head)."""
    if need == "none":
        return "none"
    target = target_tokens if target_tokens is not None else policy.post_compact_tokens
    if tokens <= target:
        return "within_target"
    if not has_grown(noop_view_tokens, tokens):
        return "unshrinkable"
    return "start"


def policy_rows(policy: Policy) -> list[tuple[str, str]]:
    """(name, value) rows for display; numbers formatted with thousands separators."""
    rows: list[tuple[str, str]] = []
    dumped = policy.model_dump()
    derived = dumped.pop("derived")
    for key, value in dumped.items():
        rows.append((key, _fmt(value)))
    for key, value in derived.items():
        rows.append((f"derived.{key}", _fmt(value)))
    return rows


def _fmt(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return " / ".join(f"{v:.0%}" if isinstance(v, float) else str(v) for v in value)
    return str(value)
