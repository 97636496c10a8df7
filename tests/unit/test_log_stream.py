"""Reading a huge session segment by segment: ``iter_events`` and ``stream_view`` give what
``read_events`` and ``read_view`` give, without holding the session or filling the cache."""

from __future__ import annotations

import pytest

from compactor.bench.synthetic import synthetic_sessions
from compactor.engine.compact import compact
from compactor.engine.policy import make_policy
from compactor.engine.view import view_text, view_text_parts
from compactor.store import LocalStore, SessionLog
from compactor.store.caches import SegmentCache
from compactor.tokens import with_tokens


def _log(tmp_path, events, name="s") -> SessionLog:
    log = SessionLog(LocalStore(tmp_path / "store"), "acme", name)
    # small appends: many segments, so a view spans several and pinned events sit in old ones
    for i in range(0, len(events), 25):
        log.append(with_tokens(events[i:i + 25]))
    return log


@pytest.mark.parametrize("which", [0, 1])
def test_stream_view_is_read_view_with_and_without_a_checkpoint(tmp_path, which) -> None:
    _, events = list(synthetic_sessions(2, seed=5))[which]
    log = _log(tmp_path, events)
    assert len(log.head().segments) > 2
    assert list(log.iter_events()) == log.read_events()
    assert list(log.iter_events(30, 60)) == log.read_events(30, 60)
    n, it = log.stream_view()
    view = log.read_view()
    assert n == len(view) and list(it) == view

    res = compact(log.read_events(), make_policy("default"), 3_000, session="s", tenant="acme")
    assert res.checkpoint is not None and not res.checkpoint.covers.empty
    head = log.head()
    log.write_checkpoint(res.checkpoint)
    for sha in res.artifacts:
        log.put_artifact(res.artifacts[sha])
    log.set_checkpoint(res.checkpoint.id, expected_etag=head.etag,
                       sha256=log.checkpoint_sha256(res.checkpoint.id))
    fresh = SessionLog(LocalStore(tmp_path / "store"), "acme", "s", cache=SegmentCache())
    view = fresh.read_view()
    n, it = SessionLog(LocalStore(tmp_path / "store"), "acme", "s", cache=SegmentCache()).stream_view()
    streamed = list(it)
    assert n == len(streamed) == len(view)
    assert streamed == view
    assert view[0].kind == "pinned" or view[0].kind == "compaction"
    assert "\n".join(view_text_parts(streamed)) == view_text(view)


def test_iter_events_does_not_fill_the_segment_cache(tmp_path) -> None:
    _, events = next(iter(synthetic_sessions(1, seed=2)))
    _log(tmp_path, events)
    cache = SegmentCache()
    log = SessionLog(LocalStore(tmp_path / "store"), "acme", "s", cache=cache)
    assert len(list(log.iter_events())) == len(events)
    assert cache.get(log.head().segments[0]) is None


def test_verify_reads_segment_by_segment_and_still_finds_a_damaged_one(tmp_path) -> None:
    from compactor.store.verify import verify_session

    _, events = next(iter(synthetic_sessions(1, seed=2)))
    _log(tmp_path, events)
    store = LocalStore(tmp_path / "store")
    cache = SegmentCache()
    log = SessionLog(store, "acme", "s", cache=cache)
    rep = verify_session(log)
    segs = log.head().segments
    assert rep.ok and rep.checked["segments"] == len(segs) > 2
    assert all(cache.get(s) is None for s in segs)  # checked, not kept
    # one segment altered on disk: named, the others still reported clean
    bad = segs[1]
    data, _ = store.get(bad.key)
    (tmp_path / "store" / bad.key).write_bytes(data.replace(b'"text"', b'"texT"', 1))
    rep = verify_session(SessionLog(store, "acme", "s", cache=SegmentCache()))
    assert [f.key for f in rep.problems] == [bad.key]
    assert "sha256" in rep.problems[0].message
