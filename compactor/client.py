"""Python client for platforms: append events, read the view, compact, keep within budget.

A platform holds one :class:`CompactorClient` (a Temporal client + the object store) and calls
:meth:`CompactorClient.ensure_budget` before each model request. Under the soft trigger it
does nothing; past it, it starts a background compaction and returns the current view at once
(the agent's next turn is never blocked); past the hard limit it waits for the compaction.
It never starts (or waits on) a run known to end ``noop``: one whose target the view already
fits (``policy.post_compact_tokens`` sits below the soft threshold, so this only happens with
provider usage or calibration above our count), or one for a session whose last compaction
could not shrink it and that has not grown since (the head's ``noop_view_tokens``).

Appends and view reads go straight to the object store (the session log is the source of
truth, and appends are safe against a running compaction: the swap merges them); only
compaction goes through Temporal. The operator reads (``inspect``, ``records``, ``diff``,
``rollback``, ``breaker``) are the CLI's, typed; a session with no events raises
:class:`~compactor.errors.NotFound` everywhere.

    async with CompactorClient.connect() as cc:          # or: cc = await CompactorClient.connect()
        await cc.append("s1", events)
        request = await cc.view("s1", as_request=True)   # {"system": ..., "messages": [...]}

    with CompactorClient.sync() as cc:                   # the same, blocking (scripts, notebooks)
        print(cc.inspect("s1").checkpoint)

A client is bound to its tenant (or to the list given as ``tenants=[...]``, or
``COMPACTOR_TENANTS``): a call naming another tenant raises ``TenantNotAllowed`` before any
I/O, and every compaction request is checked (ids, numbers) before a workflow is started.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio.client import Client, WorkflowHandle
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)

from activities.contracts import DEFAULT_MODEL
from compactor.errors import InvalidInput, TenantNotAllowed
from compactor.events import Event
from compactor.engine.measure import view_tokens
from compactor.engine.policy import make_policy, should_compact, start_decision
from compactor.tenancy import TenantScope, check_compaction_request, tenant_of_workflow_id
from compactor.tokens import calibration_ratio

if TYPE_CHECKING:
    from compactor.breaker import BreakerState
    from compactor.engine.diff import CheckpointDiff
    from compactor.operator import RollbackResult, SessionReport
    from compactor.records import CompactionRecord
    from compactor.store import AppendResult

T = TypeVar("T")

WORKFLOW_NAME = "CompactSessionWorkflow"  # = activities.contracts.WORKFLOW_NAME


def workflow_id_for(tenant: str, session: str) -> str:
    """One compaction per session at a time: the id names the session."""
    return f"compact/{tenant}/{session}"


class BudgetResult(BaseModel):
    """What :meth:`CompactorClient.ensure_budget` did."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    action: Literal["none", "started", "waited"] = Field(
        description="none: under the soft trigger; started: background compaction started or "
        "attached, view returned at once; waited: past the hard limit, compacted first."
    )
    need: str = Field(description="should_compact's verdict: none | soft | hard.")
    tokens: int = Field(description="Tokens of the returned view (our count).")
    view: list[Event]
    workflow_id: str | None = None
    result: Any | None = Field(default=None, description="CompactSessionOutput when waited.")
    reason: str | None = Field(
        default=None,
        description="Why no compaction was started although a trigger was reached: "
        "within_target (the run would end noop) or unshrinkable (the last run could not shrink "
        "the view and it has not grown since; the agent is not blocked on a run that cannot help).",
    )


class MessagesRequest(BaseModel):
    """A view rendered as a Messages API request body: pass it as ``client.messages.create(
    model=..., max_tokens=..., **request.model_dump())``."""

    system: str = Field(default="", description="Pinned (system/developer) events, joined.")
    messages: list[dict[str, Any]] = Field(description="Alternating user/assistant messages.")


class HeldDecision(BaseModel):
    """What ``approve``/``reject`` did to a compaction held before its swap."""

    workflow_id: str
    decision: Literal["approve", "reject"]
    status: Literal["committed", "noop", "failed"] | None = Field(
        default=None, description="How the run ended; None when not waited for.")
    checkpoint: str | None = None
    error: str | None = None


