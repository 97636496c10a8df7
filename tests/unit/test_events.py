import sys

from compactor.events import (
    Event,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    to_anthropic,
    to_openai,
)


def _conv():
    return [
        Event(seq=1, id="s", kind="pinned", role="system", blocks=[TextBlock(text="be careful")]),
        Event(seq=2, id="u1", role="user", blocks=[TextBlock(text="list files")]),
        Event(
            seq=3,
            id="a1",
            role="assistant",
            blocks=[TextBlock(text="ok"), ToolUseBlock(id="t1", name="bash", input={"cmd": "ls"})],
        ),
        Event(
            seq=4,
            id="r1",
            role="user",
            blocks=[ToolResultBlock(tool_use_id="t1", content=[TextBlock(text="a.py")])],
        ),
        Event(seq=5, id="a2", role="assistant", blocks=[TextBlock(text="one file")]),
    ]


def test_json_round_trip_is_lossless():
    for e in _conv():
        assert Event.from_json_line(e.to_json_line()) == e


def test_anthropic_shape_pairs_tool_calls_and_alternates_roles():
    system, msgs = to_anthropic(_conv())
    assert system == "be careful"
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[1]["content"][1] == {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}}
    assert msgs[2]["content"][0]["type"] == "tool_result"
    assert msgs[2]["content"][0]["tool_use_id"] == "t1"


def test_anthropic_shape_has_no_empty_or_whitespace_text_blocks():
    # The Messages API rejects them ("text content blocks must be non-empty" / "must contain
    # non-whitespace text"); models do return "\n\n" text before a tool_use, and transcripts
    # keep it.
    events = [
        Event(seq=1, id="u1", role="user", blocks=[TextBlock(text="list files")]),
        Event(seq=2, id="a1", role="assistant", blocks=[
            TextBlock(text="\n\n"), ToolUseBlock(id="t1", name="bash", input={"cmd": "ls"})]),
        Event(seq=3, id="r1", role="user", blocks=[
            ToolResultBlock(tool_use_id="t1", content=[TextBlock(text="")]), TextBlock(text="")]),
        Event(seq=4, id="a2", role="assistant", blocks=[TextBlock(text=" ")]),
        Event(seq=5, id="a3", role="assistant", blocks=[TextBlock(text="no files")]),
    ]
    _, msgs = to_anthropic(events)
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[1]["content"] == [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}}]
    assert msgs[2]["content"] == [{"type": "tool_result", "tool_use_id": "t1", "content": []}]
    assert msgs[3]["content"] == [{"type": "text", "text": "no files"}]


def test_openai_shape_has_tool_messages():
    msgs = to_openai(_conv())
    assert msgs[0] == {"role": "system", "content": "be careful"}
    assert msgs[2]["tool_calls"][0]["id"] == "t1"
    assert msgs[3] == {"role": "tool", "tool_call_id": "t1", "content": "a.py"}


def test_calibration_learns_the_providers_ratio_from_reported_usage():
    from compactor.events import Usage
    from compactor.tokens import calibration_ratio, estimate_context_tokens, total_tokens, with_tokens

    events, running = [], 0
    for i in range(40):
        u = Event(seq=2 * i + 1, id=f"u{i}", role="user", blocks=[TextBlock(text="word " * 200)])
        events.append(with_tokens([u])[0])
        running += events[-1].tokens
        # the provider counted 1.25x what we count for everything before this reply
        a = Event(seq=2 * i + 2, id=f"a{i}", role="assistant", blocks=[TextBlock(text="ok")],
                  usage=Usage(input_tokens=int(running * 1.25)))
        events.append(with_tokens([a])[0])
        running += events[-1].tokens
    assert abs(calibration_ratio(events) - 1.25) < 0.01
    assert abs(estimate_context_tokens(events) - 1.25 * total_tokens(events)) <= 1
    plain = [e.with_(usage=None) for e in events]
    assert calibration_ratio(plain) == 1.0 and estimate_context_tokens(plain) == total_tokens(plain)


