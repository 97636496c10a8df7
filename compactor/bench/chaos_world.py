"""The world of ``compactor bench chaos`` without its stack: the session a trial starts from,
the agent that appends to it meanwhile, and the pure checks of what a trial left behind (the
view as a Messages API request, the log's events against what was appended). No processes, no
store, no Temporal: the trial harness (``compactor.bench.chaos``) drives these.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Sequence

from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock


# --- sessions and the agent ---------------------------------------------------------------------


def _ev(eid: str, role: str, *blocks: Any, kind: str = "message") -> Event:
    return Event(id=eid, role=role, kind=kind, blocks=list(blocks))  # type: ignore[arg-type]


def _result(uid: str, text: str, *, error: bool = False) -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=uid, content=[TextBlock(text=text)], is_error=error)


def _body(rng: random.Random, i: int) -> str:
    if rng.random() < 0.3:
        return f"F.. [{i}]\nFAILED tests/test_core.py::test_{i} - AssertionError\n1 failed, 2 passed"
    lines = rng.randint(8, 30)
    return f"# module {i}\n" + "\n".join(f"def fn_{i}_{j}(x):\n    return x * {j} + {i}" for j in range(lines))


def chaos_session(rng: random.Random, prefix: str) -> list[Event]:
    """A coding session: system prompt, a request with constraints, tool rounds, an abandoned
    deploy call (``toolu_{prefix}deploy``), a latest request and a last call still running
    (``toolu_{prefix}final``)."""
    evs = [
        _ev(f"{prefix}-sys", "system", TextBlock(text="You are a careful coding agent in /repo."), kind="pinned"),
        _ev(f"{prefix}-u0", "user", TextBlock(
            text="Fix the failing tests in src/app/core.py. Do not modify tests/test_core.py and never push to main.")),
    ]
    rounds = rng.randint(14, 28)
    for i in range(rounds):
        uid = f"toolu_{prefix}{i:04d}"
        cmd = "pytest -q tests/test_core.py" if i % 3 == 0 else f"cat src/app/mod_{i}.py"
        evs.append(_ev(f"{prefix}-a{i}", "assistant", TextBlock(text=f"Step {i}: checking module {i}."),
                       ToolUseBlock(id=uid, name="Bash", input={"command": cmd})))
        evs.append(_ev(f"{prefix}-r{i}", "user", _result(uid, _body(rng, i))))
        if i == 2:
            evs.append(_ev(f"{prefix}-dep", "assistant", TextBlock(text="Deploying to staging in the background."),
                           ToolUseBlock(id=f"toolu_{prefix}deploy", name="Bash",
                                        input={"command": "./scripts/deploy.sh staging"})))
            evs.append(_ev(f"{prefix}-dep2", "assistant", TextBlock(text="While that runs, I keep reading.")))
        if i == rounds // 2:
            evs.append(_ev(f"{prefix}-u1", "user", TextBlock(text="Also keep the public API of src/app/core.py stable.")))
    evs.append(_ev(f"{prefix}-u2", "user", TextBlock(text="Now run the full test suite and report the result.")))
    evs.append(_ev(f"{prefix}-fin", "assistant", ToolUseBlock(id=f"toolu_{prefix}final", name="Bash",
                                                              input={"command": "pytest -q"})))
    return evs


class Agent:
    """The appending agent: each ``step()`` is the next batch of events it would write.

    It answers its last call first, then issues calls and mostly answers them at once; some
    calls it moves on from, and their results arrive later (late results for calls in the
    tail); the abandoned deploy call's result arrives at some point too (a late result for a
    call the checkpoint covers, once the compaction committed).
    """

    def __init__(self, rng: random.Random, prefix: str) -> None:
        self.rng = rng
        self.prefix = prefix
        self.n = 0
        self.open: str | None = f"toolu_{prefix}final"  # the call waiting for its result
        self.moved_on: list[str] = []  # calls answered late
        self.deploy_done = False
        self.late = 0

    def _id(self, what: str) -> str:
        self.n += 1
        return f"{self.prefix}-x{self.n:05d}{what}"

    def step(self) -> list[Event]:
        rng = self.rng
        if self.open is not None:
            uid, self.open = self.open, None
            if rng.random() < 0.75:
                return [_ev(self._id("r"), "user", _result(uid, _body(rng, self.n)))]
            self.moved_on.append(uid)
            return [_ev(self._id("t"), "assistant", TextBlock(text="No output yet; continuing with the next file."))]
        if self.n > 4 and not self.deploy_done and rng.random() < 0.08:
            return [self.deploy_result()]
        if self.moved_on and rng.random() < 0.3:
            uid = self.moved_on.pop(0)
            self.late += 1
            return [_ev(self._id("l"), "user", _result(uid, f"(finished late) exit 0 for {uid}"))]
        if rng.random() < 0.1:
            return [_ev(self._id("u"), "user", TextBlock(text=f"Quick check {self.n}: is the build green?"))]
        uid = f"toolu_{self.prefix}x{self.n:05d}"
        self.open = uid
        return [_ev(self._id("a"), "assistant", TextBlock(text=f"Looking at step {self.n}."),
                    ToolUseBlock(id=uid, name="Bash", input={"command": f"grep -rn fn_{self.n} src"}))]

    def deploy_result(self) -> Event:
        self.deploy_done = True
        self.late += 1
        return _ev(self._id("d"), "user", _result(f"toolu_{self.prefix}deploy", "deployed to staging: ok"))


# --- checks (pure) -------------------------------------------------------------------------------


def request_problems(view: Sequence[Event]) -> list[str]:
    """Why the request this view renders to would be rejected by the Messages API ([] = valid):
    roles alternate starting with user, no empty message or text block, tool_use ids unique,
    every tool_use answered in the next message, every tool_result answering the message
    before it and leading its message."""
    from compactor.events import is_native_compaction
    from compactor.engine.measure import render_request

    _, messages = render_request(view)
    out: list[str] = []
    if not messages:
        return ["no messages"]
    if messages[0]["role"] != "user" and not is_native_compaction(messages[0]):
        out.append("first message is not a user message")
    uses_seen: set[str] = set()
    for i, m in enumerate(messages):
        blocks = m["content"]
        if i and m["role"] == messages[i - 1]["role"]:
            out.append(f"message {i}: two {m['role']} messages in a row")
        if not blocks:
            out.append(f"message {i}: empty")
        for b in blocks:
            if b.get("type") == "text" and not b.get("text", "").strip():
                out.append(f"message {i}: empty text block")
        if m["role"] == "assistant":
            uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            for uid in uses:
                if uid in uses_seen:
                    out.append(f"message {i}: tool_use {uid} twice")
                uses_seen.add(uid)
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            got = {b["tool_use_id"] for b in (nxt or {}).get("content", []) if b.get("type") == "tool_result"}
            out.extend(f"message {i}: tool_use {u} not answered in the next message" for u in uses if u not in got)
            continue
        prev = messages[i - 1] if i else None
        asked = {b["id"] for b in (prev or {}).get("content", []) if b.get("type") == "tool_use"} \
            if prev is not None and prev["role"] == "assistant" else set()
        kinds = [b.get("type") for b in blocks]
        other = [j for j, k in enumerate(kinds) if k != "tool_result"]
        if other and "tool_result" in kinds[other[0]:]:
            out.append(f"message {i}: tool_result after other content")
        answered = Counter(b["tool_use_id"] for b in blocks if b.get("type") == "tool_result")
        for uid, n in answered.items():
            if uid not in asked:
                out.append(f"message {i}: tool_result {uid} answers no call of the previous message")
            if n > 1:
                out.append(f"message {i}: tool_use {uid} answered {n} times")
    return out


def log_problems(events: Sequence[Event], expected: Sequence[str], unconfirmed: set[str]) -> dict[str, Any]:
    """Lost / duplicated / out-of-order appended events, and seq gaps, in a read log."""
    ids = [e.id for e in events]
    counts = Counter(ids)
    lost = [i for i in expected if counts[i] == 0]
    dup = sorted(i for i, n in counts.items() if n > 1)
    wanted = set(expected)
    order_ok = [i for i in ids if i in wanted] == [i for i in expected if counts[i]]
    foreign = [i for i in counts if i not in wanted and i not in unconfirmed]
    return {
        "lost": lost,
        "duplicated": dup,
        "out_of_order": not order_ok,
        "seq_gap": [e.seq for e in events] != list(range(1, len(events) + 1)),
        "foreign": foreign,
    }
