"""Generate the bundled demo transcript (compactor/samples/demo-session.claude.jsonl).

A made-up Claude Code session (our own text, not from any corpus): a user asks an agent to
fix a failing rate limiter in a small service; the agent reads files, runs tests, fails once,
edits, re-runs, and is mid-way through a last command when the log ends (an unknown outcome).
Deterministic: running it again writes the same bytes.

    python tools/make_sample.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "compactor" / "samples" / "demo-session.claude.jsonl"
SESSION = "5f0c1d2e-demo-4b7a-9c1e-000000000001"
rng = random.Random(7)
lines: list[dict] = []
clock = [0]
n = [0]


def ts() -> str:
    clock[0] += rng.randint(3, 40)
    s = clock[0]
    return f"2026-11-02T09:{(s // 60) % 60:02d}:{s % 60:02d}.000Z"


def uid() -> str:
    n[0] += 1
    return f"00000000-0000-4000-8000-{n[0]:012d}"


parent = [None]


def push(obj: dict) -> None:
    u = uid()
    obj.update(
        {
            "parentUuid": parent[0],
            "isSidechain": False,
            "uuid": u,
            "timestamp": ts(),
            "sessionId": SESSION,
            "cwd": "/srv/ratelimit",
            "version": "2.1.90",
            "gitBranch": "main",
            "userType": "external",
        }
    )
    parent[0] = u
    lines.append(obj)


def user(text: str) -> None:
    push({"type": "user", "message": {"role": "user", "content": text}})


msg_n = [0]
tool_n = [0]


def assistant(text: str | None = None, tools: list[tuple[str, dict]] | None = None) -> list[str]:
    msg_n[0] += 1
    mid = f"msg_demo{msg_n[0]:04d}"
    ids = []
    usage = {"input_tokens": 3, "cache_read_input_tokens": 1000 * msg_n[0], "output_tokens": 120}
    if text:
        push({"type": "assistant", "message": {"id": mid, "role": "assistant", "model": "claude-sonnet-4-5",
              "content": [{"type": "text", "text": text}], "usage": usage}})
    for name, inp in tools or []:
        tool_n[0] += 1
        tid = f"toolu_demo{tool_n[0]:04d}"
        ids.append(tid)
        push({"type": "assistant", "message": {"id": mid, "role": "assistant", "model": "claude-sonnet-4-5",
              "content": [{"type": "tool_use", "id": tid, "name": name, "input": inp}], "usage": usage}})
    return ids


def result(tid: str, text: str, is_error: bool = False) -> None:
    push({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tid, "content": text, "is_error": is_error}]}})


def source_file(name: str, lines_n: int) -> str:
    out = []
    for i in range(1, lines_n + 1):
        kind = rng.choice(["def", "assign", "comment", "if", "return"])
        if kind == "def":
            out.append(f"{i:5d}\tdef handle_{rng.randint(100, 999)}(request, bucket, now):")
        elif kind == "assign":
            out.append(f"{i:5d}\t    tokens_{rng.randint(1, 9)} = bucket.capacity - bucket.used * {rng.randint(2, 9)}")
        elif kind == "comment":
            out.append(f"{i:5d}\t    # refill window {rng.randint(1, 60)}s for {name}")
        elif kind == "if":
            out.append(f"{i:5d}\t    if now - bucket.last_refill > {rng.randint(1, 90)}:")
        else:
            out.append(f"{i:5d}\t        return Decision(allowed={rng.choice(['True', 'False'])}, retry_after={rng.randint(0, 30)})")
    return "\n".join(out)


def test_log(failed: bool, extra: int) -> str:
    out = ["============================= test session starts ==============================",
           "platform linux -- Python 3.12.3, pytest-8.3.2", "rootdir: /srv/ratelimit", "collected 148 items", ""]
    for i in range(extra):
        out.append(f"tests/test_bucket_{i % 12}.py::test_case_{i} PASSED{' ' * 20}[{int(100 * i / extra):3d}%]")
    if failed:
        out += ["", "=================================== FAILURES ===================================",
                "____________________ test_refill_after_window_boundary ____________________",
                "    def test_refill_after_window_boundary(clock):",
                "        bucket = TokenBucket(capacity=10, refill_per_s=5)",
                ">       assert bucket.take(now=clock.at(1.0)) is True",
                "E       AssertionError: assert False is True",
                "src/ratelimit/bucket.py:88: AssertionError",
                "FAILED tests/test_bucket.py::test_refill_after_window_boundary - AssertionError",
                "=================== 1 failed, 147 passed in 4.12s ===================="]
    else:
        out += ["", "=================== 148 passed in 4.07s ===================="]
    return "\n".join(out)


user("We have a token-bucket rate limiter in /srv/ratelimit. Since the last release clients get "
     "429s right after the refill window boundary. Please find and fix the bug. Do not change the "
     "public API of TokenBucket, and never push to main directly: work on a branch. Our staging "
     "dashboard is https://grafana.example.internal/d/ratelimit if you need context.")
(t,) = assistant("I'll start by looking at the layout and running the tests.", [("Bash", {"command": "ls -R src tests | head -50", "description": "List files"})])
result(t, "src/ratelimit:\n__init__.py\nbucket.py\nclock.py\nmiddleware.py\nstore.py\n\ntests:\nconftest.py\ntest_bucket.py\ntest_middleware.py\ntest_store.py")
(t,) = assistant(None, [("Bash", {"command": "git checkout -b fix/refill-boundary", "description": "Work on a branch"})])
result(t, "Switched to a new branch 'fix/refill-boundary'")
(t,) = assistant(None, [("Bash", {"command": "python -m pytest -q", "description": "Run the test suite"})])
result(t, test_log(True, 140) + "\nExit code 1", is_error=True)
for f, ln in [("src/ratelimit/bucket.py", 260), ("src/ratelimit/clock.py", 120), ("src/ratelimit/store.py", 300), ("src/ratelimit/middleware.py", 220)]:
    (t,) = assistant(f"Reading {f}.", [("Read", {"file_path": f"/srv/ratelimit/{f}"})])
    result(t, source_file(f, ln))
ids = assistant("Let me check how refill is computed and where `last_refill` is updated, in parallel.",
                [("Grep", {"pattern": "last_refill", "path": "/srv/ratelimit/src"}),
                 ("Grep", {"pattern": "refill_per_s", "path": "/srv/ratelimit/src"})])
result(ids[0], "src/ratelimit/bucket.py:71:        self.last_refill = now\nsrc/ratelimit/bucket.py:84:        elapsed = now - self.last_refill\nsrc/ratelimit/store.py:140:    bucket.last_refill = row.refilled_at")
result(ids[1], "src/ratelimit/bucket.py:40:    refill_per_s: float\nsrc/ratelimit/bucket.py:86:        self.tokens = min(self.capacity, self.tokens + int(elapsed) * self.refill_per_s)")
assistant("The refill truncates `elapsed` with `int()`, so a take at 1.0s after a refill that happened at 0.4s sees 0 whole seconds. "
          "I decided to compute refill from the float elapsed time instead of switching to a sliding window, because it keeps the public API unchanged.")
(t,) = assistant(None, [("Edit", {"file_path": "/srv/ratelimit/src/ratelimit/bucket.py",
                                   "old_string": "self.tokens + int(elapsed) * self.refill_per_s",
                                   "new_string": "self.tokens + elapsed * self.refill_per_s"})])
result(t, "The file /srv/ratelimit/src/ratelimit/bucket.py has been updated.")
(t,) = assistant(None, [("Bash", {"command": "python -m pytest -q tests/test_bucket.py", "description": "Re-run bucket tests"})])
result(t, "FAILED tests/test_bucket.py::test_tokens_are_integers - TypeError: 'float' object cannot be interpreted as an integer\n1 failed, 40 passed in 1.02s\nExit code 1", is_error=True)
assistant("That approach broke an integer assumption elsewhere: `tokens` must stay an int. I'll keep fractional credit in a separate accumulator.")
(t,) = assistant(None, [("Edit", {"file_path": "/srv/ratelimit/src/ratelimit/bucket.py",
                                   "old_string": "self.tokens + elapsed * self.refill_per_s",
                                   "new_string": "self._credit + elapsed * self.refill_per_s"})])
result(t, "The file /srv/ratelimit/src/ratelimit/bucket.py has been updated.")
(t,) = assistant(None, [("TodoWrite", {"todos": [
    {"content": "Fix fractional refill in TokenBucket.take", "status": "completed", "activeForm": "Fixing refill"},
    {"content": "Add regression test for the window boundary", "status": "in_progress", "activeForm": "Adding test"},
    {"content": "Run the full suite and the load test", "status": "pending", "activeForm": "Running tests"}]})])
result(t, "Todos have been modified successfully.")
(t,) = assistant(None, [("Write", {"file_path": "/srv/ratelimit/tests/test_refill_boundary.py",
                                    "content": "def test_take_after_partial_window(clock):\n    b = TokenBucket(capacity=10, refill_per_s=5)\n    b.drain(now=clock.at(0.4))\n    assert b.take(now=clock.at(1.0))\n"})])
result(t, "File created successfully at: /srv/ratelimit/tests/test_refill_boundary.py")
(t,) = assistant(None, [("Bash", {"command": "python -m pytest -q", "description": "Full suite"})])
result(t, test_log(False, 160) + "\nExit code 0")
user("Nice. Also run the load test against staging before we merge, but only with --rate 50 or lower; "
     "the staging limiter is shared with another team.")
(t,) = assistant("Running the load test at rate 50.", [("Bash", {"command": "python tools/loadtest.py --target staging --rate 50 --duration 120", "description": "Load test at rate 50"})])
# no result: the session log ends while the load test is still running (an unknown outcome)

OUT.parent.mkdir(parents=True, exist_ok=True)
OUT.write_text("".join(json.dumps(obj, separators=(",", ":")) + "\n" for obj in lines))
print(f"wrote {OUT} ({len(lines)} lines)")
