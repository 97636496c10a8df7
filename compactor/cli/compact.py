"""``compactor compact SESSION|FILE``: compact a stored session, or import a transcript and
compact it. An argument that is an existing path is a FILE (imported first); anything else is
the id of a session already in the store.

``--inline`` runs the pure engine in this process and writes the resulting request
(``messages`` + ``system``), checkpoint and record as JSON. The durable path (session log on
object storage + Temporal workflow) plugs in at ``_durable``.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from compactor.cli.outcome import MIN_TARGET, TARGET_RATIO, default_target, print_outcome, render_report
from compactor.engine.presets import PRESETS



def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compact", help="compact a stored session, or import a transcript and compact it")
    p.add_argument("file", metavar="SESSION|FILE",
                   help="a stored session's id, or a transcript file (any supported format) to import first")
    p.add_argument("--inline", action="store_true", help="run the engine in this process (no store, no Temporal)")
    p.add_argument("--format", default="auto", help="transcript format (default: detect)")
    p.add_argument("--policy", default="default", choices=PRESETS, help="policy preset (default %(default)s)")
    p.add_argument("--window", type=int, default=200_000, help="context window W (default %(default)s)")
    p.add_argument("--max-output", type=int, default=32_000, help="max output tokens O (default %(default)s)")
    p.add_argument(
        "--target-tokens", type=int, default=None,
        help=f"budget for the view (default {TARGET_RATIO * 100:.0f}%% of the transcript's tokens, at least {MIN_TARGET:,})",
    )
    p.add_argument("--out", default=None, help="write {messages, system, checkpoint, record} JSON here")
    p.add_argument("--now", default=None, help="ISO timestamp recorded as created_at (default: now)")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON (shape in docs/cli.md)")
    from compactor.cli import _durable as durable  # durable path options (--store, --tenant, --session...)

    durable.add_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_args(args)
    if not args.inline:
        return _durable(args)
    return _inline(args)


def check_args(args: argparse.Namespace) -> None:
    """Reject bad arguments before anything is read or stored (both paths).

    Sets ``args.now_at`` (the parsed ``--now``) and ``args.session_id`` (validated ``--session``
    or the file's name).
    """
    from compactor.cli.common import session_arg
    from compactor.errors import InvalidInput, PolicyError

    if args.inline and getattr(args, "hold", False):
        raise InvalidInput("--hold holds a durable compaction before its swap; --inline has no swap to "
                           "hold: drop one of them")
    path = Path(args.file)
    args.stored = not path.exists()
    if path.is_dir():
        raise InvalidInput(f"{path}: is a directory; give a session id or the path of a transcript")
    if args.stored:
        _check_stored(args)
    if args.target_tokens is not None and args.target_tokens < 1:
        raise PolicyError(f"--target-tokens must be a positive number of tokens, not {args.target_tokens}")
    if args.window < 1 or args.max_output < 0:
        raise PolicyError("--window must be positive and --max-output non-negative")
    args.now_at = None
    if args.now:
        try:
            args.now_at = datetime.fromisoformat(args.now.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(
                f"--now {args.now!r} is not an ISO-8601 timestamp (e.g. 2025-01-31T12:00:00+00:00)"
            ) from None
        if args.now_at.tzinfo is None:
            args.now_at = args.now_at.replace(tzinfo=timezone.utc)
    if args.stored:
        return
    args.session_id = _session_id(path) if args.session is None else session_arg(args.session, path)


def _check_stored(args: argparse.Namespace) -> None:
    """``compact SESSION``: the session must be in the store (NotFound, exit 2, otherwise)."""
    from compactor import operator
    from compactor.cli.common import open_log
    from compactor.errors import InvalidId, InvalidInput, NotFound

    if args.inline:
        raise InvalidInput(f"{args.file}: no such file; --inline compacts a transcript FILE in this "
                           f"process (a stored session is compacted durably: drop --inline)")
    if args.session is not None:
        raise InvalidInput("--session names the session a FILE is imported into; give the stored "
                           "session's id as the argument instead")
    try:
        operator.require(open_log(args, args.file))
    except InvalidId:
        raise InvalidInput(f"{args.file!r} is neither an existing file nor a valid session id") from None
    except NotFound:
        raise NotFound(f"{args.file!r}: no such file, and no session of that id for tenant "
                       f"{args.tenant!r} in {args.store}; list them with `compactor sessions`") from None
    args.session_id = args.file


def _durable(args: argparse.Namespace) -> int:
    from compactor.cli import _durable as durable

    return durable.run(args)


def _inline(args: argparse.Namespace) -> int:
    from compactor.engine.gc_pause import collector_paused

    # The collector paused for the whole run, not only inside the import and compact(): the
    # default target's count, the request's render and its dump walk the same millions of
    # objects, and a full pass there re-scanned them all (issue 17).
    with collector_paused():
        return _inline_run(args)


def _inline_run(args: argparse.Namespace) -> int:
    from compactor.cli import fast_exit
    from compactor.cli.common import import_into, truncation_note
    from compactor.engine.compact import compact
    from compactor.engine.measure import quick_view_tokens, render_request, view_tokens

    path = Path(args.file)
    summarizer, llm, why = _inline_summarizer(args)  # refuses before any work when it cannot run
    # Streamed, each event counted as it arrives: the engine's prepared events are these very
    # objects (``engine.compact.prepare`` copies only uncounted ones), not a second copy of
    # the session beside the imported one.
    events: list[Any] = []
    imported = import_into(path, args.format, None,  # no store: big outputs are cut, and said so
                           sink=events.extend, count=True)  # (counted: ``with_tokens`` would keep them)
    note = truncation_note(imported)
    if note:
        print(f"note: {note}", file=sys.stderr)
    from compactor.engine.policy import make_policy

    policy = make_policy(args.policy, window=args.window, max_output=args.max_output)
    target = args.target_tokens
    counted = None
    if target is None:
        # The count of the view the engine's plan makes (no result placed as text: then it is
        # view_tokens(events) too), handed to it instead of made twice (issue 17).
        counted = quick_view_tokens(events, placed=True)
        target = default_target(view_tokens(events) if counted is None else counted)
    now = args.now_at or datetime.now(timezone.utc)
    # (the checkpoint's whole lifted state only where something reads it: written by --out, or
    # the model's summary's input; the record printed holds none of it, issue 17)
    result = compact(events, policy, target, now=now, session=args.session_id, tokens_before=counted,
                     full_state=bool(args.out) or llm is not None)
    if llm is not None:
        from compactor.cli.inline_model import summarize_inline

        result = summarize_inline(events, result, policy, llm, model=args.model, summarizer=summarizer)
    if why:
        print(f"note: summarizer {summarizer} ({why})", file=sys.stderr)
    if args.out or not fast_exit.enabled():
        events = []  # let go: the result holds what is written (memory: the whole session, issue 17)
    if args.out:
        system, messages = render_request(result.view)
        doc: dict[str, Any] = {
            "messages": messages,
            "system": system,
            "checkpoint": result.checkpoint.model_dump(mode="json") if result.checkpoint else None,
            "record": result.record.model_dump(mode="json"),
        }
        with Path(args.out).open("w") as f:  # written as it is encoded (the same text as json.dumps)
            json.dump(doc, f, indent=2, ensure_ascii=False)
        del doc
    if args.json:
        print_outcome(result.record, session=args.session_id, tenant=None, out=args.out,
                      source=str(path), fmt=imported.format)
    else:
        print(render_report(path, imported.format, result.record, args.out))
    # Written: the process may end without freeing the session's objects one by one (held
    # until then; with no ``--out``, nothing big is made after the compaction, so they are
    # held at no cost to the peak) nor the rest of its teardown (issue 17, ``fast_exit``).
    # Not after a model's summary: its client's connections close as usual.
    if llm is None:
        fast_exit.ask(events, result)
    return 0 if result.record.status in ("committed", "noop") else 1


def _inline_summarizer(args: argparse.Namespace) -> tuple[str, Any, str]:
    """The summarizer ``--inline`` runs, its client, and why when COMPACTOR_SUMMARIZER=auto chose
    it: the same model summarizer as the durable path, in this process, or a one-line refusal
    (never a silent switch)."""
    from compactor.cli.common import settings as load_settings
    from compactor.errors import InvalidInput

    settings = load_settings()  # a bad COMPACTOR_* value: one line, exit 2
    summarizer = args.summarizer or settings.summarizer
    why = settings.summarizer_why if args.summarizer is None else ""
    if summarizer == "anthropic-native":
        raise InvalidInput("--inline runs the structured and anthropic summarizers; anthropic-native "
                           "stores the API's opaque compaction block with the session: drop --inline")
    if summarizer == "structured":
        return summarizer, None, why
    from compactor.cli.inline_model import make_llm

    return summarizer, make_llm(settings), why  # InvalidInput (exit 2) without a key: one line


def _session_id(path: Path) -> str:
    import re

    stem = re.sub(r"[^A-Za-z0-9._-]", "-", path.stem)[:128].strip(".") or "session"
    return stem


if __name__ == "__main__":  # pragma: no cover
    sys.exit(1)
