"""Operator commands that read a compaction's Temporal history: ``history`` (the step
timeline of a session's latest compaction workflow) and ``replay`` (its history against this
code, for determinism).

Commands that talk to Temporal use ``TEMPORAL_ADDRESS`` (or ``--address``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from compactor.cli.common import add_json_arg, add_store_args, add_temporal_args, print_json, table
from compactor.cli.ops import _client, _is_not_found, _settings, run_and_exit
from compactor.errors import NotFound


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="step timeline of a session's latest compaction workflow")
    p.add_argument("session", metavar="SESSION", help="session id (or a workflow id such as compact/T/S)")
    add_store_args(p)  # --tenant names the session; --store is accepted for one grammar
    p.add_argument("--run-id", default=None)
    add_json_arg(p, "print the step timeline as JSON (shape in docs/cli.md)")
    p.add_argument("--raw", action="store_true", help="dump the history as Temporal's own JSON")
    add_temporal_args(p)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("replay", help="replay a session's compaction history against this code (determinism)")
    p.add_argument("session", metavar="SESSION|WORKFLOW_ID|HISTORY.json")
    add_store_args(p)  # --tenant names the session; --store is accepted for one grammar
    add_json_arg(p)
    add_temporal_args(p)
    p.set_defaults(func=cmd_replay)


# --- history / replay ----------------------------------------------------------------------------


def cmd_history(args: argparse.Namespace) -> int:
    return run_and_exit(_history(args))


def workflow_id_of(ref: str, tenant: str) -> str:
    """``SESSION`` -> its compaction workflow id ``compact/T/S``; a workflow id (it has a '/',
    which no session id may) is taken as given."""
    from compactor.cli.common import check_workflow_id
    from compactor.client import workflow_id_for
    from compactor.store import validate_id

    if "/" in ref:
        check_workflow_id(ref)  # with COMPACTOR_TENANTS: one of those tenants' workflows only
        return ref
    return workflow_id_for(validate_id(tenant, "tenant id"), validate_id(ref, "session id"))


async def _fetch_history(settings: Any, workflow_id: str, run_id: str | None = None) -> Any:
    """A workflow's history; with COMPACTOR_TENANTS, only a bound tenant's (id, then its
    CompactorTenant search attribute)."""
    from temporalio.common import SearchAttributeKey

    from compactor.cli.common import check_workflow_id, cli_scope

    check_workflow_id(workflow_id)  # before any RPC
    client = await _client(settings)
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    try:
        if cli_scope().bound:
            desc = await handle.describe()
            attr = desc.typed_search_attributes.get(SearchAttributeKey.for_keyword("CompactorTenant"))
            if attr is not None:
                cli_scope().check(attr)
        return await handle.fetch_history()
    except Exception as exc:
        if _is_not_found(exc):
            raise NotFound(f"no workflow {workflow_id!r} on {settings.temporal_address} "
                           f"(namespace {settings.temporal_namespace}); was the session ever "
                           f"compacted durably there?") from None
        raise


async def _history(args: argparse.Namespace) -> int:
    wf_id = workflow_id_of(args.session, args.tenant)
    history = await _fetch_history(_settings(args), wf_id, args.run_id)
    if args.raw:
        print(history.to_json())
        return 0
    if args.json:
        print_json({"workflow_id": history.workflow_id, "events": len(history.events),
                    "steps": timeline(history)})
        return 0
    print(render_timeline(history))
    return 0


def timeline(history: Any) -> list[dict[str, Any]]:
    """Steps of a workflow history: name, kind, attempts, duration, outcome, summary."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.converter import PayloadConverter

    conv = PayloadConverter.default
    steps: dict[int, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    t0 = None
    for ev in history.events:
        ts = ev.event_time.ToDatetime()
        t0 = t0 or ts
        et = ev.event_type
        if et == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            a = ev.activity_task_scheduled_event_attributes
            summary = _summary(conv, ev)
            step = {"step": a.activity_type.name, "kind": "activity", "queue": a.task_queue.name,
                    "at_ms": (ts - t0).total_seconds() * 1000, "start": ts, "attempts": 1,
                    "outcome": "scheduled", "summary": summary, "ms": None}
            steps[ev.event_id] = step
            out.append(step)
        elif et == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            a = ev.activity_task_started_event_attributes
            s = steps.get(a.scheduled_event_id)
            if s:
                s["attempts"] = a.attempt
                if a.HasField("last_failure"):
                    s["last_failure"] = a.last_failure.message
        elif et in (EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
                    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT):
            attrs = (ev.activity_task_completed_event_attributes
                     if et == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
                     else ev.activity_task_failed_event_attributes
                     if et == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
                     else ev.activity_task_timed_out_event_attributes)
            s = steps.get(attrs.scheduled_event_id)
            if s:
                s["ms"] = (ts - s["start"]).total_seconds() * 1000
                s["outcome"] = {EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "completed",
                                EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "failed"}.get(et, "timed out")
                if et != EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                    s["failure"] = attrs.failure.message or attrs.failure.cause.message
        elif et == EventType.EVENT_TYPE_MARKER_RECORDED:
            m = ev.marker_recorded_event_attributes
            if m.marker_name != "core_local_activity":
                continue
            data: dict[str, Any] = {}
            if "data" in m.details and m.details["data"].payloads:
                try:
                    data = conv.from_payload(m.details["data"].payloads[0], dict)
                except Exception:
                    data = {}
            ms = None
            if "result" in m.details and m.details["result"].payloads:
                try:  # our store activities report the time they spent
                    ms = conv.from_payload(m.details["result"].payloads[0], dict).get("ms")
                except Exception:
                    ms = None
            failed = m.HasField("failure")
            step = {"step": data.get("activity_type", "local activity"), "kind": "local",
                    "at_ms": (ts - t0).total_seconds() * 1000, "attempts": data.get("attempt", 1),
                    "outcome": "failed" if failed else "completed", "ms": ms,
                    "summary": _summary(conv, ev)}
            if failed:
                step["failure"] = m.failure.message or m.failure.cause.message
            out.append(step)
        elif et == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            a = ev.workflow_execution_signaled_event_attributes
            out.append({"step": f"signal {a.signal_name}", "kind": "signal",
                        "at_ms": (ts - t0).total_seconds() * 1000, "attempts": 1, "outcome": "received",
                        "ms": None, "summary": ""})
        elif et in (EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
                    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED):
            outcome = EventType.Name(et).removeprefix("EVENT_TYPE_WORKFLOW_EXECUTION_").lower()
            step = {"step": "workflow", "kind": "end", "at_ms": (ts - t0).total_seconds() * 1000,
                    "attempts": 1, "outcome": outcome, "ms": (ts - t0).total_seconds() * 1000, "summary": ""}
            if et == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
                step["failure"] = ev.workflow_execution_failed_event_attributes.failure.message
            out.append(step)
    for s in out:
        s.pop("start", None)
    return out


def _summary(conv: Any, ev: Any) -> str:
    """The readable summary the workflow attached to an activity (user metadata)."""
    if not ev.HasField("user_metadata") or not ev.user_metadata.HasField("summary"):
        return ""
    try:
        return str(conv.from_payload(ev.user_metadata.summary, str))
    except Exception:
        return ""


def render_timeline(history: Any) -> str:
    rows = []
    notes = []
    for s in timeline(history):
        ms = f"{s['ms']:.0f}" if s.get("ms") is not None else "-"
        rows.append([f"+{s['at_ms']:.0f}", s["step"], s["kind"], s["attempts"], ms, s["outcome"],
                     (s.get("summary") or "")[:70]])
        for key in ("last_failure", "failure"):
            if s.get(key):
                notes.append(f"  {s['step']}: {key.replace('_', ' ')}: {s[key]}")
    out = f"workflow {history.workflow_id}\n" + table(
        rows, ["at ms", "step", "kind", "attempts", "ms", "outcome", "summary"])
    if notes:
        out += "\n\nfailures\n" + "\n".join(notes)
    return out


def cmd_replay(args: argparse.Namespace) -> int:
    return run_and_exit(_replay(args))


async def _replay(args: argparse.Namespace) -> int:
    from temporalio.client import WorkflowHistory
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Replayer

    from workflows.compact_session import CompactSessionWorkflow
    from workflows.sweep import SweepSessionsWorkflow

    path = Path(args.session)
    if path.suffix == ".json" and path.exists():
        history = WorkflowHistory.from_json(path.stem, path.read_text())
    else:
        history = await _fetch_history(_settings(args), workflow_id_of(args.session, args.tenant))
    from workers.codec import codec_from_settings, with_codec

    # Encrypted histories replay with the configured keys; plain ones pass through the codec.
    converter = with_codec(pydantic_data_converter, codec_from_settings(_settings(args)))
    replayer = Replayer(workflows=[CompactSessionWorkflow, SweepSessionsWorkflow],
                        data_converter=converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    failure = None if result.replay_failure is None else str(result.replay_failure)
    if args.json:
        print_json({"workflow_id": history.workflow_id, "events": len(history.events),
                    "ok": failure is None, "failure": failure})
    elif failure is not None:
        print(f"replay of {history.workflow_id} FAILED: {failure}", file=sys.stderr)
    else:
        print(f"replay of {history.workflow_id}: ok ({len(history.events)} events, deterministic)")
    return 0 if failure is None else 1
