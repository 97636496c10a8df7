"""Object store on a local directory, with the same compare-and-swap semantics as S3.

Why a lock *and* a rename: the rename makes every object appear whole (readers never take a
lock and never see a partial file); the lock makes check-then-write atomic, so two writers
(threads or processes) racing on ``if_match``/``if_none_match`` cannot both win. Locks are
``fcntl.flock`` on one of a fixed set of stripe files under ``.locks/`` (flock is per open file
description, so it excludes threads of one process as well as other processes).
Temporary files live under ``.tmp/`` on the same filesystem, so ``os.replace`` is atomic.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from compactor.errors import InvalidInput, NotFound, PreconditionFailed
from compactor.store.base import ObjectInfo, check_key

_STRIPES = 64
_RESERVED = (".locks", ".tmp")


def content_etag(data: bytes) -> str:
    """Same etag S3 gives a simple PUT: hex MD5 of the content (quoted like S3)."""
    return '"' + hashlib.md5(data, usedforsecurity=False).hexdigest() + '"'


class LocalStore:
    """A directory as an object store. Safe across threads and processes on one host.

    Args:
        root: directory holding the objects (created if missing).
        fsync: flush file data and the directory entry to disk before a write returns
            (durability across power loss; costs a few hundred microseconds per write).
    """

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.root = Path(root).resolve()
        self.fsync = fsync
        self.url = f"file://{self.root}"
        self._dirs_ready = False  # created on first write: reading never creates anything
        if self.root.exists() and not self.root.is_dir():
            raise InvalidInput(
                f"store {self.url} is a file, not a directory; give --store file://DIR "
                "(a directory, created if missing) or s3://BUCKET/PREFIX"
            )

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    # --- helpers ----------------------------------------------------------------------------
    def _path(self, key: str) -> Path:
        check_key(key)
        if key.split("/", 1)[0] in _RESERVED:
            from compactor.errors import InvalidId

            raise InvalidId(f"invalid object key {key!r}: {key.split('/', 1)[0]} is reserved")
        return self.root / key

    @contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        if not self._dirs_ready:
            try:
                (self.root / ".locks").mkdir(parents=True, exist_ok=True)
                (self.root / ".tmp").mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a parent is a file, or no permission: nothing was written
                raise InvalidInput(
                    f"cannot write to store {self.url}: {exc.strerror or exc}; give a writable "
                    "directory with --store file://DIR"
                ) from None
            self._dirs_ready = True
        stripe = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big")
        path = self.root / ".locks" / f"{stripe % _STRIPES:02d}.lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except PermissionError as exc:
            raise InvalidInput(
                f"cannot write to store {self.url}: {exc.strerror}; give a writable directory "
                "with --store file://DIR"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the description releases the flock

    @staticmethod
    def _read(path: Path) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            return None
        except NotADirectoryError:
            return None

    # --- protocol ---------------------------------------------------------------------------
    def get(self, key: str) -> tuple[bytes, str]:
        data = self._read(self._path(key))
        if data is None:
            raise NotFound(f"no object {key!r} in {self.url}", key=key)
        return data, content_etag(data)

    def head(self, key: str) -> str | None:
        data = self._read(self._path(key))
        return None if data is None else content_etag(data)

    def put(
        self,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> str:
        path = self._path(key)
        data = bytes(data)
        with self._locked(key):
            if if_none_match or if_match is not None:
                current = self._read(path)
                if if_none_match and current is not None:
                    raise PreconditionFailed(f"object {key!r} already exists", key=key)
                if if_match is not None and (
                    current is None or content_etag(current) != _quoted(if_match)
                ):
                    raise PreconditionFailed(
                        f"object {key!r} changed (expected etag {if_match})", key=key
                    )
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.root / ".tmp" / f"{uuid.uuid4().hex}"
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                    if self.fsync:
                        f.flush()
                        os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
            if self.fsync:
                _fsync_dir(path.parent)
        return content_etag(data)

    def list(self, prefix: str) -> list[str]:
        # Walk only the deepest directory the prefix names, not the whole store.
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self.root / base if base else self.root
        if not start.is_dir():
            return []
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(start):
            rel = os.path.relpath(dirpath, self.root)
            rel = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            if not rel:
                dirnames[:] = [d for d in dirnames if d not in _RESERVED]
            for name in filenames:
                k = rel + name
                if k.startswith(prefix):
                    out.append(k)
        return sorted(out)


    def list_children(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> list[str]:
        """Names one level below ``prefix`` (which ends with "/"), in key order (``name/``),
        after ``start_after``, at most ``limit``."""
        start = self.root / prefix.rstrip("/") if prefix.strip("/") else self.root
        try:
            names = [n for n in os.listdir(start) if n not in _RESERVED or prefix.strip("/")]
        except (FileNotFoundError, NotADirectoryError):
            return []
        after = None if start_after is None else start_after + "/"
        keyed = sorted(n + "/" for n in names if after is None or n + "/" > after)
        return [k[:-1] for k in keyed[:limit]]

    # --- lifecycle (gc, delete) -------------------------------------------------------------
    def list_info(self, prefix: str) -> list[ObjectInfo]:
        """Like ``list``, with each object's size and modification time."""
        out = []
        for key in self.list(prefix):
            try:
                st = os.stat(self.root / key)
            except FileNotFoundError:  # removed while listing
                continue
            out.append(ObjectInfo(key, st.st_size, st.st_mtime))
        return out

    def delete(self, key: str) -> None:
        """Remove ``key``; absent is not an error (as on S3). Under the key's lock, so a
        conditional write of the same key sees it either present or gone."""
        path = self._path(key)
        with self._locked(key):
            try:
                os.unlink(path)
            except (FileNotFoundError, NotADirectoryError):
                return
            except IsADirectoryError:
                raise InvalidInput(f"cannot delete {key!r} in {self.url}: it is a directory") from None

    def prune(self, prefix: str) -> None:
        """Remove the empty directories left under ``prefix`` and its emptied parents.

        ``delete`` removes files only: a writer may be creating the same directory meanwhile.
        Called after a whole session or tenant is deleted.
        """
        base = prefix.strip("/")
        if not base or base.split("/", 1)[0] in _RESERVED:
            return
        start = self._path(base)
        if not start.is_dir():
            return
        for dirpath, _dirs, _files in sorted(os.walk(start), key=lambda w: -len(w[0])):
            try:
                os.rmdir(dirpath)
            except OSError:  # not empty
                pass
        parent = start.parent
        while parent != self.root:
            try:
                os.rmdir(parent)
            except OSError:
                break
            parent = parent.parent


def _quoted(etag: str) -> str:
    return etag if etag.startswith('"') else f'"{etag}"'


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:  # pragma: no cover - platform without directory fds
        if exc.errno in (errno.EACCES, errno.EISDIR):
            return
        raise
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
