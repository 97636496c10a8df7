"""Payload encryption: an AES-GCM ``PayloadCodec`` for every Temporal client and worker.

Why it is shaped this way:

* Temporal history is readable by anyone with read access to the namespace, and it is kept
  for the namespace's retention. The workflow only passes references (DESIGN §5), but ids,
  store keys and error text still cross it; with the codec on, every payload (inputs,
  results, failure details, and failure messages and stack traces through the failure
  converter) is ciphertext that only holders of a key can read.
* Keys carry ids and the id is written into each payload's metadata (``encryption-key-id``),
  so rotation is adding a key: the first key of the ring encrypts, every key decrypts.
  A payload whose key id is not in the ring is a :class:`UnknownEncryptionKey` naming the id,
  never a silent pass-through.
* Payloads without our ``binary/encrypted`` encoding pass through on decode, so histories
  written before the codec was turned on still replay and still show in the UI.
* Per-tenant keys (optional): the workflow id names the tenant (``compact/{tenant}/...``,
  ``sweep/{tenant}/...``); through Temporal's serialization context the codec encrypts a
  tenant's payloads with that tenant's first key. Decoding needs no context: the key id picks
  the key, so the codec server (which has no context) decodes every tenant's payloads whose
  key it holds, and an operator given only tenant A's keys cannot read tenant B's.
* The same ring drives ``compactor codec-server`` (Temporal's codec server protocol) so the
  UI and ``temporal workflow show`` can decode for an authorized operator.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
    WorkflowSerializationContext,
)

from compactor.errors import CompactorError, InvalidInput

ENCODING = b"binary/encrypted"
KEY_ID_META = "encryption-key-id"
_NONCE = 12
_TAG = 16  # AES-GCM authentication tag
_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_TENANT_WF_RE = re.compile(r"^(?:compact|sweep)/([A-Za-z0-9._-]{1,128})/")


class UnknownEncryptionKey(CompactorError):
    """A payload was encrypted with a key id this process does not hold."""

    code = "unknown_encryption_key"


class DecryptionFailed(CompactorError):
    """A payload's ciphertext does not authenticate under the key its id names."""

    code = "decryption_failed"