def test_events_share_their_fields_set_and_copies_keep_theirs_apart():
    """Equal sets of given fields are one object (memory, issue 17); a copy that sets a new
    field gets its own, and the original's stays as it was (exclude_unset dumps unchanged)."""
    a = Event(seq=1, id="a", role="user", blocks=[TextBlock(text="x")])
    b = Event(seq=2, id="b", role="user", blocks=[TextBlock(text="y")])
    assert a.model_fields_set is b.model_fields_set
    assert a.blocks[0].model_fields_set is b.blocks[0].model_fields_set
    counted = a.with_(tokens=7)
    assert counted.model_fields_set == {"seq", "id", "role", "blocks", "tokens"}
    assert a.model_fields_set == b.model_fields_set == {"seq", "id", "role", "blocks"}
    assert "tokens" not in a.model_dump(exclude_unset=True)
    assert counted.model_dump(exclude_unset=True)["tokens"] == 7
    assert counted.with_(tokens=8).model_fields_set is counted.model_fields_set
    again = Event.from_json_line(counted.to_json_line())
    assert again == counted and again.model_fields_set is not a.model_fields_set


def test_an_imported_event_keeps_its_fields_in_the_shared_key_table_with_the_same_values():
    """An event the importer builds (``events.trusted``) holds its fields in its class's
    shared-key values, smaller than a dict of its own (memory, issue 17), and keeps them there
    once its cached properties are read in any order; its fields, caches, dumps, copies and
    equality are those of the validated event."""
    from compactor.importers import _build as build
    from compactor.tokens import count_into

    made = []
    for i, order in enumerate((("text", "tool_uses", "tool_results"), ("tool_results", "text"), ("tool_uses",))):
        e = build.event(i + 1, f"u-{i}", None, "message", "assistant",
                        [build.text_block(f"step {i}"), build.tool_use_block(f"t{i}", "Bash", {"command": "ls"})],
                        None, False, "claude-code", {"line": i + 1})
        for name in order:
            getattr(e, name)
        e = count_into(e)
        made.append(e)
        same = Event.model_validate(e.model_dump())
        assert e == same and e.model_dump_json() == same.model_dump_json()
        assert list(e.__dict__)[:11] == list(Event.model_fields)
        assert e.text == same.text == f"step {i}" and e.tool_uses == same.tool_uses
        assert sys.getsizeof(e.__dict__) < sys.getsizeof(dict(e.__dict__))
        copied = e.with_(blocks=[TextBlock(text="other")])
        assert copied.text == "other" and copied.tool_uses == [] and e.text == f"step {i}"
    assert [e.seq for e in made] == [1, 2, 3]
    # an event without results holds no empty list of its own (one shared, read-only)
    assert made[0].tool_results == [] and made[0].tool_results is made[2].tool_results


def test_trusted_instances_stay_small_after_validated_ones_were_made_first():
    """A model's key table holds its field names from its creation (``events._shape_keys``):
    instances ``trusted`` builds keep their fields in the class's shared-key values (memory,
    issue 17) even when many validated instances came first (a module's constants, an import
    that validates first), which used to leave no room in the table and gave each later
    instance a dict of its own; and they are still the validated instances."""
    import gc
    import tracemalloc
    from typing import Literal

    from compactor.events import _Model, _shared_fields_set, trusted

    class Note(_Model):
        type: Literal["note"] = "note"
        body: str

    early = [Note(body=f"validated {i}") for i in range(100)]
    names = _shared_fields_set({"body"})
    bodies = [f"body {i}" for i in range(2000)]

    def traced(make) -> int:
        gc.collect()
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            made = [make(b) for b in bodies]
            return tracemalloc.get_traced_memory()[0] - start + 0 * len(made)
        finally:
            tracemalloc.stop()

    assert traced(lambda b: trusted(Note, {"type": "note", "body": b}, names)) < 0.6 * traced(lambda b: Note(body=b))
    built = trusted(Note, {"type": "note", "body": "x"}, names)
    assert built == Note(body="x") and built.model_dump_json() == Note(body="x").model_dump_json()
    assert list(built.__dict__) == ["type", "body"] and len(early) == 100


def test_the_cached_call_and_result_lists_are_the_blocks_of_their_type():
    """``tool_uses``/``tool_results``: the blocks of that type, in order, equal lists whether
    the event holds only them (then its own ``blocks`` list, read-only), some, or none."""
    use = ToolUseBlock(id="t1", name="bash", input={"cmd": "ls"})
    res = ToolResultBlock(tool_use_id="t1", content=[TextBlock(text="a")])
    for blocks in ([res], [res, res], [TextBlock(text="x"), use], [use], [], [TextBlock(text="x")], [res, TextBlock(text="y")]):
        e = Event(seq=1, id="e", role="user" if res in blocks else "assistant", blocks=blocks)
        assert e.tool_uses == [b for b in blocks if isinstance(b, ToolUseBlock)]
        assert e.tool_results == [b for b in blocks if isinstance(b, ToolResultBlock)]
        assert Event.model_validate(e.model_dump()) == e
