"""Plain commands take a short path through ``shell_files`` (issue 17) and get the scanner's answer.

A command with no quote, escape, operator, expansion, comment or line end (``cat src/x.py``,
``rm -f a.txt b.txt``, ``git mv old.py new.py``) is read by ``shell._plain_files`` without the
scanner; every command of the fixtures, the corpus, the synthetic and generated sessions, and
random commands built from the programs the rules know, must give what the scanner gives.
"""

from __future__ import annotations

import functools
import random
from pathlib import Path

from compactor.bench.scale import small_session_lines
from compactor.bench.synthetic import synthetic_sessions
from compactor.importers import import_file
from compactor.lifting import shell
from compactor.lifting.actions import _command_of
from tests.conftest import corpus_files

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@functools.lru_cache(maxsize=1)
def _session_commands() -> tuple[str, ...]:
    files = [p for p in sorted(FIXTURES.rglob("*")) if p.is_file() and p.suffix in (".jsonl", ".json")]
    sessions = []
    for path in files + corpus_files():
        try:
            sessions.append(import_file(path).events)
        except Exception:  # noqa: BLE001 - a fixture of another format (a bad-input case): not a transcript
            continue
    sessions += [evs for _, evs in synthetic_sessions(6, seed=3)]
    out = []
    for events in sessions:
        for e in events:
            for u in e.tool_uses:
                c = _command_of(u.input) if isinstance(u.input, dict) else None
                if c:
                    out.append(c)
    return tuple(out)


_PROGRAMS = ["cat", "nl", "head", "tail", "sed", "wc", "open", "rm", "touch", "mv", "cp", "tee", "truncate",
             "unlink", "git", "ls", "python", "pytest", "echo", "printf", "sudo", "time", "nohup", "exec", "command",
             "/bin/cat", "./run", "less", "bat", "npm", "make", "!", "{", "then"]
_WORDS = ["src/a.py", "a.txt", "b.md", "-n", "-i", "-i.bak", "--in-place", "-e", "s/x/y/", "-f", "--file", "x.sed",
          "-a", "--append", "mv", "rm", "add", "status", "dir/", "..", ".", "FOO=1", "A_B=x.py", "http://h/x.py",
          "s3://b/k.txt", "v1.2", "README", "notes.txt", "x=y", "-", "--", "tests/test_a.py::t", "a,b.py", "~/x.cfg",
          "é.py", "a\u00a0b.py", "a\x0bb.py", "", " "]


def _random_commands(n: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rnd.choice(_WORDS + ["FOO=bar", "sudo"]) for _ in range(rnd.randint(0, 2))]
        words.append(rnd.choice(_PROGRAMS))
        words += [rnd.choice(_WORDS + _PROGRAMS) for _ in range(rnd.randint(0, 5))]
        out.append((" " * rnd.randint(1, 2)).join(words) + " " * rnd.randint(0, 1))
    return out


def _check(commands: list[str]) -> int:
    plain = 0
    for c in commands:
        if len(c) <= shell._MAX_SCAN_CHARS and shell._SPECIAL_RE.search(c) is None:
            plain += 1
            assert shell._plain_files(c) == shell._scanned_files(c), c
        assert shell.shell_files(c) == shell._scanned_files(c), c
    return plain


def test_every_session_command_gets_the_scanners_answer() -> None:
    commands = list(_session_commands())
    commands += [line.split('"command": "', 1)[1].split('"', 1)[0]
                 for line in small_session_lines(400) if '"command": "' in line]
    assert _check(commands) > 50  # (plain commands are common: the short path ran)


def test_random_plain_commands_get_the_scanners_answer() -> None:
    commands = _random_commands(20_000)
    assert _check(commands) > 15_000
    # and the short path did find files read and changed, not only empty answers
    got = [shell._plain_files(c) for c in commands[:3000] if shell._SPECIAL_RE.search(c) is None]
    assert any(f.reads for f in got) and any(f.changes for f in got)
    rules = ["sed -i s/a/b/ src/a.py", "sed -n 1,5p src/a.py b.md", "sed -e s/a/b/ -i src/a.py", "git mv a.txt b.md",
             "git rm -f src/a.py", "cp a.txt dir/b.md", "tee -a notes.txt", "mv a.txt src/a.py", "FOO=1 cat a.txt a.txt",
             "cat http://h/x.py src/a.py", "unlink a.txt", "truncate -s 0 a.txt", "sudo time rm a.txt"]
    assert _check(rules) == len(rules)
    assert {how for c in rules for how in shell._plain_files(c).changes.values()} >= {
        "sed -i", "git mv", "git rm", "cp", "tee -a", "moved", "deleted", "truncate"}


def test_a_command_with_shell_syntax_takes_the_scanner() -> None:
    assert shell.shell_files("cat a.py > b.py").changes == {"b.py": "shell redirect"}
    assert shell.shell_files("cat src/a.py").reads == ["src/a.py"]
    assert shell.shell_files("sudo FOO=1 rm -f old.txt").changes == {"old.txt": "deleted"}
