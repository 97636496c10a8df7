"""The tests' S3 (``compactor.testing.moto_s3``): moto's app with its writes one at a time, so a
conditional write is checked and made with no other write between, as on S3; reads overlap."""

from __future__ import annotations

import threading
import time
from typing import Any

from compactor.testing.moto_s3 import WritesOneAtATime
from tests.unit.store_fixtures import make_store  # noqa: F401 - the fixture


def _run(app: WritesOneAtATime, method: str, n: int) -> list[bytes]:
    out: list[bytes] = []

    def call() -> None:
        out.append(b"".join(app({"REQUEST_METHOD": method}, lambda status, headers: None)))

    threads = [threading.Thread(target=call) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_writes_run_one_at_a_time_and_reads_do_not_wait() -> None:
    lock = threading.Lock()
    active = {"n": 0}
    peak: dict[str, int] = {}

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        m = environ["REQUEST_METHOD"]
        with lock:
            active["n"] += 1
            peak[m] = max(peak.get(m, 0), active["n"])
        time.sleep(0.05)
        with lock:
            active["n"] -= 1
        start_response("200 OK", [])
        return [b"o", b"k"]

    wrapped = WritesOneAtATime(app)
    for method in ("PUT", "POST", "DELETE"):
        assert _run(wrapped, method, 6) == [b"ok"] * 6
        assert peak[method] == 1, f"{method} requests overlapped"
    _run(wrapped, "GET", 6)
    assert peak["GET"] > 1  # reads are not serialized


def test_a_conditional_put_race_has_one_winner(make_store) -> None:
    """Eight writers put the same key with the etag they all read: S3 lets exactly one win."""
    from compactor.errors import PreconditionFailed

    make_store().put("k", b"0")
    _, etag = make_store().get("k")
    barrier = threading.Barrier(8)
    won: list[int] = []

    def writer(i: int) -> None:
        store = make_store()
        barrier.wait()
        try:  # (contents all differ: an etag is the content's MD5, so a rewrite of the same bytes keeps it)
            store.put("k", f"{rnd}-{i}".encode(), if_match=etag)
            won.append(i)
        except PreconditionFailed:
            pass

    for rnd in range(20):
        won.clear()
        _, etag = make_store().get("k")
        threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1, won
