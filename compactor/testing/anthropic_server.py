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

The "model" is deterministic (``compactor.testing.model_text``): a template request gets one
bullet per lifted-state item under the system prompt's headings (gullible on purpose to text
outside every well-formed ``untrusted_data`` fence, so a test fails if data escapes it), a
probe request (``compactor bench probes``) a deterministic reader or judge, and token counts
are ``ceil(chars / 4)`` of the request's text (a different tokenizer from ours, on purpose).
Prompt caching is simulated: the prefix up to a ``cache_control`` breakpoint is
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

from compactor.testing.model_text import (
    MALFORMED_TEXT,
    _content_text,
    count_request_tokens,
    probe_reply,
    template_summary,
    write_request,
)



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
