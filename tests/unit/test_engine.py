import json
from datetime import datetime, timezone

import pytest

from compactor.cli import main
from compactor.errors import InvalidInput
from compactor.engine.compact import compact
from compactor.engine.planning import plan
from compactor.engine.reconcile import reconcile_checkpoint
from compactor.events import TextBlock, to_anthropic
from compactor.engine.invariants import validate
from compactor.engine.layers import LAYERS
from compactor.engine.measure import NO_RESULT_TEXT, render_request, view_tokens
from compactor.engine.policy import make_policy
from compactor.engine.view import build_view
from tests.unit.engine_fixtures import Conv, long_session

POLICY = make_policy("default")
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def _api_valid(messages):
    assert messages[0]["role"] == "user"
    for a, b in zip(messages, messages[1:]):
        assert a["role"] != b["role"]
    for i, m in enumerate(messages):
        uses = [x["id"] for x in m["content"] if x["type"] == "tool_use"]
        if uses and i + 1 < len(messages):
            got = {x["tool_use_id"] for x in messages[i + 1]["content"] if x["type"] == "tool_result"}
            assert set(uses) <= got


def test_compact_fits_the_target_and_fills_the_record():
    c = long_session(rounds=30)
    res = compact(c.events, POLICY, 4_000, now=NOW)
    rec = res.record
    assert rec.status == "committed" and rec.violations == []
    assert rec.tokens_before == view_tokens(c.events) > 4_000 >= rec.tokens_after
    assert rec.tokens_after == view_tokens(res.view)
    assert rec.layers == [x for x in LAYERS if x in rec.layers]  # cheapest first
    assert "summary" in rec.layers
    assert sum(rec.freed_by_layer.values()) == rec.tokens_before - rec.tokens_after
    assert 0 < rec.retained_tail_tokens < rec.tokens_after
    assert rec.summary_tokens == res.checkpoint.summary_tokens > 0
    assert rec.covers == res.checkpoint.covers and rec.checkpoint == res.checkpoint.id
    assert rec.created_at == NOW == res.checkpoint.created_at
    assert {"plan", "summary", "validate", "total"} <= set(rec.durations_ms)
    system, messages = render_request(res.view)
    assert system == "You are a careful coding agent."
    _api_valid(messages)
    assert validate(events=c.events, checkpoint=res.checkpoint, view=res.view, target_tokens=4_000,
                    artifacts=res.artifacts) == []


def test_summary_keeps_what_the_next_turn_needs():
    c = long_session(rounds=30)
    res = compact(c.events, POLICY, 4_000)
    s = res.checkpoint.summary
    assert "Never push to main." in s and "Do not modify tests/fixtures." in s
    assert "src/parser.py" in s
    latest = [e for e in res.view if e.is_user_request][-1]
    assert latest.text == "Now also update docs/usage.md with the new flag."


def test_compact_is_deterministic():
    c = long_session(rounds=20)
    a = compact(c.events, POLICY, 3_000, now=NOW)
    b = compact(c.events, POLICY, 3_000, now=NOW)
    assert a.checkpoint == b.checkpoint and a.view == b.view and a.artifacts == b.artifacts
    assert a.record.model_dump(exclude={"durations_ms"}) == b.record.model_dump(exclude={"durations_ms"})
    other = compact(c.events, POLICY, 3_500, now=NOW)
    assert other.checkpoint.id != a.checkpoint.id
    named = compact(c.events, POLICY, 3_000, checkpoint_id="ck-mine")
    assert named.checkpoint.id == "ck-mine"


def test_checkpoint_id_does_not_depend_on_the_session_name():
    c = long_session(rounds=10)
    a = compact(c.events, POLICY, 2_000, session="one", tenant="t1")
    b = compact(c.events, POLICY, 2_000, session="two", tenant="t2")
    assert a.checkpoint.id == b.checkpoint.id and a.checkpoint.session == "one"


def test_noop_when_the_view_already_fits():
    c = long_session(rounds=2, out_lines=2)
    res = compact(c.events, POLICY, 50_000)
    assert res.checkpoint is None and res.record.status == "noop"
    assert [(e.seq, e.blocks) for e in res.view] == [(e.seq, e.blocks) for e in c.events]
    assert res.record.tokens_after == res.record.tokens_before


