"""The ``compactor`` command. Each command group lives in its own module with ``register``."""

from __future__ import annotations

import argparse
import os
import sys

from compactor.cli.common import JSON_OUTPUT, check_tenant_arg, cli_scope, report_error
from compactor.cli.lazy import LazySubParsers, load_all
from compactor.errors import CompactorError

# Modules that add subcommands; each defines register(subparsers). Order = help order.
COMMAND_MODULES = [
    "compactor.cli.demo",
    "compactor.cli.data",
    "compactor.cli.policy",
    "compactor.cli.compact",
    "compactor.cli.ops",
    "compactor.cli.history",
    "compactor.cli.lifecycle",
    "compactor.cli.setup",
    "compactor.cli.codec",
    "compactor.cli.hold",
    "compactor.cli.plot",
    "compactor.cli.config",
    "compactor.cli.report",
    "compactor.cli.bench",
]


#: Each module's commands and their help lines, listed without importing the module: it is
#: imported when its command is parsed (issue 17, ``compactor.cli.lazy``). A module missing
#: here is imported when the parser is built (correct, only slower); a command added to a
#: module needs its line here (``tests/unit/test_cli_lazy.py`` says which).
COMMANDS: dict[str, tuple[tuple[str, str], ...]] = {
    "compactor.cli.demo": (
        ("demo", "compact the bundled sample transcript end to end (embedded stack)"),),
    "compactor.cli.data": (
        ("import", "import an agent transcript into a session log"),
        ("view", "show a session's current view (what the model sees next)"),
        ("sessions", "list a tenant's sessions")),
    "compactor.cli.policy": (("policy", "show compaction policies and their numbers"),),
    "compactor.cli.compact": (
        ("compact", "compact a stored session, or import a transcript and compact it"),),
    "compactor.cli.ops": (
        ("dev", "run the embedded stack (Temporal dev server + UI + worker)"),
        ("worker", "run a worker against TEMPORAL_ADDRESS until interrupted"),
        ("inspect", "a session's head, checkpoints and compaction records (--diff: what a checkpoint replaced)"),
        ("rollback", "point a session at an earlier checkpoint (or none)"),
        ("verify", "check a session's stored objects for damage or tampering"),
        ("breaker", "a session's circuit breaker for automatic compaction (show or --clear)"),
        ("sweep", "compact every session over its trigger (once or on a schedule)")),
    "compactor.cli.history": (
        ("history", "step timeline of a session's latest compaction workflow"),
        ("replay", "replay a session's compaction history against this code (determinism)")),
    "compactor.cli.lifecycle": (
        ("gc", "remove superseded segments, unnamed checkpoints and finished runs' work objects"),
        ("delete", "erase a session (and artifacts only it references) or a whole tenant")),
    "compactor.cli.setup": (
        ("setup", "prepare a Temporal namespace: search attributes and sweep schedules (idempotent)"),),
    "compactor.cli.codec": (
        ("codec-server", "decode encrypted payloads for the Temporal UI / CLI (codec server protocol)"),
        ("codec-key", "print a new payload encryption key (ID:BASE64)")),
    "compactor.cli.hold": (
        ("approve", "approve a held compaction: it swaps the session's head"),
        ("reject", "reject a held compaction: it ends failed, the session unchanged")),
    "compactor.cli.plot": (
        ("plot", "draw a session's tokens over its life, each compaction marked (PNG)"),),
    "compactor.cli.config": (
        ("config", "print the effective settings (secrets masked); warn on unknown COMPACTOR_* variables"),),
    "compactor.cli.report": (
        ("report", "compactions, statuses, tokens saved and model cost per tenant, from the stored records"),),
    "compactor.cli.bench": (
        ("bench", "benchmarks (store, fidelity, constraints, perf, probes, load, sweep, chaos, model-path)"),),
}


#: Commands that warn about unknown COMPACTOR_* variables themselves (config lists them too).
_WARN_THEMSELVES = ("config", "worker", "dev")


class _Parser(argparse.ArgumentParser):
    """argparse's usage errors, plus the JSON error document when ``--json`` was given."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if JSON_OUTPUT["on"]:
            from compactor.cli.common import print_json

            print_json({"error": {"code": "usage", "message": f"{self.prog}: {message}", "exit_code": 2}})
        super().error(message)


def build_parser(lazy: bool = False) -> argparse.ArgumentParser:
    """The whole parser; ``lazy``: each command's module imported when it is parsed."""
    parser = _Parser(
        prog="compactor",
        description="Durable, distributed context compaction for LLM-agent sessions. "
        "Session commands take SESSION [--tenant T]; every command takes --json; exit 0 ok, "
        "1 failed, 2 usage error or not found (docs/cli.md).",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", action=LazySubParsers)
    sub.add_modules(COMMAND_MODULES, COMMANDS)
    return parser if lazy else load_all(parser)


class _Version(argparse._VersionAction):
    """``--version``, the installed version looked up when asked for (importlib.metadata is
    slow to import)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        self.version = f"compactor {version()}"
        super().__call__(parser, *args, **kwargs)


def version() -> str:
    """The installed distribution's version (the source tree's when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    from compactor import __version__

    try:
        return dist_version("compactor")
    except PackageNotFoundError:
        return __version__


def entry() -> int:
    """The process's entry (``python -m compactor``, the ``compactor`` script): ``main`` on
    ``sys.argv``, then the short exit a command may have asked for (``fast_exit``)."""
    from compactor.cli import fast_exit

    fast_exit.enable()
    return fast_exit.leave(main())


def main(argv: list[str] | None = None) -> int:
    from compactor.cli.terminal import sanitized_output

    JSON_OUTPUT["on"] = "--json" in (sys.argv[1:] if argv is None else argv)
    # Every human-readable byte passes the terminal sanitizer; --json output is left as is.
    with sanitized_output(stdout=False):
        parser = build_parser(lazy=True)
        args = parser.parse_args(argv)
    with sanitized_output(stdout=not getattr(args, "json", False)):
        return _run(parser, args)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    JSON_OUTPUT["on"] = bool(getattr(args, "json", False))
    try:
        if args.command not in _WARN_THEMSELVES:
            from compactor.cli.config import warn_unknown_variables

            warn_unknown_variables()  # a mistyped COMPACTOR_* variable is said by every command
        cli_scope()  # a blank COMPACTOR_TENANTS is an error (fail closed), for every command
        check_tenant_arg(args)  # COMPACTOR_TENANTS binds the CLI: refuse before any I/O
        rc = args.func(args)
    except CompactorError as exc:
        report_error(str(exc), code=exc.code, exit_code=exc.exit_code)
        return exc.exit_code
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            return _broken_pipe()
        # A path the system refuses (too long, no permission, a directory): one line, exit 2.
        if exc.filename is not None:
            name = str(exc.filename)
            shown = name if len(name) <= 80 else f"{name[:60]}...({len(name)} characters)"
            report_error(f"{shown}: {exc.strerror or exc}", code="os_error", exit_code=2)
            return 2
        report_error(f"{exc.strerror or exc}", code="os_error", exit_code=1)
        return 1
    except KeyboardInterrupt:
        return 130
    return int(rc or 0)


def _broken_pipe() -> int:
    # output piped into `head` and the like: not an error
    try:
        sys.stdout = open(os.devnull, "w")
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
