"""The engine clears lazily (issue 17): a result of one text alone in its event gets a
``layers.ClearedText`` (the result, its text's digest and size), whose copy and ref are made
only when a checkpoint shows the event (``realize_cleared``), its count then too, and the
digests' tokens are counted in bulk for ``freed_tokens``. What a user sees must be what the
eager layer gives: the same blocks (values, fields-set, dumps), counts, artifacts and freed
tokens from the layer, and the same view, checkpoint, record and artifacts from ``compact`` -
on generated, fixture and corpus sessions, successive compactions, and a cleared view chosen
without a summary."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import pytest

from compactor.bench.synthetic import synthetic_sessions
from compactor.engine import compact as engine
from compactor.engine.layers import (
    LAYER_CLEAR,
    ClearedText,
    _hex_tokens,
    _hex_tokens_sum,
    clear_old_tool_results,
    externalize_tool_results,
    realize_cleared,
)
from compactor.engine.policy import make_policy
from compactor.events import Event
from compactor.importers import import_file
from compactor.tokens import count_blocks
from tests.conftest import corpus_files, fixture_sessions
from tests.unit.test_engine_counts import _checks
from tests.unit.test_engine_release import _outcome

POLICY = make_policy("default").model_copy(update={"clear_tool_results_after": 0})


def _same_blocks(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w) and g == w
        assert g.__pydantic_fields_set__ == w.__pydantic_fields_set__
        assert list(vars(g)) == list(vars(w))  # field order: the dumps' key order
        assert g.model_dump_json() == w.model_dump_json() and g.model_dump() == w.model_dump()
        for gc, wc in zip(getattr(g, "content", []), getattr(w, "content", [])):
            assert type(gc) is type(wc) and gc == wc and list(vars(gc)) == list(vars(wc))
            assert gc.__pydantic_fields_set__ == wc.__pydantic_fields_set__


def _check(events: list[Event], keep: int = 2) -> int:
    """The lazy layer against the eager one on ``events`` (externalized first, as the engine
    shows them); the number of lazily cleared events."""
    ext = externalize_tool_results(events, POLICY)
    shown = [e.with_(blocks=ext.replacements[e.seq], tokens=None) if e.seq in ext.replacements else e
             for e in events]
    eager = clear_old_tool_results(shown, POLICY, keep=keep)
    lazy = clear_old_tool_results(shown, POLICY, keep=keep, lazy=True)
    assert (lazy.items, lazy.freed_tokens, lazy.artifacts) == (eager.items, eager.freed_tokens, eager.artifacts)
    assert list(lazy.replacements) == list(eager.replacements)
    n = 0
    for seq, want in eager.replacements.items():
        got = lazy.replacements[seq]
        if type(got) is ClearedText:
            n += 1
            assert seq not in lazy.counts and got.tokens() == eager.counts[seq] == count_blocks(want)
            got = got.blocks()
        else:
            assert lazy.counts[seq] == eager.counts[seq]
        _same_blocks(got, want)
    # made for the events after a cut only, written back (with their counts) in order
    seqs = list(eager.replacements)
    for cut in ([0, seqs[len(seqs) // 2], seqs[-1]] if seqs else [0]):
        repl = dict(lazy.replacements)
        counted = {s: (b, lazy.counts.get(s)) for s, b in repl.items()}
        kept = realize_cleared(repl, cut, counted)
        assert list(kept) == [s for s in seqs if s > cut]
        for s, b in kept.items():
            _same_blocks(b, eager.replacements[s])
            assert repl[s] is b and counted[s] == (b, eager.counts[s])
        assert all(type(repl[s]) is ClearedText for s in seqs if s <= cut and type(lazy.replacements[s]) is ClearedText)
    return n


def test_a_generated_session_clears_lazily_as_eagerly(tmp_path: Path) -> None:
    from compactor.bench.scale import write_session

    write_session(tmp_path / "s.jsonl", 3_000)
    assert _check(import_file(tmp_path / "s.jsonl").events) > 1_000


def test_fixture_and_synthetic_sessions_clear_lazily_as_eagerly() -> None:
    n = sum(_check(events, keep=0) for events in fixture_sessions())
    n += sum(_check(events, keep=1) for _, events in synthetic_sessions(4, seed=3))
    assert n > 20


@pytest.mark.corpus
@pytest.mark.skipif(not corpus_files(), reason="corpus not present")
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus_sessions_clear_lazily_as_eagerly(path: Path) -> None:
    _check(import_file(path).events, keep=0)


def test_the_digests_tokens_in_bulk_are_their_sum() -> None:
    rnd = random.Random(17)
    digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(3_000)]
    for alphabet in ("abcdef", "0123456789", "0a", "9f", "0123456789abcdef"):
        digests += ["".join(rnd.choice(alphabet) for _ in range(64)) for _ in range(200)]
    assert _hex_tokens_sum(digests) == sum(map(_hex_tokens, digests))
    for d in digests[::50]:
        assert _hex_tokens_sum([d]) == _hex_tokens(d)


def test_the_bulk_count_reads_every_length_of_digit_run() -> None:
    """Each run of digits counts ceil(length / 3) pieces wherever it stands - the digest's
    start, middle, end, its first 12 characters (the short part) - for every length of run,
    each digest alone and all at once (the bulk count's "000"s and what is left of a run)."""
    rnd = random.Random(3)
    digests = []
    for n in range(1, 65):
        for at in {0, 5, 11, 12, 30, 64 - n}:
            if at + n > 64:
                continue
            letters = [rnd.choice("abcdef") for _ in range(64)]
            letters[at:at + n] = [rnd.choice("0123456789") for _ in range(n)]
            digests.append("".join(letters))
    for d in digests:
        assert _hex_tokens_sum([d]) == _hex_tokens(d), d
    assert _hex_tokens_sum(digests) == sum(map(_hex_tokens, digests))


def _eager_and_lazy(monkeypatch: pytest.MonkeyPatch, events: list[Event], policy: str, target: int | None,
                    prev: Any = None) -> tuple[Any, Any, engine.CompactResult]:
    res = engine.compact(events, make_policy(policy), target, prev, session="s")
    monkeypatch.setattr(engine, "_clear_lazily", clear_old_tool_results)
    eager = _outcome(engine.compact(events, make_policy(policy), target, prev, session="s"))
    monkeypatch.undo()
    return _outcome(res), eager, res


def _engine_checks(monkeypatch: pytest.MonkeyPatch, events: list[Event], policies: tuple[str, ...],
                   targets: tuple[int | None, ...], seen: list[list[str]]) -> None:
    """Lazy and eager outcomes equal, also for the compaction after (``test_engine_counts``'s
    loop); ``seen`` gets each outcome's layers."""
    _checks(monkeypatch, events, policies, targets, set(), both=_eager_and_lazy, chosen=seen)


def _cleared_target(events: list[Event]) -> int:
    """A target the cleared view meets: the cleared view's own count."""
    policy = make_policy("default")
    p = engine.plan(events, policy, 10**9, None)
    res = engine.apply_layers(events, p.model_copy(update={"layers": [LAYER_CLEAR]}), policy)
    return res.tokens_after


def test_the_engine_gives_the_eager_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    for _, events in synthetic_sessions(3, seed=5):
        _engine_checks(monkeypatch, events, ("default", "codex"), (None, 2_000, 6_000, _cleared_target(events)),
                       seen)
    assert any(LAYER_CLEAR in s and "summary" in s for s in seen)
    assert [LAYER_CLEAR] in seen or ["externalize", LAYER_CLEAR] in seen  # the cleared view chosen


def test_a_big_generated_session_gives_the_eager_outcome(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from compactor.bench.scale import write_session

    write_session(tmp_path / "s.jsonl", 4_000)
    events = import_file(tmp_path / "s.jsonl").events
    seen: list[list[str]] = []
    _engine_checks(monkeypatch, events, ("default",), (None, 20_000), seen)
    assert any(LAYER_CLEAR in s and "summary" in s for s in seen)  # (its refs outweigh its tiny results)


@pytest.mark.corpus
@pytest.mark.skipif(not corpus_files(), reason="corpus not present")
def test_the_engine_gives_the_eager_outcome_on_the_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    for path in corpus_files():
        _engine_checks(monkeypatch, import_file(path).events, ("default",), (None, 3_000), seen)
    assert any(LAYER_CLEAR in s for s in seen)
