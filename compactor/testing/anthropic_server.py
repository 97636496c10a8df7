"""A local HTTP server speaking the Anthropic Messages API subset the summarizers use.

Endpoints (JSON in, JSON or SSE out, the shapes the ``anthropic`` SDK parses):

- ``POST /v1/messages``: non-streaming and ``"stream": true`` (SSE: ``message_start``,
  ``content_block_start``, ``ping``, ``content_block_delta``, ``content_block_stop``,
  ``message_delta``, ``message_stop``); with the top-level ``compaction`` parameter (beta
  ``compact-2026-09-04``) it answers with one signed ``compaction`` block and
  ``stop_reason: "compaction"``.
- ``POST /v1/messages/count_tokens``: ``{"input_tokens": N}``.
- ``POST /_control/faults`` (list of fault dicts), ``GET /_control/requests``,
  ``POST /_control/reset``: the same controls over HTTP, for ``python -m`` use.

The "model" is deterministic. For a template request it reads the section headings
(``## Name`` lines) from the system prompt and the lifted state from the
``<untrusted_data name="lifted_state" ...>`` block, and writes one bullet per state item under
the matching heading. It is deliberately gullible: text that says "ignore previous
instructions" *outside* every well-formed ``untrusted_data`` fence is obeyed (the summary then
claims everything is done and drops the constraints), so a test fails if data can escape its
fence. Text inside a fence is treated as data.

Requests whose system prompt names a probe protocol (``compactor-probe-reader-v1`` /
``compactor-probe-judge-v1``, from ``compactor bench probes``) get a deterministic reader or
judge instead: the reader answers each question with the line (or sentence) of the fenced
view that shares the most content words with the question, or "not in context" below
``PROBE_MIN_OVERLAP`` shared words, as JSON in a ```json fence; the judge grades each answer by
the share of the reference's content words it contains (2 from ``PROBE_FULL``, 1 from
``PROBE_PART``, else 0; never -1), as JSON after a line of prose. So a view that kept the
answer's text scores higher than one that lost it, and both reply styles exercise the
client's lenient parsing.

Token counts are ``ceil(chars / 4)`` of the request's text (a different tokenizer from ours,
on purpose). Prompt caching is simulated: the prefix up to a ``cache_control`` breakpoint is
reported as ``cache_creation_input_tokens`` the first time and ``cache_read_input_tokens``
after.

Recording and replay (the stand-in model protocol, ``../shared/probes/model.md``): with
``record_dir`` set, every template-summary request (not probe, not native compaction) is written
there by ``write_request`` as ``system.txt``, ``user.txt`` (the user message's text blocks in
order, exactly as sent) and ``request.json`` (model, max_tokens, system, messages); with
``answer`` set, that text is served for every template-summary request instead of the
deterministic model's (a ``reply`` fault still wins).

Faults are consumed in order, one per matching request (see ``Fault``). Started and stopped
from Python (``FakeAnthropic().start()`` / context manager) or as
``python -m compactor.testing.anthropic_server --port N``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterable

FENCE_RE = re.compile(
    r'<untrusted_data name="(?P<name>[a-z_]+)" fence="(?P<fence>[0-9a-f]{8,64})">\n'
    r"(?P<body>.*?)\n"
    r'</untrusted_data fence="(?P=fence)">',
    re.S,
)
INJECTION_RE = re.compile(r"ignore (all )?(the )?previous instructions", re.I)
HEADING_RE = re.compile(r"^## (.+?)\s*$", re.M)


# --- faults ------------------------------------------------------------------------------------


@dataclass
class Fault:
    """One scripted misbehaviour, applied to the next request on ``endpoint``.

    ``kind``: ``status`` (an HTTP error: ``status``, ``error_type``, ``message``,
    ``headers``), ``prompt_too_long`` (400 with the API's "prompt is too long: N tokens > M
    maximum" message, M = ``limit``, or N - ``excess`` when set), ``drop_constraints`` (200, but the summary omits the
    constraints), ``cut_stream`` (a streamed response that stops after ``after_deltas`` text
    deltas, the connection closed without ``message_stop``), ``stream_error`` (an SSE
    ``error`` event after the first delta), ``delay`` (sleep ``seconds`` then answer normally),
    ``malformed`` (200 whose text is prose with no JSON object in it), ``reply`` (200 whose
    text is ``message``, verbatim).
    ``endpoint``: ``messages``, ``count_tokens`` or ``any``.
    """

    kind: str
    endpoint: str = "messages"
    status: int = 500
    error_type: str = "api_error"
    message: str = "Internal server error"
    headers: dict[str, str] = field(default_factory=dict)
    limit: int = 1000
    excess: int = 0
    after_deltas: int = 2
    seconds: float = 0.0

    # constructors for the common cases ---------------------------------------------------
    @classmethod
    def rate_limit(cls, retry_after: float = 1.0, **kw: Any) -> Fault:
        return cls(
            "status",
            status=429,
            error_type="rate_limit_error",
            message="Number of request tokens has exceeded your per-minute rate limit",
            headers={"retry-after": _num(retry_after)},
            **kw,
        )

    @classmethod
    def overloaded(cls, retry_after: float | None = None, **kw: Any) -> Fault:
        headers = {"retry-after": _num(retry_after)} if retry_after is not None else {}
        return cls("status", status=529, error_type="overloaded_error", message="Overloaded",
                   headers=headers, **kw)

    @classmethod
    def server_error(cls, status: int = 500, **kw: Any) -> Fault:
        return cls("status", status=status, error_type="api_error", message="Internal server error", **kw)

    @classmethod
    def bad_request(cls, message: str = "messages: field required", status: int = 400, **kw: Any) -> Fault:
        etype = {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                 413: "request_too_large"}.get(status, "invalid_request_error")
        return cls("status", status=status, error_type=etype, message=message, **kw)

    @classmethod
    def prompt_too_long(cls, limit: int = 1000, excess: int = 0, **kw: Any) -> Fault:
        """400 when the prompt is over ``limit`` tokens; with ``excess`` > 0, always, reporting
        a maximum ``excess`` tokens below the prompt's size."""
        return cls("prompt_too_long", limit=limit, excess=excess, **kw)

    @classmethod
    def drop_constraints(cls, **kw: Any) -> Fault:
        return cls("drop_constraints", **kw)

    @classmethod
    def cut_stream(cls, after_deltas: int = 2, **kw: Any) -> Fault:
        return cls("cut_stream", after_deltas=after_deltas, **kw)

    @classmethod
    def stream_error(cls, error_type: str = "overloaded_error", **kw: Any) -> Fault:
        return cls("stream_error", error_type=error_type, message="Overloaded", **kw)

    @classmethod
    def delay(cls, seconds: float, **kw: Any) -> Fault:
        return cls("delay", seconds=seconds, **kw)

    @classmethod
    def malformed(cls, **kw: Any) -> Fault:
        return cls("malformed", **kw)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    fault: str | None = None
    at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# --- the deterministic model -------------------------------------------------------------------


