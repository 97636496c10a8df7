"""Object store on a local directory, with the same compare-and-swap semantics as S3.

Why a lock *and* a rename: the rename makes every object appear whole (readers never take a
lock and never see a partial file); the lock makes check-then-write atomic, so two writers
(threads or processes) racing on ``if_match``/``if_none_match`` cannot both win. Locks are
``fcntl.flock`` on one of a fixed set of stripe files under ``.locks/`` (flock is per open file
description, so it excludes threads of one process as well as other processes).
Temporary files live under ``.tmp/`` on the same filesystem, so ``os.replace`` is atomic.

Why every path is walked from a directory fd: a key names a path under the root, and a
symbolic link anywhere below the root (``t/acme`` -> another tenant, ``log`` -> ``/tmp``,
``head.json`` -> a file elsewhere) would carry reads and writes out of it. Each component is
opened relative to its parent's fd with ``O_NOFOLLOW`` (directories created with ``mkdirat``,
files created and renamed relative to their directory fds), so no link below the root is
ever followed: an object reached through one is an IntegrityError naming the link, and
``compactor verify`` reports the links it finds. The root itself may be a link (resolved once,
when the store is opened: that is the operator's choice of directory).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from compactor.errors import IntegrityError, InvalidInput, NotFound, PreconditionFailed
from compactor.store.base import ObjectInfo, check_key

_STRIPES = 64
_RESERVED = (".locks", ".tmp")
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC  # NONBLOCK: a planted FIFO never hangs a read


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
    def _key(self, key: str) -> str:
        check_key(key)
        if key.split("/", 1)[0] in _RESERVED:
            from compactor.errors import InvalidId

            raise InvalidId(f"invalid object key {key!r}: {key.split('/', 1)[0]} is reserved")
        return key

    def _path(self, key: str) -> Path:
        """The object's path (for tests and tools; the store itself opens by directory fd)."""
        return self.root / self._key(key)

    def _link_error(self, rel: str) -> IntegrityError:
        return IntegrityError(
            f"{rel!r} in store {self.url} is a symbolic link: links inside a store are never "
            f"followed (they could lead out of it); replace it with the real directory or file, "
            f"and run `compactor verify`",
            key=rel,
        )

    def _open_dir(self, parts: list[str], *, create: bool) -> int:
        """fd of the directory ``root/parts...``, each component opened without following a
        link (created when ``create``). FileNotFoundError / NotADirectoryError when absent."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        try:
            for i, part in enumerate(parts):
                try:
                    nfd = os.open(part, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(part, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass
                    nfd = os.open(part, _DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and _is_link(part, fd):
                        raise self._link_error("/".join(parts[: i + 1])) from None
                    raise
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextmanager
    def _dir(self, parts: list[str], *, create: bool = False) -> Iterator[int]:
        fd = self._open_dir(parts, create=create)
        try:
            yield fd
        finally:
            os.close(fd)

    def _ready(self) -> None:
        if self._dirs_ready:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            for name in _RESERVED:
                with self._dir([name], create=True):
                    pass
        except IntegrityError:
            raise
        except OSError as exc:  # a parent is a file, or no permission: nothing was written
            raise InvalidInput(
                f"cannot write to store {self.url}: {exc.strerror or exc}; give a writable "
                "directory with --store file://DIR"
            ) from None
        self._dirs_ready = True

    @contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        self._ready()
        stripe = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big")
        try:
            with self._dir([".locks"]) as dfd:
                fd = os.open(f"{stripe % _STRIPES:02d}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | _CLOEXEC,
                             0o644, dir_fd=dfd)
        except PermissionError as exc:
            raise InvalidInput(
                f"cannot write to store {self.url}: {exc.strerror}; give a writable directory "
                "with --store file://DIR"
            ) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._link_error(f".locks/{stripe % _STRIPES:02d}.lock") from None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the description releases the flock

    def _read(self, key: str) -> bytes | None:
        """The object's bytes, None when absent (or a directory); a link is an IntegrityError."""
        parts = key.split("/")
        try:
            dfd = self._open_dir(parts[:-1], create=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            try:
                fd = os.open(parts[-1], _FILE, dir_fd=dfd)
            except (FileNotFoundError, NotADirectoryError):
                return None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.EMLINK) and _is_link(parts[-1], dfd):
                    raise self._link_error(key) from None
                raise
        finally:
            os.close(dfd)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            return f.read()

    # ``base.read_bytes``/``write_bytes`` use ``read``/``write`` (no etag computed) only while
    # ``get``/``put`` are these very functions (``_PLAIN_GET``/``_PLAIN_PUT``, set below)
    _FAST_FOR = {"read": "_PLAIN_GET", "write": "_PLAIN_PUT"}

    def links(self, prefix: str = "") -> list[str]:
        """Keys of the symbolic links at or below ``prefix`` (and links among its ancestor
        directories), which no read or write follows: what ``compactor verify`` reports."""
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        parts = [p for p in base.split("/") if p]
        for i in range(len(parts)):
            rel = "/".join(parts[: i + 1])
            try:
                st = os.lstat(self.root / rel)
            except (FileNotFoundError, NotADirectoryError):
                return []
            if stat.S_ISLNK(st.st_mode):
                return [rel]
            if not stat.S_ISDIR(st.st_mode):
                return []
        out: list[str] = []
        start = self.root / base if base else self.root
        for dirpath, dirnames, filenames in os.walk(start):  # followlinks=False
            rel = os.path.relpath(dirpath, self.root)
            rel = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            for name in dirnames + filenames:
                k = rel + name
                if k.startswith(prefix) and os.path.islink(os.path.join(dirpath, name)):
                    out.append(k)
        return sorted(out)

    # --- protocol ---------------------------------------------------------------------------
    def get(self, key: str) -> tuple[bytes, str]:
        data = self._read(self._key(key))
        if data is None:
            raise NotFound(f"no object {key!r} in {self.url}", key=key)
        return data, content_etag(data)

    def read(self, key: str) -> bytes:
        """``get(key)[0]``, without hashing the bytes for an etag (``base.read_bytes``)."""
        data = self._read(self._key(key))
        if data is None:
            raise NotFound(f"no object {key!r} in {self.url}", key=key)
        return data

    def head(self, key: str) -> str | None:
        data = self._read(self._key(key))
        return None if data is None else content_etag(data)

    def put(
        self,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> str:
        data = bytes(data)
        self.write(key, data, if_none_match=if_none_match, if_match=if_match)
        return content_etag(data)

    def write(
        self,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> None:
        """``put`` without hashing the bytes for the etag it returns (``base.write_bytes``)."""
        self._key(key)
        data = bytes(data)
        parts = key.split("/")
        with self._locked(key):
            if if_none_match or if_match is not None:
                current = self._read(key)
                if if_none_match and current is not None:
                    raise PreconditionFailed(f"object {key!r} already exists", key=key)
                if if_match is not None and (
                    current is None or content_etag(current) != _quoted(if_match)
                ):
                    raise PreconditionFailed(
                        f"object {key!r} changed (expected etag {if_match})", key=key
                    )
            tmp = uuid.uuid4().hex
            with self._dir(parts[:-1], create=True) as dfd, self._dir([".tmp"]) as tfd:
                try:
                    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC,
                                 0o644, dir_fd=tfd)
                    with os.fdopen(fd, "wb") as f:
                        f.write(data)
                        if self.fsync:
                            f.flush()
                            os.fsync(f.fileno())
                    # rename(2) replaces a link at the name, never what it points to
                    os.replace(tmp, parts[-1], src_dir_fd=tfd, dst_dir_fd=dfd)
                except BaseException:
                    try:
                        os.unlink(tmp, dir_fd=tfd)
                    except OSError:
                        pass
                    raise
                if self.fsync:
                    os.fsync(dfd)

    def list(self, prefix: str) -> list[str]:
        # Walk only the deepest directory the prefix names, not the whole store.
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self.root / base if base else self.root
        self._no_linked_ancestor(base)
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
        self._no_linked_ancestor(prefix.strip("/"))
        try:
            names = [n for n in os.listdir(start) if n not in _RESERVED or prefix.strip("/")]
        except (FileNotFoundError, NotADirectoryError):
            return []
        after = None if start_after is None else start_after + "/"
        keyed = sorted(n + "/" for n in names if after is None or n + "/" > after)
        return [k[:-1] for k in keyed[:limit]]

    # --- lifecycle (gc, delete) -------------------------------------------------------------
    def list_info(self, prefix: str) -> list[ObjectInfo]:
        """Like ``list``, with each object's size and modification time (never through a link)."""
        out = []
        for key in self.list(prefix):
            parts = self._key(key).split("/")
            try:
                with self._dir(parts[:-1]) as dfd:
                    st = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):  # removed while listing
                continue
            if stat.S_ISREG(st.st_mode):
                out.append(ObjectInfo(key, st.st_size, st.st_mtime))
        return out

    def delete(self, key: str) -> None:
        """Remove ``key``; absent is not an error (as on S3). Under the key's lock, so a
        conditional write of the same key sees it either present or gone. The file is unlinked
        relative to its directory, opened without following a link."""
        parts = self._key(key).split("/")
        with self._locked(key):
            try:
                with self._dir(parts[:-1]) as dfd:
                    os.unlink(parts[-1], dir_fd=dfd)
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
        self._no_linked_ancestor(base)  # never walk (or remove) outside the root through a link
        start = self._path(base)
        if start.is_symlink() or not start.is_dir():
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

    def _no_linked_ancestor(self, base: str) -> None:
        parts = [p for p in base.split("/") if p]
        for i in range(len(parts)):
            rel = "/".join(parts[: i + 1])
            try:
                if stat.S_ISLNK(os.lstat(self.root / rel).st_mode):
                    raise self._link_error(rel)
            except (FileNotFoundError, NotADirectoryError):
                return


LocalStore._PLAIN_GET = LocalStore.get  # type: ignore[attr-defined]
LocalStore._PLAIN_PUT = LocalStore.put  # type: ignore[attr-defined]


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _quoted(etag: str) -> str:
    return etag if etag.startswith('"') else f'"{etag}"'
