"""Storage lifecycle commands: ``gc`` (reclaim what nothing references) and ``delete``
(erase a session or a tenant). What each removes and why it is safe: compactor/store/gc.py
and compactor/store/erase.py."""

from __future__ import annotations

import argparse
import os
from typing import Any

from compactor.cli.common import (
    DEFAULT_STORE,
    add_json_arg,
    cli_scope,
    default_tenant,
    print_json,
    settings,
)
from compactor.errors import InvalidInput


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gc",
        help="remove superseded segments, unnamed checkpoints and finished runs' work objects",
        description="Remove what no head, kept checkpoint or record references, once it is older "
        "than the grace period (COMPACTOR_GC_GRACE_S): segments superseded by merges, checkpoints "
        "of merges that did not land, finished runs' work objects; with --tenant/--all also "
        "artifacts no session names. Never a record, the head, its segments or a checkpoint the "
        "head or a record names (COMPACTOR_RETAIN_CHECKPOINTS limits those). Safe while agents "
        "append and compactions run. Exit 0 ok, 1 when a damaged session was skipped, 2 usage "
        "or not found.",
    )
    p.add_argument("session", metavar="SESSION", nargs="?", help="one session of --tenant")
    _store_args(p)
    p.add_argument("--all", action="store_true", help="every tenant in the store (those of "
                   "COMPACTOR_TENANTS when it is set)")
    p.add_argument("--dry-run", action="store_true", help="report what would be removed; remove nothing")
    p.add_argument("--grace", default=None, metavar="DURATION",
                   help="override COMPACTOR_GC_GRACE_S (e.g. 0s, 15m, 2h)")
    add_json_arg(p)
    p.set_defaults(func=cmd_gc)

    p = sub.add_parser(
        "delete",
        help="erase a session (and artifacts only it references) or a whole tenant",
        description="Remove every object of SESSION (t/T/s/SESSION/ and the artifacts no other "
        "session of the tenant references), or with --tenant T and no SESSION everything under "
        "t/T/. Leaves a deletion record (who, when, counts; no content) outside what it "
        "removed. Stop the session's writers first. Needs --yes; without it, prints what would "
        "go and exits 2.",
    )
    p.add_argument("session", metavar="SESSION", nargs="?", help="session to delete")
    _store_args(p)
    p.add_argument("--yes", action="store_true", help="really delete")
    p.add_argument("--dry-run", action="store_true", help="report what would be removed; remove nothing")
    p.add_argument("--by", default=None, help="who asks, for the deletion record (default user@host)")
    add_json_arg(p)
    p.set_defaults(func=cmd_delete)


def _store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=os.environ.get("COMPACTOR_STORE", DEFAULT_STORE),
                   help="object store URL: file://DIR (default %(default)s) or s3://BUCKET/PREFIX")
    p.add_argument("--tenant", default=None,
                   help=f"tenant id (default {default_tenant()} for a SESSION; must be in "
                   "COMPACTOR_TENANTS when that is set)")


def _grace(text: str | None) -> float | None:
    if text is None:
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        n = float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)
    except (ValueError, IndexError):
        n = -1.0
    if n < 0:
        raise InvalidInput(f"invalid --grace {text!r}: use seconds or e.g. 0s, 15m, 2h")
    return n


def _size(n: int) -> str:
    return f"{n:,} B"


