"""``compactor setup``: make a Temporal namespace ready for compactor, idempotently.

1. the namespace exists (else exit 2 naming it);
2. the search attributes the workflows set are registered (operator service: list first, add
   only what is missing);
3. one sweep schedule per tenant (``compactor-sweep-{tenant}``) exists with the interval and
   policy of the settings: created, updated when it differs, left alone when equal.

A second run changes nothing and says so ("nothing to change"). Run it once per cluster (the
Kubernetes overlays run it as a Job) and again whenever the sweep settings change.
"""

from __future__ import annotations

import argparse
from typing import Any

from compactor.cli.common import add_json_arg, add_temporal_args, print_json
from compactor.errors import InvalidInput

EVERY_OFF = ("off", "none", "0")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "setup",
        help="prepare a Temporal namespace: search attributes and sweep schedules (idempotent)",
        description="Check the namespace, register compactor's search attributes and create or "
        "update one sweep schedule per tenant from the settings (COMPACTOR_SWEEP_EVERY, "
        "COMPACTOR_SWEEP_TENANTS, COMPACTOR_SWEEP_WINDOW, COMPACTOR_SWEEP_MAX_OUTPUT, "
        "COMPACTOR_POLICY, COMPACTOR_SUMMARIZER). Safe to run again: a second run changes nothing.",
    )
    add_temporal_args(p)
    p.add_argument("--store", default=None,
                   help="store whose tenants get schedules when the tenants are '*' (default COMPACTOR_STORE)")
    p.add_argument("--tenant", dest="setup_tenants", action="append", default=None, metavar="T",
                   help="schedule only this tenant (repeatable; default COMPACTOR_SWEEP_TENANTS)")
    p.add_argument("--every", default=None,
                   help="sweep interval, e.g. 10m, or 'off' for no schedules (default COMPACTOR_SWEEP_EVERY)")
    p.add_argument("--no-schedules", action="store_true", help="search attributes only")
    add_json_arg(p, "print what was checked and changed as JSON (shape in docs/cli.md)")
    p.set_defaults(func=cmd_setup)


def cmd_setup(args: argparse.Namespace) -> int:
    from compactor.cli.ops import run_and_exit

    return run_and_exit(_setup(args))


def sweep_tenants(settings: Any, given: list[str] | None, store_url: str) -> list[str]:
    """Tenants that get a schedule: ``--tenant``, else COMPACTOR_SWEEP_TENANTS, else
    COMPACTOR_TENANTS, else every tenant in the store (``*``; the default tenant if none)."""
    from compactor.cli.common import cli_scope
    from compactor.store import validate_id

    names = list(given or settings.sweep_tenants or settings.tenants or ["*"])
    if "*" in names:
        from compactor.store import open_store

        store = open_store(store_url)
        listed = store.list_children("t/") if hasattr(store, "list_children") else []
        names = [n for n in names if n != "*"] + [t for t in listed if t not in names]
        names = names or [settings.tenant]
    scope = cli_scope()
    return [scope.check(validate_id(t, "tenant id")) for t in dict.fromkeys(names)]


async def _setup(args: argparse.Namespace) -> int:
    from activities.contracts import PolicyRef, SweepInput
    from compactor.cli.ops import _client, _interval, _settings
    from compactor.tenancy import check_sweep_request
    from workers.setup import check_namespace, ensure_search_attributes, ensure_sweep_schedule

    settings = _settings(args)
    every_text = (args.every or settings.sweep_every).strip()
    schedules_on = not args.no_schedules and every_text.lower() not in EVERY_OFF
    inputs: list[SweepInput] = []
    every = None
    if schedules_on:
        every = _interval(every_text)
        if every.total_seconds() < 1:
            raise InvalidInput(f"sweep interval {every_text!r} is under a second")
        for tenant in sweep_tenants(settings, args.setup_tenants, args.store or settings.store):
            inp = SweepInput(
                tenant=tenant,
                policy=PolicyRef(preset=settings.policy, window=settings.sweep_window,
                                 max_output=settings.sweep_max_output),
                summarizer=settings.summarizer,  # type: ignore[arg-type]
            )
            check_sweep_request(inp)  # every schedule's input is valid before anything changes
            inputs.append(inp)
    client = await _client(settings)
    ns = settings.temporal_namespace
    await check_namespace(client, ns)
    added, present = await ensure_search_attributes(client, ns)
    results = [
        await ensure_sweep_schedule(client, inp, every=every, every_text=every_text, task_queue=settings.task_queue)
        for inp in inputs
    ]
    changed = bool(added) or any(r.action != "unchanged" for r in results)
    doc = {
        "address": settings.temporal_address, "namespace": ns, "changed": changed,
        "search_attributes": {"added": added, "present": present},
        "schedules": [{"schedule": r.schedule, "tenant": r.tenant, "every": r.every, "action": r.action,
                       "changed": r.changed} for r in results],
    }
    if args.json:
        print_json(doc)
        return 0
    print(f"namespace          {ns} on {settings.temporal_address}: exists")
    if added:
        print(f"search attributes  registered {', '.join(added)}"
              + (f" ({len(present)} already present)" if present else ""))
    else:
        print(f"search attributes  all {len(present)} present")
    if not schedules_on:
        print("sweep schedules    none (" + ("--no-schedules" if args.no_schedules else "COMPACTOR_SWEEP_EVERY=off") + ")")
    for r in results:
        why = f" ({', '.join(r.changed)})" if r.changed else ""
        print(f"schedule           {r.schedule}: {r.action}{why}, sweep tenant {r.tenant} every {r.every}")
    print("setup: " + ("done" if changed else "nothing to change"))
    return 0
