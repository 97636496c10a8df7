"""Fuzz the CLI's argument handling: arbitrary argument lists for the commands that work
without a server. Every run ends with an exit code (0, 1 or 2; argparse's own exit 0/2), one
line of error at most, no traceback, and a store it did not mean to change left unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactor.cli import main
from compactor.events import Event, TextBlock
from compactor.store import LocalStore, SessionLog

COMMANDS = ["view", "sessions", "inspect", "verify", "breaker", "policy", "rollback", "import", "config",
            "codec-key", "compact"]
OPTIONS = ["--json", "--tenant", "--store", "--diff", "--to", "--all", "--force", "--clear", "--format",
           "--session", "--inline", "--policy", "--window", "--max-output", "--target-tokens", "--id", "--"]
WORDS = st.one_of(
    st.sampled_from(OPTIONS), st.sampled_from(["s", "none", "c1", "default", "acme", "-1", "0", "1e9", "auto",
                                               "claude-code", "", " ", "a" * 300, "../x", "\x1b[2J"]),
    st.text(max_size=12),
)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    SessionLog(LocalStore(root), "default", "s").append(
        [Event(id=f"e{i}", role="user" if i % 2 else "assistant", blocks=[TextBlock(text=f"t{i}")])
         for i in range(1, 4)])
    return root


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".locks" not in p.parts}


@given(cmd=st.sampled_from(COMMANDS), words=st.lists(WORDS, max_size=6))
def test_arbitrary_arguments(seeded, capsys, monkeypatch, cmd, words):
    monkeypatch.chdir(seeded)  # relative paths and the default store stay in the sandbox
    monkeypatch.delenv("TEMPORAL_ADDRESS", raising=False)
    readonly = cmd in ("view", "sessions", "inspect", "verify", "policy", "config", "codec-key")
    before = tree(seeded) if readonly else None
    argv = [cmd, *words]
    if "--store" not in words:
        argv += ["--store", f"file://{seeded}"]
    if cmd == "compact" and "--inline" not in words:
        argv.append("--inline")  # the durable path needs Temporal: not fuzzed here
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        rc = exc.code
    out = capsys.readouterr()
    assert rc in (0, 1, 2), (argv, rc)
    assert "Traceback" not in out.err, argv
    errors = [line for line in out.err.splitlines() if line.startswith("compactor: error")]
    assert len(errors) <= 1, (argv, out.err)
    if readonly:
        assert tree(seeded) == before, argv
