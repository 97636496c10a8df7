"""Model summarizers over the Anthropic Messages API, as Temporal activities.

``LlmActivities(client, store, settings)`` holds an ``anthropic.AsyncAnthropic`` client and the
object store; its two activities share ``SummarizeInput``/``SummarizeOutput`` with the
structured summarizer:

* ``summarize_anthropic``: our fixed template (``compactor.summarize.prompting``) over the lifted state
  and the covered transcript as quoted data, streamed, the stable prefix marked for caching.
* ``summarize_native``: the API's own on-demand compaction (beta ``compact-2026-09-04``, the
  top-level ``compaction`` parameter); the returned ``compaction`` block is stored opaque and
  replayed verbatim at the head of the view.

Why it is shaped this way:

* The client is made with ``max_retries=0`` and a timeout below the activity's
  start-to-close, so Temporal owns every retry and each attempt is an event in the history.
  ``_anthropic_errors.to_application_error`` is the one place that classifies failures
  (retryable with the provider's ``retry-after`` as ``next_retry_delay``, or not).
* Prompt-too-long is not worth a Temporal retry (the same prompt fails the same way): the
  activity drops the oldest rounds of the transcript and asks again, at most
  ``MAX_DROP_RETRIES`` times, and reports ``dropped_rounds``. The lifted state still covers
  the dropped rounds.
* Exact token counts come from ``count_tokens`` when it answers (used to shrink before a
  call that could not fit); when it does not, our own count stands in.
* The API key is read by the client from ``ANTHROPIC_API_KEY`` and lives only there: never
  in a payload, a heartbeat, a log line, a record or an error message.
* Long calls heartbeat from a background ticker, so a dead worker is noticed within the
  heartbeat timeout rather than the (much longer) start-to-close.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any, AsyncIterator, Sequence

import anthropic
import httpx2
from pydantic import BaseModel, ConfigDict
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import metrics
from activities._anthropic_errors import StreamIncomplete, provider_message, to_application_error
from activities.contracts import LLM_START_TO_CLOSE, ErrorType, SummarizeInput, SummarizeOutput
from activities.llm_settings import AnthropicSettings  # its own module: `compactor config` reads it without the SDK
from compactor.summarize import prompting
from compactor.errors import InvalidInput, NotFound
from compactor.events import Event
from compactor.tokens import count_text

NATIVE_BETA = "compact-2026-09-04"
"""Beta header of on-demand compaction (the top-level ``compaction`` parameter)."""

def _activity_start_to_close_s() -> float:
    """The workflow's start-to-close of the LLM activities: the client timeout stays below it."""
    return LLM_START_TO_CLOSE.total_seconds()


def make_anthropic_client(settings: Any | None = None) -> anthropic.AsyncAnthropic:
    """The summarizers' client: retries off (Temporal retries), timeout below the activity's.

    The key is ``ANTHROPIC_API_KEY`` (read by the client itself) and the endpoint
    ``ANTHROPIC_BASE_URL`` when set, as the client does by default. Raises ``InvalidInput``
    when no key is configured.
    """
    cfg = AnthropicSettings.from_settings(settings)
    limit = _activity_start_to_close_s()
    if cfg.timeout_s >= limit:
        raise InvalidInput(
            f"anthropic timeout {cfg.timeout_s}s must be below the activity start-to-close "
            f"({limit:.0f}s) so a hung call is retried by Temporal"
        )
    kwargs: dict[str, Any] = {
        "max_retries": 0,
        "timeout": httpx2.Timeout(cfg.timeout_s, connect=cfg.connect_timeout_s),
    }
    if not os.environ.get("ANTHROPIC_API_KEY"):
        secret = getattr(settings, "anthropic_api_key", None)
        if secret is None:
            raise InvalidInput(
                "ANTHROPIC_API_KEY is not set: export it to use the anthropic summarizers "
                "(the structured summarizer needs no key)"
            )
        kwargs["api_key"] = secret.get_secret_value() if hasattr(secret, "get_secret_value") else str(secret)
    return anthropic.AsyncAnthropic(**kwargs)


@contextlib.asynccontextmanager
async def _heartbeating(interval: float, progress: dict[str, Any]) -> AsyncIterator[None]:
    """Heartbeat ``progress`` (counts only, no content) every ``interval`` while the body runs."""
    if not activity.in_activity():
        yield
        return

    async def tick() -> None:
        while True:
            activity.heartbeat(dict(progress))
            await asyncio.sleep(interval)

    task = asyncio.create_task(tick())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _failed(message: str, **details: Any) -> ApplicationError:
    return ApplicationError(message, details, type=ErrorType.SUMMARIZER_FAILED, non_retryable=True)


