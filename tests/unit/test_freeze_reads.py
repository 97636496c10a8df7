"""freeze_snapshot's commit (FreezeInput.commit_as) uses the head and the events freeze read
(``commit_steps.frozen_reads``) instead of reading them again: fewer reads of the session's head,
and the same head, checkpoint, work objects and record as a commit that reads them itself - also
when an append lands between freeze's read and its commit (the head moved: merged as before)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

import activities.freeze_steps as freeze_steps
from activities.store_activities import StoreActivities
from compactor.events import Event, TextBlock
from compactor.store import SessionLog, open_store
from compactor.store.local import LocalStore
from tests.unit.test_commit_record import _stored
from tests.unit.test_freeze_commit import RUN, _freeze_input
from tests.unit.test_store_activities import _env, _session


@contextlib.contextmanager
def _without_frozen_reads(_: Any) -> Any:
    yield  # the commit reads the head and the events itself (the code before this change)


def _count_head_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    for name in ("get", "read"):
        real = getattr(LocalStore, name)

        def counted(self: LocalStore, key: str, _real: Any = real) -> Any:
            if key.endswith("/head.json"):
                reads.append(key)
            return _real(self, key)

        monkeypatch.setattr(LocalStore, name, counted)
    return reads


@pytest.mark.parametrize("second", [False, True])
@pytest.mark.parametrize("append_meanwhile", [False, True])
async def test_freeze_commits_what_a_commit_reading_for_itself_commits(tmp_path, monkeypatch, second, append_meanwhile):
    """Same stored objects (head, checkpoint, work objects, record) and the same commit output
    with and without freeze's reads handed to the commit; with them, the head is read once per
    freeze instead of three times. ``append_meanwhile``: an event appended after freeze read the
    head and before its commit: the head's CAS fails, the commit reads the head and merges, as
    the commit that reads for itself does. ``second``: on top of a checkpoint."""
    results, head_reads = {}, {}
    for mode in ("own reads", "frozen reads"):
        root = tmp_path / mode.replace(" ", "-")
        store, acts = await _session(f"file://{root}", second)
        log = SessionLog(store, "t1", "s1")
        if mode == "own reads":
            monkeypatch.setattr(freeze_steps, "frozen_reads", _without_frozen_reads)
        else:
            monkeypatch.undo()
        if append_meanwhile:
            finish = acts._finish_in_freeze

            def finish_then_append(*a: Any, _finish: Any = finish, _log: SessionLog = log) -> Any:
                out = _finish(*a)
                _log.append([Event(id="meanwhile", role="user", blocks=[TextBlock(text="one more thing")])])
                return out

            acts._finish_in_freeze = finish_then_append  # type: ignore[method-assign]
        reads = _count_head_reads(monkeypatch)
        snap = await _env(RUN).run(acts.freeze_snapshot, _freeze_input(commit=True))
        head_reads[mode] = len(reads)
        monkeypatch.undo()
        out = snap.committed
        assert out is not None
        assert out.commit.conflicts_merged == (1 if append_meanwhile else 0)
        head = log.head()
        assert head.checkpoint == out.commit.checkpoint_id and head.checkpoint_run == RUN
        if append_meanwhile:
            assert head.version == snap.version + 1 and log.read_events()[-1].id == "meanwhile"
        results[mode] = (out.commit.model_dump(exclude={"ms"}), _stored(root))
    assert results["own reads"] == results["frozen reads"]
    if append_meanwhile:  # freeze's, the failed CAS's check, the commit's after it
        assert head_reads["frozen reads"] < head_reads["own reads"]
    else:
        assert head_reads == {"own reads": 3, "frozen reads": 1}


async def test_frozen_reads_of_another_snapshot_are_not_used(tmp_path):
    """A commit of a snapshot other than the one freeze read (another session, another head)
    reads for itself."""
    from activities.commit_steps import _FROZEN, FrozenReads, frozen_reads
    from activities.contracts import SnapshotRef

    store = open_store(f"file://{tmp_path}")
    log = SessionLog(store, "t1", "s1")
    log.append([Event(id="a", role="user", blocks=[TextBlock(text="hi")])])
    head = log.head()
    snap = SnapshotRef(tenant="t1", session="s1", version=head.version, etag=head.etag)
    read = FrozenReads("t1", "s1", head, ())
    assert read.of(snap)
    assert not read.of(snap.model_copy(update={"session": "s2"}))
    assert not read.of(snap.model_copy(update={"etag": "other"}))
    assert not read.of(snap.model_copy(update={"version": head.version + 1}))
    with frozen_reads(read):
        assert _FROZEN.get() is read
    assert _FROZEN.get() is None
    with frozen_reads(None):
        assert _FROZEN.get() is None
    assert StoreActivities  # (the activities module imports frozen_reads from commit_steps)
