"""A model summary is completed from the lifted state, or rejected when it names nothing of a
section the state has content for (issue 8: a one-word answer replaced 491 events)."""

from __future__ import annotations

from compactor.summarize.completion import ALSO_HEADING, complete_from_state, missing_sections
from compactor.lifting.lift import lift_state
from tests.unit.engine_fixtures import Conv


def _session() -> Conv:
    c = Conv()
    c.user("Add retries to src/client.py. Never retry a POST.")
    c.call("Edit", {"file_path": "src/client.py", "old_string": "x", "new_string": "y"}, "ok")
    c.call("Bash", {"command": "pytest tests/test_client.py"}, "E   TypeError: bad\n1 failed", is_error=True)
    c.use("Bash", {"command": "deploy --prod"})  # abandoned: outcome unknown
    for i in range(15):
        c.call("Bash", {"command": f"ls dir{i}"}, "file\n" * 80)
    c.user("Now document it.")
    return c


def test_a_stub_answer_is_completed_with_what_the_state_says_the_next_turn_needs():
    c = _session()
    state = lift_state(c.events[:-1])
    assert set(missing_sections("## Goal\n- stub", state)) >= {"Goal", "Files changed", "Errors and failed approaches"}
    text, added = complete_from_state("## Goal\n- stub", state, 2_000)
    assert ALSO_HEADING in text
    assert "Add retries to src/client.py." in text and "Never retry a POST." in text
    assert "src/client.py" in text and "deploy --prod" in text
    assert missing_sections(text, state) == []
    assert "Goal" in added and "Files changed" in added


def test_a_complete_model_summary_is_left_as_written():
    c = _session()
    state = lift_state(c.events[:-1])
    full, _ = complete_from_state("", state, 10_000)
    again, added = complete_from_state(full, state, 10_000)
    assert added == [] and again == full