@dataclass(frozen=True)
class KeyRing:
    """Encryption keys by id: ``default`` (first = encrypts) and optional per-tenant lists."""

    default: tuple[tuple[str, bytes], ...] = ()
    tenants: Mapping[str, tuple[tuple[str, bytes], ...]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.default and not self.tenants

    def all_keys(self) -> dict[str, bytes]:
        """Every key by id (decryption needs only the id in the payload)."""
        out: dict[str, bytes] = {}
        for kid, key in [*self.default, *(k for ks in self.tenants.values() for k in ks)]:
            if out.get(kid, key) != key:
                raise InvalidInput(f"codec key id {kid!r} is given twice with different keys")
            out[kid] = key
        return out

    def encrypting(self, tenant: str | None) -> tuple[str, bytes] | None:
        """The key that encrypts payloads of ``tenant`` (its own first key, else the default)."""
        own = self.tenants.get(tenant or "") if tenant else None
        if own:
            return own[0]
        return self.default[0] if self.default else None


def _parse_key(entry: str, where: str) -> tuple[str, bytes]:
    kid, sep, b64 = entry.partition(":")
    kid, b64 = kid.strip(), b64.strip()
    if not sep or not _ID_RE.match(kid):
        raise InvalidInput(
            f"{where}: expected KEY_ID:BASE64 (id of [A-Za-z0-9._-], up to 64), got an entry "
            f"starting {entry[:12]!r}..."
        )
    try:
        key = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{where}: key {kid!r} is not valid base64") from None
    if len(key) not in (16, 24, 32):
        raise InvalidInput(
            f"{where}: key {kid!r} is {len(key)} bytes; AES-GCM needs 16, 24 or 32 "
            "(make one with `compactor codec-key`)"
        )
    return kid, key


def parse_keys(text: str, where: str = "COMPACTOR_CODEC_KEYS") -> KeyRing:
    """Parse ``"k2:BASE64,k1:BASE64"`` (commas or newlines; ``#`` comments) into a ring.

    An entry ``TENANT/KEY_ID:BASE64`` is a key of that tenant only; a tenant's first key
    encrypts its payloads, the first untenanted key everyone else's.
    """
    default: list[tuple[str, bytes]] = []
    tenants: dict[str, list[tuple[str, bytes]]] = {}
    for raw in re.split(r"[,\n]", text):
        entry = raw.split("#", 1)[0].strip()
        if not entry:
            continue
        tenant, slash, rest = entry.partition("/")
        if slash and ":" in rest and ":" not in tenant:
            if not re.match(r"^[A-Za-z0-9._-]{1,128}$", tenant):
                raise InvalidInput(f"{where}: invalid tenant id {tenant!r} in a key entry")
            tenants.setdefault(tenant, []).append(_parse_key(rest, where))
        else:
            default.append(_parse_key(entry, where))
    ring = KeyRing(tuple(default), {t: tuple(ks) for t, ks in tenants.items()})
    ring.all_keys()  # duplicate ids with different keys are an error now, not at decode time
    return ring


def new_key(key_id: str = "k1") -> str:
    """A fresh 256-bit key as a ``KEY_ID:BASE64`` entry."""
    if not _ID_RE.match(key_id):
        raise InvalidInput(f"invalid key id {key_id!r}: use [A-Za-z0-9._-], up to 64 characters")
    return f"{key_id}:{base64.b64encode(os.urandom(32)).decode()}"


def tenant_of(context: SerializationContext | None) -> str | None:
    """Tenant named by the workflow id of a serialization context, if any."""
    wf_id = getattr(context, "workflow_id", None) if isinstance(
        context, (WorkflowSerializationContext, ActivitySerializationContext)
    ) else None
    m = _TENANT_WF_RE.match(wf_id or "")
    return m.group(1) if m else None


class EncryptionCodec(PayloadCodec, WithSerializationContext):
    """AES-GCM over each whole serialized payload; key id in the metadata.

    Args:
        ring: the keys; its first default key (or the tenant's own first key) encrypts.
        tenant: set through ``with_context`` from the workflow id; selects a tenant key.
    """

    def __init__(self, ring: KeyRing, tenant: str | None = None) -> None:
        if ring.empty:
            raise InvalidInput("the payload codec needs at least one key")
        self.ring = ring
        self.tenant = tenant
        self._keys = ring.all_keys()
        self._aead = {kid: AESGCM(key) for kid, key in self._keys.items()}

    def with_context(self, context: SerializationContext) -> EncryptionCodec:
        tenant = tenant_of(context)
        if tenant == self.tenant or tenant not in self.ring.tenants:
            return self
        return EncryptionCodec(self.ring, tenant)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return self.encode_sync(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return self.decode_sync(payloads)

    def encode_sync(self, payloads: Iterable[Payload]) -> list[Payload]:
        chosen = self.ring.encrypting(self.tenant)
        if chosen is None:
            # Only tenant keys configured and this payload belongs to none of them.
            raise InvalidInput(
                f"no codec key for tenant {self.tenant or '(unknown)'}: add an untenanted key "
                "to COMPACTOR_CODEC_KEYS"
            )
        kid = chosen[0]
        aead = self._aead[kid]
        out = []
        for p in payloads:
            nonce = os.urandom(_NONCE)
            # The key id is authenticated too: a payload cannot be relabelled to another key.
            data = nonce + aead.encrypt(nonce, p.SerializeToString(), kid.encode())
            out.append(Payload(metadata={"encoding": ENCODING, KEY_ID_META: kid.encode()}, data=data))
        return out

    def decode_sync(self, payloads: Iterable[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            if p.metadata.get("encoding", b"") != ENCODING:
                out.append(p)  # written before the codec was on: readable as it is
                continue
            kid = p.metadata.get(KEY_ID_META, b"").decode(errors="replace")
            aead = self._aead.get(kid)
            if aead is None:
                raise UnknownEncryptionKey(
                    f"payload encrypted with key id {kid!r}, which is not in this process's "
                    f"codec keys ({', '.join(sorted(self._keys)) or 'none'}): add that key to "
                    "COMPACTOR_CODEC_KEYS (or the key file) to read it"
                )
            if len(p.data) < _NONCE + _TAG:
                raise DecryptionFailed(
                    f"payload under key id {kid!r} is {len(p.data)} bytes, shorter than a nonce "
                    f"and a tag ({_NONCE + _TAG}): it was cut or altered"
                )
            try:
                plain = aead.decrypt(p.data[:_NONCE], p.data[_NONCE:], kid.encode())
                out.append(Payload.FromString(plain))
            except (InvalidTag, ValueError, DecodeError):
                raise DecryptionFailed(
                    f"payload under key id {kid!r} does not decrypt: the key with that id is a "
                    "different key, or the payload was altered"
                ) from None
        return out


def keyring_from_settings(settings: Any) -> KeyRing | None:
    """The configured key ring, or None when payload encryption is off (the default)."""
    parts: list[str] = []
    if settings.codec_keys is not None:
        parts.append(settings.codec_keys.get_secret_value())
    if settings.codec_key_file:
        try:
            with open(settings.codec_key_file, encoding="utf-8") as fh:
                parts.append(fh.read())
        except OSError as exc:
            raise InvalidInput(
                f"cannot read the codec key file {settings.codec_key_file}: {exc.strerror}"
            ) from None
    if not parts:
        return None
    where = "COMPACTOR_CODEC_KEYS / COMPACTOR_CODEC_KEY_FILE"
    ring = parse_keys("\n".join(parts), where)
    if ring.empty:
        raise InvalidInput(f"{where} is set but holds no key")
    return ring


def codec_from_settings(settings: Any) -> EncryptionCodec | None:
    """The payload codec the settings ask for, or None."""
    ring = keyring_from_settings(settings)
    return EncryptionCodec(ring) if ring is not None else None


def with_codec(converter: DataConverter, codec: PayloadCodec | None) -> DataConverter:
    """``converter`` with ``codec`` on payloads and on failure messages and stack traces.

    Failures move their message and stack trace into encoded attributes (Temporal's
    ``DefaultFailureConverterWithEncodedAttributes``), so the codec covers them too.
    """
    if codec is None:
        return converter
    return dataclasses.replace(
        converter,
        payload_codec=codec,
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )
