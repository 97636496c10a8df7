"""Tenant binding and request checks, done before any I/O.

Tenants share one bucket and (usually) one Temporal namespace, so a tenant id in a request is
only a name. It becomes a boundary when every party checks it against the tenants it was bound
to before doing anything: the client (:class:`compactor.client.CompactorClient`), the CLI
(``COMPACTOR_TENANTS``), the worker (``workers.tenant_guard``) and, under all of them, the
store credentials (``infra/iam/``), which are the only check an attacker with its own code
cannot skip.

Requests are checked here too, on the caller's side and again in the workflow's first step,
so a bad id or number never creates a workflow (and never reaches the store).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from compactor.errors import InvalidInput, TenantNotAllowed
from compactor.engine.policy import make_policy
from compactor.store.ids import validate_id

#: Longest free-text field a request may carry into history (trigger, model, queue names).
MAX_LABEL = 200
#: Upper bounds of the loop counters a request sets: enough for any real use, not a DoS knob.
MAX_MERGES = 100
MAX_LLM_ATTEMPTS = 20
MAX_APPROVAL_S = 30 * 86_400


def parse_tenants(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """Tenant ids from ``"a,b"`` or a list: validated, deduplicated, in order; () = unbound.

    Unbound is only ever ``None`` or an empty list: a *string* that names no tenant (an empty
    or blank ``COMPACTOR_TENANTS``, a lone comma) is an InvalidInput, because silently turning
    the binding off is the one wrong way to read a mistake in it (fail closed).
    """
    if value is None:
        return ()
    if isinstance(value, str) and not value.replace(",", "").strip():
        raise InvalidInput(
            f"COMPACTOR_TENANTS is set but names no tenant ({value!r}): list the tenants this "
            "process may act for (e.g. COMPACTOR_TENANTS=acme,globex), or unset it to act for any"
        )
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for raw in items:
        t = raw.strip() if isinstance(raw, str) else raw
        if t == "":
            continue
        validate_id(t, "tenant id in COMPACTOR_TENANTS")
        if t not in out:
            out.append(t)
    return tuple(out)


class TenantScope:
    """The tenants a client, CLI process or worker may act for.

    ``allowed`` empty means unbound (any valid tenant): an operator's CLI without
    ``COMPACTOR_TENANTS``, or a worker serving every tenant.
    """

    def __init__(self, allowed: Iterable[str] = (), default: str | None = None) -> None:
        self.allowed = parse_tenants(list(allowed))
        if default is not None:
            validate_id(default, "tenant id")
        if default is not None and self.allowed and default not in self.allowed:
            raise TenantNotAllowed(
                f"default tenant {default!r} is not among the bound tenants "
                f"{', '.join(self.allowed)}", tenant=default, allowed=list(self.allowed),
            )
        self.default = default or (self.allowed[0] if self.allowed else "default")

    @classmethod
    def for_client(cls, tenant: str | None, tenants: Iterable[str] | None) -> TenantScope:
        """A client is always bound: to ``tenants`` when given, else to its one ``tenant``."""
        listed = parse_tenants(tenants)
        if listed:
            return cls(listed, tenant)
        t = tenant or "default"
        return cls((t,), t)

    @property
    def bound(self) -> bool:
        return bool(self.allowed)

    def allows(self, tenant: str) -> bool:
        return not self.allowed or tenant in self.allowed

    def check(self, tenant: str | None = None) -> str:
        """The tenant to act for (``None`` = the default), or TenantNotAllowed / InvalidId."""
        t = self.default if tenant is None else tenant
        validate_id(t, "tenant id")
        if not self.allows(t):
            raise TenantNotAllowed(
                f"tenant {t!r} is not allowed here: this client/worker is bound to "
                f"{', '.join(self.allowed)}; use credentials bound to {t!r}",
                tenant=t, allowed=list(self.allowed),
            )
        return t


def tenant_of_workflow_id(workflow_id: str) -> str | None:
    """Tenant named by a compactor workflow id (``compact/T/S``, ``sweep/T[/...]``), else None."""
    parts = workflow_id.split("/")
    if len(parts) >= 2 and parts[0] in ("compact", "sweep") and parts[1]:
        return parts[1]
    return None


def check_label(value: str | None, what: str) -> None:
    """A short printable label (recorded in history), or InvalidInput."""
    if value is None:
        return
    if not isinstance(value, str) or len(value) > MAX_LABEL or not value.isprintable():
        raise InvalidInput(f"invalid {what}: at most {MAX_LABEL} printable characters", what=what)


def _check_count(value: int | None, what: str, low: int, high: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{what} must be a whole number from {low:,} to {high:,}, not {value!r}",
                           what=what)


def check_policy_numbers(preset: str, window: int, max_output: int, configured: int | None,
                         target_tokens: int | None) -> None:
    """The policy builds for these numbers and the target is a positive token count."""
    make_policy(preset, window=window, max_output=max_output, configured=configured)
    if target_tokens is not None and (isinstance(target_tokens, bool) or target_tokens < 1):
        raise InvalidInput(f"target_tokens must be a positive number of tokens, not {target_tokens!r}",
                           what="target_tokens")


def check_compaction_request(inp: Any) -> None:
    """Every field of a ``CompactSessionInput`` that could be wrong, checked without I/O.

    Raises InvalidId / PolicyError / InvalidInput (all InvalidInput, exit 2).
    """
    validate_id(inp.tenant, "tenant id")
    validate_id(inp.session, "session id")
    check_policy_numbers(inp.policy, inp.window, inp.max_output, inp.configured, inp.target_tokens)
    _check_count(inp.max_merges, "max_merges", 0, MAX_MERGES)
    _check_count(inp.llm_attempts, "llm_attempts", 1, MAX_LLM_ATTEMPTS)
    _check_count(inp.approval_timeout_s, "approval_timeout_s", 1, MAX_APPROVAL_S)
    check_label(inp.trigger, "trigger")
    check_label(inp.model, "model")
    check_label(inp.llm_task_queue, "llm_task_queue")


def check_sweep_request(inp: Any) -> None:
    """Every field of a ``SweepInput`` that could be wrong, checked without I/O."""
    validate_id(inp.tenant, "tenant id")
    pol = inp.policy
    check_policy_numbers(pol.preset, pol.window, pol.max_output, pol.configured, pol.target_tokens)
    _check_count(inp.max_sessions, "max_sessions", 1, 1_000_000)
