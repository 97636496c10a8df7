"""Cold start (issue 17): a command imports only what it runs, and says exactly what it said.

The parser lists every command from the tables in ``compactor.cli`` and ``compactor.cli.bench``
and imports a command's module when that command is parsed. These tests hold the listing to
the modules' own ``register`` (help text, order, options), and check in a fresh interpreter
that ``--help`` and the commands that never count load neither the benchmarks nor the
tokenizer.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from compactor.cli import COMMAND_MODULES, COMMANDS, _Parser, build_parser, main
from compactor.cli.bench import BENCH_MODULES
from compactor.cli.lazy import LazySubParsers, load_all

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "anthropic" / "cli-session.json"


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _eager_parser() -> argparse.ArgumentParser:
    """The parser as it was built before issue 17: every module imported, registered in order
    (and the benchmarks under `bench`)."""
    lazy = build_parser(lazy=True)
    parser = _Parser(prog=lazy.prog, description=lazy.description)
    parser.add_argument("--version", action="version", version="compactor x")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        if name != "compactor.cli.bench":
            importlib.import_module(name).register(sub)
            continue
        bench = sub.add_parser("bench", help=dict(COMMANDS[name])["bench"])
        bench_sub = bench.add_subparsers(dest="bench", metavar="BENCH")
        for bench_module in BENCH_MODULES:
            importlib.import_module(bench_module).register(bench_sub)
    return parser


def _all_parsers(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    out = {prefix.strip(): parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            if isinstance(action, LazySubParsers):
                action.load_all()
            for name, p in action.choices.items():
                out.update(_all_parsers(p, f"{prefix} {name}"))
    return out


def test_the_listing_is_the_modules_own():
    """`compactor --help` and `compactor bench --help` list what the modules register, in order."""
    parser = build_parser(lazy=True)
    sub = _subparsers(parser)
    bench = sub.load("bench")
    listed = (parser.format_help(), bench.format_help(), list(sub.choices), list(_subparsers(bench).choices))
    load_all(parser)
    loaded = (parser.format_help(), bench.format_help(), list(sub.choices), list(_subparsers(bench).choices))
    assert listed == loaded, "a command's line in COMMANDS/BENCHES differs from its module's register()"


def test_every_command_parses_and_helps_as_before():
    lazy = _all_parsers(load_all(build_parser(lazy=True)))
    eager = _all_parsers(_eager_parser())
    assert sorted(lazy) == sorted(eager)
    for name, parser in eager.items():
        if name:  # the top level's --version differs only in when the version is looked up
            assert lazy[name].format_help() == parser.format_help(), name


def test_a_lazy_command_parses_its_options():
    args = build_parser(lazy=True).parse_args(["compact", "x.jsonl", "--inline", "--window", "5000"])
    assert (args.command, args.file, args.inline, args.window) == ("compact", "x.jsonl", True, 5000)
    args = build_parser(lazy=True).parse_args(["bench", "sweep"])
    assert args.bench == "sweep" and callable(args.func)


def test_unknown_command_is_a_usage_error_listing_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'frobnicate'" in err and "'demo', 'import', 'view'" in err and "'bench')" in err


def test_version_is_looked_up_when_asked():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and out.getvalue().startswith("compactor ") and out.getvalue().strip() != "compactor"


# A fresh interpreter runs the command and reports what it imported and whether it counted.
_PROBE = """
import atexit, json, sys
def _report():
    tokens = sys.modules.get("compactor.tokens")
    print("@@" + json.dumps({
        "tiktoken": "tiktoken" in sys.modules,
        "encoding": bool(tokens and tokens.encoding.cache_info().currsize),
        "bench": sorted(m for m in sys.modules if m.startswith("compactor.bench")),
        "engine": sorted(m for m in sys.modules if m.startswith("compactor.engine.") and m != "compactor.engine.presets"),
        "pydantic": "pydantic" in sys.modules,
        "anthropic": "anthropic" in sys.modules,
        "store": sorted(m for m in sys.modules if m.startswith("compactor.store")),
    }), file=sys.__stderr__)
atexit.register(_report)
from compactor.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _probe(*argv: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("@@"))
    return {"rc": proc.returncode, "out": proc.stdout, **json.loads(line[2:])}


@pytest.mark.parametrize("argv", [["--help"], ["bench", "--help"], ["compact", "--help"], ["policy", "show", "--help"],
                                  ["inspect", "--help"], ["config", "--help"]])
def test_help_imports_no_benchmark_engine_or_tokenizer(argv):
    seen = _probe(*argv)
    assert seen["rc"] in (0, 2) and "usage: compactor" in seen["out"]
    assert seen["bench"] == [] and seen["engine"] == [] and not seen["tiktoken"] and not seen["pydantic"]