class _Loaded(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    state: dict[str, Any]
    events: list[Event]
    first_seq: int
    previous_summary: str | None = None
    previous_native: dict[str, Any] | None = None
    latest_full: bool = False


class _Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0

    def add(self, u: Any) -> None:
        if u is None:
            return
        self.input_tokens += getattr(u, "input_tokens", 0) or 0
        self.output_tokens += getattr(u, "output_tokens", 0) or 0
        self.cache_read_tokens += getattr(u, "cache_read_input_tokens", 0) or 0
        self.cache_creation_tokens += getattr(u, "cache_creation_input_tokens", 0) or 0


class LlmActivities:
    """Summarizer activities over one Anthropic client and one object store."""

    def __init__(
        self,
        client: anthropic.AsyncAnthropic | None,
        store: Any,
        settings: AnthropicSettings | None = None,
        *,
        unavailable: str | None = None,
    ) -> None:
        self.client = client
        self.store = store
        self.settings = settings or AnthropicSettings()
        self.unavailable = unavailable if client is None else None
        if client is None and not self.unavailable:
            self.unavailable = "no Anthropic client configured"

    def activities(self) -> list[Any]:
        return [self.summarize_anthropic, self.summarize_native]

    # --- activities ------------------------------------------------------------------------------
    @activity.defn(name="summarize_anthropic")
    async def summarize_anthropic(self, inp: SummarizeInput) -> SummarizeOutput:
        """Template summary of the covered range via the Messages API."""
        return await self._run(inp, native=False)

    @activity.defn(name="summarize_native")
    async def summarize_native(self, inp: SummarizeInput) -> SummarizeOutput:
        """The API's own compaction block for the covered range (stored opaque)."""
        return await self._run(inp, native=True)

    # --- shared ------------------------------------------------------------------------------------
    async def _run(self, inp: SummarizeInput, *, native: bool) -> SummarizeOutput:
        if self.client is None:
            raise _failed(f"anthropic summarizer unavailable: {self.unavailable}")
        model = inp.model or self.settings.model
        progress: dict[str, Any] = {"phase": "load", "dropped_rounds": 0, "chars": 0}
        try:
            async with _heartbeating(self.settings.heartbeat_s, progress):
                loaded = await asyncio.to_thread(self._load, inp)
                if native:
                    result = await self._native(inp, model, loaded, progress)
                else:
                    result = await self._template(inp.covers_end, inp.budget_tokens, model, loaded, progress)
                summary, sections, native_block, usage, dropped = result
                progress["phase"] = "write"
                payload = json.dumps(
                    {"summary": summary, "sections": sections, "native": native_block},
                    ensure_ascii=False,
                ).encode()
                await asyncio.to_thread(self.store.put, inp.output_key, payload)
        except ApplicationError:
            raise
        except NotFound as e:
            raise ApplicationError(str(e), type=ErrorType.NOT_FOUND, non_retryable=True) from e
        except Exception as e:
            mapped = to_application_error(e)
            if mapped is None:
                raise
            metrics.record_llm_error(str(mapped.type or "error"), model)
            if activity.in_activity():
                # The provider's own text may quote the request: the log gets what history gets
                # (type, status, request id), and only the length of the provider's message.
                activity.logger.warning(
                    "anthropic call failed: %s", mapped.message,
                    extra={"fields": {"event": "llm_error", "error_type": mapped.type, "model": model,
                                      "status_code": getattr(e, "status_code", None),
                                      "request_id": getattr(e, "request_id", None),
                                      "provider_message_chars": len(provider_message(e))}},
                )
            # Not chained: the client's exception text quotes the response body, which may
            # quote the request, and a chained cause is recorded in history.
            raise mapped from None
        attempt = activity.info().attempt if activity.in_activity() else 1
        return SummarizeOutput(
            output_key=inp.output_key,
            summary_tokens=count_text(summary),
            model=model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_creation_tokens=usage.cache_creation_tokens,
            attempts=attempt,
            dropped_rounds=dropped,
        )

    def _load(self, inp: SummarizeInput) -> _Loaded:
        from compactor.store import SessionLog

        from compactor.lifting.lift import LiftedState

        raw, _ = self.store.get(inp.state_key)
        # In the model's field order, as the inline path has it: both paths send the same bytes.
        state = LiftedState.model_validate(json.loads(raw)).model_dump(mode="json")
        log = SessionLog(self.store, inp.tenant, inp.session)
        prev_end = 0
        prev_summary = prev_native = None
        if inp.prev_checkpoint:
            ck = log.read_checkpoint(inp.prev_checkpoint, inp.prev_checkpoint_sha256)
            prev_end = ck.covers.end
            prev_summary = ck.summary or None
            prev_native = ck.native
        events = log.read_events(prev_end + 1, inp.covers_end) if inp.covers_end > prev_end else []
        return _Loaded(
            state=state,
            events=events,
            first_seq=prev_end + 1,
            previous_summary=prev_summary,
            previous_native=prev_native,
            latest_full=inp.latest_full,
        )

    def _max_tokens(self, budget: int) -> int:
        return max(256, min(self.settings.max_output_tokens, int(max(budget, 256) * 1.5)))

    async def _count(self, model: str, params: dict[str, Any], local: int, *, beta: bool) -> int:
        """Exact input tokens from count_tokens; our count when the endpoint does not answer."""
        if not self.settings.count_tokens:
            return local
        assert self.client is not None
        try:
            if beta:
                r = await self.client.beta.messages.count_tokens(model=model, betas=[NATIVE_BETA], **params)
            else:
                r = await self.client.messages.count_tokens(model=model, **params)
            return int(r.input_tokens)
        except (anthropic.APIError, httpx2.TransportError) as e:
            if activity.in_activity():
                activity.logger.info("count_tokens unavailable (%s); using the local count", type(e).__name__)
            return local

    async def _shrinking(
        self,
        loaded: _Loaded,
        progress: dict[str, Any],
        build: Any,
        call: Any,
        count: Any,
    ) -> tuple[Any, int]:
        """Run ``call(build(events, dropped))``, dropping the oldest rounds when the prompt is
        too long (by count_tokens before the call, or by the API's 400 after it)."""
        events: list[Event] = list(loaded.events)
        dropped = 0
        for shrink in range(prompting.MAX_DROP_RETRIES + 1):
            params = build(events, dropped)
            progress.update(phase="count", dropped_rounds=dropped)
            tokens, limit = await count(params), self.settings.max_input_tokens
            too_long: tuple[int, int] | None = (tokens, limit) if tokens > limit else None
            if too_long is None:
                progress["phase"] = "call"
                try:
                    return await call(params), dropped
                except anthropic.BadRequestError as e:
                    too_long = prompting.parse_prompt_too_long(e.api_message or str(e))
                    if too_long is None:
                        raise
            if shrink == prompting.MAX_DROP_RETRIES:
                break
            need = prompting.tokens_to_free(events, *too_long)
            events, n = prompting.drop_oldest_rounds(events, rounds_to_drop=1, tokens_to_free=need)
            if n == 0:
                raise _failed(
                    f"prompt too long ({too_long[0]} tokens > {too_long[1]}) and only one round "
                    "is left to summarize; nothing more can be dropped",
                    dropped_rounds=dropped,
                )
            dropped += n
        raise _failed(
            f"prompt still too long after dropping {dropped} round(s) in "
            f"{prompting.MAX_DROP_RETRIES} tries",
            dropped_rounds=dropped,
        )

    # --- template ----------------------------------------------------------------------------------
    async def template_summary(
        self,
        state: dict[str, Any],
        events: Sequence[Event],
        *,
        covers_end: int,
        budget_tokens: int,
        first_seq: int = 1,
        model: str | None = None,
        previous_summary: str | None = None,
        latest_full: bool = False,
    ) -> tuple[str, dict[str, list[str]], dict[str, int]]:
        """The template summary in this process (``compact --inline --summarizer anthropic``):
        the same request, call, shrinking and answer checks as the activity.

        Returns (text, sections, usage and ``dropped_rounds``). Raises ``ApplicationError``
        (the activity's classification) when the call or the answer fails.
        """
        if self.client is None:
            raise _failed(f"anthropic summarizer unavailable: {self.unavailable}")
        loaded = _Loaded(state=state, events=list(events), first_seq=first_seq,
                         previous_summary=previous_summary, latest_full=latest_full)
        progress: dict[str, Any] = {"phase": "call", "dropped_rounds": 0, "chars": 0}
        try:
            text, sections, _, usage, dropped = await self._template(
                covers_end, budget_tokens, model or self.settings.model, loaded, progress)
        except ApplicationError:
            raise
        except Exception as e:
            mapped = to_application_error(e)
            if mapped is None:
                raise
            raise mapped from None
        return text, sections, {**usage.model_dump(), "dropped_rounds": dropped}

    async def _template(
        self, covers_end: int, budget_tokens: int, model: str, loaded: _Loaded, progress: dict[str, Any]
    ) -> tuple[str, dict[str, list[str]], None, _Usage, int]:
        usage = _Usage()
        covers = (loaded.first_seq, covers_end)
        if (why := prompting.no_room(loaded.state, budget_tokens, latest_full=loaded.latest_full)) is not None:
            raise _failed(why)  # before any call: an answer with no room to show is not paid for

        def build(events: Sequence[Event], dropped: int) -> prompting.SummaryPrompt:
            return prompting.build_prompt(
                loaded.state, events, budget_tokens=budget_tokens, covers=covers,
                previous_summary=loaded.previous_summary, dropped_rounds=dropped,
                latest_full=loaded.latest_full,
            )

        async def count(p: prompting.SummaryPrompt) -> int:
            return await self._count(model, p.params(), p.local_tokens(), beta=False)

        async def call(p: prompting.SummaryPrompt) -> tuple[str, str | None]:
            max_tokens = self._max_tokens(budget_tokens)
            assert self.client is not None
            if not self.settings.stream:
                msg = await self.client.messages.create(model=model, max_tokens=max_tokens, **p.params())
                usage.add(msg.usage)
                return "".join(b.text for b in msg.content if b.type == "text"), msg.stop_reason
            saw_stop = False
            async with self.client.messages.stream(model=model, max_tokens=max_tokens, **p.params()) as stream:
                async for event in stream:
                    if event.type == "text":
                        progress["chars"] += len(event.text)
                    elif event.type == "message_stop":
                        saw_stop = True
                msg = await stream.get_final_message()
            usage.add(msg.usage)
            if not saw_stop or msg.stop_reason is None:
                raise StreamIncomplete(
                    f"Anthropic API stream ended without message_stop after {progress['chars']} characters"
                )
            return "".join(b.text for b in msg.content if b.type == "text"), msg.stop_reason

        (text, stop), dropped = await self._shrinking(loaded, progress, build, call, count)
        if stop == "max_tokens":
            raise _failed(
                f"the summary did not fit in max_tokens={self._max_tokens(budget_tokens)} "
                f"(budget {budget_tokens}); a cut-off summary is never used"
            )
        if stop == "refusal":
            raise _failed("the model refused to summarize this range")
        if not text.strip():
            raise _failed("the model's answer was empty")
        # An answer without the template's headings is judged on what it says
        # (engine.model_summary / summarize.acceptance), like any other.
        sections = prompting.parse_summary(text)
        return text.strip() + "\n", sections, None, usage, dropped

    # --- native --------------------------------------------------------------------------------------
    async def _native(
        self, inp: SummarizeInput, model: str, loaded: _Loaded, progress: dict[str, Any]
    ) -> tuple[str, dict[str, list[str]], dict[str, Any], _Usage, int]:
        usage = _Usage()

        def build(events: Sequence[Event], dropped: int) -> dict[str, Any]:
            system, messages = prompting.native_messages(
                events, previous_native=loaded.previous_native,
                previous_summary=loaded.previous_summary,
            )
            params: dict[str, Any] = {"messages": messages}
            if system:
                params["system"] = system
            return params

        async def count(params: dict[str, Any]) -> int:
            local = count_text(json.dumps(params, ensure_ascii=False))
            return await self._count(model, params, local, beta=True)

        async def call(params: dict[str, Any]) -> Any:
            assert self.client is not None
            compaction: dict[str, Any] = {"type": "summarize"}
            if self.settings.native_instructions:
                compaction["instructions"] = self.settings.native_instructions
            msg = await self.client.beta.messages.create(
                model=model,
                max_tokens=self._max_tokens(inp.budget_tokens),
                betas=[NATIVE_BETA],
                compaction=compaction,  # type: ignore[arg-type]
                **params,
            )
            usage.add(msg.usage)
            return msg

        if not loaded.events and loaded.previous_native is None:
            raise _failed("nothing to compact in the covered range")
        msg, dropped = await self._shrinking(loaded, progress, build, call, count)
        block = next((b for b in msg.content if getattr(b, "type", None) == "compaction"), None)
        if block is None or msg.stop_reason != "compaction":
            raise _failed(f"no compaction block in the answer (stop_reason {msg.stop_reason!r})")
        if not block.content:
            # The API's way of saying the summary came out malformed; a new attempt may succeed.
            raise ApplicationError(
                "the API returned an empty compaction block (compaction failed on the server)",
                type="ProviderCompactionFailed",
            )
        raw = block.to_dict(mode="json")
        return block.content, prompting.parse_summary(block.content), raw, usage, dropped


def build_activities(*, settings: Any = None, store: Any) -> list[Any]:
    """The worker's entry point (workers.worker.llm_activities): activities for the LLM queue.

    Without an API key the activities still register and fail at once, non-retryably, so
    the workflow falls back to the structured summarizer instead of waiting on a queue no
    worker serves.
    """
    cfg = AnthropicSettings.from_settings(settings)
    try:
        client = make_anthropic_client(settings)
    except InvalidInput as e:
        return LlmActivities(None, store, cfg, unavailable=str(e)).activities()
    return LlmActivities(client, store, cfg).activities()


__all__ = [
    "AnthropicSettings",
    "LlmActivities",
    "NATIVE_BETA",
    "build_activities",
    "make_anthropic_client",
]

