"""``compactor report --by tenant``: compactions, statuses, tokens saved and model cost per
tenant, read from the stored compaction records (one per run), not from metrics.

Why the records: they are durable and complete (metrics restart with the worker and are
sampled), they carry the tenant, status, token counts and every model call's usage, and a run
re-executed after a lost worker supersedes its own record, so nothing is counted twice.
Model cost is an estimate at list prices (``activities/metrics.PRICES_PER_MTOK``).
"""

from __future__ import annotations

import argparse
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from compactor.cli.common import add_json_arg, cli_scope, print_json, table
from compactor.errors import CompactorError, InvalidInput, NotFound

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="compactions, statuses, tokens saved and model cost per tenant, from the stored records",
        description="Read every compaction record in the store (or those of --tenant) and sum them "
        "per tenant: runs by status, tokens before/after, tokens saved (committed runs), model calls, "
        "model tokens and estimated cost at list prices. Exit 0; 2 on a bad --since or an unknown "
        "tenant or store.",
    )
    p.add_argument("--by", choices=["tenant"], default="tenant", help="group by (default %(default)s)")
    p.add_argument("--since", default=None, metavar="DURATION|DATE",
                   help="only runs recorded since: a duration back from now (30m, 24h, 7d) or a date "
                   "/ ISO time (2026-01-31, 2026-01-31T12:00:00Z)")
    p.add_argument("--tenant", default=None, help="only this tenant (default: every tenant, or "
                   "those of COMPACTOR_TENANTS)")
    p.add_argument("--store", default=None, help="object store URL (default COMPACTOR_STORE)")
    add_json_arg(p)
    p.set_defaults(func=cmd_report)


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """``24h`` -> now - 24 h; ``2026-01-31`` / ISO time -> that instant (UTC when naive)."""
    if text is None:
        return None
    now = now or datetime.now(timezone.utc)
    t = text.strip()
    m = _DURATION.match(t)
    if m:
        return now - timedelta(seconds=float(m.group(1)) * _UNIT_S[m.group(2)])
    try:
        when = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"--since {text!r}: expected a duration (30m, 24h, 7d) or a date (2026-01-31 or an ISO time)"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _tenants(store: Any, only: str | None) -> list[str]:
    from compactor.store import validate_id

    scope = cli_scope()
    if only is not None:
        return [validate_id(only, "tenant id")]
    if scope.allowed:
        return list(scope.allowed)
    lister = getattr(store, "list_children", None)
    if lister is not None:
        return sorted(lister("t/", limit=1_000_000))
    return sorted({k.split("/")[1] for k in store.list("t/") if k.count("/") >= 2})


def _empty(tenant: str) -> dict[str, Any]:
    return {"tenant": tenant, "compactions": 0, "statuses": {}, "tokens_before": 0, "tokens_after": 0,
            "tokens_saved": 0, "fallbacks": 0, "llm_calls": 0, "llm_input_tokens": 0,
            "llm_output_tokens": 0, "cost_usd": 0.0, "unreadable_records": 0, "first": None, "last": None}


def tenant_report(store: Any, tenant: str, since: datetime | None = None) -> dict[str, Any]:
    """The sums of one tenant's records (recorded at or after ``since``)."""
    from activities.metrics import llm_cost_usd
    from compactor.store import SessionLog

    row = _empty(tenant)
    prefix = f"t/{tenant}/s/"
    keys = [k for k in store.list(prefix) if re.fullmatch(r"[^/]+/records/[^/]+\.json", k[len(prefix):])]
    for key in keys:
        session = key[len(prefix):].split("/", 1)[0]
        try:
            rec = SessionLog(store, tenant, session).read_record(key)
        except CompactorError:
            row["unreadable_records"] += 1  # `compactor verify SESSION` says what is wrong
            continue
        at = rec.created_at
        if since is not None and (at is None or at < since):
            continue
        row["compactions"] += 1
        row["statuses"][rec.status] = row["statuses"].get(rec.status, 0) + 1
        row["tokens_before"] += max(rec.tokens_before, 0)
        row["tokens_after"] += max(rec.tokens_after, 0)
        if rec.status == "committed":
            row["tokens_saved"] += max(rec.tokens_before - rec.tokens_after, 0)
        row["fallbacks"] += 1 if rec.fallback_reason else 0
        for call in rec.llm_calls or []:
            row["llm_calls"] += 1
            row["llm_input_tokens"] += int(call.get("input_tokens") or 0)
            row["llm_output_tokens"] += int(call.get("output_tokens") or 0)
            row["cost_usd"] += llm_cost_usd(call)
        if at is not None:
            stamp = at.isoformat()
            row["first"] = min(row["first"] or stamp, stamp)
            row["last"] = max(row["last"] or stamp, stamp)
    row["cost_usd"] = round(row["cost_usd"], 6)
    return row


def build_report(store: Any, *, tenant: str | None = None, since: datetime | None = None) -> dict[str, Any]:
    rows = [tenant_report(store, t, since) for t in _tenants(store, tenant)]
    total = _empty("total")
    for r in rows:
        for k in ("compactions", "tokens_before", "tokens_after", "tokens_saved", "fallbacks", "llm_calls",
                  "llm_input_tokens", "llm_output_tokens", "cost_usd", "unreadable_records"):
            total[k] += r[k]
        for s, n in r["statuses"].items():
            total["statuses"][s] = total["statuses"].get(s, 0) + n
    total["cost_usd"] = round(total["cost_usd"], 6)
    for k in ("tenant", "first", "last"):
        total.pop(k)
    return {"by": "tenant", "since": since.isoformat() if since else None, "store": store.url,
            "tenants": rows, "total": total}


def _open(url: str) -> Any:
    from pathlib import Path

    from compactor.store import open_store

    if url.startswith("file://") or "://" not in url:
        root = Path(url[len("file://"):] if url.startswith("file://") else url)
        if not root.is_dir():
            raise NotFound(f"no store at {url}: nothing has been imported there (check --store / COMPACTOR_STORE)")
    return open_store(url)


def cmd_report(args: argparse.Namespace) -> int:
    from compactor.cli.common import settings

    since = parse_since(args.since)
    store = _open(args.store or settings().store)
    doc = build_report(store, tenant=args.tenant, since=since)
    if args.tenant is not None and not doc["tenants"][0]["compactions"] and not store.list(f"t/{args.tenant}/"):
        raise NotFound(f"tenant {args.tenant!r} has nothing in {store.url}")
    if args.json:
        print_json(doc)
        return 0
    statuses = ("committed", "noop", "failed", "rolled_back")
    rows = []
    for r in [*doc["tenants"], {**doc["total"], "tenant": "total"}]:
        st = r["statuses"]
        rows.append([r["tenant"], f"{r['compactions']:,}", *(f"{st.get(s, 0):,}" for s in statuses),
                     f"{r['tokens_saved']:,}", f"{r['llm_calls']:,}", f"{r['cost_usd']:.4f}"])
    window = f" since {doc['since']}" if doc["since"] else ""
    print(f"compactions by tenant in {doc['store']}{window}")
    print(table(rows, ["tenant", "runs", *statuses, "tokens saved", "model calls", "cost USD"]))
    if doc["total"]["unreadable_records"]:
        print(f"{doc['total']['unreadable_records']} record(s) could not be read: run `compactor verify --all`")
    return 0
