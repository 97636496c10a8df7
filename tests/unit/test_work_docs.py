"""``work_docs``: a document dumped with its nested parts gives the plain dump's bytes, and a
part's bytes are handed out only for that very object while its entry is kept."""

from __future__ import annotations

import json

from activities.merge import _dumps
from activities.work_docs import _HOLE, WorkDocs, dumps_nested


def _doc(state: object) -> dict:
    return {"z": [1, 2.5, None], "checkpoint": {"b": "é\n\u2028", "state": state, "a": {"k": True}},
            "artifacts": ["x"], "mid_turn": False}


def test_nested_parts_are_the_plain_dumps() -> None:
    for state in ({"files": ["src/a.py", "ü"], "n": 1e-7, "big": 2**70}, {}, [], "text"):
        doc = _doc(state)
        got = dumps_nested(doc, ("checkpoint", "state"))
        assert got == [_dumps(doc), _dumps(doc["checkpoint"]), _dumps(state)]
        # and they are what a parse of the whole gives back, dumped
        back = json.loads(got[0])
        assert _dumps(back["checkpoint"]) == got[1] and _dumps(back["checkpoint"]["state"]) == got[2]


def test_a_value_equal_to_the_placeholder_falls_back_to_a_plain_dump() -> None:
    doc = _doc({"files": []})
    doc["checkpoint"]["b"] = _HOLE
    assert dumps_nested(doc, ("checkpoint", "state")) is None


def test_a_part_is_handed_out_for_that_object_only_while_its_entry_is_kept() -> None:
    docs = WorkDocs()
    doc = json.loads(_dumps(_doc({"files": ["a"]})))
    state = doc["checkpoint"]["state"]
    docs.put("k", b"whole", doc, [(state, b"state-bytes")])
    assert docs.dumped(state) == b"state-bytes"
    assert docs.dumped(dict(state)) is None  # an equal copy is not the object
    docs.put("k", b"other", {})  # the entry replaced: its parts go with it
    assert docs.dumped(state) is None
