"""The codec server refuses before it reads: real HTTP over loopback against the real server.

Token (or Host) first, then Content-Length (411 / 400 / 413), then the body; a malformed body
is a 400 with a message; the server stays up and prints no traceback.
"""

from __future__ import annotations

import base64
import json
import socket
import time

import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from compactor.cli import main
from compactor.errors import InvalidInput
from workers.codec import EncryptionCodec, new_key, parse_keys
from workers.codec_server import MAX_BODY, CodecServer

KEY = new_key("k1")
SECRET = "CODEC-SECRET-5521"


@pytest.fixture
def codec() -> EncryptionCodec:
    return EncryptionCodec(parse_keys(KEY))


def serve(codec: EncryptionCodec, **kw) -> CodecServer:
    server = CodecServer(codec, port=0, **kw)
    server.start()
    return server


@pytest.fixture
def server(codec):
    s = serve(codec, token="tok")
    yield s
    s.shutdown()
    s.server_close()


@pytest.fixture
def open_server(codec):
    s = serve(codec, cors_origins=["http://localhost:8233"])
    yield s
    s.shutdown()
    s.server_close()


def request(server: CodecServer, head: str, body: bytes = b"", *, wait: float = 5.0) -> tuple[int, dict, float]:
    """Send raw bytes; (status, JSON body, seconds until the answer arrived)."""
    host, port = server.server_address[:2]
    with socket.create_connection((host, port), timeout=wait) as sock:
        t0 = time.monotonic()
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        elapsed = time.monotonic() - t0
        header, _, rest = data.partition(b"\r\n\r\n")
        length = int(next((ln.split(b":")[1] for ln in header.split(b"\r\n")
                           if ln.lower().startswith(b"content-length:")), b"0"))
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
    status = int(header.split(b" ")[1])
    return status, json.loads(rest or b"{}"), elapsed


def post(server: CodecServer, body: bytes, *, token: str | None = "tok", extra: str = "",
         host: str | None = None) -> tuple[int, dict, float]:
    host = host or "127.0.0.1:%d" % server.server_address[1]
    auth = f"Authorization: Bearer {token}\n" if token else ""
    head = (f"POST /decode HTTP/1.1\nHost: {host}\n{auth}Content-Type: application/json\n"
            f"Content-Length: {len(body)}\n{extra}")
    return request(server, head, body)


async def encrypted_body(codec: EncryptionCodec) -> bytes:
    plain = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps({"text": SECRET}).encode())
    return json_format.MessageToJson(Payloads(payloads=await codec.encode([plain]))).encode()


@pytest.mark.parametrize("auth", ["", "Authorization: Bearer tok\n"])
def test_negative_length_with_a_slow_body_is_answered_without_reading(server, auth):
    """The audit's case: ``Content-Length: -1`` and a body that never ends. The answer comes
    at once (we send nothing after the headers), before and after the token check."""
    host = "127.0.0.1:%d" % server.server_address[1]
    status, body, elapsed = request(server, f"POST /decode HTTP/1.1\nHost: {host}\n{auth}Content-Length: -1\n",
                                    b"x" * 10)
    assert status == (401 if not auth else 400) and body["message"]
    assert elapsed < 2


def test_unauthenticated_is_refused_before_the_length_or_body(server):
    host = "127.0.0.1:%d" % server.server_address[1]
    for length in (str(MAX_BODY * 100), "abc", ""):
        cl = f"Content-Length: {length}\n" if length else ""
        status, _, elapsed = request(server, f"POST /decode HTTP/1.1\nHost: {host}\n{cl}")
        assert status == 401 and elapsed < 2


@pytest.mark.parametrize("header, status", [
    ("", 411),
    ("Transfer-Encoding: chunked\n", 411),
    ("Content-Length: abc\n", 400),
    ("Content-Length: 1e3\n", 400),
    ("Content-Length: %d\n" % (MAX_BODY + 1), 413),
    ("Content-Length: 3\nContent-Length: 4\n", 400),
])
def test_content_length_is_required_and_bounded(server, header, status):
    host = "127.0.0.1:%d" % server.server_address[1]
    got, body, elapsed = request(server, f"POST /decode HTTP/1.1\nHost: {host}\nAuthorization: Bearer tok\n{header}")
    assert got == status and body["message"] and elapsed < 2


