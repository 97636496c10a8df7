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
    MD5 etag of every object it reads (~1.5 ms per MB). ``read`` is used only while the
    store's ``get`` is the very one ``read`` stands for (``_own``): a wrapper, a subclass or a
    hook that counts or records ``get`` calls (``CountingStore``) sees every read.
    NotFound when absent, as ``get``.
    """
    if _own(store, "read", "get"):
        return type(store).read(store, key)  # type: ignore[attr-defined]
    return store.get(key)[0]


def write_bytes(store: ObjectStore, key: str, data: bytes, *, if_none_match: bool = False) -> None:
    """``store.put(key, data, if_none_match=...)`` whose etag nobody uses, without computing it
    when the store's class writes without it (``LocalStore.write``; same rule as
    ``read_bytes``: a wrapper, subclass or hook with its own ``put`` sees every write)."""
    if _own(store, "write", "put"):
        type(store).write(store, key, data, if_none_match=if_none_match)  # type: ignore[attr-defined]
    else:
        store.put(key, data, if_none_match=if_none_match)


def _own(store: object, fast: str, plain: str) -> bool:
    """Whether ``store``'s ``plain`` method is the very one its class' ``fast`` stands for
    (``_FAST_FOR``): not a subclass' own ``plain``, nor one patched on the class or the
    instance (a test's or a tool's hook), nor a wrapper's (``__getattr__`` delegation: the
    wrapper's class names no ``_FAST_FOR``)."""
    cls = type(store)
    meant = getattr(cls, "_FAST_FOR", {}).get(fast)
    return (meant is not None and getattr(cls, plain, None) is getattr(cls, meant, None)
            and plain not in getattr(store, "__dict__", {}))


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
