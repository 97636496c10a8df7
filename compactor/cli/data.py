"""Data commands: ``compactor import``, ``compactor view``, ``compactor sessions``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, TextIO

from compactor.cli.common import (
    add_store_args, import_into, open_log, print_json, session_arg, table, truncation_note,
)
from compactor.errors import InvalidInput, NotFound


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="import an agent transcript into a session log",
        description="Import a transcript (Claude Code, Codex, Aider, SWE-agent, pi, Gemini CLI, "
        "OpenCode, Anthropic/OpenAI message lists) and append it to a session. Re-importing the "
        "same file stores nothing twice.",
    )
    p.add_argument("file", help="transcript file")
    p.add_argument("--format", default="auto", help="source format (default: auto-detect)")
    p.add_argument("--session", help="session id (default: derived from the file name)")
    p.add_argument("--json", action="store_true", help="print the import report as JSON (shape in docs/cli.md)")
    add_store_args(p)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("view", help="show a session's current view (what the model sees next)")
    p.add_argument("session", metavar="SESSION", help="session id")
    p.add_argument(
        "--json",
        action="store_true",
        help='write {"system": ..., "messages": [...]} in the Anthropic Messages API shape',
    )
    add_store_args(p)
    p.set_defaults(func=cmd_view)

    p = sub.add_parser("sessions", help="list a tenant's sessions")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_store_args(p)
    p.set_defaults(func=cmd_sessions)


def cmd_import(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if path.is_dir() or not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise InvalidInput(f"{path}: {what}; give the path of a transcript to import")
    session = session_arg(args.session, path)
    log = open_log(args, session)  # validates tenant/session/store before reading anything else
    res, (result, n_events, n_tokens) = _import_streamed(path, args.format, log)
    st = result.stats
    if args.json:
        print_json({
            "tenant": log.tenant, "session": log.session, "store": log.store.url, "source": str(path),
            "format": result.format, "events": n_events, "appended": res.appended,
            "first_seq": res.first_seq if res.appended else None,
            "last_seq": res.last_seq if res.appended else None, "duplicates": res.duplicates,
            "version": res.version, "tokens": n_tokens, "stats": st,
            "skipped": [{"line": s.line, "reason": s.reason} for s in result.skipped],
            "large_outputs": len(result.truncated),
        })
        return 0
    new = f"{res.appended} new" + (f" (seq {res.first_seq}-{res.last_seq})" if res.appended else "")
    rows = [
        ["format", result.format],
        ["session", f"{log.tenant}/{log.session}"],
        ["store", log.store.url],
        ["events", f"{n_events} read; {new}; {res.duplicates} already stored"],
        ["messages", f"{st.get('messages', 0)} ({st.get('user_messages', 0)} from the user)"],
        ["tool calls", f"{st.get('tool_calls', 0)} ({st.get('tool_results', 0)} results)"],
        ["pinned", st.get("pinned", 0)],
        ["compactions", f"{st.get('compactions', 0)} made by the source agent"],
        ["tokens", f"{log.view_size():,} in the view (the measure plan, records and `view` use)"],
        ["skipped lines", len(result.skipped) or "none"],
    ]
    note = truncation_note(result)
    if note:
        rows.insert(-1, ["large outputs", note])
    print(f"imported {path}")
    for k, v in rows:
        print(f"  {k:<14}{v}")
    for s in result.skipped[:20]:
        print(f"    line {s.line}: {s.reason}")
    if len(result.skipped) > 20:
        print(f"    ... and {len(result.skipped) - 20} more")
    print(f"  {'head version':<14}{res.version}")
    print(f"next: compactor view {log.session}" + _store_hint(args))
    return 0


def _import_streamed(path: Path, fmt: str, log: Any) -> tuple[Any, tuple[Any, int, int]]:
    """Import ``path`` into ``log`` streamed (``store.bulk.append_stream``): events go to the
    log as the transcript is read and segments are written as they fill; the head moves once,
    at the end. Returns the append's result and (import result, events read, their tokens)."""
    from compactor import tokens
    from compactor.store.bulk import append_stream

    def produce(sink: Any) -> tuple[Any, int, int]:
        seen = [0, 0]

        def counted(events: list[Any]) -> None:
            events = tokens.with_tokens(events)
            seen[0] += len(events)
            seen[1] += sum(e.tokens or 0 for e in events)
            sink(events)

        result = import_into(path, fmt, log, sink=counted, count=True)
        return result, seen[0], seen[1]

    return append_stream(log, produce)