def test_nothing_to_compact_is_a_noop_that_says_why():
    c = Conv(system="rule " * 500)
    c.user("hi")
    res = compact(c.events, POLICY, 100)
    assert res.checkpoint is None and res.record.status == "noop"
    assert [v.split(":")[0] for v in res.record.violations] == ["over_budget"] and res.record.error


def test_target_must_be_positive():
    with pytest.raises(InvalidInput):
        compact(long_session(rounds=2).events, POLICY, 0)


def test_stops_at_the_cheapest_layer_that_meets_the_target():
    c = Conv()
    c.user("go")
    c.call("Bash", {"command": "cat big.log"}, "".join(f"row {i}\n" for i in range(6_000)))
    c.say("done reading")
    c.user("thanks")
    res = compact(c.events, POLICY, 4_000)
    assert res.record.layers == ["externalize"]
    assert res.checkpoint.covers.empty and res.checkpoint.replacements
    assert len(res.artifacts) == 1
    assert validate(events=c.events, checkpoint=res.checkpoint, view=res.view, target_tokens=4_000,
                    artifacts=res.artifacts) == []


def test_plan_reports_need_and_budgets():
    c = long_session(rounds=30)
    p = plan(c.events, POLICY, 4_000, None)
    assert not p.noop and p.tokens_before > 4_000 and p.need == "none"
    assert p.tail_budget <= p.available_tokens // 2 and p.cut > 0
    assert p.layers[-1] == "summary"
    tiny = plan(c.events, make_policy("claude-code", window=60_000, max_output=8_000), None, None)
    assert tiny.need in ("soft", "hard")


def test_successive_compactions_merge_state_without_rereading_the_log():
    c = long_session(rounds=15)
    first = compact(c.events, POLICY, 3_000)
    end1 = first.checkpoint.covers.end
    for i in range(15):
        c.call("Bash", {"command": f"pytest tests/test_more.py -k m{i}"}, "passed\n" * 200)
    c.user("Finally, run the whole suite.")
    c.call("Bash", {"command": "pytest"}, "120 passed")
    new = [e for e in c.events if e.seq > end1 or e.kind == "pinned"]
    second = compact(new, POLICY, 3_000, prev=first.checkpoint)
    ck = second.checkpoint
    assert ck.based_on == first.checkpoint.id and ck.covers.end > end1
    assert ck.state["goal"]["seq"] == 2  # from the previous state: seq 2 was not passed in
    assert "Never push to main." in ck.summary
    assert validate(events=new, checkpoint=ck, view=second.view, target_tokens=3_000,
                    artifacts=second.artifacts, prev_checkpoint=first.checkpoint) == []
    # the same view as compacting from the full log's point of view
    full = build_view(c.events, ck)
    assert [(e.seq, e.blocks) for e in full] == [(e.seq, e.blocks) for e in second.view]


def test_unreachable_target_is_reported_not_forced():
    c = Conv()
    c.user("first task")
    for i in range(5):
        c.call("Bash", {"command": f"s{i}"}, "out " * 300)
    huge = "Please do this: " + "details " * 3_000
    c.user(huge)
    res = compact(c.events, POLICY, 1_000)
    rec = res.record
    assert [v.split(":")[0] for v in rec.violations] == ["over_budget"]
    assert rec.status == "committed" and "cannot be met" in rec.error
    assert any(e.text == huge for e in res.view)  # the latest request kept verbatim


def test_one_giant_request_over_the_target_is_kept_not_dropped():
    # Nothing before the request can be summarized smaller and the summary cannot quote it in
    # full: the view stays as it is (over budget), never a view without the request.
    for before in ([], ["hi", "hello"]):
        c = Conv()
        for i, text in enumerate(before):
            c.user(text) if i % 2 == 0 else c.say(text)
        huge = "Please do this: " + "details " * 3_000
        c.user(huge)
        res = compact(c.events, POLICY, 1_000)
        rec = res.record
        assert [v.split(":")[0] for v in rec.violations] == ["over_budget"], rec.violations
        assert rec.status == "noop" and rec.error
        assert any(e.text == huge for e in res.view)


def test_cut_passes_the_only_request_as_a_last_resort():
    c = Conv()
    c.user("Only request: make the tests pass in src/app.py")
    for i in range(30):
        c.call("Bash", {"command": f"pytest -k t{i}"}, f"t{i} " * 400)
    res = compact(c.events, POLICY, 3_000)
    assert res.record.violations == [] and res.record.fallback_reason
    assert res.checkpoint.covers.end > 2
    assert "Only request: make the tests pass in src/app.py" in res.checkpoint.summary


