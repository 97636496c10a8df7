"""``compact FILE --inline --summarizer anthropic`` runs the model summarizer in this process
(issue 14 item 2): the real ``anthropic`` client against the local Messages API server, the
same prompt, validation, completion and fallback as the activity, or a one-line refusal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor.bench.model_answers import PLACEHOLDER
from compactor.cli import main
from compactor.summarize import prompting
from compactor.testing import FakeAnthropic

SAMPLE = Path(__file__).resolve().parents[2] / "compactor" / "samples" / "demo-session.claude.jsonl"


@pytest.fixture
def fake(monkeypatch):
    with FakeAnthropic() as f:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-unit")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f.base_url)
        monkeypatch.delenv("COMPACTOR_SUMMARIZER", raising=False)
        yield f


def compact(capsys, tmp_path, *extra: str) -> tuple[int, dict, str]:
    out = tmp_path / "view.json"
    rc = main(["compact", str(SAMPLE), "--inline", "--target-tokens", "3000", "--out", str(out), *extra])
    _, err = capsys.readouterr()
    doc = json.loads(out.read_text()) if out.exists() else {}
    return rc, doc, err


def summary_of(doc: dict) -> str:
    first = doc["messages"][0]["content"]
    return "\n".join(b.get("text", "") for b in first if isinstance(b, dict))


def test_the_model_summary_is_used_inline_with_the_activitys_prompt(fake, capsys, tmp_path):
    rc, doc, _ = compact(capsys, tmp_path, "--summarizer", "anthropic")
    assert rc == 0
    rec = doc["record"]
    assert rec["summarizer"] == "anthropic" and rec["fallback_reason"] is None
    assert doc["checkpoint"]["summarizer"] == "anthropic"
    calls = fake.calls()
    assert len(calls) == 1
    body = calls[0].body
    assert body["system"][0]["text"] == prompting.SYSTEM_PROMPT
    assert rec["llm_calls"] and rec["llm_calls"][0]["input_tokens"] > 0
    # the budget the model is asked for leaves room for completion
    budget = int(body["messages"][0]["content"][0]["text"].split("at most ")[1].split()[0])
    assert 0 < budget < rec["target_tokens"]


def test_a_placeholder_answer_falls_back_and_the_record_says_structured(fake, capsys, tmp_path):
    fake.answer = PLACEHOLDER
    rc, doc, _ = compact(capsys, tmp_path, "--summarizer", "anthropic")
    assert rc == 0
    rec = doc["record"]
    assert rec["summarizer"] == "structured" and doc["checkpoint"]["summarizer"] == "structured"
    assert "empty or a placeholder" in rec["fallback_reason"]
    assert "placeholder" not in summary_of(doc).lower()


def test_an_empty_answer_falls_back_saying_it_was_empty(fake, capsys, tmp_path):
    fake.answer = ""
    rc, doc, _ = compact(capsys, tmp_path, "--summarizer", "anthropic")
    assert rc == 0 and doc["record"]["summarizer"] == "structured"
    assert "answer was empty" in doc["record"]["fallback_reason"]


def test_without_a_key_the_model_path_refuses_in_one_line(fake, capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    rc, doc, err = compact(capsys, tmp_path, "--summarizer", "anthropic")
    assert rc == 2 and doc == {}
    assert len(err.strip().splitlines()) == 1 and "ANTHROPIC_API_KEY" in err and "Traceback" not in err
    assert fake.calls() == []


def test_native_compaction_is_refused_inline(fake, capsys, tmp_path):
    rc, doc, err = compact(capsys, tmp_path, "--summarizer", "anthropic-native")
    assert rc == 2 and doc == {} and "drop --inline" in err


def test_auto_picks_anthropic_with_a_key_and_structured_without(fake, capsys, tmp_path, monkeypatch):
    rc, doc, err = compact(capsys, tmp_path)
    assert rc == 0 and doc["record"]["summarizer"] == "anthropic" and "auto: ANTHROPIC_API_KEY is set" in err
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    rc, doc, err = compact(capsys, tmp_path)
    assert rc == 0 and doc["record"]["summarizer"] == "structured" and "auto: no ANTHROPIC_API_KEY" in err


def test_no_room_beside_the_quoted_request_means_no_model_call(fake):
    """After a mid-turn cut the service quotes the latest request whole; when the summary's
    budget leaves under ``MIN_MODEL_ROOM`` tokens beside it (raze at 5%: 45 of 935), no model is
    asked (its answer could not be shown) and the reason says so in counts; with room, it is."""
    import asyncio

    import anthropic
    from temporalio.exceptions import ApplicationError

    from activities.llm import AnthropicSettings, LlmActivities
    from compactor.events import Event, TextBlock
    from compactor.lifting.lift import lift_state
    from compactor.tokens import count_text

    task = ("Review this plan for media support in Document. " + "Each media item becomes one Document. " * 100).strip()
    ev = [Event(seq=1, id="e1", role="user", blocks=[TextBlock(text=task)]),
          Event(seq=2, id="e2", role="assistant", blocks=[TextBlock(text="Reading knowledge.py first.")])]
    state = json.loads(lift_state(ev).model_dump_json())
    llm = LlmActivities(anthropic.AsyncAnthropic(api_key="sk-unit", base_url=fake.base_url, max_retries=0),
                        None, AnthropicSettings())
    quoted = count_text(task) + 24
    with pytest.raises(ApplicationError, match="no room for a model summary") as info:
        asyncio.run(llm.template_summary(state, ev, covers_end=2, budget_tokens=quoted + 50, latest_full=True))
    assert "50 of the summary's" in info.value.message and "Each media" not in info.value.message
    assert fake.calls() == []
    asyncio.run(llm.template_summary(state, ev, covers_end=2, budget_tokens=quoted + prompting.MIN_MODEL_ROOM,
                                     latest_full=True))
    assert len(fake.calls()) == 1
