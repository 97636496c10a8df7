"""Reads and writes whose etag nobody uses skip the local store's MD5 (``base.read_bytes``,
``write_bytes``), and every wrapper, subclass or hook that watches ``get``/``put`` still sees
each one (issue 17, round fourteen)."""

from __future__ import annotations

import pytest

from activities.step_support import CountingStore
from compactor.errors import NotFound, PreconditionFailed
from compactor.store import SegmentCache, SessionLog
from compactor.store import local as local_mod
from compactor.store.base import read_bytes, write_bytes
from compactor.store.local import LocalStore
from compactor.tokens import with_tokens
from compactor.bench.perf import turns


@pytest.fixture
def md5_calls(monkeypatch):
    """Sizes of the objects the local store hashes for an etag."""
    sizes: list[int] = []
    real = local_mod.content_etag

    def counting(data: bytes) -> str:
        sizes.append(len(data))
        return real(data)

    monkeypatch.setattr(local_mod, "content_etag", counting)
    return sizes


def test_read_is_get_without_etag(tmp_path, md5_calls):
    store = LocalStore(tmp_path, fsync=False)
    store.put("a/b.json", b"x" * 1000)
    md5_calls.clear()
    assert read_bytes(store, "a/b.json") == store.read("a/b.json") == store.get("a/b.json")[0]
    assert md5_calls == [1000]  # only get hashed
    with pytest.raises(NotFound):
        read_bytes(store, "a/missing.json")
    with pytest.raises(NotFound):
        store.read("a/missing.json")


class Recording(LocalStore):
    def __init__(self, root) -> None:
        super().__init__(root, fsync=False)
        self.seen: list[str] = []

    def get(self, key):
        self.seen.append(key)
        return super().get(key)


class Proxy:
    def __init__(self, inner) -> None:
        self.inner, self.url, self.seen = inner, inner.url, []

    def get(self, key):
        self.seen.append(key)
        return self.inner.get(key)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_wrappers_and_subclasses_see_every_read(tmp_path):
    store = LocalStore(tmp_path, fsync=False)
    store.put("k", b"v")
    counting = CountingStore(store)
    assert read_bytes(counting, "k") == b"v" and counting.gets == 1
    proxy = Proxy(store)
    assert read_bytes(proxy, "k") == b"v" and proxy.seen == ["k"]
    rec = Recording(tmp_path)
    assert read_bytes(rec, "k") == b"v" and rec.seen == ["k"]


def test_session_reads_hash_no_segment_and_equal_the_old_path(tmp_path, md5_calls):
    store = LocalStore(tmp_path, fsync=False)
    log = SessionLog(store, "acme", "s1")
    log.append(with_tokens(turns(30, prefix="s")))
    head = log.head()
    seg_sizes = {s.bytes for s in head.segments}
    assert seg_sizes and min(seg_sizes) > 0
    md5_calls.clear()
    fresh = SessionLog(store, "acme", "s1", cache=SegmentCache())
    events = fresh.read_events()
    assert not any(n in seg_sizes for n in md5_calls), md5_calls  # the head only
    # the same events as a store whose reads all go through get (a counting wrapper)
    counting = CountingStore(store)
    old = SessionLog(counting, "acme", "s1", cache=SegmentCache()).read_events()
    assert [e.model_dump() for e in old] == [e.model_dump() for e in events]
    assert counting.gets >= 1 + len(head.segments)


def test_write_is_put_without_etag(tmp_path, md5_calls):
    store = LocalStore(tmp_path, fsync=True)
    write_bytes(store, "w/a.json", b"y" * 700)
    write_bytes(store, "w/a.json", b"z" * 500)  # overwrites, as put
    assert md5_calls == []
    assert store.get("w/a.json")[0] == b"z" * 500
    write_bytes(store, "w/b.json", b"1", if_none_match=True)
    with pytest.raises(PreconditionFailed):
        write_bytes(store, "w/b.json", b"2", if_none_match=True)
    assert store.read("w/b.json") == b"1"
    md5_calls.clear()
    assert store.put("w/c.json", b"abc") == local_mod.content_etag(b"abc")  # put still returns it


def test_hooks_on_the_class_or_instance_see_every_read_and_write(tmp_path, monkeypatch):
    store = LocalStore(tmp_path, fsync=False)
    seen: list[tuple[str, str]] = []
    real_get, real_put = LocalStore.get, LocalStore.put

    def get(self, key):
        seen.append(("get", key))
        return real_get(self, key)

    def put(self, key, data, **kw):
        seen.append(("put", key))
        return real_put(self, key, data, **kw)

    monkeypatch.setattr(LocalStore, "get", get)
    monkeypatch.setattr(LocalStore, "put", put)
    write_bytes(store, "h/x", b"1")
    assert read_bytes(store, "h/x") == b"1"
    assert seen == [("put", "h/x"), ("get", "h/x")]
    monkeypatch.undo()
    other = LocalStore(tmp_path, fsync=False)
    other.get = lambda key: (seen.append(("inst", key)), real_get(other, key))[1]
    assert read_bytes(other, "h/x") == b"1" and seen[-1] == ("inst", "h/x")


def test_subclass_with_its_own_put_sees_every_write(tmp_path):
    class Puts(LocalStore):
        def __init__(self, root) -> None:
            super().__init__(root, fsync=False)
            self.keys: list[str] = []

        def put(self, key, data, **kw):
            self.keys.append(key)
            return super().put(key, data, **kw)

    store = Puts(tmp_path)
    log = SessionLog(store, "acme", "s2")
    log.append(with_tokens(turns(5, prefix="p")))
    assert any("/log/" in k for k in store.keys)  # the segment went through put


def test_work_objects_written_and_read_without_md5(tmp_path, md5_calls):
    from activities.store_activities import StoreActivities

    store = LocalStore(tmp_path, fsync=True)
    acts = StoreActivities(store)
    key = "t/acme/s/s3/work/x/layers.json"
    acts._put_json(key, {"b": [1, 2], "a": "x" * 2000})
    fresh = StoreActivities(store)  # nothing kept: parsed from the bytes read
    assert fresh._get_json(key) == {"a": "x" * 2000, "b": [1, 2]}
    assert md5_calls == []
