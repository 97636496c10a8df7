"""Fuzz the codec server's request handling over real loopback HTTP: arbitrary methods, paths,
headers and bodies. Every request gets a well-formed answer with a status we chose (or, for a
request line HTTP itself rejects, the stdlib's 400), the server keeps serving, and nothing is
decoded without the token."""

from __future__ import annotations

import json
import socket

import pytest
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload, Payloads

from workers.codec import EncryptionCodec, new_key, parse_keys
from workers.codec_server import CodecServer

STATUSES = {200, 204, 400, 401, 403, 404, 405, 411, 413, 414, 431, 501, 505}
SECRET = "FUZZ-SECRET-1"


@pytest.fixture(scope="module")
def server():
    codec = EncryptionCodec(parse_keys(new_key("k1")))
    s = CodecServer(codec, port=0, token="tok", cors_origins=["http://localhost:8233"])
    s.start()
    plain = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps({"t": SECRET}).encode())
    s.sample = json_format.MessageToJson(Payloads(payloads=codec.encode_sync([plain]))).encode()
    yield s
    s.shutdown()
    s.server_close()


TOKEN = st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=":"), min_size=1, max_size=12)
HEADER_VALUES = st.one_of(st.sampled_from(["-1", "0", "abc", "99999999999", "1e3", " 5", "chunked", "Bearer tok",
                                           "Bearer wrong", "localhost", "evil.example", "*"]),
                          st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20))
HEADERS = st.lists(st.tuples(st.sampled_from(["Content-Length", "Authorization", "Host", "Origin",
                                              "Transfer-Encoding", "Content-Type", "Connection"]) | TOKEN,
                             HEADER_VALUES), max_size=6)


def exchange(server, raw: bytes) -> bytes:
    with socket.create_connection(server.server_address[:2], timeout=10) as sock:
        try:
            sock.sendall(raw)
            sock.shutdown(socket.SHUT_WR)  # no more body: a server still reading sees the end
        except OSError:
            pass
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
    return data


@given(method=st.sampled_from(["POST", "GET", "OPTIONS", "PUT", "post"]),
       path=st.sampled_from(["/decode", "/encode", "/", "/decode?x=1", "/x/decode/", "//decode"]),
       headers=HEADERS, body=st.binary(max_size=64) | st.just(b"{}") | st.just(b'{"payloads": []}'),
       use_sample=st.booleans())
def test_arbitrary_requests(server, capfd, method, path, headers, body, use_sample):
    if use_sample:
        body = server.sample
    lines = [f"{method} {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers]
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    answer = exchange(server, raw)
    if answer:  # an empty answer: the connection closed (a client that sent nothing usable)
        status_line = answer.split(b"\r\n", 1)[0].split(b" ")
        assert status_line[0].startswith(b"HTTP/1."), answer[:80]
        assert int(status_line[1]) in STATUSES, answer[:200]
        authorized = any(k == "Authorization" and v == "Bearer tok" for k, v in headers)
        if not authorized:
            assert b"200 OK" not in answer.split(b"\r\n", 1)[0]
    # still serving
    ok = exchange(server, b"POST /decode HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer tok\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(server.sample) + server.sample)
    assert ok.startswith(b"HTTP/1.1 200")
    assert "Traceback" not in capfd.readouterr().err