def test_help_states_the_presets_and_default_model():
    from activities.contracts import DEFAULT_MODEL
    from compactor.engine.policy import PRESETS

    seen = _probe("compact", "--help")
    assert "{" + ",".join(PRESETS) + "}" in seen["out"].replace("\n", "").replace(" ", "")
    assert DEFAULT_MODEL in seen["out"].replace("\n", "").replace(" ", "")


def test_a_benchmarks_help_imports_that_benchmark_only():
    seen = _probe("bench", "constraints", "--help")
    assert seen["rc"] == 0 and "usage: compactor bench constraints" in seen["out"]
    assert "compactor.bench.constraints" in seen["bench"] and "compactor.bench.fidelity" not in seen["bench"]
    assert not seen["encoding"]


def test_commands_that_never_count_never_load_the_tokenizer(tmp_path):
    store = f"file://{tmp_path / 'store'}"
    imported = _probe("import", str(FIXTURE), "--store", store, "--session", "s1")
    assert imported["rc"] == 0 and imported["encoding"]  # import counts every event
    for argv in (["view", "s1"], ["sessions"], ["verify", "s1"], ["inspect", "s1"]):
        seen = _probe(*argv, "--store", store)
        assert seen["rc"] == 0, (argv, seen)
        assert not seen["encoding"] and not seen["tiktoken"], argv
        assert seen["bench"] == [], argv
    seen = _probe("policy", "show", "default")
    assert seen["rc"] == 0 and not seen["tiktoken"]


def test_inline_compaction_loads_no_store(tmp_path):
    """``compact --inline`` writes nothing to a store: its id checks (``store.ids``) must not
    load the log, its caches and every backend (the package's names are imported on use)."""
    seen = _probe("compact", "--inline", str(FIXTURE), "--json")
    assert seen["rc"] == 0 and json.loads(seen["out"])["session"] == "cli-session"
    assert seen["store"] == ["compactor.store", "compactor.store.ids"], seen["store"]
    # and the package's names still resolve, each from its own module
    import compactor.store as store
    from compactor.store.local import LocalStore
    from compactor.store.log import SessionLog

    assert store.SessionLog is SessionLog and isinstance(store.open_store(str(tmp_path)), LocalStore)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        store.nope  # noqa: B018


def test_config_shows_the_summarizer_settings_without_the_anthropic_sdk():
    """``compactor config`` lists the ``COMPACTOR_ANTHROPIC_*`` settings from their own module:
    the SDK (thousands of modules, seconds of CPU) is a worker's import, not the listing's."""
    seen = _probe("config", "--json")
    assert seen["rc"] == 0 and not seen["anthropic"]
    shown = json.loads(seen["out"])
    assert shown["settings"]["anthropic_timeout_s"] == 120.0 and shown["sources"]["anthropic_timeout_s"] == "default"


def test_inline_compaction_renders_and_writes_with_the_collector_paused(tmp_path, monkeypatch):
    """The request is rendered and dumped inside the run's collector pause (its full passes
    re-scanned every object of the session there), and the collector is on again after."""
    import gc

    from compactor.engine import measure

    seen: list[bool] = []
    real = measure.render_request
    monkeypatch.setattr(measure, "render_request", lambda view: (seen.append(gc.isenabled()), real(view))[1])
    assert gc.isenabled()
    out = tmp_path / "view.json"
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(["compact", "--inline", str(FIXTURE), "--target-tokens", "300", "--out", str(out), "--json"])
    assert rc in (0, 1) and json.loads(out.read_text())["messages"]
    assert seen == [False] and gc.isenabled()


def test_view_json_answers_a_pending_call_without_the_tokenizer(tmp_path):
    """A view whose last call has no result yet gets a placeholder result in ``--json``; making
    it counts nothing, so the tokenizer stays unloaded."""
    lines = [
        {"type": "user", "uuid": "u1", "sessionId": "p", "timestamp": "2026-01-01T00:00:00Z",
         "message": {"role": "user", "content": "list the files"}},
        {"type": "assistant", "uuid": "u2", "sessionId": "p", "timestamp": "2026-01-01T00:00:01Z",
         "message": {"id": "m1", "role": "assistant", "content": [
             {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]}},
    ]
    transcript = tmp_path / "pending.jsonl"
    transcript.write_text("".join(json.dumps(x) + "\n" for x in lines))
    store = f"file://{tmp_path / 'store'}"
    assert _probe("import", str(transcript), "--store", store, "--session", "p")["rc"] == 0
    seen = _probe("view", "p", "--json", "--store", store)
    assert seen["rc"] == 0 and not seen["encoding"] and not seen["tiktoken"]
    messages = json.loads(seen["out"])["messages"]
    assert messages[-1]["role"] == "user"
    assert [b["tool_use_id"] for b in messages[-1]["content"] if b["type"] == "tool_result"] == ["toolu_1"]