async def decide_held(temporal: Client, workflow_id: str, *, approve: bool, reason: str | None = None,
                      wait: bool = True) -> HeldDecision:
    """Signal a held compaction (``resume`` or ``reject``); NotFound unless one is waiting."""
    from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
    from temporalio.service import RPCError, RPCStatusCode

    from activities.contracts import CompactSessionOutput, CompactStatus
    from compactor.errors import NotFound

    handle = temporal.get_workflow_handle(workflow_id, result_type=CompactSessionOutput)
    try:
        desc = await handle.describe()
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        raise NotFound(f"no compaction {workflow_id!r}: nothing is held") from None
    status = None
    if desc.status == WorkflowExecutionStatus.RUNNING:
        status = await handle.query("status", result_type=CompactStatus)
    if status is None or not status.waiting_for_resume:
        where = f"its run is at {status.step}" if status else f"its last run is {desc.status.name.lower()}"
        raise NotFound(f"no held compaction {workflow_id!r} ({where}); start one with "
                       f"`compactor compact SESSION --hold`")
    if approve:
        await handle.signal("resume")
    else:
        await handle.signal("reject", reason or "rejected by an operator")
    out = HeldDecision(workflow_id=workflow_id, decision="approve" if approve else "reject")
    if not wait:
        return out
    try:
        res = await handle.result()
    except WorkflowFailureError as exc:
        cause = getattr(exc, "cause", None) or exc
        return out.model_copy(update={"status": "failed", "error": str(cause)})
    return out.model_copy(update={"status": res.status, "checkpoint": res.checkpoint})


