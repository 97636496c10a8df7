"""The identifier check's shared index (``engine.covered_text``) gives the full search's
verdict: for every identifier a session states, at every cut, with pinned events, a previous
checkpoint and identifiers that occur only after the cut or nowhere."""

from __future__ import annotations

import random

from compactor.bench.synthetic import synthetic_sessions
from compactor.engine.covered_text import CoveredText
from compactor.engine.invariants import check_identifiers, identifiers
from compactor.events import Event, TextBlock
from compactor.records import Checkpoint, SeqRange
from tests.conftest import corpus_files


def _sessions() -> list[list[Event]]:
    from compactor.importers import import_file

    out = [evs for _, evs in synthetic_sessions(3, seed=11)]
    out += [import_file(p).events for p in corpus_files()[:6]]
    return out


def test_index_gives_the_full_searchs_verdict_at_every_cut() -> None:
    rnd = random.Random(7)
    compared = rejected = 0
    for events in _sessions():
        evs = sorted(events, key=lambda e: e.seq)
        found = sorted({i for e in evs for i in identifiers(e.text)} |
                       {i for e in evs for u in e.tool_uses for i in identifiers(str(u.input))})
        if not found:
            continue
        stated = rnd.sample(found, min(40, len(found))) + ["src/never_seen_anywhere.py", "toolu_0000deadbeef"]
        summary = "\n".join(f"- worked on {i}" for i in stated)
        prev = Checkpoint(id="p", tenant="t", session="s", covers=SeqRange(start=1, end=0),
                          summary="earlier: see docs/previous_only.md", state={"files": ["lib/prev_only.rs"]})
        index = CoveredText(evs)
        seqs = [e.seq for e in evs]
        for end in sorted(rnd.sample(seqs, min(8, len(seqs)))) + [seqs[-1]]:
            for p in (None, prev):
                ck = Checkpoint(id="c", tenant="t", session="s", covers=SeqRange(start=1, end=end),
                                summary=summary + "\n- docs/previous_only.md", state={"artifacts": []})
                full = check_identifiers(evs, ck, p)
                assert check_identifiers(evs, ck, p, index) == full, end
                compared += 1
                rejected += bool(full)
    assert compared > 20 and rejected == compared  # the unseen ones are always rejected


def test_pinned_events_count_wherever_they_are() -> None:
    evs = [Event(seq=1, id="a", kind="message", role="user", blocks=[TextBlock(text="fix src/a.py")]),
           Event(seq=2, id="b", kind="message", role="assistant", blocks=[TextBlock(text="ok src/b.py")]),
           Event(seq=3, id="c", kind="pinned", role="user", blocks=[TextBlock(text="rules in docs/RULES.md")])]
    ck = Checkpoint(id="c", tenant="t", session="s", covers=SeqRange(start=1, end=1),
                    summary="- src/a.py\n- docs/RULES.md\n- src/b.py\n- src/c.py")
    got = check_identifiers(evs, ck, None, CoveredText(evs))
    assert got == check_identifiers(evs, ck, None)
    # src/b.py is after the cut but in the session (the tail the view shows): not invented
    assert [v.detail for v in got] == ["src/c.py"]


def test_validate_with_the_per_cut_facts_gives_the_walks_violations() -> None:
    """Batches, constraints, unknown outcomes, ranges, the latest request and the summary's
    size read from the index give the violations walking the events per candidate gives: at
    every 5th cut (splitting calls from their results too), replacements that keep or drop a result, and a view that shows a covered event."""
    from compactor.engine.boundary import body, safe_cut_points_both
    from compactor.engine.invariants import validate
    from compactor.engine.layers import clear_old_tool_results
    from compactor.engine.policy import make_policy
    from compactor.engine.view import build_view
    from compactor.tokens import with_tokens

    codes: set[str] = set()
    all_planned: set[str] = set()
    for events in _sessions():
        evs = with_tokens(sorted(events, key=lambda e: e.seq))
        repl = clear_old_tool_results(evs, make_policy("default"), keep=3).replacements
        text_repl = {s: [TextBlock(text="late result as text")] for s in list(repl)[-2:]}
        index = CoveredText(evs)
        shared = CoveredText(evs, body=(0, body(evs, 0)))  # the engine's: its body list given
        # the engine's since issue 17: the calls learnt by the plan's walk for the safe cuts
        planned_body, calls = body(evs, 0), {}
        safe_cut_points_both(evs, 0, body_events=planned_body, calls=calls)
        planned = CoveredText(evs, body=(0, planned_body))
        planned.take_calls(0, calls)
        assert not evs or ("call_facts", 0) in planned._memo  # (taken, not walked again)
        planned_codes: set[str] = set()
        for end in [e.seq for e in evs][::5]:
            for replacements in ({}, repl, {**repl, **text_repl}):
                kept = {s: b for s, b in replacements.items() if s > end}
                ckpt = Checkpoint(id="c", tenant="t", session="s", covers=SeqRange(start=1, end=end),
                                  summary="short", state={"constraints": [], "unknown_actions": []},
                                  replacements=kept)
                view = build_view(evs, ckpt)
                if end % 3 == 0 and len(view) > 2:
                    view = [*view, next(e for e in evs if e.seq <= end and e.kind != "pinned")]
                got = validate(events=evs, checkpoint=ckpt, view=view, target_tokens=None, index=index)
                want = validate(events=evs, checkpoint=ckpt, view=view, target_tokens=None)
                assert got == want, end
                assert validate(events=evs, checkpoint=ckpt, view=view, target_tokens=None, index=shared) == want
                from_plan = validate(events=evs, checkpoint=ckpt, view=view, target_tokens=None, index=planned)
                assert from_plan == want, end
                codes |= {v.code for v in got}
                planned_codes |= {v.code for v in from_plan}
        all_planned |= planned_codes
    assert {"event_duplicated", "latest_request_missing", "constraint_dropped"} <= codes, codes
    assert codes & {"tool_pairing", "batch_split"}, codes
    assert all_planned == codes


