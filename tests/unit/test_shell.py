"""Shell parsing: heredocs are data, escaped newlines are decoded, no path is ever invented."""

from __future__ import annotations

import json
import random

import pytest

from compactor.importers import import_file
from compactor.lifting.lift import _command_of, classify
from compactor.lifting.shell import plausible_path, shell_files
from tests.conftest import corpus_files


def changed(command: str) -> dict[str, str]:
    return shell_files(command).changes


def test_heredoc_changes_the_file_and_its_body_is_data() -> None:
    cmd = "cat > .github/workflows/ci.yml <<'EOF'\nname: CI\nrm src/keep.py\nmv a/b.py c/d.py\nEOF\nls"
    files = shell_files(cmd)
    assert files.changes == {".github/workflows/ci.yml": "heredoc"}
    assert files.writes[".github/workflows/ci.yml"].startswith("name: CI\n")
    assert files.reads == []


def test_literal_backslash_n_newlines_yield_only_real_paths() -> None:
    cmd = "mkdir -p .github/workflows && cat > .github/workflows/ci.yml <<'EOF'\\nname: CI\\non: push\\nEOF"
    assert changed(cmd) == {".github/workflows/ci.yml": "heredoc"}


def test_exec_script_with_json_escaped_command() -> None:
    inner = "cat > docker/app.Dockerfile <<'EOF'\nFROM rust:1.79\nCOPY target/release/edgerunner /usr/local/bin/edgerunner\nEOF"
    script = f"const r = await tools.exec_command({{cmd: {json.dumps(inner)}}});\nconsole.log(r.output);"
    assert changed(script) == {"docker/app.Dockerfile": "heredoc"}


@pytest.mark.parametrize("cmd, path, how", [
    ("printf 'a=1\\nb=2\\n' > conf/app.env", "conf/app.env", "printf"),
    ("echo 'export PATH=$HOME/bin:$PATH' >> ~/.bashrc_extra.sh", "~/.bashrc_extra.sh", "echo append"),
    ("echo done | tee -a logs/run.log", "logs/run.log", "tee -a"),
    ("cat <<EOF | sudo tee /etc/app/config.yaml\nkey: v\nEOF", "/etc/app/config.yaml", "tee"),
    ("sed -i 's/a/b/' src/x.py", "src/x.py", "sed -i"),
])
def test_writers_change_their_target(cmd: str, path: str, how: str) -> None:
    assert changed(cmd) == {path: how}


def test_here_strings_substitutions_and_interpreter_heredocs_name_no_files() -> None:
    assert changed("python - <<'PY'\nopen('out/x.txt', 'w').write('x')\nPY") == {}
    assert changed("echo $(cat secret/x.txt) > out/$NAME.txt") == {}
    assert shell_files("grep -c x <<< 'a/b.txt'").reads == []


def test_reads_and_sed_script_is_not_a_file() -> None:
    files = shell_files("sed -e 's/a/b/' src/x.py | head -n 5 other/y.md; cat 'my notes.txt'")
    assert files.reads == ["src/x.py", "other/y.md", "my notes.txt"]


_PATHS = ["src/app.py", ".github/workflows/ci.yml", "/usr/local/bin/edgerunner", "a b/c.txt",
          "pkg/index.ts", "Cargo.toml", "docs/README.md", "~/.config/x.json"]
_BODY = ["name: CI", "COPY . /usr/local/bin/edgerunner", "rm -rf build/out.txt", "x > y/z.txt",
         "print('a\\nb')", "echo hi >> notes/n.md", "  - run: cargo build"]


def _quote(rng: random.Random, p: str) -> str:
    return rng.choice([f"'{p}'", f'"{p}"']) if " " in p else rng.choice([p, f"'{p}'", f'"{p}"'])


def _generated(rng: random.Random) -> str:
    p, q = rng.choice(_PATHS), rng.choice(_PATHS)
    body = "\n".join(rng.sample(_BODY, 3))
    forms = [
        f"cat > {_quote(rng, p)} <<'EOF'\n{body}\nEOF",
        f"cat <<EOF > {_quote(rng, p)}\n{body}\nEOF\ncat {_quote(rng, q)}",
        f"printf '%s\\n' {rng.choice(_BODY)!r} >> {_quote(rng, p)}",
        f"echo {rng.choice(_BODY)!r} | tee -a {_quote(rng, p)} >/dev/null",
        f"cd repo && sed -i 's/x/y/' {_quote(rng, p)} && git mv {_quote(rng, p)} {_quote(rng, q)} 2>&1",
        f"mkdir -p x && tee {_quote(rng, p)} <<-'END'\n\t{body}\n\tEND\nhead -5 {_quote(rng, q)}",
    ]
    cmd = rng.choice(forms)
    style = rng.randrange(3)
    if style == 1:  # stored JSON-escaped: literal \n between lines
        cmd = json.dumps(cmd)[1:-1]
    elif style == 2:  # inside a Codex exec script
        cmd = f"const r = await tools.exec_command({{cmd: {json.dumps(cmd)}}});\nconsole.log(r);"
    return cmd


def test_property_every_reported_path_occurs_verbatim_and_is_plausible() -> None:
    rng = random.Random(7)
    for _ in range(600):
        cmd = _generated(rng)
        files = shell_files(cmd)
        for path in [*files.reads, *files.changes]:
            assert path in cmd and plausible_path(path), (cmd, path)
            assert "\\n" not in path and "\n" not in path
        assert files.changes, cmd  # each form writes something: the parser did not lose it


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus_shell_paths_occur_in_their_command(path) -> None:
    for e in import_file(path).events:
        for use in e.tool_uses:
            act = classify(use)
            if act.kind != "command" or not isinstance(use.input, dict):
                continue
            command = _command_of(use.input) or ""
            for p in [*act.paths, *act.reads]:
                assert p in command and "\n" not in p, (use.id, p)



def _commands() -> list[str]:
    """Shell commands of every corpus transcript and the synthetic sessions, plus plain ones."""
    from compactor.bench.synthetic import synthetic_sessions

    cmds = ["cat src/mod_1.py", "pytest -q tests/a.py", "  ls   -la  ", "", "git mv a.py b.py",
            "sed -n 1,20p src/x.py", "tee -a notes.md", "rm -rf build/", "A=1 make test",
            "sudo touch /etc/x.conf", "wc -l a.py b.py", "echo done"]
    sessions = [e for _, evs in synthetic_sessions(3, seed=5) for e in evs]
    for path in corpus_files():
        sessions += import_file(path).events
    for e in sessions:
        for u in e.tool_uses:
            c = _command_of(u.input)
            if c:
                cmds.append(c)
    return cmds


def test_plain_commands_parse_as_the_scanner_does() -> None:
    """``parse`` splits a command without quotes, escapes or operators on spaces (fast path);
    it gives what the full scanner gives, and shell_files/command_key reports the same."""
    from compactor.lifting.failures import command_key
    from compactor.lifting.shell import _Scanner, parse

    plain = 0
    for cmd in _commands():
        for script in (cmd, cmd.replace("\n", " ")):
            assert parse(script) == _Scanner(script).run(), script
            plain += "'" not in script and '"' not in script and "\\" not in script
            toks = " ".join(script.split())
            if "'" not in toks and '"' not in toks and "\\" not in toks:
                import shlex

                assert shlex.split(toks) == toks.split()
    assert plain > 10
    assert command_key("cat 'a b.py'") == "cat a b.py"  # quoted: still the shlex path
