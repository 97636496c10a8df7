"""What a Temporal namespace needs before compactor runs there, made so idempotently.

``compactor setup`` (compactor/cli/setup.py) calls these; ``compactor worker``, ``compactor
compact`` and :class:`~compactor.client.CompactorClient` only *check* (``require_search_attributes``)
and name the command when something is missing, because registering search attributes is a
cluster-admin action (the operator service) that a worker's credentials should not need.

Why each step reads before it writes: a second run must change nothing and say so, and on
clusters where ``AddSearchAttributes`` is slow (Elasticsearch visibility runs it as a system
workflow) adding what already exists is an error, not a no-op.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from compactor.errors import InvalidInput, NotFound, SetupRequired

#: Search attributes the workflows set; operators and the client filter by them.
SEARCH_ATTRIBUTES: dict[str, str] = {
    "CompactorTenant": "Keyword",
    "CompactorSession": "Keyword",
    "CompactorStatus": "Keyword",
    "CompactorTokensBefore": "Int",
    "CompactorTokensAfter": "Int",
}

SETUP_COMMAND = "compactor setup"
#: How long a freshly added attribute may take to show in ListSearchAttributes.
REGISTER_WAIT_S = 30.0


def schedule_id_for(tenant: str) -> str:
    """One sweep schedule per tenant (``compactor sweep`` and ``compactor setup`` share it)."""
    return f"compactor-sweep-{tenant}"


def _indexed_type(name: str) -> int:
    from temporalio.api.enums.v1 import IndexedValueType

    return IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{name.upper()}")


def _type_name(value: int) -> str:
    from temporalio.api.enums.v1 import IndexedValueType

    return IndexedValueType.Name(value).removeprefix("INDEXED_VALUE_TYPE_").title()


async def check_namespace(client: Any, namespace: str) -> None:
    """NotFound (exit 2) naming the namespace when the cluster does not have it."""
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.service import RPCError, RPCStatusCode

    try:
        await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=namespace))
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise NotFound(
                f"Temporal namespace {namespace!r} does not exist; create it (`temporal operator "
                f"namespace create --namespace {namespace}`) or set TEMPORAL_NAMESPACE"
            ) from None
        raise


async def registered_search_attributes(client: Any, namespace: str) -> dict[str, str]:
    """Custom search attributes of the namespace, name -> type (``Keyword``, ``Int``...)."""
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

    resp = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    return {name: _type_name(t) for name, t in resp.custom_attributes.items()}


def _missing(registered: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in SEARCH_ATTRIBUTES.items() if k not in registered}


def _wrong_type(registered: dict[str, str]) -> dict[str, str]:
    return {k: registered[k] for k, v in SEARCH_ATTRIBUTES.items() if k in registered and registered[k] != v}


async def require_search_attributes(client: Any, namespace: str) -> None:
    """SetupRequired (one line, exit 2) when the namespace lacks a search attribute we set."""
    from temporalio.service import RPCError

    try:
        registered = await registered_search_attributes(client, namespace)
    except RPCError:
        return  # not allowed to list (restricted credentials): the start itself will say
    missing = _missing(registered)
    if missing:
        raise _setup_required(namespace, list(missing))


def _setup_required(namespace: str, names: list[str]) -> SetupRequired:
    """One line naming the attributes ``names`` the namespace lacks and the command to run."""
    return SetupRequired(
        f"Temporal namespace {namespace!r} has no search attribute{'s' if len(names) > 1 else ''} "
        f"{', '.join(names)}; run `{SETUP_COMMAND}` once against this cluster (it registers them)",
        missing=sorted(names),
    )


def setup_required_from(exc: BaseException, namespace: str) -> SetupRequired | None:
    """The SetupRequired a workflow start failed with ("no mapping defined for search
    attribute"), else None."""
    text = str(exc)
    if "search attribute" not in text.lower() or "no mapping" not in text.lower():
        return None
    named = [k for k in SEARCH_ATTRIBUTES if k in text] or list(SEARCH_ATTRIBUTES)
    return _setup_required(namespace, named)


async def ensure_search_attributes(client: Any, namespace: str) -> tuple[list[str], list[str]]:
    """Register the missing search attributes; returns (added, already present)."""
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest

    registered = await registered_search_attributes(client, namespace)
    wrong = _wrong_type(registered)
    if wrong:
        want = ", ".join(f"{k} is {t}, compactor needs {SEARCH_ATTRIBUTES[k]}" for k, t in wrong.items())
        raise InvalidInput(f"namespace {namespace!r}: search attribute {want}; remove or rename it first")
    missing = _missing(registered)
    present = sorted(k for k in SEARCH_ATTRIBUTES if k not in missing)
    if not missing:
        return [], present
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=namespace, search_attributes={k: _indexed_type(v) for k, v in missing.items()}
        )
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REGISTER_WAIT_S
    while _missing(await registered_search_attributes(client, namespace)):
        if loop.time() > deadline:
            raise TimeoutError(f"search attributes {', '.join(missing)} not visible after {REGISTER_WAIT_S:.0f}s")
        await asyncio.sleep(0.5)
    return sorted(missing), present