def _abandoned_session():
    c = Conv()
    c.user("Deploy the site, then check it.")
    lost = c.use("Bash", {"command": "./deploy.sh"})
    c.say("no answer from the deploy; continuing with checks")
    for i in range(12):
        c.call("Bash", {"command": f"curl -s https://example.com/p{i}"}, "<html>ok</html>\n" * 60)
    c.user("Is it live now?")
    c.say("Checking.")
    return c, lost


def test_reconcile_resolves_a_late_result():
    c, lost = _abandoned_session()
    res = compact(c.events, POLICY, 2_500)
    ck = res.checkpoint
    assert lost in {u["tool_use_id"] for u in ck.state["unknown_actions"]}
    late = c.result(lost, "deployed: https://example.com (exit 0)")
    merged, resolved = reconcile_checkpoint(ck, [late])
    assert resolved == [lost]
    assert lost not in {u["tool_use_id"] for u in merged.state["unknown_actions"]}
    assert merged.id != ck.id and merged.snapshot_version == late.seq
    view = build_view(c.events, merged)
    assert validate(events=c.events, checkpoint=merged, view=view, target_tokens=None,
                    artifacts=res.artifacts) == []
    # the late result leads its message as text, not as an orphan tool_result
    shown = next(e for e in view if e.seq == late.seq)
    assert not shown.tool_results and "deployed" in shown.text


def test_a_late_result_appended_after_the_commit_keeps_the_view_valid():
    # The merge in commit_swap shows a late result of a covered call as text; a result that
    # arrives after the swap must not reach the request as an orphan tool_result either (the
    # Messages API rejects it), nor block the next compaction with a tool_pairing violation.
    c, lost = _abandoned_session()
    res = compact(c.events, POLICY, 2_500)
    ck = res.checkpoint
    assert ck.covers.end >= c.seq_of(lost)
    late = c.result(lost, "deployed: https://example.com (exit 0)")
    c.say("The deploy finished.")
    view = build_view(c.events, ck)
    _, messages = render_request(view)
    for prev_m, m in zip(messages, messages[1:]):
        asked = {b["id"] for b in prev_m["content"] if b["type"] == "tool_use"}
        assert {b["tool_use_id"] for b in m["content"] if b["type"] == "tool_result"} <= asked
    shown = next(e for e in view if e.seq == late.seq)
    assert not shown.tool_results and "deployed" in shown.text and lost in shown.text
    new = [e for e in c.events if e.seq > ck.covers.end or e.kind == "pinned"]
    again = compact(new, POLICY, 4_000, prev=ck)
    assert [v for v in again.record.violations if not v.startswith("over_budget")] == []


def test_reconcile_without_matching_results_is_a_noop():
    c, lost = _abandoned_session()
    ck = compact(c.events, POLICY, 2_500).checkpoint
    other = c.say("unrelated")
    assert reconcile_checkpoint(ck, [other]) == (ck, [])


def test_render_request_closes_dangling_calls():
    c = Conv()
    c.user("go")
    lost = c.use("Bash", {"command": "./deploy.sh"})
    c.user("hello?")
    pending = c.use("Bash", {"command": "make"})
    _, raw = to_anthropic(c.events)
    _, messages = render_request(c.events)
    _api_valid(messages)
    assert len(messages) == len(raw) + 1  # the trailing call gets its own user message
    closed = [b for m in messages for b in m["content"] if b["type"] == "tool_result"]
    assert [b["tool_use_id"] for b in closed] == [lost, pending]
    assert all(b["is_error"] and b["content"][0]["text"] == NO_RESULT_TEXT for b in closed)
    assert messages[2]["content"][0]["type"] == "tool_result"  # results lead the user message
    assert view_tokens(c.events) > view_tokens(c.events[:-1])