def cmd_gc(args: argparse.Namespace) -> int:
    from compactor.errors import NotFound
    from compactor.store import open_store
    from compactor.store.gc import gc_session, gc_tenant, list_tenants

    if args.all and (args.session or args.tenant):
        raise InvalidInput("give SESSION [--tenant T], --tenant T or --all (only one)")
    if not (args.all or args.session or args.tenant):
        raise InvalidInput("give SESSION [--tenant T], --tenant T (its every session) or --all")
    cfg = settings().gc_settings()
    grace = _grace(args.grace)
    if grace is not None:
        cfg = cfg.model_copy(update={"grace_s": grace})
    store = open_store(args.store)
    if args.session:
        tenant = args.tenant or default_tenant()
        cli_scope().check(tenant)
        rep = gc_session(store, tenant, args.session, cfg, dry_run=args.dry_run)
        if rep.stored_objects == 0:
            raise NotFound(f"no session {tenant}/{args.session} in {store.url}")
        doc: Any = {"sessions": [rep.model_dump(mode="json") | {"after_bytes": rep.after_bytes}]}
        failed = rep.damaged
        if args.json:
            print_json(doc)
        else:
            print(_session_line(rep))
        return 1 if failed else 0
    scope = cli_scope()
    tenants = [args.tenant] if args.tenant else [t for t in list_tenants(store) if not scope.bound or t in scope.allowed]
    for t in tenants:
        scope.check(t)
    reps = [gc_tenant(store, t, cfg, dry_run=args.dry_run) for t in tenants]
    damaged = [s for r in reps for s in r.sessions if s.damaged]
    if args.json:
        print_json({"tenants": [r.model_dump(mode="json") | {"totals": r.totals()} for r in reps]})
        return 1 if damaged else 0
    if not reps:
        print(f"no tenants in {store.url}")
    for r in reps:
        for s in r.sessions:
            if s.removed or s.skipped or s.retired_checkpoints:
                print(_session_line(s))
        tot = r.totals()
        verb = "would remove" if r.dry_run else "removed"
        print(f"{r.tenant}: {len(r.sessions)} sessions; artifacts: {verb} {r.artifacts_removed} of "
              f"{r.artifacts_stored} ({_size(r.artifacts_removed_bytes)}); stored {_size(tot['stored_bytes'])} -> "
              f"{_size(tot['after_bytes'])}, live {_size(tot['live_bytes'])}")
    return 1 if damaged else 0


_NOUN = {"work": "work object"}


def _session_line(rep: Any) -> str:
    name = f"{rep.tenant}/{rep.session}"
    if rep.skipped:
        return f"{name}: skipped: {rep.skipped}"
    verb = "would remove" if rep.dry_run else "removed"
    what = ", ".join(f"{n} {_NOUN.get(k, k)}{'s' if n != 1 else ''}" for k, n in sorted(rep.removed.items())) or "nothing"
    ratio = f" ({rep.after_bytes / rep.live_bytes:.2f}x live)" if rep.live_bytes else ""
    line = (f"{name}: {verb} {what} ({_size(sum(rep.removed_bytes.values()))}); stored "
            f"{_size(rep.stored_bytes)} -> {_size(rep.after_bytes)}, live {_size(rep.live_bytes)}{ratio}")
    if rep.retired_checkpoints:
        line += f"; retired by COMPACTOR_RETAIN_CHECKPOINTS: {', '.join(rep.retired_checkpoints)}"
    if rep.restored:
        line += f"; written back (a rollback raced): {', '.join(rep.restored)}"
    return line


def cmd_delete(args: argparse.Namespace) -> int:
    from compactor.store import open_store
    from compactor.store.erase import delete_session, delete_tenant

    if not args.session and not args.tenant:
        raise InvalidInput("give SESSION [--tenant T] (one session) or --tenant T (the whole tenant)")
    tenant = args.tenant or default_tenant()
    cli_scope().check(tenant)
    dry = args.dry_run or not args.yes
    store = open_store(args.store)
    if args.session:
        rec = delete_session(store, tenant, args.session, by=args.by, dry_run=dry)
        what = f"session {tenant}/{args.session}"
    else:
        rec = delete_tenant(store, tenant, by=args.by, dry_run=dry)
        what = f"tenant {tenant} (everything under t/{tenant}/)"
    if args.json:
        print_json(rec)
    else:
        counts = ", ".join(f"{n} {k}" for k, n in sorted(rec.objects.items()))
        size = _size(sum(rec.bytes.values()))
        if dry:
            print(f"would delete {what}: {rec.total_objects} objects ({counts}; {size})"
                  + (f"; {rec.artifacts_shared} shared artifacts stay" if rec.artifacts_shared else ""))
        else:
            print(f"deleted {what}: {rec.total_objects} objects ({counts}; {size})"
                  + (f"; {rec.artifacts_shared} shared artifacts kept" if rec.artifacts_shared else "")
                  + f"; record {rec.record_key}")
    if dry and not args.dry_run:
        raise InvalidInput("nothing deleted: add --yes to delete")
    return 0
