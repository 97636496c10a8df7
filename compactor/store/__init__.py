"""Object storage for session logs: one protocol, a local-directory and an S3 backend.

``open_store(url)`` picks the backend from a URL; ``SessionLog`` is the append-only log of one
session on top of it (see ``compactor.store.log`` for the durability design).
"""

from __future__ import annotations

import os

from importlib import import_module
from typing import TYPE_CHECKING, Any

from compactor.errors import InvalidInput

if TYPE_CHECKING:
    from compactor.store.base import ObjectStore, check_key
    from compactor.store.caches import SegmentCache
    from compactor.store.listing import list_sessions, list_sessions_page
    from compactor.store.local import LocalStore
    from compactor.store.log import AppendResult, SessionLog
    from compactor.store.s3 import S3Store
    from compactor.store.ids import validate_id

#: Where each name of this package lives. They are imported on first use (PEP 562), not when
#: the package is: importing one light module (``compactor.store.ids``, which every CLI command's
#: id check uses) ran this file, which imported every backend, the log and its caches (~25-60 ms
#: at each command's start, issue 17).
_LAZY = {
    "AppendResult": "log", "SessionLog": "log", "validate_id": "ids",
    "LocalStore": "local", "S3Store": "s3", "ObjectStore": "base", "check_key": "base",
    "SegmentCache": "caches", "list_sessions": "listing", "list_sessions_page": "listing",
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def open_store(url: str, **kwargs: object) -> ObjectStore:
    """``file://DIR`` (or a bare path) -> LocalStore; ``s3://BUCKET[/PREFIX]`` -> S3Store.

    The S3 endpoint comes from ``AWS_ENDPOINT_URL`` (or ``endpoint_url=``); credentials from the
    usual AWS environment / config chain.
    """
    if url.startswith("s3://"):
        from compactor.store.s3 import S3Store  # boto3 is imported when a store is created

        rest = url[len("s3://") :]
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise InvalidInput(f"invalid store URL {url!r}: expected s3://BUCKET/PREFIX")
        return S3Store(bucket, prefix, **kwargs)  # type: ignore[arg-type]
    if url.startswith("file://"):
        path = url[len("file://") :]
    elif "://" in url:
        raise InvalidInput(
            f"unsupported store URL {url!r}: use file://DIR or s3://BUCKET/PREFIX"
        )
    else:
        path = url
    if not path:
        raise InvalidInput(f"invalid store URL {url!r}: no directory given")
    from compactor.store.local import LocalStore

    return LocalStore(os.path.expanduser(path), **kwargs)  # type: ignore[arg-type]


__all__ = [
    "AppendResult",
    "LocalStore",
    "ObjectStore",
    "S3Store",
    "SegmentCache",
    "SessionLog",
    "check_key",
    "list_sessions",
    "list_sessions_page",
    "open_store",
    "validate_id",
]
