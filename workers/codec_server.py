"""Temporal codec server: ``POST /encode`` and ``POST /decode`` over the payload codec.

The protocol of Temporal's codec servers (samples-python ``encryption/codec_server.py``): the
body is ``{"payloads": [...]}`` in protobuf JSON, the answer the same shape. The Temporal UI
(set its "codec server" to this URL) and ``temporal workflow show --codec-endpoint`` call it to
show decrypted payloads to an operator; the keys never leave this process.

Why it is shaped this way:

* Standard library only (``http.server``): one small process beside the operator's browser,
  no new dependency.
* With a token configured every request needs ``Authorization: Bearer <token>`` (compared in
  constant time); a missing or wrong token is 401 and nothing is decoded. The UI sends the
  header when configured to pass the user's access token; ``--token-env`` names the variable
  holding the token so it is never on the command line.
* CORS answers only the configured origins (the UI's), with the headers the UI sends. A
  wildcard origin is answered without credentials, and only when a token is required (any web
  page could otherwise read decoded payloads through the operator's browser).
* Nothing is read before it is allowed: the token (or, without one, the Host header) is
  checked first, then ``Content-Length`` (required: 411 without it; a number from 0 to
  ``MAX_BODY``: 400 / 413), and only then the body. A refused request is answered without
  reading its body, and the connection is closed. A malformed body (not UTF-8, not JSON, not
  payloads, a ciphertext cut short) is a 400 with a message, never a traceback.
* Without a token the server binds loopback only and answers only requests whose Host names
  loopback (a DNS-rebinding page reaches 127.0.0.1 under its own host name).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from compactor.errors import CompactorError, InvalidInput
from workers.codec import EncryptionCodec

MAX_BODY = 64 << 20
_ALLOW_HEADERS = "authorization,content-type,x-namespace"
_LINGER_S = 0.5
_LINGER_BYTES = 64 << 10
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """True for a loopback host name or address (``localhost``, ``127.x``, ``::1``)."""
    h = host.strip().strip("[]").lower()
    if h in _LOOPBACK_NAMES or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


class CodecServer(ThreadingHTTPServer):
    """The HTTP server; ``serve_forever`` in the caller's thread, ``start`` for a background one.

    Raises:
        InvalidInput: a non-loopback ``host`` without a token, or a wildcard CORS origin
            without a token.
    """

    daemon_threads = True

    def __init__(
        self,
        codec: EncryptionCodec,
        *,
        host: str = "127.0.0.1",
        port: int = 8081,
        cors_origins: Sequence[str] = (),
        token: str | None = None,
    ) -> None:
        if not token and not is_loopback(host):
            raise InvalidInput(
                f"refusing to serve decrypted payloads on {host} without a token: bind 127.0.0.1 "
                "or require a bearer token with --token-env VAR"
            )
        if not token and "*" in cors_origins:
            raise InvalidInput(
                "refusing --cors-origin '*' without a token: any web page could read decrypted "
                "payloads through your browser; name the UI's origin or require --token-env VAR"
            )
        self.codec = codec
        self.cors_origins = tuple(o.rstrip("/") for o in cors_origins)
        self.token = token
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self.serve_forever, name="codec-server", daemon=True)
        t.start()
        return t

    def authorized(self, header: str | None) -> bool:
        if not self.token:
            return True
        scheme, _, value = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self.token.encode())

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that vanished mid-request is not the operator's problem: no traceback.
        exc = sys.exc_info()[1]
        print(f"codec server: request from {client_address[0]} failed: {type(exc).__name__}",
              file=sys.stderr)


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Handler(BaseHTTPRequestHandler):
    server: CodecServer
    protocol_version = "HTTP/1.1"
    timeout = 30  # seconds a client may stall mid-request (socket timeout) before it is dropped

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # request lines would name workflow paths only, but stay quiet like a codec should

    def _cors(self) -> None:
        origin = (self.headers.get("Origin") or "").rstrip("/")
        if not origin:
            return
        if origin in self.server.cors_origins:
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Credentials", "true")
            self.send_header("Vary", "Origin")
        elif "*" in self.server.cors_origins:
            self.send_header("Access-Control-Allow-Origin", "*")  # never with credentials
        else:
            return
        self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", _ALLOW_HEADERS)

    def _reply(self, status: int, body: dict[str, Any], *, close: bool = False) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self._cors()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if close:
            # the body (if any) was not read: the connection cannot carry another request
            self.send_header("Connection", "close")
            self.close_connection = True
            self._linger = True
        self.end_headers()
        self.wfile.write(data)

    _linger = False

    def finish(self) -> None:
        super().finish()
        if not self._linger:
            return
        # The answer is sent; closing with unread bytes queued would make the kernel send a
        # reset that can destroy it before the client reads it. Discard a little for a short
        # while (bounded: never the body a refused client wanted to push), then close.
        try:
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(_LINGER_S)
            deadline = time.monotonic() + _LINGER_S
            left = _LINGER_BYTES
            while left > 0 and time.monotonic() < deadline:
                chunk = self.connection.recv(min(left, 16384))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass

    def _check_host(self) -> None:
        """Without a token, only requests addressed to a loopback name (DNS rebinding)."""
        if self.server.token:
            return
        host = (self.headers.get("Host") or "").strip()
        if host.startswith("["):
            name = host[1:].split("]", 1)[0]  # [::1]:8081
        elif host.count(":") == 1:
            name = host.split(":", 1)[0]  # localhost:8081
        else:
            name = host
        if not is_loopback(name):
            raise _Refused(403, "Host must name loopback (localhost, 127.0.0.1, [::1]) when no token is set")

    def _length(self) -> int:
        if self.headers.get("Transfer-Encoding"):
            raise _Refused(411, "chunked bodies are not accepted: send Content-Length")
        values = self.headers.get_all("Content-Length") or []
        if not values:
            raise _Refused(411, "Content-Length required")
        if len(set(values)) > 1:
            raise _Refused(400, "conflicting Content-Length headers")
        raw = values[0].strip()
        if not raw.isdigit() or not raw.isascii():
            raise _Refused(400, f"Content-Length must be a number of bytes from 0 to {MAX_BODY}")
        length = int(raw)
        if length > MAX_BODY:
            raise _Refused(413, f"body over {MAX_BODY} bytes")
        return length

    def do_OPTIONS(self) -> None:  # noqa: N802 - stdlib name
        # Preflight carries no credentials; the POST that follows must.
        try:
            self._check_host()
        except _Refused as r:
            self._reply(r.status, {"message": str(r)}, close=True)
            return
        self.send_response(204)
        self._cors()
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._reply(405, {"message": "use POST /encode or POST /decode"}, close=True)

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        try:
            self._check_host()
            if not self.server.authorized(self.headers.get("Authorization")):
                raise _Refused(401, "missing or wrong bearer token")
            path = self.path.split("?", 1)[0].rstrip("/")
            op = path.rsplit("/", 1)[-1]
            if op not in ("encode", "decode"):
                raise _Refused(404, "use POST /encode or POST /decode")
            length = self._length()
        except _Refused as r:
            self._reply(r.status, {"message": str(r)}, close=True)
            return
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True  # the client went away mid-body
            return
        try:
            payloads = json_format.Parse(body.decode("utf-8") or "{}", Payloads())
        except UnicodeDecodeError:
            self._reply(400, {"message": "body is not UTF-8"})
            return
        except (json_format.ParseError, ValueError, RecursionError):
            self._reply(400, {"message": 'expected {"payloads": [...]} (protobuf JSON)'})
            return
        codec = self.server.codec
        try:
            fn = codec.encode_sync if op == "encode" else codec.decode_sync
            out = Payloads(payloads=fn(payloads.payloads))
        except CompactorError as exc:
            self._reply(400, {"message": str(exc)})
            return
        self._reply(200, json_format.MessageToDict(out))
