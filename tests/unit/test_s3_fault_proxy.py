"""The S3 fault proxy forwards requests unchanged and injects each fault kind it is set to."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from compactor.testing.s3_fault_proxy import FaultRates, S3FaultProxy


class _Upstream:
    """A tiny origin that stores PUT bodies by path and serves them on GET."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        up = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_PUT(self):
                n = int(self.headers.get("Content-Length") or 0)
                up.objects[self.path] = self.rfile.read(n)
                self.send_response(200)
                self.send_header("ETag", '"e1"')
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                body = up.objects.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def upstream():
    up = _Upstream()
    yield up
    up.close()


def _call(url: str, method: str, path: str, body: bytes | None = None):
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(method, path, body=body)
        r = conn.getresponse()
        return r.status, r.read(), dict(r.getheaders())
    finally:
        conn.close()


def test_without_faults_requests_pass_through_unchanged(upstream):
    with S3FaultProxy(upstream.url) as proxy:
        status, _, headers = _call(proxy.url, "PUT", "/b/k", b"hello")
        assert (status, headers["ETag"]) == (200, '"e1"')
        assert _call(proxy.url, "GET", "/b/k")[:2] == (200, b"hello")
        assert _call(proxy.url, "GET", "/b/missing")[0] == 404
    assert upstream.objects == {"/b/k": b"hello"}
    assert proxy.stats.requests == 3 and sum(proxy.stats.injected.values()) == 0


def test_write_then_500_lands_the_write_and_reports_failure(upstream):
    with S3FaultProxy(upstream.url, FaultRates(write500=1.0)) as proxy:
        status, body, _ = _call(proxy.url, "PUT", "/b/k", b"landed")
        assert status == 500 and b"InternalError" in body
        assert upstream.objects["/b/k"] == b"landed"  # the client was told it failed
        # reads are never write-then-500: they pass
        assert _call(proxy.url, "GET", "/b/k")[:2] == (200, b"landed")


def test_errors_are_answered_without_forwarding(upstream):
    with S3FaultProxy(upstream.url, FaultRates(error=1.0)) as proxy:
        status, body, _ = _call(proxy.url, "PUT", "/b/k", b"x")
    assert status in (500, 503) and b"<Error>" in body
    assert upstream.objects == {}


def test_a_dropped_connection_gets_no_answer(upstream):
    with S3FaultProxy(upstream.url, FaultRates(drop=1.0)) as proxy:
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            _call(proxy.url, "PUT", "/b/k", b"x")
    assert upstream.objects == {}


def test_rates_parse_and_refuse_nonsense():
    r = FaultRates.parse("error=0.04,write500=0.02,drop=0.02,stall=0.02")
    assert (r.error, r.write500, r.drop, r.stall) == (0.04, 0.02, 0.02, 0.02)
    with pytest.raises(ValueError):
        FaultRates.parse("teapot=0.1")
    with pytest.raises(ValueError):
        FaultRates.parse("error=0.8,drop=0.5")
