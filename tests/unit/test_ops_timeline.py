"""The operator timeline reads recorded histories (no server needed)."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import WorkflowHistory

from compactor.cli.history import render_timeline, timeline

HISTORIES = Path(__file__).resolve().parents[1] / "histories"


def test_timeline_of_a_merge_shows_steps_signal_and_outcome():
    path = HISTORIES / "v3-compact-merge.json"  # recorded with lift/summary/validation as three steps
    steps = timeline(WorkflowHistory.from_json("wf", path.read_text()))
    names = [s["step"] for s in steps]
    assert names.index("validate_candidate") < names.index("signal resume") < names.index("commit_swap")
    assert steps[-1]["step"] == "workflow" and steps[-1]["outcome"] == "completed"
    commit = next(s for s in steps if s["step"] == "commit_swap")
    assert commit["outcome"] == "completed" and "swap head" in commit["summary"]


def test_timeline_names_the_failure():
    path = HISTORIES / "compact-invalid-summary.json"
    text = render_timeline(WorkflowHistory.from_json("wf", path.read_text()))
    assert "failed" in text and "constraint_dropped" in text
