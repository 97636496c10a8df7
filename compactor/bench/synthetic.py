"""Deterministic synthetic agent sessions for the fidelity bench (no corpus needed).

Real transcripts are few and small; these add the shapes that stress a compaction: many
turns, failures that are later fixed, a final turn (the last request plus the agent's work
after it) larger than any target the bench uses, and sessions whose bulk is in tool *inputs*
(files written through heredocs, ``printf`` and ``tee``), which no tool-result layer can shrink.

Two shapes, both canonical ``compactor.events.Event`` lists:

- ``claude_session``: Claude-Code-like ``Bash``/``Read``/``Edit``/``Write`` tool pairs
  (failed runs as ``is_error`` results starting ``Exit code 1``), user rules and links, a
  closing message per turn, and a long final turn that ends on an unanswered call.
- ``codex_session``: Codex-like ``exec_command`` calls (``{"cmd", "workdir"}``) whose results
  carry Codex's ``Process exited with code N`` header; files are written with
  ``cat > path <<'EOF'``, ``printf '...\\n...' > path`` and ``echo ... | tee -a path``.

Same seed, same session: every choice comes from ``random.Random(seed)``.
"""

from __future__ import annotations

import random
from typing import Iterator

from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock

MODULES = ("billing", "ledger", "invoices", "scheduler", "webhooks", "quota", "exporter", "sessions",
           "catalog", "pricing", "audit", "notifier", "gateway", "tenants", "reports", "search")
NOUNS = ("retry", "budget", "cursor", "window", "batch", "token", "schema", "record", "handler",
         "payload", "timeout", "index", "snapshot", "digest", "offset", "channel", "bucket")
VERBS = ("normalize", "validate", "merge", "flush", "resolve", "render", "encode", "parse",
         "throttle", "reconcile", "export", "collect", "rotate", "compact", "dispatch")
OUTCOME = ("idempotent", "backpressure", "deduplicated", "monotonic", "paginated", "checksummed",
           "rate-limited", "memoized", "streaming", "sharded", "versioned", "debounced", "lazily",
           "atomically", "batched", "cached", "retried", "fenced", "ordered", "bounded")
ERRORS = (("KeyError", "'{n}_id'"), ("AttributeError", "'NoneType' object has no attribute '{n}'"),
          ("ModuleNotFoundError", "No module named '{m}_{n}'"), ("TypeError", "{v}() missing 1 required "
          "positional argument: '{n}'"), ("ValueError", "invalid {n} for {m}: -1"))
SYSTEM = ("You are a coding agent working in a git repository. Use the tools to read, edit and "
          "run code. Keep changes minimal and explain what you did at the end of each turn.")


class _Gen:
    """Shared builders: seq numbering, tool pairs, realistic filler text."""

    def __init__(self, seed: int, prefix: str) -> None:
        self.rng = random.Random(seed)
        self.prefix = prefix
        self.events: list[Event] = []
        self.calls = 0

    def add(self, role: str, blocks: list, kind: str = "message") -> None:
        seq = len(self.events) + 1
        self.events.append(Event(seq=seq, id=f"{self.prefix}-{seq}", kind=kind, role=role,  # type: ignore[arg-type]
                                 blocks=blocks))

    def call_id(self) -> str:
        self.calls += 1
        return f"{self.prefix}_call_{self.calls:04d}"

    def pair(self, name: str, inp: dict, output: str, is_error: bool = False, text: str = "") -> str:
        cid = self.call_id()
        blocks: list = [TextBlock(text=text)] if text else []
        self.add("assistant", blocks + [ToolUseBlock(id=cid, name=name, input=inp)])
        self.add("user", [ToolResultBlock(tool_use_id=cid, content=[TextBlock(text=output)], is_error=is_error)])
        return cid

    def pick(self, xs: tuple) -> str:
        return self.rng.choice(xs)

    def path(self) -> str:
        return f"src/{self.pick(MODULES)}/{self.pick(VERBS)}_{self.pick(NOUNS)}.py"

    def code(self, lines: int) -> str:
        out = []
        for i in range(lines):
            v, n, m = self.pick(VERBS), self.pick(NOUNS), self.pick(MODULES)
            if i % 6 == 0:
                out.append(f"def {v}_{n}({m}, {n}_limit={self.rng.randint(1, 500)}):")
            elif i % 6 == 5:
                out.append(f"    return {n}s  # {m} {v} path")
            else:
                out.append(f"    {n}s = [{v}(x) for x in {m}.{n}s if x.{n} > {self.rng.randint(0, 99)}]")
        return "\n".join(out)

    def log(self, lines: int) -> str:
        return "\n".join(f"{self.pick(MODULES)}: {self.pick(VERBS)} {self.pick(NOUNS)} "
                         f"{self.rng.randint(1000, 99999)} in {self.rng.randint(1, 900)}ms" for _ in range(lines))

    def error(self) -> tuple[str, str]:
        name, msg = self.rng.choice(ERRORS)
        return name, msg.format(n=self.pick(NOUNS), m=self.pick(MODULES), v=self.pick(VERBS))

    def closing(self) -> str:
        w = self.rng.sample(OUTCOME, 5)
        return f"Done: the {self.pick(MODULES)} path is now {w[0]}, {w[1]} and {w[2]}; exports are {w[3]} and {w[4]}."


