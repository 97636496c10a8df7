"""The picked lifted state dumped with its items let go of as they are dumped (issue 17, memory:
the result's dump at 300k events) is the same JSON as ``model_dump``, and the compaction's
outcome (view, checkpoint, record, artifacts) is the one of a plain dump."""

from __future__ import annotations

import gc
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from compactor.bench.scale import small_session_lines
from compactor.bench.synthetic import synthetic_sessions
from compactor.engine import candidates
from compactor.engine import compact as engine
from compactor.engine.candidates import dump_releasing
from compactor.engine.policy import make_policy
from compactor.events import Event
from compactor.lifting.lift import Lifter
from tests.conftest import corpus_files, fixture_sessions
from tests.unit.test_engine_release import _outcome


def _generated(n: int) -> list[Event]:
    from compactor.importers import import_file

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "small.jsonl"
        path.write_text("".join(line if line.endswith("\n") else line + "\n" for line in small_session_lines(n)))
        return import_file(path).events


def _sessions() -> list[list[Event]]:
    from compactor.importers import import_file

    out = [evs for _, evs in synthetic_sessions(3, seed=29)] + [_generated(3000)]
    out += fixture_sessions()
    out += [import_file(p).events for p in corpus_files()]
    return out


@pytest.mark.parametrize("chunk", [3, 4096])
def test_the_dump_is_model_dumps(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(candidates, "_CHUNK", chunk)
    long_lists = 0
    for events in _sessions():
        lifter = Lifter(sorted(events, key=lambda e: e.seq))
        want = lifter.state_at(None).model_dump(mode="json")
        state = lifter.state_at(None)
        shared = state.commands  # (a list another holder reads: left as it was)
        before = list(shared)
        assert dump_releasing(state) == want
        assert shared == before
        long_lists += sum(type(v) is list and len(v) > chunk for v in want.values())
    assert long_lists > 10 or chunk > 3000  # (no session here has 4,096 items of a kind)


def test_the_compactions_outcome_is_a_plain_dumps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(candidates, "_CHUNK", 5)
    summarized = 0
    for events in _sessions()[:12]:
        for target in (2000, 8000):
            got = _outcome(engine.compact(events, make_policy("default"), target, session="s"))
            with monkeypatch.context() as m:
                m.setattr(candidates, "dump_releasing", lambda s: s.model_dump(mode="json"))
                want = _outcome(engine.compact(events, make_policy("default"), target, session="s"))
            assert got == want
            summarized += bool(got[1] and got[1]["summary"])
    assert summarized > 5


def test_the_dump_lets_go_of_the_items_as_it_goes() -> None:
    """The traced peak of the dump of a state nothing else holds stays well under the items'
    memory plus their dump (what ``model_dump`` held at once)."""
    events = _generated(20_000)

    def peak(dump: Any) -> tuple[int, int]:
        state = Lifter(events).state_at(None)  # (the lifter let go of: the state alone holds its items)
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            out = dump(state)
            del state
            now, top = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert out["commands"]
        return top - base, now - base

    plain_peak, plain_kept = peak(lambda s: s.model_dump(mode="json"))
    peak_releasing, kept = peak(dump_releasing)
    assert peak_releasing < plain_peak - (plain_peak - plain_kept) // 2