def _store_hint(args: argparse.Namespace) -> str:
    from compactor.cli.common import DEFAULT_STORE, DEFAULT_TENANT

    hint = ""
    if args.store != DEFAULT_STORE:
        hint += f" --store {args.store}"
    if args.tenant != DEFAULT_TENANT:
        hint += f" --tenant {args.tenant}"
    return hint


def cmd_view(args: argparse.Namespace) -> int:
    # render_request (streamed), not bare to_anthropic: a call still waiting for its result
    # gets an "outcome unknown" placeholder, so the JSON is always a request the API accepts.
    from compactor.engine.request_stream import stream_request
    from compactor.engine.view import view_text_parts

    log = open_log(args)
    head = log.head()
    if head.etag is None:
        raise NotFound(
            f"no session {args.session!r} for tenant {args.tenant!r} in {log.store.url}; "
            f"list them with `compactor sessions` or import one with `compactor import FILE`"
        )
    if args.json:
        # segment by segment, each message written as it is made (issue 17: the whole decoded
        # session and request were held before the dump, 873 MB at 300k small events)
        system, messages = stream_request(lambda first: log.stream_view(head=head, first=first))
        write_request_json(system, messages, sys.stdout)
        sys.stdout.write("\n")
        return 0
    ck = f", checkpoint {head.checkpoint}" if head.checkpoint else ""
    n, events = log.stream_view(head=head)  # segment by segment: a huge view is never in memory
    print(
        f"session {log.tenant}/{log.session}: version {head.version}{ck}; view {n} "
        f"events, {log.view_size(head):,} tokens"
    )
    for part in view_text_parts(events):
        sys.stdout.write(part)
        sys.stdout.write("\n")
    return 0


def write_request_json(system: str, messages: Iterable[dict[str, Any]], out: TextIO) -> None:
    """``json.dump({"system": system, "messages": list(messages)}, out, ensure_ascii=False,
    indent=1)`` without the list: the same encoder, so the same bytes, each message made as
    the encoder reaches it (``_Streamed``)."""
    it = iter(messages)
    first = next(it, None)
    listed: list[dict[str, Any]] = [] if first is None else _Streamed(first, it)
    # json.dump's own encoder, its chunks joined a few thousand at a time: dump writes each
    # chunk on its own (~40 a message), which cost a third of the command's CPU at 100k
    chunks: list[str] = []
    for chunk in json.JSONEncoder(ensure_ascii=False, indent=1).iterencode({"system": system, "messages": listed}):
        chunks.append(chunk)
        if len(chunks) == 4096:
            out.write("".join(chunks))
            chunks.clear()
    out.write("".join(chunks))


class _Streamed(list):  # type: ignore[type-arg]
    """A one-item list iterating over its item and then the rest of an iterator: json's
    encoder writes a list item by item (``for value in lst``) once it has seen it is not
    empty, so the messages after the first are made one at a time, never listed."""

    def __init__(self, first: dict[str, Any], rest: Iterator[dict[str, Any]]) -> None:
        super().__init__([first])
        self._rest = rest

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield from super().__iter__()
        yield from self._rest


def cmd_sessions(args: argparse.Namespace) -> int:
    """Every session of the tenant; a head that cannot be read is named, not fatal (exit 1)."""
    from compactor.errors import CompactorError, StoreUnavailable
    from compactor.store import SessionLog, list_sessions, open_store

    store = open_store(args.store)
    rows = []
    bad: list[dict[str, str]] = []
    for sid in list_sessions(store, args.tenant):
        try:
            h = SessionLog(store, args.tenant, sid).head()
        except (NotFound, StoreUnavailable):
            raise  # the store itself is gone: nothing else can be listed either
        except CompactorError as exc:
            bad.append({"session": sid, "error": str(exc)})
            continue
        rows.append(
            {
                "session": sid,
                "version": h.version,
                "checkpoint": h.checkpoint,
                "segments": len(h.segments),
                "updated_at": h.updated_at.isoformat(timespec="seconds") if h.updated_at else None,
            }
        )
    if args.json:
        print(json.dumps(rows + bad, indent=1))
        return 1 if bad else 0
    if not rows and not bad:
        print(f"no sessions for tenant {args.tenant!r} in {store.url}")
        return 0
    if rows:
        print(
            table(
                [[r["session"], r["version"], r["checkpoint"] or "-", r["segments"], r["updated_at"] or "-"] for r in rows],
                ["session", "events", "checkpoint", "segments", "updated"],
            )
        )
    for b in bad:
        print(f"compactor: error: session {b['session']}: head unreadable: {b['error']}", file=sys.stderr)
    if bad:
        print(f"{len(bad)} of {len(rows) + len(bad)} session(s) could not be read; check them with "
              f"`compactor verify SESSION`", file=sys.stderr)
    return 1 if bad else 0
