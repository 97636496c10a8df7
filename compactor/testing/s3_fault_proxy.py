"""An HTTP proxy in front of an S3 endpoint (moto_server) that injects the faults a real object
store shows under load, so the session log and the workflow are tested against them.

Each request draws at most one fault, at the configured rates:

- ``error``: answered 500/503 (an S3 ``InternalError``/``SlowDown`` body) without forwarding.
- ``write500``: a write (PUT/POST/DELETE) is forwarded and lands, then answered 500, so the
  client retries a write that already happened (a conditional PUT then meets 412).
- ``drop``: the connection is closed with no answer, before forwarding.
- ``stall``: the request waits ``stall_s`` seconds (a random value in the range), then is
  forwarded normally.

Requests are forwarded unchanged (moto does not check signatures, so the signed ``Host`` of
the proxy passes through). Used by ``compactor bench chaos --s3``; also runnable as
``python -m compactor.testing.s3_fault_proxy --upstream URL [--port N] [--faults ...]``.
"""

from __future__ import annotations

import argparse
import http.client
import random
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULT_KINDS = ("error", "write500", "drop", "stall")
_WRITES = {"PUT", "POST", "DELETE"}
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade"}
_ERROR_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
    "<Message>injected by s3_fault_proxy</Message><RequestId>chaos</RequestId></Error>"
)


@dataclass
class FaultRates:
    """Per-request probability of each fault (their sum must be <= 1)."""

    error: float = 0.0
    write500: float = 0.0
    drop: float = 0.0
    stall: float = 0.0
    stall_s: tuple[float, float] = (0.2, 1.5)

    @classmethod
    def parse(cls, text: str) -> FaultRates:
        """``"error=0.04,write500=0.02,drop=0.02,stall=0.02"`` (missing kinds are 0)."""
        rates = cls()
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, _, value = part.partition("=")
            if name not in FAULT_KINDS:
                raise ValueError(f"unknown fault {name!r}; known: {', '.join(FAULT_KINDS)}")
            setattr(rates, name, float(value))
        if rates.total() > 1.0:
            raise ValueError(f"fault rates add up to {rates.total():.2f} > 1")
        return rates

    def total(self) -> float:
        return self.error + self.write500 + self.drop + self.stall


@dataclass
class FaultStats:
    requests: int = 0
    injected: dict[str, int] = field(default_factory=lambda: {k: 0 for k in FAULT_KINDS})


class S3FaultProxy:
    """A threaded proxy on 127.0.0.1; ``start()`` returns its URL, ``stop()`` shuts it down.

    Args:
        upstream: the real endpoint, e.g. ``http://127.0.0.1:5000``.
        rates: fault rates (default: none, a plain proxy).
        seed: seeds the fault draws (the order of concurrent requests still varies).
    """

    def __init__(self, upstream: str, rates: FaultRates | None = None, *, seed: int | None = None,
                 port: int = 0, drop_headers: tuple[str, ...] = ()) -> None:
        u = urllib.parse.urlsplit(upstream)
        # e.g. ("If-None-Match", "If-Match"): an endpoint that ignores conditional writes
        self.drop_headers = {h.lower() for h in drop_headers}
        self.upstream = (u.hostname or "127.0.0.1", u.port or 80)
        self.rates = rates or FaultRates()
        self.stats = FaultStats()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> str:
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-fault-proxy", daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> S3FaultProxy:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- faults ---------------------------------------------------------------------------------
    def error_status(self) -> tuple[int, str]:
        """500 or 503 for an injected error, from the seeded generator (reproducible runs)."""
        with self._lock:
            return self._rng.choice([(500, "InternalError"), (503, "SlowDown")])

    def draw(self, method: str) -> tuple[str | None, float]:
        """The fault for one request (None = forward normally) and, for a stall, its length."""
        r = self.rates
        with self._lock:
            self.stats.requests += 1
            x = self._rng.random()
            stall = self._rng.uniform(*r.stall_s)
            kind = None
            for name in FAULT_KINDS:
                p = getattr(r, name)
                if x < p:
                    kind = name
                    break
                x -= p
            if kind == "write500" and method not in _WRITES:
                kind = None  # only a write can land before its answer is lost
            if kind is not None:
                self.stats.injected[kind] += 1
        return kind, stall

    def _forward(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes):
        conn = getattr(self._local, "conn", None)
        for attempt in range(2):  # a pooled connection closed upstream: reconnect once
            if conn is None:
                conn = http.client.HTTPConnection(*self.upstream, timeout=60)
                self._local.conn = conn
            try:
                conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
                for k, v in headers:
                    conn.putheader(k, v)
                if body or method in _WRITES:
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body)
                resp = conn.getresponse()
                data = resp.read()
                return resp.status, resp.getheaders(), data
            except (http.client.HTTPException, OSError):
                conn.close()
                conn = self._local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline().strip():
                                pass
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response_only(status)
                for k, v in headers:
                    if k.lower() not in _HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _error(self, status: int, code: str) -> None:
                body = _ERROR_BODY.format(code=code).encode()
                self._reply(status, [("Content-Type", "application/xml")], body)

            def _handle(self) -> None:
                body = self._body()
                kind, stall = proxy.draw(self.command)
                if kind == "drop":
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if kind == "error":
                    status, code = proxy.error_status()
                    self._error(status, code)
                    return
                if kind == "stall":
                    time.sleep(stall)
                headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP
                           and k.lower() != "content-length" and k.lower() not in proxy.drop_headers]
                try:
                    status, rheaders, data = proxy._forward(self.command, self.path, headers, body)
                except OSError:
                    self._error(502, "BadGateway")
                    return
                if kind == "write500":
                    self._error(500, "InternalError")  # it landed; the client is told it did not
                    return
                self._reply(status, rheaders, data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        return Handler


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m compactor.testing.s3_fault_proxy", description=__doc__)
    p.add_argument("--upstream", required=True, help="S3 endpoint to forward to")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--faults", default="error=0.04,write500=0.02,drop=0.02,stall=0.02")
    p.add_argument("--seed", type=int, default=None)
    args = p.parse_args(argv)
    proxy = S3FaultProxy(args.upstream, FaultRates.parse(args.faults), seed=args.seed, port=args.port)
    print(proxy.start(), flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        proxy.stop()


if __name__ == "__main__":
    main()
