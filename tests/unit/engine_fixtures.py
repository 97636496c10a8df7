"""Hand-built conversations for the engine tests (policy, boundary, layers, invariants, engine)."""

from __future__ import annotations

from compactor.events import Block, Event, TextBlock, ToolResultBlock, ToolUseBlock


class Conv:
    """Builds a gap-free event list: ``c.user("...")``, ``c.call("bash", {...}, "output")``."""

    def __init__(self, system: str | None = "You are a careful coding agent.") -> None:
        self.events: list[Event] = []
        self._n = 0
        if system is not None:
            self.add("system", [TextBlock(text=system)], kind="pinned")

    def add(self, role: str, blocks: list[Block], **kw) -> Event:
        seq = len(self.events) + 1
        e = Event(seq=seq, id=kw.pop("id", f"e{seq}"), role=role, blocks=blocks, **kw)
        self.events.append(e)
        return e

    def user(self, text: str, **kw) -> Event:
        return self.add("user", [TextBlock(text=text)], **kw)

    def say(self, text: str) -> Event:
        return self.add("assistant", [TextBlock(text=text)])

    def tool_id(self) -> str:
        self._n += 1
        return f"toolu_{self._n:06d}"

    def use(self, name: str, inp: dict, text: str = "", *, tid: str | None = None) -> str:
        tid = tid or self.tool_id()
        blocks: list[Block] = [TextBlock(text=text)] if text else []
        self.add("assistant", [*blocks, ToolUseBlock(id=tid, name=name, input=inp)])
        return tid

    def result(self, tid: str, output: str, *, is_error: bool = False) -> Event:
        return self.add(
            "user", [ToolResultBlock(tool_use_id=tid, content=[TextBlock(text=output)], is_error=is_error)]
        )

    def call(self, name: str, inp: dict, output: str, text: str = "", **kw) -> str:
        tid = self.use(name, inp, text)
        self.result(tid, output, **kw)
        return tid

    def batch(self, calls: list[tuple[str, dict, str]], *, split_results: bool = True) -> list[str]:
        """One assistant event with several tool_uses; results in one event each (or together)."""
        ids = [self.tool_id() for _ in calls]
        self.add("assistant", [ToolUseBlock(id=i, name=n, input=inp) for i, (n, inp, _) in zip(ids, calls)])
        if split_results:
            for i, (_, _, out) in zip(ids, calls):
                self.result(i, out)
        else:
            self.add("user", [ToolResultBlock(tool_use_id=i, content=[TextBlock(text=out)])
                              for i, (_, _, out) in zip(ids, calls)])
        return ids

    def seq_of(self, tid: str) -> int:
        return next(e.seq for e in self.events if any(u.id == tid for u in e.tool_uses))


def long_session(rounds: int = 30, out_lines: int = 150) -> Conv:
    """A session with a goal + constraints, many tool rounds, a later request, a final round."""
    c = Conv()
    c.user("Fix the failing parser in src/parser.py. Never push to main. Do not modify tests/fixtures.")
    for i in range(rounds):
        c.call("Bash", {"command": f"pytest tests/test_parser.py -k case{i}"},
               "\n".join(f"case{i} line {j}: ok" for j in range(out_lines)),
               text=f"Checking case {i}.")
    c.user("Now also update docs/usage.md with the new flag.")
    c.call("Read", {"file_path": "docs/usage.md"}, "# Usage\n\nRun the parser.\n")
    c.say("I will add the flag to docs/usage.md next.")
    return c


def random_session(rng) -> Conv:
    """A random but well-formed session: calls, parallel batches (results split or together),
    abandoned and pending calls, requests with constraints, pinned and injected events."""
    c = Conv(system=None if rng.random() < 0.2 else "sys " * rng.randint(1, 300))
    c.user("Start: fix src/a.py. Never delete data.")
    for _ in range(rng.randint(5, 80)):
        r = rng.random()
        if r < 0.45:
            c.call("Bash", {"command": f"cmd {rng.randint(0, 999)}"}, "out\n" * rng.randint(1, 3000),
                   text=rng.choice(["", "doing it"]), is_error=rng.random() < 0.1)
        elif r < 0.6:
            n = rng.randint(2, 4)
            c.batch([("Read", {"file_path": f"f{i}.py"}, "x " * rng.randint(1, 2000)) for i in range(n)],
                    split_results=rng.random() < 0.5)
        elif r < 0.7:
            c.user(rng.choice(["please continue", "Do not touch prod. Always run tests.", "what now?",
                               "see https://example.com/x"]))
        elif r < 0.75:
            c.use("Bash", {"command": "lost"})  # abandoned unless it ends the session
        elif r < 0.78:
            c.add("system", [TextBlock(text="pinned mid " * rng.randint(1, 50))], kind="pinned")
        elif r < 0.82:
            c.user("<system-reminder>injected</system-reminder>", injected=True)
        else:
            c.say("thinking out loud " * rng.randint(1, 100))
    if rng.random() < 0.3:
        c.use("Bash", {"command": "pending"})
    return c
