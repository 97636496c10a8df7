"""One contract suite for every ObjectStore backend: local directory and S3 (moto_server)."""

from __future__ import annotations

import multiprocessing
import threading

import pytest

from compactor.errors import InvalidId, NotFound, PreconditionFailed
from compactor.store import LocalStore, ObjectStore, open_store
from compactor.store.s3 import S3Store


@pytest.fixture(params=["local", "s3"])
def make_store(request, tmp_path):
    """A factory of independent store objects (own client each) on one fresh location."""
    if request.param == "local":
        return lambda: LocalStore(tmp_path / "store")
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("s3_bucket")
    return lambda: S3Store(bucket, "pre/fix", endpoint_url=endpoint)


@pytest.fixture
def store(make_store) -> ObjectStore:
    return make_store()


def test_is_an_object_store(store):
    assert isinstance(store, ObjectStore)


def test_get_and_head_of_a_missing_key(store):
    with pytest.raises(NotFound):
        store.get("a/missing.json")
    assert store.head("a/missing.json") is None


def test_put_get_head_round_trip_binary(store):
    data = bytes(range(256)) * 3
    etag = store.put("a/b/c.bin", data)
    got, got_etag = store.get("a/b/c.bin")
    assert got == data
    assert got_etag == etag == store.head("a/b/c.bin")


def test_overwrite_changes_etag_and_same_bytes_keep_it(store):
    e1 = store.put("k", b"one")
    e2 = store.put("k", b"two")
    assert e1 != e2
    assert store.get("k")[0] == b"two"
    assert store.put("k", b"two") == e2  # content-derived etag, like S3


def test_if_none_match_creates_once(store):
    store.put("obj", b"first", if_none_match=True)
    with pytest.raises(PreconditionFailed):
        store.put("obj", b"second", if_none_match=True)
    assert store.get("obj")[0] == b"first"


def test_if_match_swaps_only_the_expected_version(store):
    e1 = store.put("head", b"v1", if_none_match=True)
    e2 = store.put("head", b"v2", if_match=e1)
    with pytest.raises(PreconditionFailed):
        store.put("head", b"v3", if_match=e1)  # stale etag
    assert store.get("head") == (b"v2", e2)


def test_if_match_on_a_missing_key_fails(store):
    e = store.put("x", b"data")
    with pytest.raises(PreconditionFailed):
        store.put("absent", b"data", if_match=e)
    assert store.head("absent") is None


def test_list_by_prefix_sorted(store):
    for k in ["t/a/s/2/head.json", "t/a/s/1/log/1.jsonl", "t/a/s/1/head.json", "t/b/s/1/head.json"]:
        store.put(k, b"x")
    assert store.list("t/a/") == ["t/a/s/1/head.json", "t/a/s/1/log/1.jsonl", "t/a/s/2/head.json"]
    assert store.list("t/a/s/1/h") == ["t/a/s/1/head.json"]
    assert store.list("t/c/") == []
    assert len(store.list("")) == 4


@pytest.mark.parametrize("key", ["../escape", "/abs", "a//b", "a/./b", "a/../../b", ""])
def test_keys_that_escape_are_rejected(store, key):
    with pytest.raises(InvalidId):
        store.put(key, b"x")
    with pytest.raises(InvalidId):
        store.get(key)


def _cas_increment(store: ObjectStore, key: str, n: int) -> int:
    """Add 1 to a counter n times with CAS; returns the number of lost CAS rounds."""
    lost = 0
    for _ in range(n):
        while True:
            data, etag = store.get(key)
            try:
                store.put(key, str(int(data) + 1).encode(), if_match=etag)
                break
            except PreconditionFailed:
                lost += 1
    return lost


def test_concurrent_cas_loses_no_update(make_store):
    """8 writers, each its own client, hammer one key: every increment survives."""
    make_store().put("counter", b"0")
    writers, per = 8, 25
    lost: list[int] = []

    def run() -> None:
        lost.append(_cas_increment(make_store(), "counter", per))

    threads = [threading.Thread(target=run) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert int(make_store().get("counter")[0]) == writers * per
    assert sum(lost) > 0  # the writers really did race


def _proc_increment(root: str, n: int) -> None:
    _cas_increment(LocalStore(root), "counter", n)


def test_local_cas_is_safe_across_processes(tmp_path):
    root = str(tmp_path / "store")
    LocalStore(root).put("counter", b"0")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_proc_increment, args=(root, 40)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert LocalStore(root).get("counter")[0] == b"160"


def test_local_store_hides_its_own_bookkeeping(tmp_path):
    store = LocalStore(tmp_path)
    store.put("a", b"1")
    assert store.list("") == ["a"]
    with pytest.raises(InvalidId):
        store.put(".locks/00.lock", b"x")


def test_open_store_urls(tmp_path, monkeypatch):
    assert isinstance(open_store(f"file://{tmp_path}/x"), LocalStore)
    assert isinstance(open_store(str(tmp_path / "y")), LocalStore)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    s3 = open_store("s3://bucket/some/prefix")
    assert isinstance(s3, S3Store)
    assert (s3.bucket, s3.prefix, s3.endpoint_url) == ("bucket", "some/prefix", "http://127.0.0.1:1")
    from compactor.errors import InvalidInput

    with pytest.raises(InvalidInput):
        open_store("ftp://host/x")


def test_unreachable_s3_endpoint_is_a_typed_error(monkeypatch):
    from compactor.errors import StoreUnavailable

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    store = S3Store("bucket", endpoint_url="http://127.0.0.1:9", max_attempts=1)
    with pytest.raises(StoreUnavailable):
        store.get("k")
    with pytest.raises(StoreUnavailable):
        store.put("k", b"x", if_none_match=True)


def test_list_info_and_delete(store):
    """gc's two primitives: sizes and write times by prefix; delete, idempotent."""
    import time

    t0 = time.time()
    store.put("t/a/s/1/log/x.jsonl", b"12345")
    store.put("t/a/s/1/head.json", b"{}")
    store.put("t/ab/s/1/head.json", b"{}")
    infos = store.list_info("t/a/")
    assert [(i.key, i.size) for i in infos] == [("t/a/s/1/head.json", 2), ("t/a/s/1/log/x.jsonl", 5)]
    assert all(abs(i.modified - t0) < 120 for i in infos)
    store.delete("t/a/s/1/log/x.jsonl")
    store.delete("t/a/s/1/log/x.jsonl")  # absent: not an error
    assert store.list("t/a/") == ["t/a/s/1/head.json"] and store.head("t/a/s/1/log/x.jsonl") is None
    store.put("t/a/s/1/log/x.jsonl", b"again", if_none_match=True)  # a deleted key can be created again
    assert store.get("t/a/s/1/log/x.jsonl")[0] == b"again"


def test_delete_many_in_batches(store):
    from compactor.store.gc import delete_all

    keys = [f"t/a/s/1/work/{i:04d}.json" for i in range(7)]
    for k in keys:
        store.put(k, b"x")
    store.put("t/a/s/1/head.json", b"{}")
    if isinstance(store, S3Store):
        store.delete_many(keys[:5] + ["t/a/s/1/absent.json"], batch=2)  # 3 requests, one absent key
    delete_all(store, keys)
    assert store.list("t/a/") == ["t/a/s/1/head.json"]
