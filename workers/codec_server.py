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
* CORS answers only the configured origins (the UI's), with the headers the UI sends.
"""

from __future__ import annotations

import hmac
import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from compactor.errors import CompactorError
from workers.codec import EncryptionCodec

MAX_BODY = 64 << 20
_ALLOW_HEADERS = "authorization,content-type,x-namespace"


class CodecServer(ThreadingHTTPServer):
    """The HTTP server; ``serve_forever`` in the caller's thread, ``start`` for a background one."""

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


class _Handler(BaseHTTPRequestHandler):
    server: CodecServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # request lines would name workflow paths only, but stay quiet like a codec should

    def _cors(self) -> None:
        origin = (self.headers.get("Origin") or "").rstrip("/")
        if origin and (origin in self.server.cors_origins or "*" in self.server.cors_origins):
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
            self.send_header("Access-Control-Allow-Headers", _ALLOW_HEADERS)
            self.send_header("Access-Control-Allow-Credentials", "true")
            self.send_header("Vary", "Origin")

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self._cors()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_OPTIONS(self) -> None:  # noqa: N802 - stdlib name
        # Preflight carries no credentials; the POST that follows must.
        self.send_response(204)
        self._cors()
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?", 1)[0].rstrip("/")
        op = path.rsplit("/", 1)[-1]
        if op not in ("encode", "decode"):
            self._reply(404, {"message": "use POST /encode or POST /decode"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if not self.server.authorized(self.headers.get("Authorization")):
            self.rfile.read(min(length, MAX_BODY))
            self._reply(401, {"message": "missing or wrong bearer token"})
            return
        if length > MAX_BODY:
            self._reply(413, {"message": f"body over {MAX_BODY} bytes"})
            self.close_connection = True
            return
        try:
            payloads = json_format.Parse(self.rfile.read(length) or b"{}", Payloads())
        except json_format.ParseError:
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
