"""The payloads of the recorded histories decode with today's contracts and encode back to the
JSON that was recorded (every field kept, same names, same values): what a running workflow or
an old history needs of a deployment whose contract modules were rearranged (the split of
``activities/contracts.py``, session 20). New optional fields may be added; nothing recorded may
be dropped or renamed.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from activities import breaker, contracts as c

HISTORIES = sorted((Path(__file__).resolve().parents[1] / "histories").glob("*.json"))

# activity type -> (input model, result model), as the workflows schedule them
ACTIVITIES: dict[str, tuple[type, type]] = {
    c.ActivityName.FREEZE_SNAPSHOT: (c.FreezeInput, c.SnapshotRef),
    c.ActivityName.PLAN_COMPACTION: (c.PlanInput, c.PlanOutput),
    c.ActivityName.EXTERNALIZE: (c.ExternalizeInput, c.ExternalizeOutput),
    c.ActivityName.LIFT_STATE: (c.LiftInput, c.LiftOutput),
    c.ActivityName.SUMMARIZE_STRUCTURED: (c.SummarizeInput, c.SummarizeOutput),
    c.ActivityName.SUMMARIZE_ANTHROPIC: (c.SummarizeInput, c.SummarizeOutput),
    c.ActivityName.SUMMARIZE_NATIVE: (c.SummarizeInput, c.SummarizeOutput),
    c.ActivityName.VALIDATE_CANDIDATE: (c.ValidateInput, c.ValidateOutput),
    c.ActivityName.FINISH_STRUCTURED: (c.FinishStructuredInput, c.FinishStructuredOutput),
    c.ActivityName.EXTERNALIZE_FINISH: (c.ExternalizeFinishInput, c.ExternalizeFinishOutput),
    c.ActivityName.COMMIT_SWAP: (c.CommitInput, c.CommitOutput),
    c.ActivityName.WRITE_RECORD: (c.RecordInput, c.RecordOutput),
    c.ActivityName.COMMIT_RECORD: (c.CommitRecordInput, c.CommitRecordOutput),
    c.ActivityName.LIST_DUE_SESSIONS: (c.SweepInput, c.DueSessions),
    breaker.CHECK_BREAKER: (breaker.BreakerCheckInput, breaker.BreakerCheckOutput),
    breaker.RECORD_BREAKER: (breaker.BreakerRecordInput, breaker.BreakerRecordOutput),
}
WORKFLOWS = {
    c.WORKFLOW_NAME: (c.CompactSessionInput, c.CompactSessionOutput),
    c.SWEEP_WORKFLOW_NAME: (c.SweepInput, c.SweepOutput),
}


def _json(payload: dict[str, Any]) -> Any:
    return json.loads(base64.b64decode(payload["data"]))


def _payloads(history: dict[str, Any]) -> list[tuple[str, type, Any]]:
    """(where, model, recorded JSON) of every pydantic payload of a history."""
    out: list[tuple[str, type, Any]] = []
    scheduled: dict[str, str] = {}
    wf_type = ""
    for ev in history["events"]:
        kind, eid = ev["eventType"], ev["eventId"]
        if kind == "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED":
            a = ev["workflowExecutionStartedEventAttributes"]
            wf_type = a["workflowType"]["name"]
            out += [(f"{wf_type} input", WORKFLOWS[wf_type][0], _json(p)) for p in a["input"]["payloads"]]
        elif kind == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED":
            a = ev["workflowExecutionCompletedEventAttributes"]
            res = a.get("result", {}).get("payloads", [])
            out += [(f"{wf_type} result", WORKFLOWS[wf_type][1], _json(p)) for p in res if _json(p) is not None]
        elif kind == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED":
            a = ev["activityTaskScheduledEventAttributes"]
            name = scheduled[eid] = a["activityType"]["name"]
            out += [(f"{name} input", ACTIVITIES[name][0], _json(p)) for p in a["input"]["payloads"]]
        elif kind == "EVENT_TYPE_ACTIVITY_TASK_COMPLETED":
            a = ev["activityTaskCompletedEventAttributes"]
            name = scheduled[a["scheduledEventId"]]
            out += [(f"{name} result", ACTIVITIES[name][1], _json(p)) for p in a["result"]["payloads"]]
        elif kind == "EVENT_TYPE_MARKER_RECORDED":
            a = ev["markerRecordedEventAttributes"]
            if a["markerName"] != "core_local_activity" or "result" not in a["details"]:
                continue
            name = _json(a["details"]["data"]["payloads"][0])["activity_type"]
            out += [(f"{name} result (local)", ACTIVITIES[name][1], _json(p))
                    for p in a["details"]["result"]["payloads"]]
    return out


def _keeps(new: Any, old: Any, where: str) -> None:
    """Everything recorded in ``old`` is in ``new``, under the same names, with the same values."""
    if isinstance(old, dict):
        assert isinstance(new, dict), where
        missing = sorted(set(old) - set(new))
        assert not missing, f"{where}: recorded fields no longer encoded: {missing}"
        for k, v in old.items():
            _keeps(new[k], v, f"{where}.{k}")
    elif isinstance(old, list):
        assert isinstance(new, list) and len(new) == len(old), where
        for i, (n, o) in enumerate(zip(new, old)):
            _keeps(n, o, f"{where}[{i}]")
    else:
        assert new == old, f"{where}: {old!r} recorded, {new!r} now"


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
def test_recorded_payloads_decode_and_encode_unchanged(path: Path):
    payloads = _payloads(json.loads(path.read_text()))
    assert payloads, path.name
    conv = pydantic_data_converter.payload_converter
    for where, model, recorded in payloads:
        value = model.model_validate(recorded)
        (again,) = conv.to_payloads([value])
        _keeps(json.loads(again.data), recorded, f"{path.stem}: {where}")


def test_the_histories_hold_every_step_payload():
    """The check above sees the payloads of every step the compaction schedules (so a contract
    moved without its fields is caught on real recorded data, not on none). (No sweep history
    is recorded: the sweep's payloads live in ``contracts`` itself, unmoved.)"""
    seen = {where.split(" ")[0] for p in HISTORIES for where, _, _ in _payloads(json.loads(p.read_text()))}
    unrecorded = {c.ActivityName.SUMMARIZE_NATIVE, c.ActivityName.LIST_DUE_SESSIONS}
    assert {str(n) for n in c.ActivityName} - unrecorded <= seen
    assert {breaker.CHECK_BREAKER, breaker.RECORD_BREAKER, c.WORKFLOW_NAME} <= seen