def test_identifiers_of_the_previous_state_keep_the_full_searchs_verdict() -> None:
    """A summary that restates the previous checkpoint's state (whole words of it, parts of
    its words, its artifact list) and invents a few: the index's answer - the previous text's
    words first, its searches remembered - is the full search's, for every candidate checked
    against the same previous checkpoint (the second one answered from the memo)."""
    from compactor.bench.perf import turns
    from compactor.engine.compact import compact
    from compactor.engine.policy import make_policy
    from compactor.tokens import with_tokens

    first = [e.with_(seq=i + 1) for i, e in enumerate(with_tokens(turns(30, prefix="p")))]
    prev = compact(first, make_policy("default"), 3_000, tenant="t", session="s").checkpoint
    assert prev is not None and prev.state
    more = [e.with_(seq=len(first) + i + 1) for i, e in enumerate(with_tokens(turns(10, prefix="q", start=50)))]
    evs = [e for e in [*first, *more] if e.seq > prev.covers.end]
    in_prev = sorted(identifiers("\n".join([prev.summary, *_all_strings(prev.state)])))
    assert len(in_prev) > 20
    parts = sorted({i.rsplit("/", 1)[-1] for i in in_prev if "/" in i and "." in i.rsplit("/", 1)[-1]})
    stated = [*in_prev, *parts, "src/app/mod_99999.py", "lib/nowhere/at_all.rs", "art/only_here.txt"]
    summary = "\n".join(f"- {i}" for i in stated)
    index = CoveredText(evs)
    end = evs[len(evs) // 2].seq
    verdicts = []
    for state in ({"artifacts": [{"uri": "art/only_here.txt"}]}, {"artifacts": []}):
        ck = Checkpoint(id="c", tenant="t", session="s", covers=SeqRange(start=1, end=end),
                        summary=summary, state=state)
        full = check_identifiers(evs, ck, prev)
        assert check_identifiers(evs, ck, prev, index) == full
        assert check_identifiers(evs, ck, prev, index) == full  # from the memo
        verdicts.append(sorted(v.detail for v in full))
    assert verdicts == [["lib/nowhere/at_all.rs", "src/app/mod_99999.py"],
                        ["art/only_here.txt", "lib/nowhere/at_all.rs", "src/app/mod_99999.py"]]


def _all_strings(obj: object) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _all_strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _all_strings(v)]
    return []


def test_summary_identifiers_line_by_line_are_the_whole_texts() -> None:
    """The identifier check reads a summary line by line, remembering each line's answer: the
    same identifiers as one pass over the text, for texts of the sessions, lines of them shuffled
    together, and lines whose identifiers depend on the line before (a URL's scheme ending it)
    or are cut short at the line's end - also when the lines are answered from the memo."""
    from compactor.engine import identifiers as identifiers_mod
    from compactor.engine.invariants import summary_identifiers

    texts = [e.text for events in _sessions() for e in events if e.text]
    lines = [ln for t in texts for ln in t.split("\n")]
    rnd = random.Random(5)
    texts += ["\n".join(rnd.choice(lines) for _ in range(rnd.randint(1, 40))) for _ in range(200)]
    texts += ["see https://\n/usr/local/bin/tool and src/app.py\nsrc/cut_short.py...\nnext/one.py…",
              "abc://\nlib/x.py\n\n~/notes/today.md 日本/home/u/tmp에", "x" * 8 + "://\n/etc/hosts.d/a.conf"]
    seen = 0
    for t in texts:
        want = identifiers(t)
        assert summary_identifiers(t) == want, t[:200]
        assert summary_identifiers(t) == want, t[:200]  # from the memo
        seen += bool(want)
    assert seen > 50
    assert "/usr/local/bin/tool" not in summary_identifiers(texts[-3])  # the path of a URL
    assert "/usr/local/bin/tool" in summary_identifiers("see\n/usr/local/bin/tool")
    quote = "- " + "word " * 2_000 + "src/quoted/at_the_end.py"  # a long line is searched, not kept
    assert summary_identifiers("head\n" + quote) == identifiers("head\n" + quote) == {"src/quoted/at_the_end.py"}
    assert not any(line == quote for _, line in identifiers_mod._LINE_IDS)