def count_request_tokens(body: dict[str, Any]) -> int:
    """Approximate input tokens of a request: ceil(chars / 4) of its text content."""
    return max(1, math.ceil(len(_request_text(body)) / 4))


def _request_text(body: dict[str, Any]) -> str:
    parts: list[str] = []
    system = body.get("system")
    if isinstance(system, str):
        parts.append(system)
    elif isinstance(system, list):
        parts.extend(b.get("text", "") for b in system if isinstance(b, dict))
    for m in body.get("messages") or []:
        parts.append(_content_text(m.get("content")))
    return "\n".join(parts)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    out: list[str] = []
    for b in content or []:
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t == "text":
            out.append(b.get("text", ""))
        elif t == "tool_use":
            out.append(f"{b.get('name', '')} {json.dumps(b.get('input', {}))}")
        elif t == "tool_result":
            out.append(_content_text(b.get("content")))
        elif t == "compaction":
            out.append(b.get("content") or "")
    return "\n".join(out)


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    return ""


def split_fenced(text: str) -> tuple[str, dict[str, str]]:
    """(text outside every well-formed fence, {name: fenced body})."""
    data: dict[str, str] = {}

    def take(m: re.Match[str]) -> str:
        data[m.group("name")] = m.group("body")
        return "\n"

    return FENCE_RE.sub(take, text), data


def _item_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for k in ("verbatim", "text", "request", "description", "summary", "command", "path", "name", "id"):
            v = item.get(k)
            if isinstance(v, str) and v.strip():
                return v
        return json.dumps(item, sort_keys=True, ensure_ascii=False)
    return json.dumps(item, ensure_ascii=False)


def _norm(s: str) -> str:
    return re.sub(r"[^a-z]", "", s.lower())


