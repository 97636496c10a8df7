"""Options every command shares and small output helpers: the one CLI grammar (docs/cli.md).

Session commands take ``SESSION [--tenant T] [--store URL]``; commands that talk to Temporal
take ``--address`` and ``--namespace``; every command takes ``--json``. Exit codes: 0 ok,
1 failed, 2 usage error or not found.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compactor.errors import InvalidInput

if TYPE_CHECKING:
    from compactor.importers import ImportLimits, ImportResult
    from compactor.store import SessionLog

DEFAULT_STORE = "file://./.compactor"
DEFAULT_TENANT = "default"


def default_tenant() -> str:
    """``COMPACTOR_TENANT``, else the first of ``COMPACTOR_TENANTS``, else ``default``."""
    first = os.environ.get("COMPACTOR_TENANTS", "").split(",")[0].strip()
    return os.environ.get("COMPACTOR_TENANT") or first or DEFAULT_TENANT


def cli_scope() -> Any:
    """The tenants this CLI process may act for (``COMPACTOR_TENANTS``; unset = any)."""
    from compactor.tenancy import TenantScope, parse_tenants

    return TenantScope(parse_tenants(os.environ.get("COMPACTOR_TENANTS")))


def check_tenant_arg(args: argparse.Namespace) -> None:
    """Refuse a ``--tenant`` outside ``COMPACTOR_TENANTS`` before the command does anything."""
    tenant = getattr(args, "tenant", None)
    if tenant is not None:
        cli_scope().check(tenant)


def check_workflow_id(workflow_id: str) -> None:
    """With ``COMPACTOR_TENANTS``: a workflow id must name one of those tenants."""
    from compactor.errors import TenantNotAllowed
    from compactor.tenancy import tenant_of_workflow_id

    scope = cli_scope()
    if not scope.bound:
        return
    named = tenant_of_workflow_id(workflow_id)
    if named is None:
        raise TenantNotAllowed(
            f"workflow {workflow_id!r} names no tenant; with COMPACTOR_TENANTS set only "
            f"compact/TENANT/SESSION and sweep/TENANT workflows of {', '.join(scope.allowed)} "
            "can be read", workflow_id=workflow_id,
        )
    scope.check(named)


def add_store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        default=os.environ.get("COMPACTOR_STORE", DEFAULT_STORE),
        help="object store URL: file://DIR (default %(default)s) or s3://BUCKET/PREFIX",
    )
    p.add_argument(
        "--tenant",
        default=default_tenant(),
        help="tenant id (default %(default)s; must be in COMPACTOR_TENANTS when that is set)",
    )


def add_session_args(p: argparse.ArgumentParser, *, nargs: str | None = None) -> None:
    """``SESSION`` (positional) + ``--store`` + ``--tenant``: the grammar of session commands."""
    p.add_argument("session", metavar="SESSION", nargs=nargs, help="session id ([A-Za-z0-9._-]{1,128})")
    add_store_args(p)


def add_temporal_args(p: argparse.ArgumentParser) -> None:
    """``--address`` and ``--namespace`` for every command that talks to Temporal."""
    p.add_argument("--address", default=None,
                   help="Temporal frontend host:port (default TEMPORAL_ADDRESS)")
    p.add_argument("--namespace", default=None,
                   help="Temporal namespace (default TEMPORAL_NAMESPACE or 'default')")


def add_json_arg(p: argparse.ArgumentParser, what: str = "print JSON (shape in docs/cli.md)") -> None:
    p.add_argument("--json", action="store_true", help=what)


def print_json(doc: Any) -> None:
    """One JSON document on stdout (pydantic models dumped in JSON mode)."""
    from pydantic import BaseModel

    if isinstance(doc, BaseModel):
        doc = doc.model_dump(mode="json")
    json.dump(doc, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def open_log(args: argparse.Namespace, session: str | None = None) -> SessionLog:
    """The session log named by ``SESSION``/``--tenant``/``--store`` (ids validated)."""
    from compactor.store import SessionLog, open_store

    return SessionLog(open_store(args.store), args.tenant, session or args.session)


def table(rows: list[list[object]], header: list[str]) -> str:
    """A plain aligned text table."""
    from compactor.cli.terminal import sanitize

    # sanitized before measuring, so escapes do not break the alignment
    cells = [[sanitize(str(c)) for c in header]] + [[sanitize(str(c)) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for n, r in enumerate(cells):
        lines.append("  ".join(c.rjust(w) if _num(c) else c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _num(s: str) -> bool:
    return s.replace(",", "").replace(".", "", 1).replace("%", "").lstrip("-").isdigit()


def settings() -> Any:
    """The process's ``Settings`` (environment); a bad value is a one-line InvalidInput."""
    from pydantic import ValidationError

    from workers.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        err = exc.errors()[0]
        field = "_".join(str(p) for p in err.get("loc", ())).upper()
        raise InvalidInput(f"invalid setting COMPACTOR_{field}: {err.get('msg')}") from None