def claude_session(seed: int = 0, turns: int = 6, final_turn_pairs: int = 40) -> list[Event]:
    """A Claude-Code-like session: ``turns`` ordinary turns, then a long final turn."""
    g = _Gen(seed, f"cc{seed}")
    g.add("system", [TextBlock(text=SYSTEM)], kind="pinned")
    for t in range(turns):
        mod = g.pick(MODULES)
        rule = g.rng.choice((f"Don't change the public API of {mod}.",
                             f"Never edit files under migrations/{mod}/.",
                             f"Only touch the {mod} package."))
        url = f" The ticket is https://tracker.example.com/{mod.upper()}-{g.rng.randint(100, 999)}." if t % 2 else ""
        g.add("user", [TextBlock(text=f"Make the {mod} {g.pick(NOUNS)} handling {g.pick(VERBS)} correctly "
                                      f"when the {g.pick(NOUNS)} is empty. {rule}{url}")])
        path = g.path()
        g.pair("Read", {"file_path": path}, g.code(g.rng.randint(60, 140)), text=f"Let me read {path}.")
        g.pair("Bash", {"command": f"rg -n '{g.pick(VERBS)}_' src/{mod}", "description": "search"}, g.log(30))
        test = f"pytest -q tests/test_{mod}.py"
        name, msg = g.error()
        g.pair("Bash", {"command": test, "description": "run tests"},
               f"Exit code 1\n{g.log(20)}\nTraceback (most recent call last):\n  File \"{path}\", line "
               f"{g.rng.randint(10, 200)}, in {g.pick(VERBS)}\n{name}: {msg}\n1 failed, {g.rng.randint(3, 40)} passed",
               is_error=True)
        g.pair("Edit", {"file_path": path, "old_string": g.code(3), "new_string": g.code(4)},
               f"The file {path} has been updated successfully.")
        if t % 3 == 1:
            new = f"tests/test_{mod}_{g.pick(NOUNS)}.py"
            g.pair("Write", {"file_path": new, "content": g.code(40)}, f"File created successfully at: {new}")
        g.pair("Bash", {"command": test, "description": "run tests"},
               f"{g.log(5)}\n{g.rng.randint(4, 41)} passed in {g.rng.randint(1, 9)}.{g.rng.randint(10, 99)}s")
        g.add("assistant", [TextBlock(text=g.closing())])
    mod = g.pick(MODULES)
    g.add("user", [TextBlock(text=f"Now port the whole {mod} exporter to the streaming writer, file by file, "
                                  f"and keep every existing test green. Do not add dependencies.")])
    for i in range(final_turn_pairs):
        path = g.path()
        if i % 3 == 0:
            g.pair("Read", {"file_path": path}, g.code(g.rng.randint(40, 90)))
        elif i % 3 == 1:
            g.pair("Edit", {"file_path": path, "old_string": g.code(4), "new_string": g.code(8)},
                   f"The file {path} has been updated successfully.")
        else:
            g.pair("Bash", {"command": f"python -m {mod}.check {path}", "description": "check"}, g.log(25))
    g.add("assistant", [ToolUseBlock(id=g.call_id(), name="Bash",
                                     input={"command": f"pytest -q tests/test_{mod}.py", "description": "run tests"})])
    return g.events