def test_occurs_is_a_search_of_every_text_the_full_check_reads() -> None:
    """``CoveredText.occurs`` searches pieces of the texts and makes the calls' input JSON only
    for what no other text holds: the same verdict as a search of all the texts joined, for
    words, parts of words, parts of a call's JSON only (quotes, braces, keys), of the results'
    bodies, text that would straddle two texts, and what occurs nowhere."""
    from compactor.engine.identifiers import _block_texts, _result_texts

    rnd = random.Random(17)
    json_only = compared = 0
    for events in _sessions():
        texts = [t for e in events for b in e.blocks for t in _block_texts(b)]
        haystack = "\n".join(texts)
        bulk = "\n".join(t for e in events for r in e.tool_results for t in _result_texts(r))
        inputs = [t for t in texts if t.startswith("{") and '": ' in t]
        probes = ["src/never_seen_anywhere.py", "toolu_0000deadbeef"]
        for source in (haystack, bulk, *inputs[:20]):
            for _ in range(40):
                if not source:
                    break
                i = rnd.randrange(len(source))
                probe = source[i:i + rnd.randint(1, 30)].split("\n")[0]
                if probe:
                    probes.append(probe)
            probes += source.split()[:50]
        for a, b in zip(texts, texts[1:]):  # the end of one text and the start of the next
            if a and b and "\n" not in a[-4:] + b[:4]:
                probes.append(a[-4:] + b[:4])
        index = CoveredText(events)
        for probe in probes:
            want = probe in haystack or probe in bulk
            assert index.occurs(probe) is want, probe
            compared += 1
            json_only += want and not any(probe in t for t in texts if t not in inputs) and probe not in bulk
    assert compared > 2000 and json_only > 20  # the calls' JSON alone did answer some


def test_a_gap_or_a_repeat_in_the_seqs_is_still_caught_with_the_index() -> None:
    """``check_range`` with the index finds the gaps from the seqs it holds: a missing seq
    after the previous checkpoint is reported as the walk reports it; a repeated one or one
    before the previous checkpoint is no gap."""
    from compactor.engine.invariants import check_range

    def ev(seq: int, role: str = "user", kind: str = "message") -> Event:
        return Event(seq=seq, id=f"e{seq}-{role}", kind=kind, role=role, blocks=[TextBlock(text=f"t{seq}")])

    prev = Checkpoint(id="p", tenant="t", session="s", covers=SeqRange(start=1, end=2))
    cases = {
        "gap": [ev(1, kind="pinned"), ev(3), ev(4, "assistant"), ev(6), ev(7, "assistant")],
        "repeat": [ev(1, kind="pinned"), ev(3), ev(3, "assistant"), ev(4), ev(5, "assistant")],
        "whole": [ev(1, kind="pinned"), ev(3), ev(4, "assistant"), ev(5)],
    }
    found = {}
    for name, evs in cases.items():
        for p in (None, prev):
            want = check_range(evs, None, evs, p)
            got = check_range(evs, None, evs, p, CoveredText(evs))
            assert got == want, (name, p)
            found[name, p is None] = sorted(v.code for v in got)
    assert found["gap", False] == ["range_not_contiguous"] and found["whole", False] == []
    assert found["repeat", False] == ["event_duplicated"] * 2  # no gap: the two events share seq 3


def test_the_events_by_seq_read_as_the_dict_of_them() -> None:
    """``range_facts``' events by seq (bisection of the seqs, not a dict held through the
    ladder, issue 17) answer ``in``, ``[]`` and ``len`` as ``{e.seq: e for e in events}``:
    with repeated seqs (the last event of a seq), gaps, and seqs never seen."""
    rnd = random.Random(3)
    for trial in range(60):
        seqs = sorted(rnd.choice([rnd.randint(0, 40)] * 3 + [rnd.randint(0, 400)]) for _ in range(rnd.randint(0, 60)))
        events = [Event(seq=s, id=f"e{i}", role="user", blocks=[TextBlock(text=f"t{i}")]) for i, s in enumerate(seqs)]
        facts = CoveredText(events).range_facts()
        assert facts is not None
        got, want = facts[0], {e.seq: e for e in events}
        assert len(got) == len(want) and facts[1] == seqs
        for s in range(-2, 410):
            assert (s in got) == (s in want)
            if s in want:
                assert got[s] is want[s]
    shuffled = [Event(seq=s, id=f"x{s}", role="user", blocks=[TextBlock(text="t")]) for s in (3, 1, 2)]
    assert CoveredText(shuffled).range_facts() is None
