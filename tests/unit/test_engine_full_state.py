"""``compact(..., full_state=False)``: the picked summary checkpoint keeps only the lifted state's
fields the checks read, not the dump of the whole state (issue 17: ~0.5 s of CPU and the run's
peak at 300k events, for ``compact --inline`` without ``--out``, which prints the record only).
Everything else a user sees is the same: the view, the record, the artifacts, the checkpoint but
its state; and the CLI's ``--json`` line and ``--out`` document are the ones of the full dump."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compactor.bench.synthetic import synthetic_sessions
from compactor.cli import main
from compactor.engine import compact as engine
from compactor.engine.policy import make_policy
from compactor.events import Event
from tests.conftest import corpus_files, fixture_sessions
from tests.unit.test_engine_release import _outcome
from tests.unit.test_result_dump import _generated


def _sessions() -> list[list[Event]]:
    from compactor.importers import import_file

    out = [evs for _, evs in synthetic_sessions(3, seed=17)] + [_generated(3000)]
    out += fixture_sessions()[:6]
    out += [import_file(p).events for p in corpus_files()[:3]]
    return out


def test_the_outcome_but_the_state_is_the_full_dumps() -> None:
    summarized = 0
    for events in _sessions():
        for policy in ("default", "codex"):
            for target in (None, 3_000):
                full = engine.compact(events, make_policy(policy), target, session="s")
                part = engine.compact(events, make_policy(policy), target, session="s", full_state=False)
                view, ckpt, record, arts = _outcome(full)
                view2, ckpt2, record2, arts2 = _outcome(part)
                assert (view2, record2, arts2) == (view, record, arts)
                if ckpt is None:
                    assert ckpt2 is None
                    continue
                state, state2 = ckpt.pop("state"), ckpt2.pop("state")
                assert ckpt2 == ckpt
                if "summary" in full.record.layers:
                    summarized += 1
                    # (what the checks read, as in the full dump; the rest left out)
                    assert state2 == {k: state[k] for k in engine._CHECKED_STATE}
                    assert len(state) > len(state2)
                else:
                    assert state2 == state
    assert summarized > 10


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    """The exit code and the printed JSON, its timings left out."""
    code = main(argv)
    printed = capsys.readouterr().out
    return code, _untimed(json.loads(printed)) if printed.strip() else None


def _untimed(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _untimed(v) for k, v in doc.items() if k != "durations_ms"}
    return [_untimed(v) for v in doc] if isinstance(doc, list) else doc


@pytest.mark.parametrize("policy", ["default", "codex"])
def test_the_cli_prints_and_writes_what_the_full_dump_gives(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    """``compact --inline --json`` (no dump) prints the line it printed with the dump; with
    ``--out`` the document holds the whole state, as before."""
    files = list(corpus_files()[:2])
    small = tmp_path / "small.jsonl"
    from compactor.bench.scale import small_session_lines

    small.write_text("".join(line if line.endswith("\n") else line + "\n" for line in small_session_lines(3000)))
    files.append(small)
    calls: list[bool] = []
    real = engine.compact

    def spy(*a: Any, **kw: Any) -> Any:
        calls.append(kw.get("full_state", True))
        return real(*a, **kw)

    monkeypatch.setattr(engine, "compact", spy)
    summarized = 0
    for f in files:
        argv = ["compact", "--inline", str(f), "--policy", policy, "--json", "--now", "2026-01-01T00:00:00Z"]
        for target in ([], ["--target-tokens", "3000"]):
            code, printed = _run(argv + target, capsys)
            assert calls[-1] is False
            with monkeypatch.context() as m:  # the same run, the state dumped whole
                m.setattr(engine, "compact", lambda *a, **kw: real(*a, **{**kw, "full_state": True}))
                code2, printed2 = _run(argv + target, capsys)
            assert (code, printed) == (code2, printed2)
            assert printed["status"] in ("committed", "noop")
            summarized += "summary" in printed["record"]["layers"]
            out = tmp_path / "out.json"
            _run(argv + target + ["--out", str(out)], capsys)
            assert calls[-1] is True
            doc = json.loads(out.read_text())
            if doc["checkpoint"] is not None and doc["checkpoint"]["summary"]:
                assert set(doc["checkpoint"]["state"]) > set(engine._CHECKED_STATE)
    assert summarized