@pytest.mark.parametrize("seed", range(15))
def test_random_sessions_keep_every_invariant(seed):
    import random

    from compactor.engine.policy import PRESETS
    from tests.unit.engine_fixtures import random_session

    rng = random.Random(seed)
    c = random_session(rng)
    pol = make_policy(rng.choice(PRESETS))
    target = max(500, int(view_tokens(c.events) * rng.choice([0.05, 0.15, 0.3, 0.6])))
    res = compact(c.events, pol, target)
    assert [v for v in res.record.violations if not v.startswith("over_budget")] == []
    _api_valid(render_request(res.view)[1])
    if res.checkpoint is None:
        return
    prev = res.checkpoint
    for _ in range(rng.randint(1, 20)):
        c.call("Bash", {"command": "more"}, "y\n" * rng.randint(1, 1000))
    c.user("next step please")
    new = [e for e in c.events if e.kind == "pinned" or e.seq > prev.covers.end]
    again = compact(new, pol, target, prev=prev)
    assert [v for v in again.record.violations if not v.startswith("over_budget")] == []
    _api_valid(render_request(again.view)[1])


# --- CLI --------------------------------------------------------------------------------------


def _messages_file(tmp_path):
    c = long_session(rounds=20)
    system, messages = to_anthropic(c.events)
    path = tmp_path / "session.json"
    path.write_text(json.dumps({"system": system, "messages": messages}))
    return path


def test_cli_compact_inline_writes_a_valid_request(tmp_path, capsys):
    path = _messages_file(tmp_path)
    out = tmp_path / "view.json"
    rc = main(["compact", str(path), "--inline", "--target-tokens", "3000", "--out", str(out),
               "--now", "2026-01-01T00:00:00+00:00"])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert set(doc) == {"messages", "system", "checkpoint", "record"}
    _api_valid(doc["messages"])
    assert doc["record"]["tokens_after"] <= 3_000 and doc["record"]["violations"] == []
    text = capsys.readouterr().out
    assert "->" in text and "invariants  ok" in text


def test_cli_compact_default_target_is_15_percent(tmp_path):
    path = _messages_file(tmp_path)
    out = tmp_path / "view.json"
    assert main(["compact", str(path), "--inline", "--out", str(out)]) == 0
    rec = json.loads(out.read_text())["record"]
    assert rec["target_tokens"] == max(8_000, int(rec["tokens_before"] * 0.15))


def test_cli_compact_inline_is_the_engine_on_the_plain_import(tmp_path):
    """``compact --inline`` streams the import and counts each event as it arrives (so the
    engine works on those objects, not on copies); the request, checkpoint and record are the
    engine's on the whole, uncounted import."""
    from compactor.bench.scale import write_session
    from compactor.cli.compact import _session_id
    from compactor.importers import import_file

    for path in [tmp_path / "small.jsonl", *(p for p in CORPUS if "claude-code" in p.parts)]:
        if path.name == "small.jsonl":
            write_session(path, 2_000)
        out = tmp_path / "view.json"
        assert main(["compact", str(path), "--inline", "--out", str(out), "--now",
                     "2026-01-01T00:00:00+00:00", "--target-tokens", "3000"]) in (0, 1)
        doc = json.loads(out.read_text())
        events = import_file(path).events
        assert all(e.tokens is None for e in events)
        res = compact(events, make_policy("default"), 3000, session=_session_id(path),
                      now=datetime(2026, 1, 1, tzinfo=timezone.utc))
        system, messages = render_request(res.view)
        assert (doc["messages"], doc["system"]) == (messages, system), path
        assert doc["checkpoint"] == (res.checkpoint.model_dump(mode="json") if res.checkpoint else None)
        rec = res.record.model_dump(mode="json")
        assert {k: v for k, v in doc["record"].items() if k != "durations_ms"} == {
            k: v for k, v in rec.items() if k != "durations_ms"}


def test_cli_compact_bad_policy_is_rejected(tmp_path):
    path = _messages_file(tmp_path)
    with pytest.raises(SystemExit):
        main(["compact", str(path), "--inline", "--policy", "nope"])


# --- corpus -------------------------------------------------------------------------------------

from compactor.events import Event  # noqa: E402
from compactor.importers import import_file  # noqa: E402
from tests.conftest import corpus_files  # noqa: E402
from compactor.tokens import count_event  # noqa: E402

CORPUS = corpus_files()


def _target(tokens: int, events=()) -> int:
    """15% of the session, at least 8k, and never below its pinned instructions (a target
    under them cannot be met by any compaction: the engine reports it over budget)."""
    pinned = sum(count_event(e) for e in events if e.kind == "pinned")
    return max(8_000, int(tokens * 0.15), pinned + 4_000)


@pytest.fixture(scope="module")
def imported():
    cache: dict = {}

    def get(path):
        if path not in cache:
            cache[path] = import_file(path).events
        return cache[path]

    return get


