"""activities.llm called directly (no Temporal): the real anthropic client over HTTP against
the local fake server, a real LocalStore in a temp dir."""

from __future__ import annotations

import json

import anthropic
import pytest
from temporalio.exceptions import ApplicationError

from activities._anthropic_errors import ProviderErrorType
from activities.contracts import ErrorType, SummarizeInput
from activities.llm import NATIVE_BETA, AnthropicSettings, LlmActivities, make_anthropic_client
from compactor.errors import InvalidInput
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.lifting.lift import dump_state, lift_state
from compactor.store import SessionLog, open_store
from compactor.testing import FakeAnthropic, Fault
from compactor.testing.model_text import count_request_tokens, split_fenced

CONSTRAINT = "Never push to main."


def session_events(rounds: int = 4, tool_text: str = "5 passed in 0.1s") -> list[Event]:
    ev: list[Event] = []
    n = 0

    def add(role: str, blocks: list) -> None:
        nonlocal n
        n += 1
        ev.append(Event(id=f"e{n}", role=role, blocks=blocks))

    add("user", [TextBlock(text=f"Fix the failing parser test in src/parser.py. {CONSTRAINT}")])
    for r in range(rounds):
        add("assistant", [ToolUseBlock(id=f"t{r}", name="bash", input={"command": f"pytest -q tests/test_p{r}.py"})])
        add("user", [ToolResultBlock(tool_use_id=f"t{r}", content=[TextBlock(text=tool_text + " " + "x" * 400)])])
        add("assistant", [TextBlock(text=f"Round {r} done; the tests pass.")])
        add("user", [TextBlock(text=f"Next, handle case {r + 1} as well.")])
    add("assistant", [TextBlock(text="Working on it.")])
    return ev


def make_session(store, session: str, events: list[Event], covers_end: int | None = None) -> SummarizeInput:
    log = SessionLog(store, "t1", session)
    log.append(events)
    stored = log.read_events()
    end = covers_end or stored[-1].seq
    state_key = f"t/t1/s/{session}/work/state.json"
    store.put(state_key, json.dumps(dump_state(lift_state(stored[:end]))).encode())
    return SummarizeInput(
        tenant="t1", session=session, snapshot_version=stored[-1].seq, covers_end=end,
        prev_checkpoint=None, state_key=state_key, budget_tokens=1500, model="claude-test",
        mode="template", output_key=f"t/t1/s/{session}/work/summary.json",
    )


@pytest.fixture
def fake():
    with FakeAnthropic() as f:
        yield f


@pytest.fixture
def store(tmp_path):
    return open_store(f"file://{tmp_path}")


def acts(fake, store, **settings) -> LlmActivities:
    client = anthropic.AsyncAnthropic(api_key="sk-unit", base_url=fake.base_url, max_retries=0)
    return LlmActivities(client, store, AnthropicSettings(**settings))


async def test_template_summary_is_written_with_usage_and_cached_prefix(fake, store):
    inp = make_session(store, "s1", session_events())
    a = acts(fake, store)
    out = await a.summarize_anthropic(inp)
    doc = json.loads(store.get(inp.output_key)[0])
    assert CONSTRAINT in doc["summary"]
    assert any(CONSTRAINT in c for c in doc["sections"]["Constraints (verbatim)"])
    assert doc["native"] is None
    assert out.summary_tokens > 0 and out.input_tokens > 0 and out.output_tokens > 0
    assert out.dropped_rounds == 0 and out.model == "claude-test"
    calls = fake.calls()
    assert len(calls) == 1 and calls[0].body["stream"] is True
    assert calls[0].body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert len(fake.calls("/v1/messages/count_tokens")) == 1
    assert out.cache_creation_tokens > 0 and out.cache_read_tokens == 0
    # the same stable prefix for another session is read from the cache
    out2 = await a.summarize_anthropic(make_session(store, "s2", session_events(2)))
    assert out2.cache_read_tokens == out.cache_creation_tokens


async def test_prompt_too_long_drops_oldest_rounds_and_succeeds(fake, store):
    inp = make_session(store, "s1", session_events(rounds=6))
    # Measure the full prompt, then allow a little less than it.
    await acts(fake, store).summarize_anthropic(inp)
    limit = count_request_tokens(fake.calls("/v1/messages/count_tokens")[0].body) - 150
    fake.reset()
    fake.max_prompt_tokens = limit
    out = await acts(fake, store).summarize_anthropic(inp)
    assert out.dropped_rounds >= 1
    statuses = [c.status for c in fake.calls()]
    assert statuses[0] == 400 and statuses[-1] == 200 and len(statuses) <= 4
    last = fake.calls()[-1].body["messages"][0]["content"]
    _, data = split_fenced("\n".join(b["text"] for b in last))
    assert CONSTRAINT not in data["transcript"]  # its round was dropped ...
    doc = json.loads(store.get(inp.output_key)[0])
    assert CONSTRAINT in doc["summary"]  # ... and the lifted state kept it