def _codex_out(g: _Gen, code: int, body: str) -> str:
    return (f"Chunk ID: {g.rng.randrange(16**6):06x}\nWall time: 0.{g.rng.randint(1000, 9999)} seconds\n"
            f"Process exited with code {code}\nOriginal token count: {len(body) // 4}\nOutput:\n{body}")


def codex_session(seed: int = 0, turns: int = 4, writes_per_turn: int = 6,
                  big_final_turn: bool = True) -> list[Event]:
    """A Codex-like session whose files are written by shell: heredocs, printf, tee."""
    g = _Gen(seed, f"cx{seed}")
    g.add("system", [TextBlock(text=SYSTEM)], kind="pinned")
    wd = f"/home/dev/{g.pick(MODULES)}-service"
    for t in range(turns + (1 if big_final_turn else 0)):
        final = big_final_turn and t == turns
        mod = g.pick(MODULES)
        g.add("user", [TextBlock(text=f"Scaffold the {mod} {g.pick(NOUNS)} module with tests. "
                                      f"Avoid network calls in tests.")])
        for w in range(writes_per_turn * (4 if final else 1)):
            path = g.path()
            kind = w % 4
            if kind == 0:
                cmd = f"mkdir -p {path.rsplit('/', 1)[0]} && cat > {path} <<'EOF'\n{g.code(g.rng.randint(30, 80))}\nEOF"
            elif kind == 1:
                body = "\\n".join(g.code(12).splitlines())  # printf's escaped newlines, as typed
                cmd = f"printf '{body}\\n' > {path}"
            elif kind == 2:
                path = f"docs/{mod}.md"
                cmd = f"echo \"- {g.pick(VERBS)} {g.pick(NOUNS)}: {g.pick(OUTCOME)}\" | tee -a {path}"
            else:
                cmd = f"python - <<'PY'\nimport pathlib\np = pathlib.Path('{path}')\np.write_text(p.read_text().replace('{g.pick(NOUNS)}', '{g.pick(NOUNS)}'))\nPY"
            g.add("assistant", [ToolUseBlock(id=(cid := g.call_id()), name="exec_command",
                                             input={"cmd": cmd, "workdir": wd})])
            g.add("user", [ToolResultBlock(tool_use_id=cid, content=[TextBlock(text=_codex_out(g, 0, ""))])])
        test = f"python -m pytest -q tests/{mod}"
        name, msg = g.error()
        g.pair("exec_command", {"cmd": test, "workdir": wd},
               _codex_out(g, 1, f"{g.log(10)}\nE   {name}: {msg}\n1 failed, {g.rng.randint(2, 20)} passed"))
        g.pair("exec_command", {"cmd": f"cat > tests/{mod}/conftest.py <<'EOF'\n{g.code(10)}\nEOF", "workdir": wd},
               _codex_out(g, 0, ""))
        g.pair("exec_command", {"cmd": test, "workdir": wd},
               _codex_out(g, 0, f"{g.rng.randint(3, 21)} passed in 0.{g.rng.randint(10, 99)}s"))
        g.add("assistant", [TextBlock(text=g.closing())])
    return g.events


def synthetic_sessions(n: int, seed: int = 0) -> Iterator[tuple[str, list[Event]]]:
    """``n`` sessions, alternating the two shapes, named ``synthetic/<shape>-<seed>``."""
    for i in range(n):
        s = seed + i
        if i % 2 == 0:
            yield f"synthetic/claude-{s}", claude_session(s)
        else:
            yield f"synthetic/codex-heredoc-{s}", codex_session(s, big_final_turn=(i // 2) % 2 == 0)