def _awaitable_cm(fn: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., _Connecting[T]]:
    """Let ``connect`` be awaited or used as ``async with CompactorClient.connect(...)``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> _Connecting[T]:
        return _Connecting(fn(*args, **kw))

    return wrapper


class _Connecting(Awaitable[T]):
    def __init__(self, coro: Coroutine[Any, Any, T]) -> None:
        self._coro = coro
        self._client: Any = None

    def __await__(self) -> Generator[Any, None, T]:
        return self._coro.__await__()

    async def __aenter__(self) -> T:
        self._client = await self._coro
        return await self._client.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        await self._client.__aexit__(*exc)


class CompactorClient:
    """Platform-facing client, bound to its tenant(s). Blocking store calls run in threads.

    Args:
        tenant: the tenant calls act for when they name none (default: the first of
            ``tenants``, else ``"default"``).
        tenants: every tenant this client may act for; without it only ``tenant``. A call
            with ``tenant=`` outside the list raises ``TenantNotAllowed`` before any I/O.
    """

    def __init__(
        self,
        temporal: Client,
        store: Any,
        *,
        tenant: str | None = None,
        tenants: Sequence[str] | None = None,
        task_queue: str = "compactor",
        llm_task_queue: str | None = None,
        policy: str = "default",
        summarizer: str = "structured",
        model: str = DEFAULT_MODEL,
    ) -> None:
        self.temporal = temporal
        self.store = store
        self.scope = TenantScope.for_client(tenant, tenants)
        self.tenant = self.scope.default
        self.task_queue = task_queue
        self.llm_task_queue = llm_task_queue
        self.policy = policy
        self.summarizer = summarizer
        self.model = model

    async def __aenter__(self) -> CompactorClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Nothing to release today (the Temporal client closes with its runtime); kept so
        callers need not change when one is added."""

    @classmethod
    def sync(cls, settings: Any = None, address: str | None = None, **kw: Any) -> SyncCompactorClient:
        """A blocking facade over a client it connects on its own event loop thread."""
        return SyncCompactorClient(settings, address, **kw)

    @classmethod
    @_awaitable_cm
    async def connect(cls, settings: Any = None, address: str | None = None, **kw: Any) -> CompactorClient:
        """Client from settings (``COMPACTOR_*``, ``TEMPORAL_ADDRESS``)."""
        from compactor.store import open_store
        from workers.settings import Settings
        from workers.worker import _store_s3_client, connect

        settings = settings or Settings()
        store = open_store(settings.store)
        temporal = await connect(settings, address, s3_client=_store_s3_client(store))
        kw.setdefault("tenant", settings.tenant)
        if settings.tenants:
            kw.setdefault("tenants", list(settings.tenants))
        kw.setdefault("task_queue", settings.task_queue)
        kw.setdefault("llm_task_queue", settings.llm_task_queue)
        kw.setdefault("policy", settings.policy)
        kw.setdefault("summarizer", settings.summarizer)
        kw.setdefault("model", settings.model)
        return cls(temporal, store, **kw)

    @property
    def tenants(self) -> tuple[str, ...]:
        """The tenants this client may act for."""
        return self.scope.allowed

    # --- log ---------------------------------------------------------------------------------------
    def _log(self, session: str, tenant: str | None = None) -> Any:
        from compactor.store import SessionLog

        return SessionLog(self.store, self.scope.check(tenant), session)

    async def append(self, session: str, events: Sequence[Event], *, tenant: str | None = None) -> AppendResult:
        """Append events (idempotent by event id); returns the store's AppendResult."""
        log = self._log(session, tenant)
        return await asyncio.to_thread(log.append, list(events))

    @overload
    async def view(self, session: str, *, tenant: str | None = None,
                   as_request: Literal[False] = False) -> list[Event]: ...
    @overload
    async def view(self, session: str, *, tenant: str | None = None,
                   as_request: Literal[True]) -> MessagesRequest: ...

    async def view(self, session: str, *, tenant: str | None = None,
                   as_request: bool = False) -> list[Event] | MessagesRequest:
        """The view the next model request is built from; ``as_request``: rendered as a
        Messages API request (a call still waiting for its result gets an "outcome unknown"
        placeholder, so the request is always one the API accepts)."""
        log = self._log(session, tenant)
        view = await asyncio.to_thread(log.read_view)
        if not as_request:
            return view
        from compactor.engine.measure import render_request

        system, messages = render_request(view)
        return MessagesRequest(system=system, messages=messages)

    # --- operator reads (the CLI's inspect / rollback / breaker) -----------------------------------
    async def _op(self, fn: Callable[..., T], session: str, tenant: str | None, *args: Any, **kw: Any) -> T:
        return await asyncio.to_thread(fn, self._log(session, tenant), *args, **kw)

    async def inspect(self, session: str, *, tenant: str | None = None) -> SessionReport:
        """Head, checkpoints and compaction records of a session."""
        from compactor import operator

        return await self._op(operator.inspect_session, session, tenant)

    async def records(self, session: str, *, tenant: str | None = None) -> list[CompactionRecord]:
        """The session's compaction records, oldest first."""
        from compactor import operator

        return await self._op(operator.records, session, tenant)

    async def diff(self, session: str, checkpoint: str | None = None, *,
                   tenant: str | None = None) -> CheckpointDiff:
        """What ``checkpoint`` (default: the current one) replaced and what its summary kept."""
        from compactor import operator

        return await self._op(operator.checkpoint_diff, session, tenant, checkpoint)

    async def rollback(self, session: str, to: str | None, *, tenant: str | None = None) -> RollbackResult:
        """Point the session at checkpoint ``to`` (None: no checkpoint); nothing is deleted."""
        from compactor import operator

        return await self._op(operator.rollback, session, tenant, to)

    async def breaker(self, session: str, *, tenant: str | None = None,
                      clear_by: str | None = None) -> BreakerState:
        """The session's circuit breaker; ``clear_by`` (who) closes it."""
        from compactor import operator

        return await self._op(operator.breaker, session, tenant, clear_by=clear_by)

    async def approve(self, session: str, *, tenant: str | None = None, wait: bool = True) -> HeldDecision:
        """Approve the swap of a compaction held with ``pause_before_commit``."""
        return await decide_held(self.temporal, workflow_id_for(self.scope.check(tenant), session),
                                 approve=True, wait=wait)

    async def reject(self, session: str, reason: str = "rejected by an operator", *,
                     tenant: str | None = None, wait: bool = True) -> HeldDecision:
        """Reject a held compaction: it ends failed, the session unchanged."""
        return await decide_held(self.temporal, workflow_id_for(self.scope.check(tenant), session),
                                 approve=False, reason=reason, wait=wait)

    # --- compaction --------------------------------------------------------------------------------
    async def start_compaction(
        self,
        session: str,
        *,
        tenant: str | None = None,
        window: int = 200_000,
        max_output: int = 32_000,
        target_tokens: int | None = None,
        policy: str | None = None,
        summarizer: str | None = None,
        trigger: str = "manual",
        pause_before_commit: bool = False,
        **extra: Any,
    ) -> WorkflowHandle:
        """Start a compaction, or attach to the one already running for this session."""
        from activities.contracts import WORKFLOW_PATHS, CompactSessionInput

        tenant = self.scope.check(tenant)
        try:
            inp = CompactSessionInput(
                paths=WORKFLOW_PATHS,
                tenant=tenant,
                session=session,
                policy=policy or self.policy,
                window=window,
                max_output=max_output,
                target_tokens=target_tokens,
                summarizer=summarizer or self.summarizer,  # type: ignore[arg-type]
                model=self.model,
                llm_task_queue=self.llm_task_queue,
                trigger=trigger,
                pause_before_commit=pause_before_commit,
                **extra,
            )
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err.get("loc", ()))
            raise InvalidInput(f"invalid compaction request: {field}: {err.get('msg')}") from None
        # Before the workflow exists: a bad request must not leave a failed run in history.
        check_compaction_request(inp)
        try:
            return await self._start(inp, tenant, session, trigger)
        except Exception as exc:
            from compactor.errors import SetupRequired
            from workers.setup import require_search_attributes, setup_required_from

            # A namespace without our search attributes: name the command, not the RPC error,
            # and every attribute missing (the server's error names only the first it met).
            missing = setup_required_from(exc, self.temporal.namespace)
            if missing is not None:
                try:
                    await require_search_attributes(self.temporal, self.temporal.namespace)
                except SetupRequired as every:
                    raise every from None
                raise missing from None
            raise

    async def _start(self, inp: Any, tenant: str, session: str, trigger: str) -> WorkflowHandle:
        from activities.contracts import CompactSessionOutput

        return await self.temporal.start_workflow(
            WORKFLOW_NAME,
            inp,
            id=workflow_id_for(tenant, session),
            task_queue=self.task_queue,
            result_type=CompactSessionOutput,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(SearchAttributeKey.for_keyword("CompactorTenant"), tenant),
                    SearchAttributePair(SearchAttributeKey.for_keyword("CompactorSession"), session),
                    # (the workflow does not upsert these again: workflows.compact_session.FREEZE_FINISH_PATCH)
                    SearchAttributePair(SearchAttributeKey.for_keyword("CompactorStatus"), "running"),
                ]
            ),
            static_summary=f"compact {tenant}/{session} ({trigger})",
            # Eager start: when a worker on this same Client polls the task queue and has a free
            # workflow-task slot (bench perf, durable_cpu, `compactor compact`'s embedded worker),
            # the SDK core asks for it and the run's first workflow task comes back in the start
            # response, to that worker: no poll/match round trip. Otherwise the core drops the
            # flag and the server queues the task as before (a client without a worker of its own).
            request_eager_start=True,
        )

    # --- operators: history, scoped to the bound tenants -------------------------------
    async def history(self, workflow_id: str, *, run_id: str | None = None) -> Any:
        """A compaction's Temporal history, when the workflow belongs to a bound tenant.

        The tenant is read from the workflow id before any call (``compact/T/S``) and, as the
        id is chosen by whoever starts a workflow, also from its ``CompactorTenant`` search
        attribute; an id that names no tenant is refused.
        """
        named = tenant_of_workflow_id(workflow_id)
        if named is None:
            raise TenantNotAllowed(
                f"workflow {workflow_id!r} names no tenant; this client reads only compactor "
                f"workflows of {', '.join(self.tenants)}", workflow_id=workflow_id,
            )
        self.scope.check(named)
        handle = self.temporal.get_workflow_handle(workflow_id, run_id=run_id)
        desc = await handle.describe()
        attr = desc.typed_search_attributes.get(SearchAttributeKey.for_keyword("CompactorTenant"))
        if attr is not None:
            self.scope.check(attr)
        return await handle.fetch_history()

    async def compactions(self, *, tenant: str | None = None, limit: int = 100) -> list[Any]:
        """Recent compaction workflows (``WorkflowExecution``), of the bound tenants only."""
        tenants = [self.scope.check(tenant)] if tenant is not None else list(self.tenants)
        listed = ", ".join(f"'{t}'" for t in tenants)  # ids are validated: no quotes in them
        query = f"WorkflowType = '{WORKFLOW_NAME}' AND CompactorTenant IN ({listed})"
        out: list[Any] = []
        async for wf in self.temporal.list_workflows(query, limit=limit):
            out.append(wf)
        return out

    async def compact(self, session: str, *, wait: bool = True, **kw: Any) -> Any:
        """Request a compaction; with ``wait`` return its CompactSessionOutput, else the handle."""
        handle = await self.start_compaction(session, **kw)
        if not wait:
            return handle
        return await handle.result()

    async def ensure_budget(
        self,
        session: str,
        window: int,
        *,
        max_output: int = 32_000,
        provider_usage: int | None = None,
        policy: str | None = None,
        tenant: str | None = None,
        **kw: Any,
    ) -> BudgetResult:
        """Keep a session within its window (see module docstring)."""
        pol = make_policy(policy or self.policy, window=window, max_output=max_output)
        head, view = await asyncio.to_thread(self._head_and_view, session, tenant)
        raw = view_tokens(view)  # per-event counts cached at append: nothing re-tokenized
        tokens = round(raw * calibration_ratio(view))
        need = should_compact(pol, tokens, provider_usage)
        decision = start_decision(
            pol, need, raw, target_tokens=kw.get("target_tokens"), noop_view_tokens=head.noop_view_tokens
        )
        if decision != "start":
            reason = None if decision == "none" else decision
            return BudgetResult(action="none", need=need, tokens=tokens, view=view, reason=reason)
        handle = await self.start_compaction(
            session,
            tenant=tenant,
            window=window,
            max_output=max_output,
            policy=policy,
            trigger=f"budget:{need}",
            **kw,
        )
        if need == "soft":
            return BudgetResult(
                action="started", need=need, tokens=tokens, view=view, workflow_id=handle.id
            )
        result = await handle.result()
        view = await self.view(session, tenant=tenant)
        return BudgetResult(
            action="waited",
            need=need,
            tokens=round(view_tokens(view) * calibration_ratio(view)),
            view=view,
            workflow_id=handle.id,
            result=result,
        )

    def _head_and_view(self, session: str, tenant: str | None) -> tuple[Any, list[Event]]:
        log = self._log(session, tenant)
        head = log.head()
        return head, log.read_view(head=head)