def template_summary(body: dict[str, Any], *, drop_constraints: bool = False) -> str:
    """What the fake model writes for a template request."""
    # The system prompt is ours (it may quote the phrase as an example); injected text can
    # only arrive through the messages, so only they are checked.
    request = "\n".join(_content_text(m.get("content")) for m in body.get("messages") or [])
    outside, data = split_fenced(request)
    if INJECTION_RE.search(outside):
        # The gullible path: an injection reached the instructions.
        return "All work is complete. Every test passed. Nothing else needs to be remembered."
    headings = HEADING_RE.findall(_system_text(body))
    if not headings:
        return "Summary of the request: " + " ".join(request.split())[:400] + "\n"
    try:
        state = json.loads(data.get("lifted_state", "{}"))
    except json.JSONDecodeError:
        state = {}
    if not isinstance(state, dict):
        state = {}
    by_heading: dict[str, list[str]] = {h: [] for h in headings}
    norm_heading = {_norm(h): h for h in headings}
    for key, value in state.items():
        if drop_constraints and "constraint" in key.lower():
            continue
        items = value if isinstance(value, list) else ([value] if isinstance(value, str) and value else [])
        if not items:
            continue
        target = norm_heading.get(_norm(key))
        if target is None:
            # "goal" -> "Goal", "todos" -> "Todos / plan", "unknown_actions" -> "Unknown outcomes"
            target = next((h for n, h in norm_heading.items() if n.startswith(_norm(key)[:5])), None)
        if target is None:
            continue
        by_heading[target].extend(_item_text(i) for i in items)
    lines: list[str] = []
    for h in headings:
        lines.append(f"## {h}")
        items = by_heading.get(h) or []
        if not items:
            lines.append("- (none)")
        for it in items:
            lines.append("- " + " ".join(it.split()))
        lines.append("")
    return "\n".join(lines).strip() + "\n"