# --- sweep schedules -------------------------------------------------------------------------------


@dataclass
class ScheduleResult:
    schedule: str
    tenant: str
    every: str
    action: str  # created | updated | unchanged
    changed: list[str] = field(default_factory=list)


def desired_schedule(inp: Any, *, every: timedelta, task_queue: str) -> Any:
    from temporalio.client import Schedule, ScheduleActionStartWorkflow, ScheduleIntervalSpec, ScheduleSpec

    from activities.contracts import SWEEP_WORKFLOW_NAME

    return Schedule(
        action=ScheduleActionStartWorkflow(
            SWEEP_WORKFLOW_NAME, inp, id=f"sweep/{inp.tenant}", task_queue=task_queue
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
    )


async def _differences(client: Any, current: Any, want: Any) -> list[str]:
    """What differs between a described schedule and the wanted one (empty = unchanged)."""
    from activities.contracts import SweepInput

    diffs: list[str] = []
    cur_a, want_a = current.action, want.action
    if getattr(cur_a, "workflow", None) != want_a.workflow:
        diffs.append("workflow")
    if getattr(cur_a, "task_queue", None) != want_a.task_queue:
        diffs.append("task_queue")
    if getattr(cur_a, "id", None) != want_a.id:
        diffs.append("workflow_id")
    try:
        args = await client.data_converter.decode(list(cur_a.args), [SweepInput])
        if not args or args[0] != want_a.args[0]:
            diffs.append("input")
    except Exception:  # noqa: BLE001 - an input we cannot read (older shape, other codec key) is replaced
        diffs.append("input")
    cur_every = [i.every for i in current.spec.intervals]
    if cur_every != [i.every for i in want.spec.intervals] or current.spec.cron_expressions or current.spec.calendars:
        diffs.append("interval")
    if getattr(current.state, "paused", False):
        diffs.append("paused")
    return diffs


async def ensure_sweep_schedule(client: Any, inp: Any, *, every: timedelta, every_text: str,
                                task_queue: str) -> ScheduleResult:
    """Create the tenant's sweep schedule, or update it to ``inp``/``every``; unchanged when equal."""
    from temporalio.client import ScheduleUpdate
    from temporalio.service import RPCError, RPCStatusCode

    sid = schedule_id_for(inp.tenant)
    want = desired_schedule(inp, every=every, task_queue=task_queue)
    handle = client.get_schedule_handle(sid)
    try:
        desc = await handle.describe()
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        await client.create_schedule(sid, want)
        return ScheduleResult(sid, inp.tenant, every_text, "created")
    diffs = await _differences(client, desc.schedule, want)
    if not diffs:
        return ScheduleResult(sid, inp.tenant, every_text, "unchanged")
    await handle.update(lambda _: ScheduleUpdate(schedule=want))
    return ScheduleResult(sid, inp.tenant, every_text, "updated", diffs)