def import_limits() -> ImportLimits:
    """Import bounds from the environment (``COMPACTOR_MAX_*``, see workers/settings.py)."""
    return settings().import_limits()


def session_id_from_path(path: str | Path) -> str:
    """A valid session id from a file name: unsafe characters become '-', at most 128."""
    name = Path(path).name
    for suffix in (".jsonl", ".json", ".traj", ".md", ".txt"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    sid = re.sub(r"[^A-Za-z0-9._-]+", "-", name)
    sid = re.sub(r"\.{2,}", ".", sid).strip(".-") or "session"
    return sid[:128].rstrip(".-") or "session"


def session_arg(session: str | None, path: str | Path) -> str:
    """The ``--session`` value, validated when given (an empty one is an error, not the file
    name), else an id derived from the file name."""
    from compactor.store.ids import validate_id

    if session is None:
        return session_id_from_path(path)
    return validate_id(session, "session id")


#: Previews an imported tool output keeps when it goes to the artifact store.
SPILL_HEAD, SPILL_TAIL = 2_000, 1_000


def import_into(path: str | Path, fmt: str, log: SessionLog | None, sink: Any = None,
                count: bool = False) -> ImportResult:
    """Import ``path`` with the configured limits; with a session log, tool outputs over the
    inline limit go to its artifact store, without one they are cut with a marker. ``sink``:
    the events go there as they are read (``import_file``), not into the result. ``count``:
    the events carry their token count (``import_file``)."""
    from compactor.importers import import_file

    _big_buffers_to_mmap()
    def spill(data: bytes) -> Any:
        assert log is not None
        return log.put_artifact(data, preview_head=SPILL_HEAD, preview_tail=SPILL_TAIL)

    return import_file(path, format=fmt, limits=import_limits(), spill=spill if log is not None else None,
                       sink=sink, count=count)


_M_MMAP_THRESHOLD = -3


def _big_buffers_to_mmap() -> None:
    """Serve every buffer of 1 MiB or more from its own mapping (glibc ``mallopt``).

    glibc raises its mmap threshold to the size of the largest block freed, so after a giant
    line is parsed and freed its later copies (serialized event, segment bytes) come from the
    heap, which keeps the freed pages: the import's peak grew to 7.2x the line. With a fixed
    threshold each big buffer is unmapped when freed (bench store: 4.3x). A no-op without glibc.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, 1 << 20)
    except (OSError, AttributeError):
        pass


def truncation_note(result: ImportResult) -> str | None:
    """One line about tool outputs over the inline limit, or None."""
    if not result.truncated:
        return None
    stored = sum(1 for t in result.truncated if t.artifact)
    cut = len(result.truncated) - stored
    parts = []
    if stored:
        parts.append(f"{stored} moved to the artifact store")
    if cut:
        parts.append(f"{cut} cut to head + tail with a marker (no store)")
    biggest = max(t.bytes for t in result.truncated)
    return (f"{len(result.truncated)} tool output(s) over the inline limit: " + ", ".join(parts)
            + f"; largest {biggest:,} bytes (COMPACTOR_MAX_INLINE_TOOL_OUTPUT)")


#: Set by ``main`` when the command was given ``--json``: errors then also go to stdout as JSON.
JSON_OUTPUT = {"on": False}


def report_error(message: str, *, code: str, exit_code: int) -> None:
    """One ``compactor: error:`` line on stderr; with ``--json`` also ``{"error": {...}}`` on
    stdout (a script reading stdout gets a document, not nothing). The exit code is the caller's."""
    print(f"compactor: error: {message}", file=sys.stderr)
    if JSON_OUTPUT["on"]:
        print_json({"error": {"code": code, "message": message, "exit_code": exit_code}})