@pytest.mark.corpus
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_view_is_valid_and_within_budget(path, imported):
    events = imported(path)
    target = _target(view_tokens(events), events)
    res = compact(events, POLICY, target)
    assert res.record.violations == [], res.record.violations
    assert view_tokens(res.view) <= target
    assert validate(events=events, checkpoint=res.checkpoint, view=res.view, target_tokens=target,
                    artifacts=res.artifacts) == []
    _api_valid(render_request(res.view)[1])


@pytest.mark.corpus
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_three_successive_compactions_of_a_growing_session(path, imported):
    events = imported(path)
    n = len(events)
    prev = None
    for i in (1, 2, 3, 4):
        upto = events[: n * i // 4]
        end = 0 if prev is None else prev.covers.end
        given = [e for e in upto if e.kind == "pinned" or e.seq > end]
        target = _target(view_tokens(upto), upto)
        res = compact(given, POLICY, target, prev=prev)
        assert res.record.violations == [], (i, res.record.violations)
        assert view_tokens(res.view) <= target
        if res.checkpoint is not None:
            if prev is not None:
                assert res.checkpoint.based_on == prev.id
                assert res.checkpoint.covers.end >= prev.covers.end
            prev = res.checkpoint
        full = build_view(upto, prev)
        assert [(e.seq, e.blocks) for e in full] == [(e.seq, e.blocks) for e in res.view]
        _api_valid(render_request(res.view)[1])


def _withhold_a_result(events):
    """Drop the first tool result in the first 30% of the session: its call is abandoned."""
    limit = events[len(events) * 3 // 10].seq
    for r in events:
        if r.seq > limit:
            break
        for res in r.tool_results:
            rest = [b for b in r.blocks if b is not res]
            blocks = rest or [TextBlock(text="(the tool result was not recorded)")]
            note = Event(seq=r.seq, id=r.id, role="user", injected=not rest, blocks=blocks)
            return [note if e.seq == r.seq else e for e in events], res
    return None, None


@pytest.mark.corpus
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_view_after_reconcile(path, imported):
    events, withheld = _withhold_a_result(imported(path))
    if events is None:
        pytest.skip("no single tool result early in this session")
    tid = withheld.tool_use_id
    target = _target(view_tokens(events))
    res = compact(events, POLICY, target)
    if res.checkpoint is None or res.checkpoint.covers.empty:
        # fits the benchmark budget without a summary: ask for half of what it got to
        target = max(2_000, res.record.tokens_after // 2)
        res = compact(events, POLICY, target)
    if res.checkpoint is None or res.checkpoint.covers.empty:
        pytest.skip("no summary even at half the size")
    use_seq = next(e.seq for e in events if any(u.id == tid for u in e.tool_uses))
    assert res.checkpoint.covers.end >= use_seq
    assert tid in {u["tool_use_id"] for u in res.checkpoint.state["unknown_actions"]}
    late = Event(seq=events[-1].seq + 1, id="late-result", role="user", blocks=[withheld])
    merged, resolved = reconcile_checkpoint(res.checkpoint, [late])
    assert resolved == [tid]
    everything = [*events, late]
    view = build_view(everything, merged)
    assert validate(events=everything, checkpoint=merged, view=view, target_tokens=None,
                    artifacts=res.artifacts) == []
    assert view_tokens(view) <= target + view_tokens([e for e in view if e.seq == late.seq])
    _api_valid(render_request(view)[1])


def test_source_hash_of_any_prefix_is_the_content_hash_of_that_prefix():
    """The ladder's source hashes come from running-hash copies (no per-event line kept):
    any prefix, asked in any order, after the checkpoint id's pass fed it or not, hashes as
    ``content_hash`` of those events."""
    import random

    from compactor.engine.source_hash import HashLines, PrefixHash
    from compactor.events import content_hash

    events = long_session(rounds=300, out_lines=3).events
    assert len(events) > 2 * PrefixHash.EVERY
    fed = PrefixHash(events)
    assert HashLines(fed).digest(events) == content_hash(events)
    cold = PrefixHash(events)
    rnd = random.Random(7)
    for n in [len(events), 0, 1, PrefixHash.EVERY, PrefixHash.EVERY + 3, *rnd.sample(range(len(events)), 12)]:
        want = content_hash(events[:n])
        assert fed.at(n) == want
        assert cold.at(n) == want