@pytest.mark.parametrize("body, words", [
    (b"\xff\xfe not utf-8", "UTF-8"),
    (b"{not json", "payloads"),
    (b'{"payloads": 5}', "payloads"),
    (b"[" * 5000, "payloads"),
    (json.dumps({"payloads": [{"metadata": {"encoding": base64.b64encode(b"binary/encrypted").decode(),
                                            "encryption-key-id": base64.b64encode(b"k1").decode()},
                               "data": base64.b64encode(b"short").decode()}]}).encode(), "shorter"),
    (json.dumps({"payloads": [{"metadata": {"encoding": base64.b64encode(b"binary/encrypted").decode(),
                                            "encryption-key-id": base64.b64encode(b"k1").decode()},
                               "data": base64.b64encode(b"x" * 40).decode()}]}).encode(), "does not decrypt"),
])
async def test_a_malformed_body_is_a_400_with_a_message(server, codec, capfd, body, words):
    status, out, _ = post(server, body)
    assert status == 400 and words in out["message"]
    status, out, _ = post(server, await encrypted_body(codec))  # still serving
    assert status == 200
    assert "Traceback" not in capfd.readouterr().err


async def test_a_good_request_still_decodes(server, codec):
    status, out, _ = post(server, await encrypted_body(codec))
    [p] = json_format.ParseDict(out, Payloads()).payloads
    assert status == 200 and json.loads(p.data)["text"] == SECRET


async def test_without_a_token_only_loopback_hosts_are_answered(open_server, codec):
    body = await encrypted_body(codec)
    status, out, _ = post(open_server, body, token=None, host="attacker.example:8081")
    assert status == 403 and SECRET not in json.dumps(out)
    for host in ("localhost:%d" % open_server.server_address[1], "127.0.0.1", "[::1]:8081"):
        status, _, _ = post(open_server, body, token=None, host=host)
        assert status == 200, host


def test_no_token_means_loopback_only(codec):
    for host in ("0.0.0.0", "192.0.2.7", "::"):
        with pytest.raises(InvalidInput, match="without a token"):
            CodecServer(codec, host=host, port=0)


def test_cli_refuses_a_public_bind_without_a_token(monkeypatch, capsys):
    monkeypatch.setenv("COMPACTOR_CODEC_KEYS", KEY)
    assert main(["codec-server", "--host", "0.0.0.0", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "without a token" in err and len(err.strip().splitlines()) == 1
    assert main(["codec-server", "--port", "0", "--cors-origin", "*"]) == 2
    assert "'*'" in capsys.readouterr().err


async def test_a_wildcard_origin_is_never_credentialed(codec):
    s = serve(codec, token="tok", cors_origins=["*"])
    try:
        host = "127.0.0.1:%d" % s.server_address[1]
        head = (f"POST /decode HTTP/1.1\nHost: {host}\nOrigin: http://anything.example\n"
                f"Authorization: Bearer tok\nContent-Length: 2\n")
        hostport = s.server_address[:2]
        with socket.create_connection(hostport, timeout=5) as sock:
            sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n{}")
            data = sock.recv(65536).decode()
        headers = data.split("\r\n\r\n")[0].lower()
        assert "access-control-allow-origin: *" in headers
        assert "access-control-allow-credentials" not in headers
    finally:
        s.shutdown()
        s.server_close()


def test_a_configured_origin_is_answered_with_credentials(open_server):
    host = "127.0.0.1:%d" % open_server.server_address[1]
    with socket.create_connection(open_server.server_address[:2], timeout=5) as sock:
        sock.sendall(f"OPTIONS /decode HTTP/1.1\r\nHost: {host}\r\nOrigin: http://localhost:8233\r\n\r\n".encode())
        data = sock.recv(65536).decode().lower()
    assert "access-control-allow-origin: http://localhost:8233" in data
    assert "access-control-allow-credentials: true" in data
