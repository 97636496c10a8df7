from compactor.events import Event, TextBlock, to_anthropic
from compactor.invariants import check_first_user
from compactor.records import Checkpoint, SeqRange
from compactor.view import build_view


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
