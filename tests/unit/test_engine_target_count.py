"""``compact --inline`` counts the view once: the count its default target is made from
(``measure.quick_view_tokens(events, placed=True)``) is handed to the engine's plan
(``engine.compact(..., tokens_before=)``) instead of made again (issue 17). The outcome is the
one of the old path - the target from ``view_tokens(events)``, the plan counting for itself -
on the corpus, generated sessions and sessions with late results; a count that is not the
plan's (events out of order, copies, a previous checkpoint) is not taken."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from compactor.bench.scale import write_session
from compactor.bench.synthetic import synthetic_sessions
from compactor.cli import main
from compactor.cli.outcome import default_target
from compactor.engine import compact as engine
from compactor.engine import measure
from compactor.engine.policy import make_policy
from compactor.events import Event
from tests.conftest import corpus_files
from tests.unit.test_engine_counts import _late_session
from tests.unit.test_engine_release import _outcome


def _cli_doc(path: Path, out: Path, *extra: str) -> dict[str, Any]:
    assert main(["compact", "--inline", str(path), "--out", str(out), "--now", "2026-01-01T00:00:00Z",
                 *extra]) in (0, 1)
    doc = json.loads(out.read_text())
    doc["record"].pop("durations_ms")
    return doc


def _late_transcript(path: Path) -> None:
    """A Claude Code transcript whose results arrive after the conversation moved on (the view
    shows them as text: the plan's count is not ``view_tokens`` of the events)."""
    lines: list[dict[str, Any]] = []

    def say(role: str, content: Any) -> None:
        n = len(lines) + 1
        lines.append({"type": role, "message": {"role": role, "content": content}, "uuid": f"u-{n:05d}",
                      "sessionId": "late", "timestamp": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.000Z"})

    say("user", "Fix the flaky tests in src/. Do not touch the CI config.")
    for i in range(30):
        uid = f"toolu_{i:08d}"
        say("assistant", [{"type": "text", "text": f"Run {i}."},
                          {"type": "tool_use", "id": uid, "name": "Bash", "input": {"command": f"pytest t{i}.py"}}])
        if i % 6 == 2:
            say("user", "ok, continue")
            say("assistant", [{"type": "text", "text": "Moving on while it runs."}])
        say("user", [{"type": "tool_result", "tool_use_id": uid, "content": f"{i} passed\n" * 40}])
    say("user", "Now summarize what failed.")
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def _without_count(compact: Any) -> Any:
    def run(*args: Any, tokens_before: int | None = None, **kwargs: Any) -> engine.CompactResult:
        return compact(*args, **kwargs)
    return run


def test_the_cli_gives_the_old_paths_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    small = tmp_path / "small.jsonl"
    write_session(small, 600)
    late = tmp_path / "late.jsonl"
    _late_transcript(late)
    files = [small, late, *corpus_files()[:6]]
    for path in files:
        handed = _cli_doc(path, tmp_path / "a.json")
        # the old path: the target from view_tokens, and the plan counts for itself
        monkeypatch.setattr(measure, "quick_view_tokens", lambda events, placed=False: None)
        monkeypatch.setattr(engine, "compact", _without_count(engine.compact))
        old = _cli_doc(path, tmp_path / "b.json")
        monkeypatch.undo()
        assert handed == old, path.name
    capsys.readouterr()


def _sessions() -> list[list[Event]]:
    return [events for _, events in synthetic_sessions(3, seed=11)] + [_late_session()]


def test_a_handed_count_gives_the_plans_outcome() -> None:
    for events in _sessions():
        for policy in ("default", "codex"):
            counted = measure.quick_view_tokens(events, placed=True)
            target = default_target(measure.view_tokens(events) if counted is None else counted)
            handed = engine.compact(events, make_policy(policy), target, session="s", tokens_before=counted)
            own = engine.compact(events, make_policy(policy), target, session="s")
            assert _outcome(handed) == _outcome(own)
            if counted is not None:  # (taken: else the comparison shows nothing)
                assert handed.record.tokens_before == counted


def test_a_count_of_other_events_is_not_taken() -> None:
    """Shuffled events are sorted by ``prepare`` (another order: another count), uncounted
    ones copied, and with a previous checkpoint the view is not the events: a wrong count
    handed over changes nothing."""
    events = _sessions()[0]
    policy = make_policy("default")
    shuffled = list(events)
    random.Random(3).shuffle(shuffled)
    uncounted = [e.with_(tokens=None) for e in events]
    for evs in (shuffled, uncounted, events[:-1] + [events[-1].with_(tokens=None)]):
        assert _outcome(engine.compact(evs, policy, 3_000, session="s", tokens_before=123)) == \
            _outcome(engine.compact(evs, policy, 3_000, session="s"))
    first = engine.compact(events, policy, 3_000, session="s")
    assert first.checkpoint is not None and not first.checkpoint.covers.empty
    later = [e for e in events if e.kind == "pinned" or e.seq > first.checkpoint.covers.end]
    assert _outcome(engine.compact(later, policy, 3_000, first.checkpoint, session="s", tokens_before=123)) == \
        _outcome(engine.compact(later, policy, 3_000, first.checkpoint, session="s"))
