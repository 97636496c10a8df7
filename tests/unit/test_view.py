from compactor.events import Event, TextBlock, to_anthropic
from compactor.engine.invariants import check_first_user, check_tool_pairing
from compactor.engine.measure import LATE_RESULT_TEXT, render_request
from compactor.records import Checkpoint, SeqRange
from compactor.engine.view import build_view
from tests.unit.engine_fixtures import Conv


def _events():
    return [
        Event(seq=1, id="p", kind="pinned", role="system", blocks=[TextBlock(text="rules")]),
        Event(seq=2, id="u1", role="user", blocks=[TextBlock(text="first")]),
        Event(seq=3, id="a1", role="assistant", blocks=[TextBlock(text="reply")]),
        Event(seq=4, id="u2", role="user", blocks=[TextBlock(text="second")]),
    ]


def _ckpt(**kw):
    return Checkpoint(id="c1", tenant="t", session="s", covers=SeqRange(start=1, end=3), **kw)


def test_structured_checkpoint_view_is_pinned_summary_then_tail():
    view = build_view(_events(), _ckpt(summary="S"))
    assert [e.id for e in view] == ["p", "checkpoint:c1", "u2"]
    system, msgs = to_anthropic(view)
    assert system == "rules"
    assert msgs[0]["role"] == "user" and "S" in msgs[0]["content"][0]["text"]
    assert msgs[0]["content"][1]["text"] == "second"


def test_native_block_opens_the_conversation_in_an_assistant_turn():
    native = {"type": "compaction", "content": "opaque summary", "signature": "sig_x"}
    view = build_view(_events(), _ckpt(native=native))
    _, msgs = to_anthropic(view)
    assert msgs[0] == {"role": "assistant", "content": [native]}
    assert msgs[1]["role"] == "user"
    assert check_first_user(view) == []


def test_assistant_first_without_native_block_is_a_violation():
    events = [Event(seq=1, id="a", role="assistant", blocks=[TextBlock(text="hi")])]
    assert [v.code for v in check_first_user(events)] == ["first_not_user"]


# --- late results (DESIGN §7.1) -----------------------------------------------------------------


def _api_valid(messages):
    """What the Messages API enforces on tool blocks: each tool_use answered in the next
    message, each tool_result answering the message just before."""
    for i, m in enumerate(messages):
        uses = {b["id"] for b in m["content"] if b["type"] == "tool_use"}
        nxt = messages[i + 1]["content"] if i + 1 < len(messages) else []
        assert uses <= {b["tool_use_id"] for b in nxt if b["type"] == "tool_result"}
        prev = messages[i - 1]["content"] if i else []
        asked = {b["id"] for b in prev if b["type"] == "tool_use"}
        assert {b["tool_use_id"] for b in m["content"] if b["type"] == "tool_result"} <= asked


def _moved_on():
    """A call the agent moved on from; its result arrives two messages later."""
    c = Conv()
    c.user("Deploy, then tell me about the docs.")
    lost = c.use("Bash", {"command": "./deploy.sh"})
    c.user("While that runs: where are the docs?")
    c.say("In docs/.")
    late = c.result(lost, "deployed (exit 0)")
    c.call("Read", {"path": "docs/index.md"}, "# Docs")
    return c, lost, late


def test_a_late_result_of_a_tail_call_is_text_where_it_arrived():
    c, lost, late = _moved_on()
    view = build_view(c.events, None)
    assert [e.seq for e in view] == [e.seq for e in c.events]  # nothing reordered or dropped
    _, messages = render_request(view)
    _api_valid(messages)
    assert check_tool_pairing(c.events, view) == []
    shown = next(e for e in view if e.seq == late.seq)
    assert not shown.tool_results and lost in shown.text and "deployed (exit 0)" in shown.text
    # the call itself is closed as "arrived later", and the in-place call keeps its tool_result
    closed = [b for m in messages for b in m["content"] if b["type"] == "tool_result"]
    assert closed[0]["tool_use_id"] == lost and closed[0]["content"][0]["text"] == LATE_RESULT_TEXT
    assert closed[1]["content"][0]["text"] == "# Docs"


def test_a_late_result_after_a_checkpoint_keeps_the_request_valid():
    c, lost, late = _moved_on()
    ck = Checkpoint(id="c1", tenant="t", session="s", covers=SeqRange(start=1, end=2), summary="S")
    view = build_view(c.events, ck)
    _, messages = render_request(view)
    _api_valid(messages)
    assert check_tool_pairing(c.events, view) == []


def test_without_the_placement_the_late_result_is_a_pairing_violation():
    c, _, _ = _moved_on()
    assert {v.code for v in check_tool_pairing(c.events, c.events)} == {"tool_pairing"}


def test_a_repeated_result_is_shown_once_as_a_result():
    c = Conv()
    c.user("go")
    tid = c.use("Bash", {"command": "make"})
    c.result(tid, "ok")
    again = c.result(tid, "ok")
    view = build_view(c.events, None)
    _, messages = render_request(view)
    _api_valid(messages)
    results = [b for m in messages for b in m["content"] if b["type"] == "tool_result"]
    assert len(results) == 1
    assert not next(e for e in view if e.seq == again.seq).tool_results