async def test_prompt_that_never_fits_fails_non_retryably_after_three_shrinks(fake, store):
    inp = make_session(store, "s1", session_events(rounds=8))
    fake.push(*[Fault.prompt_too_long(excess=20)] * 5)  # each answer: just over the maximum
    with pytest.raises(ApplicationError) as ei:
        await acts(fake, store).summarize_anthropic(inp)
    assert ei.value.type == ErrorType.SUMMARIZER_FAILED and ei.value.non_retryable
    assert "in 3 tries" in ei.value.message
    assert [c.status for c in fake.calls()] == [400] * 4  # the first try + 3 shrinks, no more


async def test_prompt_too_long_with_one_round_left_gives_up_at_once(fake, store):
    inp = make_session(store, "s1", session_events(rounds=8))
    fake.max_prompt_tokens = 10
    with pytest.raises(ApplicationError) as ei:
        await acts(fake, store).summarize_anthropic(inp)
    assert ei.value.type == ErrorType.SUMMARIZER_FAILED and ei.value.non_retryable
    assert "only one round" in ei.value.message
    assert len(fake.calls()) == 2  # everything but the last round dropped at once, then stop


async def test_count_tokens_shrinks_before_calling(fake, store):
    inp = make_session(store, "s1", session_events(rounds=6))
    await acts(fake, store).summarize_anthropic(inp)
    full = count_request_tokens(fake.calls("/v1/messages/count_tokens")[0].body)
    fake.reset()
    out = await acts(fake, store, max_input_tokens=full - 150).summarize_anthropic(inp)
    assert out.dropped_rounds >= 1
    assert all(c.status == 200 for c in fake.calls())  # never sent an oversized prompt


async def test_count_tokens_unreachable_falls_back_to_local_count(fake, store):
    inp = make_session(store, "s1", session_events())
    fake.push(Fault.server_error(500, endpoint="count_tokens"))
    out = await acts(fake, store).summarize_anthropic(inp)
    assert out.summary_tokens > 0
    assert [c.status for c in fake.calls("/v1/messages/count_tokens")] == [500]


async def test_stream_cut_midway_is_a_retryable_failure_and_writes_nothing(fake, store):
    inp = make_session(store, "s1", session_events())
    fake.push(Fault.cut_stream(after_deltas=2))
    with pytest.raises(ApplicationError) as ei:
        await acts(fake, store).summarize_anthropic(inp)
    assert ei.value.type == ProviderErrorType.STREAM_INCOMPLETE and not ei.value.non_retryable
    assert store.head(inp.output_key) is None


async def test_rate_limit_maps_to_retry_after(fake, store):
    inp = make_session(store, "s1", session_events())
    fake.push(Fault.rate_limit(retry_after=4))
    with pytest.raises(ApplicationError) as ei:
        await acts(fake, store).summarize_anthropic(inp)
    assert ei.value.type == ProviderErrorType.RATE_LIMITED
    assert ei.value.next_retry_delay is not None and ei.value.next_retry_delay.total_seconds() == 4


async def test_native_compaction_block_is_stored_verbatim(fake, store):
    inp = make_session(store, "s1", session_events()).model_copy(update={"mode": "native"})
    out = await acts(fake, store).summarize_native(inp)
    doc = json.loads(store.get(inp.output_key)[0])
    assert doc["native"]["type"] == "compaction"
    assert doc["native"]["signature"].startswith("sig_")
    assert doc["native"]["content"] == doc["summary"]
    call = fake.calls()[-1]
    assert NATIVE_BETA in call.headers["anthropic-beta"]
    assert call.body["compaction"]["type"] == "summarize"
    assert out.input_tokens > 0


async def test_without_a_client_the_activity_fails_fast_and_non_retryably(store):
    a = LlmActivities(None, store, unavailable="ANTHROPIC_API_KEY is not set")
    inp = make_session(store, "s1", session_events(1))
    with pytest.raises(ApplicationError) as ei:
        await a.summarize_anthropic(inp)
    assert ei.value.non_retryable and "ANTHROPIC_API_KEY" in ei.value.message


def test_client_factory_turns_retries_off_and_reads_env(monkeypatch, fake):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    c = make_anthropic_client(AnthropicSettings(timeout_s=42))
    assert c.max_retries == 0
    assert str(c.base_url).rstrip("/") == fake.base_url
    assert c.timeout.read == 42
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(InvalidInput):
        make_anthropic_client(AnthropicSettings())
    with pytest.raises(InvalidInput):
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
        make_anthropic_client(AnthropicSettings(timeout_s=600))


def test_settings_from_env_and_worker_settings(monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setenv("COMPACTOR_ANTHROPIC_TIMEOUT_S", "33")
    monkeypatch.setenv("COMPACTOR_ANTHROPIC_MAX_INPUT_TOKENS", "5000")
    cfg = AnthropicSettings.from_settings(SimpleNamespace(model="claude-x"))
    assert (cfg.timeout_s, cfg.max_input_tokens, cfg.model) == (33, 5000, "claude-x")
    cfg2 = AnthropicSettings.from_settings(SimpleNamespace(model="m", anthropic_timeout_s=12.0))
    assert cfg2.timeout_s == 12.0


def test_defaults_fit_inside_the_workflows_llm_timeouts():
    from activities.contracts import LLM_HEARTBEAT, LLM_START_TO_CLOSE

    cfg = AnthropicSettings()
    assert cfg.timeout_s < LLM_START_TO_CLOSE.total_seconds()
    assert cfg.heartbeat_s < LLM_HEARTBEAT.total_seconds() / 2
