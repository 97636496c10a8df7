"""Payload encryption (workers/codec.py) and the codec server (workers/codec_server.py)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import DefaultFailureConverterWithEncodedAttributes, WorkflowSerializationContext

from activities.contracts import CompactSessionInput
from compactor.errors import InvalidInput
from workers.codec import (
    DecryptionFailed,
    EncryptionCodec,
    UnknownEncryptionKey,
    new_key,
    parse_keys,
)
from workers.codec_server import CodecServer
from workers.settings import Settings
from workers.worker import build_data_converter

SECRET = "ZQX-SECRET-7731"
K1, K2, KT = new_key("k1"), new_key("k2"), new_key("acme-1")


def _plain(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps({"text": text}).encode())


async def test_codec_is_off_by_default_and_on_with_one_setting(monkeypatch):
    off = build_data_converter(Settings(store="file:///tmp/x"))
    assert off.payload_codec is None
    monkeypatch.setenv("COMPACTOR_CODEC_KEYS", K1)
    conv = build_data_converter(Settings(store="file:///tmp/x"))
    assert isinstance(conv.payload_codec, EncryptionCodec)
    # Failure messages and stack traces go through the codec as well.
    assert isinstance(conv.failure_converter, DefaultFailureConverterWithEncodedAttributes)
    inp = CompactSessionInput(tenant="t1", session=SECRET)
    [p] = await conv.encode([inp])
    assert p.metadata["encoding"] == b"binary/encrypted" and p.metadata["encryption-key-id"] == b"k1"
    assert SECRET.encode() not in p.data
    with pytest.raises(ValueError):
        json.loads(p.data)
    [back] = await conv.decode([p], [CompactSessionInput])
    assert back == inp


async def test_rotation_new_key_encrypts_old_key_still_decrypts():
    old = EncryptionCodec(parse_keys(K1))
    [p_old] = await old.encode([_plain(SECRET)])
    rotated = EncryptionCodec(parse_keys(f"{K2},{K1}"))
    [p_new] = await rotated.encode([_plain(SECRET)])
    assert p_new.metadata["encryption-key-id"] == b"k2"
    assert [json.loads(p.data)["text"] for p in await rotated.decode([p_old, p_new])] == [SECRET, SECRET]
    # The old process does not hold k2: a clear error naming the key id.
    with pytest.raises(UnknownEncryptionKey, match="'k2'"):
        await old.decode([p_new])


async def test_plain_payloads_pass_through_and_tampering_is_detected():
    codec = EncryptionCodec(parse_keys(K1))
    plain = _plain("written before the codec was on")
    assert await codec.decode([plain]) == [plain]
    [p] = await codec.encode([_plain(SECRET)])
    flipped = Payload(metadata=dict(p.metadata), data=p.data[:-1] + bytes([p.data[-1] ^ 1]))
    with pytest.raises(DecryptionFailed):
        await codec.decode([flipped])
    # Same id, another key (a mistyped key file): refused, not garbage.
    other = EncryptionCodec(parse_keys("k1:" + new_key().split(":", 1)[1]))
    with pytest.raises(DecryptionFailed):
        await other.decode([p])


async def test_tenant_keys_encrypt_that_tenants_workflows_only():
    ring = parse_keys(f"{K1}\nacme/{KT}  # acme's own key")
    codec = EncryptionCodec(ring)
    acme = codec.with_context(WorkflowSerializationContext(namespace="default", workflow_id="compact/acme/s1"))
    other = codec.with_context(WorkflowSerializationContext(namespace="default", workflow_id="compact/beta/s1"))
    [pa] = await acme.encode([_plain(SECRET)])
    [pb] = await other.encode([_plain(SECRET)])
    assert pa.metadata["encryption-key-id"] == b"acme-1" and pb.metadata["encryption-key-id"] == b"k1"
    # An operator holding only the default key reads beta's payloads, not acme's.
    default_only = EncryptionCodec(parse_keys(K1))
    assert json.loads((await default_only.decode([pb]))[0].data)["text"] == SECRET
    with pytest.raises(UnknownEncryptionKey):
        await default_only.decode([pa])


@pytest.mark.parametrize(
    "text",
    ["k1", "k1:not base64!", "k1:" + base64.b64encode(b"short").decode(), "bad id:" + K1.split(":")[1],
     f"{K1},k1:{new_key().split(':', 1)[1]}"],
)
def test_bad_keys_are_one_line_invalid_input(text):
    with pytest.raises(InvalidInput):
        parse_keys(text)


def test_key_file_and_settings_errors(tmp_path, monkeypatch):
    f = tmp_path / "keys"
    f.write_text(f"# rotated 2026-01\n{K2}\n{K1}\n")
    conv = build_data_converter(Settings(store="file:///tmp/x", codec_key_file=str(f)))
    assert conv.payload_codec.ring.encrypting(None)[0] == "k2"
    with pytest.raises(InvalidInput, match="codec key file"):
        build_data_converter(Settings(store="file:///tmp/x", codec_key_file=str(tmp_path / "missing")))


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict, dict]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), dict(e.headers)


async def test_codec_server_decodes_only_with_the_bearer_token():
    codec = EncryptionCodec(parse_keys(K1))
    encrypted = await codec.encode([_plain(SECRET)])
    body = json_format.MessageToJson(Payloads(payloads=encrypted)).encode()
    server = CodecServer(codec, port=0, cors_origins=["http://localhost:8233"], token="tok-123")
    server.start()
    try:
        ui = {"Content-Type": "application/json", "Origin": "http://localhost:8233"}
        status, _, _ = _post(server.url + "/decode", body, ui)
        assert status == 401
        status, _, _ = _post(server.url + "/decode", body, {**ui, "Authorization": "Bearer wrong"})
        assert status == 401
        status, out, headers = _post(server.url + "/decode", body, {**ui, "Authorization": "Bearer tok-123"})
        assert status == 200
        assert headers["Access-Control-Allow-Origin"] == "http://localhost:8233"
        [p] = json_format.ParseDict(out, Payloads()).payloads
        assert json.loads(p.data)["text"] == SECRET
        # encode is the inverse, for `temporal workflow start` through the codec endpoint
        status, enc, _ = _post(server.url + "/encode", json_format.MessageToJson(Payloads(payloads=[p])).encode(),
                               {**ui, "Authorization": "Bearer tok-123"})
        [e] = json_format.ParseDict(enc, Payloads()).payloads
        assert status == 200 and e.metadata["encoding"] == b"binary/encrypted"
        # CORS preflight answers the UI origin only
        pre = urllib.request.Request(server.url + "/decode", method="OPTIONS",
                                     headers={"Origin": "http://evil.example"})
        with urllib.request.urlopen(pre, timeout=10) as r:
            assert "Access-Control-Allow-Origin" not in r.headers
    finally:
        server.shutdown()
        server.server_close()


def test_cli_codec_server_needs_keys(monkeypatch, capsys):
    from compactor.cli import main

    monkeypatch.delenv("COMPACTOR_CODEC_KEYS", raising=False)
    assert main(["codec-server", "--port", "0"]) == 2
    assert "COMPACTOR_CODEC_KEYS" in capsys.readouterr().err
    monkeypatch.setenv("COMPACTOR_CODEC_KEYS", K1)
    assert main(["codec-server", "--port", "0", "--token-env", "NO_SUCH_VAR_X"]) == 2
