"""The identifier check of a growing session's later compactions (issue 17, k-th / first): the
index's verdict is the full search's, and it is reached without the work that grew with the
session - the previous state's walk, when the previous summary holds what the new one
restates, and the tool results' bodies, when the previous text holds it."""

from __future__ import annotations

import random

from compactor.engine import identifiers as ids
from compactor.engine.covered_text import CoveredText
from compactor.engine.invariants import check_identifiers
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.records import Checkpoint, SeqRange


def _growing(k: int) -> list[tuple[list[Event], Checkpoint | None, Checkpoint]]:
    """bench perf's growing session: (events the compaction sees, the previous checkpoint as
    the store gives it back, the checkpoint made) for each of ``k`` compactions."""
    from compactor.bench.perf import turns
    from compactor.engine.compact import compact
    from compactor.engine.policy import make_policy
    from compactor.tokens import with_tokens

    pol = make_policy("default")
    allev: list[Event] = []
    prev: Checkpoint | None = None
    out = []
    for i in range(k):
        allev += [e.with_(seq=len(allev) + j + 1) for j, e in enumerate(with_tokens(turns(40, prefix="g", start=i * 100)))]
        end = 0 if prev is None or prev.covers.empty else prev.covers.end
        evs = [e for e in allev if e.seq > end or e.kind == "pinned"]
        if prev is not None:
            prev = Checkpoint.model_validate_json(prev.model_dump_json())
        made = compact(evs, pol, 4_000, prev, tenant="t", session="grow").checkpoint
        assert made is not None
        out.append((evs, prev, made))
        prev = made
    return out


def test_later_compactions_check_without_the_previous_state_or_the_bodies() -> None:
    seen = 0
    for i, (evs, prev, made) in enumerate(_growing(6)):
        assert made.summary and not made.covers.empty
        full = check_identifiers(evs, made, prev)
        index = CoveredText(evs)
        fresh = Checkpoint.model_validate_json(prev.model_dump_json()) if prev is not None else None
        assert check_identifiers(evs, made, fresh, index) == full == []
        if fresh is None:
            continue
        facts = ids._prev_facts(fresh)
        # the summary restates earlier files inside words of the previous summary
        # (``src/app/core_0.py`` in ``src/app/core_0.py:12``): found there, not in the bodies
        assert not index._bulk_built, i
        assert facts._text is None, i  # the previous state not walked: its summary held all
        seen += 1
    assert seen == 5


def _event(seq: int, *blocks: object, role: str = "assistant") -> Event:
    return Event(seq=seq, id=f"e{seq}", kind="message", role=role, blocks=list(blocks))  # type: ignore[arg-type]


def test_each_source_of_an_identifier_is_searched_and_gives_the_full_verdict() -> None:
    """An identifier known only from the previous state (not its summary), inside a word of the
    previous summary, only from the artifact list, only from a tool result's body, only from a
    call's input JSON, or from nowhere: the index gives the full search's verdict, and walks
    the state or builds the bodies' words only for what needs them."""
    evs = [
        _event(1, TextBlock(text="please fix lib/app/main.py"), role="user"),
        _event(2, TextBlock(text="running"), ToolUseBlock(id="toolu_aaaaaaaa", name="bash",
                                                          input={"command": "cat lib/app/main.py"})),
        _event(3, ToolResultBlock(tool_use_id="toolu_aaaaaaaa",
                                  content=[TextBlock(text="see out/only_in_body.txt for details")]), role="user"),
        _event(4, TextBlock(text="done"), role="assistant"),
    ]
    prev = Checkpoint(id="p", tenant="t", session="s", covers=SeqRange(start=1, end=0),
                      summary="- edited (src/inside_word.py) twice",
                      state={"files": [{"path": "state/only_in_state.rs", "notes": ["x", {"deep": "a/b/deep_one.go"}]}]})
    stated = {
        "lib/app/main.py": ([], False, False),            # the events' calls
        "src/inside_word.py": ([], False, False),         # inside a word of the previous summary
        "state/only_in_state.rs": ([], True, False),      # the previous state: walked
        "a/b/deep_one.go": ([], True, False),
        "art/only_artifact.txt": ([], True, False),       # the artifact list (after the state)
        "out/only_in_body.txt": ([], True, True),         # a tool result's body: built
        "src/nowhere_at_all.py": (["src/nowhere_at_all.py"], True, True),
    }
    for ident, (unknown, walked, bulk) in stated.items():
        ck = Checkpoint(id="c", tenant="t", session="s", covers=SeqRange(start=1, end=3),
                        summary=f"- worked on {ident}", state={"artifacts": [{"uri": "art/only_artifact.txt"}]})
        fresh = prev.model_copy()  # (a new object: the memo starts empty)
        full = [v.detail for v in check_identifiers(evs, ck, fresh)]
        index = CoveredText(evs)
        fresh = prev.model_copy()
        got = [v.detail for v in check_identifiers(evs, ck, fresh, index)]
        assert got == full == unknown, ident
        assert (ids._prev_facts(fresh)._text is not None) is walked, ident
        assert index._bulk_built is bulk, ident


def test_occurs_in_calls_answers_occurs_or_leaves_it_to_it() -> None:
    """``occurs_in_calls`` True only where ``occurs`` is True; False where only the bodies hold
    it or nothing does; and asking it first does not change ``occurs``' answers."""
    from compactor.bench.synthetic import synthetic_sessions
    from compactor.engine.identifiers import _block_texts, _result_texts

    rnd = random.Random(3)
    compared = in_bodies = 0
    for _, events in synthetic_sessions(3, seed=5):
        texts = "\n".join(t for e in events for b in e.blocks for t in _block_texts(b))
        bulk = "\n".join(t for e in events for r in e.tool_results for t in _result_texts(r))
        probes = ["src/never_seen_anywhere.py"]
        for source in (texts, bulk):
            words = source.split()
            probes += rnd.sample(words, min(60, len(words)))
            probes += [source[i:i + 12].split("\n")[0] for i in rnd.sample(range(len(source)), 40) if source]
        index, plain = CoveredText(events), CoveredText(events)
        for p in filter(None, probes):
            first = index.occurs_in_calls(p)
            want = plain.occurs(p)
            assert want is (p in texts or p in bulk), p
            assert (first is True and want) or (first is False), p
            assert index.occurs(p) is want
            assert index.occurs_in_calls(p) is want  # (answered by occurs now)
            compared += 1
            in_bodies += want and first is False
    assert compared > 300 and in_bodies > 10


def test_collect_strings_is_every_string_in_order() -> None:
    class Text(str):
        pass

    class Items(list):  # type: ignore[type-arg]
        pass

    state = {"a": "x", "b": [1, "y", {"c": Text("z"), "d": [None, True, 2.5, ["w", {"e": "v"}]]}],
             "f": Items(["u", Items([Text("t")])]), "g": {}, "h": [], "i": ("not", "walked")}
    assert ids._strings(state) == ["x", "y", "z", "w", "v", "u", "t"]
    assert ids._strings("alone") == ["alone"]
    assert ids._strings(Items(["s", {"k": Text("r")}])) == ["s", "r"]