class SyncCompactorClient:
    """Blocking facade: a :class:`CompactorClient` on its own event loop thread.

    For scripts and notebooks; each method runs the async one and waits. Use as a context
    manager (or call :meth:`close`) to stop the loop thread.
    """

    def __init__(self, settings: Any = None, address: str | None = None, **kw: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="compactor-client", daemon=True)
        self._thread.start()
        try:
            self.client: CompactorClient = self._run(CompactorClient.connect(settings, address, **kw))
        except BaseException:
            self.close()
            raise

    def _run(self, aw: Awaitable[T]) -> T:
        async def _await() -> T:
            return await aw

        return asyncio.run_coroutine_threadsafe(_await(), self._loop).result()

    def __enter__(self) -> SyncCompactorClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)

    def append(self, session: str, events: Sequence[Event], **kw: Any) -> AppendResult:
        return self._run(self.client.append(session, events, **kw))

    def view(self, session: str, **kw: Any) -> Any:
        return self._run(self.client.view(session, **kw))

    def ensure_budget(self, session: str, window: int, **kw: Any) -> BudgetResult:
        return self._run(self.client.ensure_budget(session, window, **kw))

    def compact(self, session: str, **kw: Any) -> Any:
        return self._run(self.client.compact(session, **kw))

    def inspect(self, session: str, **kw: Any) -> SessionReport:
        return self._run(self.client.inspect(session, **kw))

    def records(self, session: str, **kw: Any) -> list[CompactionRecord]:
        return self._run(self.client.records(session, **kw))

    def diff(self, session: str, checkpoint: str | None = None, **kw: Any) -> CheckpointDiff:
        return self._run(self.client.diff(session, checkpoint, **kw))

    def rollback(self, session: str, to: str | None, **kw: Any) -> RollbackResult:
        return self._run(self.client.rollback(session, to, **kw))

    def breaker(self, session: str, **kw: Any) -> BreakerState:
        return self._run(self.client.breaker(session, **kw))

    def approve(self, session: str, **kw: Any) -> HeldDecision:
        return self._run(self.client.approve(session, **kw))

    def reject(self, session: str, reason: str = "rejected by an operator", **kw: Any) -> HeldDecision:
        return self._run(self.client.reject(session, reason, **kw))