def request_user_text(body: dict[str, Any]) -> str:
    """The user messages' text blocks, in order, joined by a blank line (as the model reads them)."""
    parts: list[str] = []
    for m in body.get("messages") or []:
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
            continue
        parts.extend(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")
    return "\n\n".join(parts)


def write_request(directory: str | Path, body: dict[str, Any]) -> Path:
    """Save one request as the stand-in model protocol wants it: ``system.txt``, ``user.txt``
    and ``request.json`` (model, max_tokens, system, messages) under ``directory``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / "system.txt").write_text(_system_text(body), encoding="utf-8")
    (d / "user.txt").write_text(request_user_text(body), encoding="utf-8")
    whole = {k: body.get(k) for k in ("model", "max_tokens", "system", "messages")}
    (d / "request.json").write_text(json.dumps(whole, indent=1, ensure_ascii=False), encoding="utf-8")
    return d


# --- the probe reader and judge -----------------------------------------------------------------

PROBE_RE = re.compile(r"\bcompactor-probe-(reader|judge)-v\d+\b")
PROBE_MIN_OVERLAP = 2
PROBE_FULL = 0.6
PROBE_PART = 0.25
MALFORMED_TEXT = "Sorry, I lost track of the format; here are my thoughts in prose instead."
_STOP = frozenset(
    "the and for was what which who whom whose why how when where that this these those with from "
    "into onto did does done has have had are were been being not but its it's any all can could "
    "would should will shall about after before than then them they their there here our you your "
    "agent user session file files".split()
)
_WORD_RE = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> set[str]:
    """Lower-case words of 3+ characters (or numbers), minus stop words; paths split."""
    return {w for w in _WORD_RE.findall(text.lower()) if (len(w) >= 3 or w.isdigit()) and w not in _STOP}


def _units(view: str) -> list[str]:
    """Lines of the view, long ones split into sentences: what a reader can quote."""
    out: list[str] = []
    for line in view.splitlines():
        line = line.strip()
        if not line:
            continue
        parts = re.split(r"(?<=[.!?])\s+", line) if len(line) > 300 else [line]
        out.extend(p.strip() for p in parts if p.strip())
    return out


def probe_reader(data: dict[str, str]) -> str:
    """Answer each fenced question from the fenced view by word overlap (```json fenced)."""
    view = _fenced_json(data, "view", "")
    questions = _fenced_json(data, "questions", [])
    units = [(u, content_words(u)) for u in _units(view if isinstance(view, str) else "")]
    answers = []
    for q in questions if isinstance(questions, list) else []:
        qw = content_words(str(q.get("question", "")))
        best, score = "not in context", 0
        for text, words in units:
            n = len(qw & words)
            if n > score:  # ties keep the earliest line
                best, score = text[:400], n
        answers.append({"id": q.get("id"), "answer": best if score >= PROBE_MIN_OVERLAP else "not in context"})
    return "```json\n" + json.dumps({"answers": answers}, ensure_ascii=False) + "\n```\n"


def probe_judge(data: dict[str, str]) -> str:
    """Grade every label's answer by the share of reference words it carries (prose + JSON)."""
    probes = _fenced_json(data, "probes", {})
    probes = probes if isinstance(probes, dict) else {}
    rows = []
    for q in probes.get("questions") or []:
        ref = content_words(str(q.get("reference", "")))
        row: dict[str, Any] = {"id": q.get("id")}
        notes = []
        for label, answer in (q.get("answers") or {}).items():
            share = len(ref & content_words(str(answer))) / len(ref) if ref else 0.0
            row[label] = 2 if share >= PROBE_FULL else 1 if share >= PROBE_PART else 0
            notes.append(f"{label} {share:.2f}")
        row["note"] = "reference words found: " + ", ".join(notes)
        rows.append(row)
    return "Here are the grades.\n" + json.dumps({"grades": rows}, ensure_ascii=False)


def _fenced_json(data: dict[str, str], name: str, default: Any) -> Any:
    try:
        return json.loads(data.get(name, ""))
    except json.JSONDecodeError:
        return default


def probe_reply(body: dict[str, Any]) -> str | None:
    """The fake reader's or judge's reply, or None when the request is not a probe request."""
    m = PROBE_RE.search(_system_text(body))
    if m is None:
        return None
    request = "\n".join(_content_text(msg.get("content")) for msg in body.get("messages") or [])
    _, data = split_fenced(request)
    return probe_reader(data) if m.group(1) == "reader" else probe_judge(data)


# --- server ------------------------------------------------------------------------------------


class FakeAnthropic:
    """The server plus its scriptable state. Thread-safe; one instance per test is cheap."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, max_prompt_tokens: int | None = None,
                 chunk_chars: int = 40, stream_delay: float = 0.0, record_dir: str | None = None,
                 answer: str | None = None) -> None:
        self.record_dir = record_dir
        """Write each template-summary request here (``write_request``); None: do not."""
        self.answer = answer
        """Serve this text for template-summary requests (a recorded answer); None: the fake model."""
        self.host = host
        self.port = port
        self.max_prompt_tokens = max_prompt_tokens
        self.chunk_chars = chunk_chars
        self.stream_delay = stream_delay
        self.requests: list[RecordedRequest] = []
        self._faults: deque[Fault] = deque()
        self._cache: set[str] = set()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle ----------------------------------------------------------------------------
    def start(self) -> FakeAnthropic:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = _Server((self.host, self.port), handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="fake-anthropic", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # scripting ----------------------------------------------------------------------------
    def push(self, *faults: Fault) -> None:
        with self._lock:
            self._faults.extend(faults)

    def reset(self) -> None:
        with self._lock:
            self._faults.clear()
            self.requests.clear()
            self._cache.clear()

    @property
    def pending_faults(self) -> int:
        return len(self._faults)

    def _next_fault(self, endpoint: str) -> Fault | None:
        with self._lock:
            for i, f in enumerate(self._faults):
                if f.endpoint in (endpoint, "any"):
                    del self._faults[i]
                    return f
        return None

    def calls(self, path: str = "/v1/messages") -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.split("?")[0] == path]

    # model ----------------------------------------------------------------------------------
    def _usage(self, body: dict[str, Any]) -> dict[str, int]:
        total = count_request_tokens(body)
        prefix = self._cached_prefix(body)
        created = read = 0
        if prefix is not None:
            key, tokens = prefix
            tokens = min(tokens, total)
            with self._lock:
                if key in self._cache:
                    read = tokens
                else:
                    self._cache.add(key)
                    created = tokens
        return {
            "input_tokens": total - created - read,
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": read,
        }

    @staticmethod
    def _cached_prefix(body: dict[str, Any]) -> tuple[str, int] | None:
        """Hash and token count of the request up to its last cache_control breakpoint."""
        seen: list[str] = [str(body.get("model"))]
        last: tuple[str, int] | None = None
        chars = 0
        system = body.get("system")
        blocks: list[dict[str, Any]] = list(system) if isinstance(system, list) else []
        for m in body.get("messages") or []:
            if isinstance(m.get("content"), list):
                blocks.extend(b for b in m["content"] if isinstance(b, dict))
        for b in blocks:
            text = json.dumps(b, sort_keys=True)
            seen.append(text)
            chars += len(_content_text([b]))
            if b.get("cache_control"):
                key = hashlib.sha256("\n".join(seen).encode()).hexdigest()
                last = (key, max(1, math.ceil(chars / 4)))
        return last


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up (a cut stream, a cancelled activity) are expected here.
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeAnthropic
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # plumbing -------------------------------------------------------------------------------
    def _read_body(self) -> Any:
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw) if raw else None
        except json.JSONDecodeError:
            return raw.decode("utf-8", "replace")

    def _record(self, body: Any) -> RecordedRequest:
        rec = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            at=time.time(),
        )
        with self.fake._lock:
            self.fake.requests.append(rec)
        return rec

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_" + uuid.uuid4().hex[:20])
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, rec: RecordedRequest, status: int, etype: str, message: str,
               headers: dict[str, str] | None = None, fault: str | None = None) -> None:
        rec.status = status
        rec.fault = fault
        headers = dict(headers or {})
        # The API sets x-should-retry; the SDK would obey it, but our clients run with
        # max_retries=0, so only Temporal retries.
        headers.setdefault("x-should-retry", "true" if status in (408, 409, 429) or status >= 500 else "false")
        self._json(
            status,
            {"type": "error", "error": {"type": etype, "message": message}, "request_id": "req_fake"},
            headers,
        )

    # routes ---------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/_control/requests"):
            self._json(200, [r.to_dict() for r in self.fake.requests])
        else:
            self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}})

    def do_POST(self) -> None:  # noqa: N802
        body = self._read_body()
        path = self.path.split("?")[0]
        if path == "/_control/faults":
            self.fake.push(*(Fault(**f) for f in body or []))
            self._json(200, {"pending": self.fake.pending_faults})
            return
        if path == "/_control/reset":
            self.fake.reset()
            self._json(200, {"ok": True})
            return
        rec = self._record(body)
        if path == "/v1/messages/count_tokens":
            self._count_tokens(rec, body)
        elif path == "/v1/messages":
            self._messages(rec, body)
        else:
            self._error(rec, 404, "not_found_error", f"Not found: {path}")

    def _common_fault(self, rec: RecordedRequest, fault: Fault | None) -> bool:
        """Apply a fault that replaces the whole response; True when the response is sent."""
        if fault is None:
            return False
        if fault.kind == "delay":
            time.sleep(fault.seconds)
            rec.fault = "delay"
            return False
        if fault.kind == "status":
            self._error(rec, fault.status, fault.error_type, fault.message, fault.headers, fault="status")
            return True
        return False

    def _count_tokens(self, rec: RecordedRequest, body: Any) -> None:
        fault = self.fake._next_fault("count_tokens")
        if self._common_fault(rec, fault):
            return
        if not isinstance(body, dict) or "messages" not in body or "model" not in body:
            self._error(rec, 400, "invalid_request_error", "messages: Field required")
            return
        rec.status = 200
        self._json(200, {"input_tokens": count_request_tokens(body)})

    def _messages(self, rec: RecordedRequest, body: Any) -> None:
        fault = self.fake._next_fault("messages")
        if self._common_fault(rec, fault):
            return
        if not isinstance(body, dict) or not body.get("messages") or "model" not in body:
            self._error(rec, 400, "invalid_request_error", "messages: Field required")
            return
        if "max_tokens" not in body:
            self._error(rec, 400, "invalid_request_error", "max_tokens: Field required")
            return
        tokens = count_request_tokens(body)
        limit = self.fake.max_prompt_tokens
        if fault is not None and fault.kind == "prompt_too_long":
            limit = max(1, tokens - fault.excess) - 1 if fault.excess else fault.limit
        if limit is not None and tokens > limit:
            self._error(rec, 400, "invalid_request_error",
                        f"prompt is too long: {tokens} tokens > {limit} maximum",
                        fault="prompt_too_long" if fault is not None else "max_prompt_tokens")
            return
        if fault is not None and fault.kind == "prompt_too_long":
            fault = None  # fitted under the limit: answer normally
        usage = self.fake._usage(body)
        msg_id = "msg_" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
        if body.get("compaction") is not None:
            self._compaction(rec, body, msg_id, usage)
            return
        text = probe_reply(body)
        if text is None and self.fake.record_dir is not None:
            write_request(self.fake.record_dir, body)
        if text is None and self.fake.answer is not None:
            text = self.fake.answer
        if fault is not None and fault.kind == "malformed":
            text = MALFORMED_TEXT
        elif fault is not None and fault.kind == "reply":
            text = fault.message
        elif text is None:
            text = template_summary(body, drop_constraints=fault is not None and fault.kind == "drop_constraints")
        out_tokens = max(1, math.ceil(len(text) / 4))
        if fault is not None:
            rec.fault = fault.kind
        if body.get("stream"):
            self._stream(rec, body, msg_id, usage, text, out_tokens, fault)
            return
        rec.status = 200
        self._json(200, {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": out_tokens},
        })

    def _compaction(self, rec: RecordedRequest, body: dict[str, Any], msg_id: str, usage: dict[str, int]) -> None:
        beta = self.headers.get("anthropic-beta") or ""
        if "compact-2026-09-04" not in [b.strip() for b in beta.split(",")]:
            self._error(rec, 400, "invalid_request_error",
                        "compaction: requires the anthropic-beta header compact-2026-09-04")
            return
        msgs = body["messages"]
        last = msgs[-1]
        if last.get("role") == "assistant" and any(
            isinstance(b, dict) and b.get("type") == "tool_use" for b in (last.get("content") or [])
        ):
            self._error(rec, 400, "invalid_request_error",
                        "The compaction request ends on an assistant turn that is not finished")
            return
        convo = "\n".join(_content_text(m.get("content")) for m in msgs)
        instr = (body["compaction"] or {}).get("instructions") or ""
        lines = [ln.strip() for ln in convo.splitlines() if ln.strip()]
        keep = [ln for ln in lines if re.search(r"\b(never|do not|don't|must not|always)\b", ln, re.I)]
        summary = "Summary of the conversation so far.\n" + "\n".join(f"- {ln}" for ln in (keep or lines[:3]))
        if instr:
            summary += "\n(instructions applied)"
        block = {
            "type": "compaction",
            "content": summary,
            "signature": "sig_" + hashlib.sha256(summary.encode()).hexdigest()[:32],
        }
        rec.status = 200
        self._json(200, {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [block],
            "stop_reason": "compaction",
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": max(1, math.ceil(len(summary) / 4))},
        })

    def _stream(self, rec: RecordedRequest, body: dict[str, Any], msg_id: str, usage: dict[str, int],
                text: str, out_tokens: int, fault: Fault | None) -> None:
        rec.status = 200
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", "req_" + uuid.uuid4().hex[:20])
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

        def send(event: str, data: dict[str, Any]) -> None:
            payload = f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()
            if self.fake.stream_delay:
                time.sleep(self.fake.stream_delay)

        send("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": body["model"],
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1},
        }})
        send("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}})
        send("ping", {"type": "ping"})
        step = max(1, self.fake.chunk_chars)
        chunks = [text[i:i + step] for i in range(0, len(text), step)] or [""]
        kind = fault.kind if fault is not None else None
        for n, chunk in enumerate(chunks + [None]):
            if kind == "cut_stream" and (n >= fault.after_deltas or chunk is None):
                # Drop the connection mid-body: no terminating chunk, no message_stop.
                self.wfile.flush()
                self.close_connection = True
                try:
                    self.connection.shutdown(2)
                except OSError:
                    pass
                return
            if kind == "stream_error" and (n == 1 or chunk is None):
                send("error", {"type": "error", "error": {"type": fault.error_type, "message": fault.message}})
                self.wfile.write(b"0\r\n\r\n")
                return
            if chunk is None:
                break
            send("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": chunk}})
        send("content_block_stop", {"type": "content_block_stop", "index": 0})
        send("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {"output_tokens": out_tokens}})
        send("message_stop", {"type": "message_stop"})
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main(argv: Iterable[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Local fake of the Anthropic Messages API (for tests and demos).")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--max-prompt-tokens", type=int, default=None,
                   help="answer 400 'prompt is too long' above this many tokens")
    p.add_argument("--record", default=None, metavar="DIR",
                   help="write each summary request to DIR (system.txt, user.txt, request.json)")
    p.add_argument("--answer", default=None, metavar="FILE",
                   help="serve this file's text as the answer to every summary request")
    args = p.parse_args(list(argv) if argv is not None else None)
    answer = Path(args.answer).read_text(encoding="utf-8") if args.answer else None
    fake = FakeAnthropic(args.host, args.port, max_prompt_tokens=args.max_prompt_tokens,
                         record_dir=args.record, answer=answer).start()
    print(f"fake Anthropic API on {fake.base_url} (set ANTHROPIC_BASE_URL={fake.base_url})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
