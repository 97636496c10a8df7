"""A worker bound to tenants (``COMPACTOR_TENANTS``) refuses every other tenant's work.

Why an interceptor: it sees every workflow and activity input, decoded, before the workflow
code or the activity runs, so the refusal happens before any store I/O whatever the entry
point (our client, another SDK, a hand-written workflow calling our activities by name). The
refusal is a non-retryable ``TenantNotAllowed`` failure: another attempt on this worker
cannot succeed, and retrying elsewhere would only mask a misrouted request. Bound workers
therefore poll their own task queue (``COMPACTOR_TASK_QUEUE``); on a queue shared with other
tenants they would fail those tenants' compactions.

An input that names no tenant at all is refused as well (fail closed).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from activities.contracts import ErrorType

TENANT_NOT_ALLOWED = str(ErrorType.TENANT_NOT_ALLOWED)
_NESTED = ("snapshot", "record", "lift", "summarize", "check", "commit", "externalize")  # fields that carry the tenant further down


def tenants_in(args: Iterable[Any]) -> set[str]:
    """Tenant ids named by payload arguments (``tenant`` fields, or one level down)."""
    found: set[str] = set()
    for arg in args:
        if isinstance(arg, BaseModel):
            tenant = getattr(arg, "tenant", None)
            if isinstance(tenant, str):
                found.add(tenant)
            found |= tenants_in(getattr(arg, name, None) for name in _NESTED)
        elif isinstance(arg, dict) and isinstance(arg.get("tenant"), str):
            found.add(arg["tenant"])
    return found


def refusal(allowed: frozenset[str], args: Iterable[Any], what: str) -> ApplicationError | None:
    """The failure for an input outside ``allowed``, or None when it may run."""
    named = tenants_in(args)
    if named and named <= allowed:
        return None
    shown = ", ".join(sorted(named)) or "no tenant"
    return ApplicationError(
        f"{what} for {shown} refused: this worker serves tenants {', '.join(sorted(allowed))} "
        f"(COMPACTOR_TENANTS); route it to a worker bound to its tenant",
        type=TENANT_NOT_ALLOWED,
        non_retryable=True,
    )


class _ActivityGuard(ActivityInboundInterceptor):
    def __init__(self, nxt: ActivityInboundInterceptor, allowed: frozenset[str]) -> None:
        super().__init__(nxt)
        self._allowed = allowed

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        err = refusal(self._allowed, input.args, f"activity {getattr(input.fn, '__name__', '?')}")
        if err is not None:
            raise err
        return await self.next.execute_activity(input)


class _WorkflowGuard(WorkflowInboundInterceptor):
    allowed: frozenset[str] = frozenset()

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        err = refusal(self.allowed, input.args, f"workflow {getattr(input.type, '__name__', '?')}")
        if err is not None:
            raise err
        return await self.next.execute_workflow(input)


class TenantGuard(Interceptor):
    """Worker interceptor that refuses workflows and activities of tenants not in ``allowed``."""

    def __init__(self, allowed: Iterable[str]) -> None:
        self.allowed = frozenset(allowed)
        if not self.allowed:
            raise ValueError("TenantGuard needs at least one tenant")
        # Workflow interceptors are given as a class: bind the allow-list into one.
        self._workflow_cls = type("BoundWorkflowGuard", (_WorkflowGuard,), {"allowed": self.allowed})

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityGuard(next, self.allowed)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return self._workflow_cls
