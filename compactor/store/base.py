"""The object-store protocol both backends implement, and key helpers.

Semantics follow S3 with conditional writes, so the session log above it is written once and
runs unchanged on a local directory or any S3 endpoint:

* ``get(key) -> (bytes, etag)``; ``NotFound`` when absent.
* ``put(key, data)`` overwrites; ``if_none_match=True`` creates only if absent;
  ``if_match=etag`` replaces only if the current etag is ``etag`` (compare-and-swap).
  A lost condition raises ``PreconditionFailed`` and changes nothing.
* ``head(key) -> etag | None``; ``list(prefix) -> sorted keys``.

Etags are opaque strings derived from the content (S3: MD5 of a simple PUT; local: the same),
so writing identical bytes again keeps the etag. Callers that CAS must therefore make every
new version differ in content (the session head carries its version and a timestamp).
"""

from __future__ import annotations

import re
from typing import NamedTuple, Protocol, runtime_checkable

from compactor.errors import InvalidId

_KEY_PART = re.compile(r"^[^\x00\\]+$")


@runtime_checkable
class ObjectStore(Protocol):
    """A flat key -> bytes store with compare-and-swap writes. Blocking (boto3 is)."""

    url: str

    def get(self, key: str) -> tuple[bytes, str]:
        """Bytes and etag of ``key``; raises NotFound."""
        ...

    def put(
        self,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> str:
        """Write ``data``; returns the new etag; raises PreconditionFailed if a condition fails."""
        ...

    def head(self, key: str) -> str | None:
        """Etag of ``key``, or None when absent."""
        ...

    def list(self, prefix: str) -> list[str]:
        """Every key starting with ``prefix``, sorted."""
        ...


def read_bytes(store: ObjectStore, key: str) -> bytes:
    """``store.get(key)[0]``, without the etag when the store's class reads without it.

    A read whose etag nobody uses (a segment, a checkpoint, a work object: each checked by its
    own digest, or read as it is) need not hash the object, and ``LocalStore.get`` computes the
    MD5 etag of every object it reads (~1.5 ms per MB). ``read`` is used only when the class
    that defines it is the one that defines ``get`` or a subclass of it, never through a
    wrapper's ``__getattr__`` delegation nor past a subclass' own ``get``: a wrapper or a
    subclass that counts or records its ``get`` calls (``CountingStore``) sees every read.
    NotFound when absent, as ``get``.
    """
    mro = type(store).__mro__
    read_at = next((i for i, c in enumerate(mro) if "read" in c.__dict__), None)
    get_at = next((i for i, c in enumerate(mro) if "get" in c.__dict__), -1)
    if read_at is not None and read_at <= get_at:
        return type(store).read(store, key)  # type: ignore[attr-defined]
    return store.get(key)[0]


def check_key(key: str) -> str:
    """Reject keys that could escape the store's root (``..``, absolute, empty parts)."""
    if not key or key.startswith("/") or not _KEY_PART.match(key):
        raise InvalidId(f"invalid object key {key!r}: must be a relative path without NUL or '\\'")
    for part in key.split("/"):
        if part in ("", ".", ".."):
            raise InvalidId(
                f"invalid object key {key!r}: empty, '.' or '..' path components are not allowed"
            )
    return key


class ObjectInfo(NamedTuple):
    """One listed object: key, size in bytes, last write (epoch seconds; S3 LastModified)."""

    key: str
    size: int
    modified: float
