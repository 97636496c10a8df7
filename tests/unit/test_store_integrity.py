"""Tamper evidence on both backends: each edited store object is an IntegrityError naming it,
nothing is written, and ``compactor verify`` reports it; clean and legacy sessions still read."""

from __future__ import annotations

import hashlib
import json
from typing import Callable

import pytest

import compactor.store.log as logmod
from compactor.cli import main
from compactor.errors import IntegrityError
from compactor.events import Event, TextBlock
from compactor.records import Checkpoint, CompactionRecord, SeqRange
from compactor.store import LocalStore, ObjectStore, SessionLog
from compactor.store.verify import verify_session
from tests.unit.store_fixtures import cli_url, cold_process, make_store, store  # noqa: F401 - fixtures

T, S = "acme", "sess"
RULE = "Do not change the public API"


pytestmark = pytest.mark.usefixtures("cold_process")


def ev(i: str) -> Event:
    return Event(id=i, role="user", blocks=[TextBlock(text=f"text of {i}")])


def ckpt(cid: str, end: int) -> Checkpoint:
    return Checkpoint(id=cid, tenant=T, session=S, covers=SeqRange(start=1, end=end),
                      summary=f"{RULE}. Work so far on events 1-{end}.")


def build(store: ObjectStore) -> SessionLog:
    """Events 1-6 in three segments, checkpoint c1 over 1-3 committed and recorded, then more."""
    log = SessionLog(store, T, S, merge=False)
    log.append([ev("a"), ev("b"), ev("c")])
    log.append([ev("d"), ev("e")])
    log.write_checkpoint(ckpt("c1", 3))
    head = log.set_checkpoint("c1", expected_etag=None)
    log.write_record(CompactionRecord(id="run-1", tenant=T, session=S, checkpoint="c1",
                                      checkpoint_sha256=head.checkpoint_sha256, covers=SeqRange(start=1, end=3)))
    log.append([ev("f")])
    logmod._VERIFIED_CKPTS.clear()
    logmod._INDEXES.clear()
    return log


def snapshot(store: ObjectStore) -> dict[str, bytes]:
    return {k: store.get(k)[0] for k in store.list("")}


def remove(store: ObjectStore, key: str) -> None:
    if isinstance(store, LocalStore):
        store._path(key).unlink()
    else:
        store.client.delete_object(Bucket=store.bucket, Key=store._key(key))


def edit_head(store: ObjectStore, change: Callable[[dict], None]) -> str:
    key = f"t/{T}/s/{S}/head.json"
    doc = json.loads(store.get(key)[0])
    change(doc)
    store.put(key, json.dumps(doc).encode())
    return key


def flip(store: ObjectStore, key: str, old: bytes, new: bytes) -> str:
    data = store.get(key)[0]
    assert old in data
    store.put(key, data.replace(old, new, 1))
    return key


def verify_cli(url: str, capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["verify", *extra, "--store", url, "--tenant", T])
    return rc, capsys.readouterr().out


# --- each tampering ----------------------------------------------------------------------------


def version_lower(store):  # the issue's report: 6 -> 4 hides two events
    return edit_head(store, lambda d: d.update(version=4))


def version_higher(store):
    return edit_head(store, lambda d: d.update(version=9))


def segment_file_removed(store):
    key = SessionLog(store, T, S).head().segments[1].key
    remove(store, key)
    return key


def segment_dropped_from_head(store):
    return edit_head(store, lambda d: d["segments"].pop(1))


def checkpoint_byte_flipped(store):
    return flip(store, f"t/{T}/s/{S}/ckpt/c1.json", b"Do not", b"Do now")


def covers_past_version(store):
    """The head points at a genuine checkpoint (digest right) covering more than it holds."""
    log = SessionLog(store, T, S)
    log.write_checkpoint(ckpt("c9", 10))
    data = store.get(f"t/{T}/s/{S}/ckpt/c9.json")[0]
    edit_head(store, lambda d: d.update(checkpoint="c9", checkpoint_sha256=hashlib.sha256(data).hexdigest()))
    return f"t/{T}/s/{S}/head.json"


TAMPERINGS = [version_lower, version_higher, segment_file_removed, segment_dropped_from_head,
              checkpoint_byte_flipped, covers_past_version]


@pytest.mark.parametrize("tamper", TAMPERINGS, ids=lambda f: f.__name__)
def test_tampering_is_refused_naming_the_object_and_nothing_is_written(store, tamper, capsys, cli_url):
    build(store)
    key = tamper(store)
    before = snapshot(store)
    for op in (lambda log: log.read_view(), lambda log: log.append([ev("g")])):
        logmod._VERIFIED_CKPTS.clear()
        with pytest.raises(IntegrityError) as exc:
            op(SessionLog(store, T, S))
        assert exc.value.details["key"] == key and key in str(exc.value)
    assert snapshot(store) == before
    report = verify_session(SessionLog(store, T, S))
    assert not report.ok and key in {f.key for f in report.problems}
    # the CLI (on both stores): one line naming the object, exit 1
    capsys.readouterr()
    # inspect reads no segments (verify does), but never shows a bad head or checkpoint
    for cmd in ("view",) if tamper is segment_file_removed else ("view", "inspect"):
        assert main([cmd, S, "--store", cli_url, "--tenant", T]) == 1
        err = capsys.readouterr().err
        assert key in err and len(err.strip().splitlines()) == 1
    rc, out = verify_cli(cli_url, capsys, S)
    assert rc == 1 and key in out


def test_the_issues_hidden_events_cannot_happen(store):
    """Version edited below the checkpoint: no append lands under it, the view never shrinks."""
    log = build(store)
    assert [e.id for e in log.read_view()][-3:] == ["d", "e", "f"]
    version_lower(store)
    with pytest.raises(IntegrityError):
        SessionLog(store, T, S).append([ev("g"), ev("h")])
    assert not [k for k in store.list(f"t/{T}/s/{S}/log/") if "000000000005-" in k]


def test_record_byte_flipped(store, tmp_path):
    build(store)
    key = flip(store, f"t/{T}/s/{S}/records/run-1.json", b'"covers":{"start":1,"end":3}',
               b'"covers":{"start":1,"end":4}')
    before = snapshot(store)
    with pytest.raises(IntegrityError) as exc:
        SessionLog(store, T, S).list_records()
    assert exc.value.details["key"] == key
    report = verify_session(SessionLog(store, T, S))
    assert [f.key for f in report.problems] == [key]
    assert snapshot(store) == before


def test_a_record_holds_the_checkpoint_digest_a_rollback_verifies(store, capsys, cli_url):
    """Rolling back to an older checkpoint checks it against its record; a flipped byte in it
    is refused (nothing written), an intact one is restored with its digest in the head."""
    log = build(store)
    log.write_checkpoint(ckpt("c2", 5))
    h2 = log.set_checkpoint("c2", expected_etag=None)
    log.write_record(CompactionRecord(id="run-2", tenant=T, session=S, checkpoint="c2",
                                      checkpoint_sha256=h2.checkpoint_sha256))
    url = cli_url
    rc = main(["rollback", S, "--to", "c1", "--store", url, "--tenant", T])
    head = SessionLog(store, T, S).head()
    assert rc == 0 and head.checkpoint == "c1"
    assert head.checkpoint_sha256 == log.recorded_checkpoint_sha256("c1", h2)
    main(["rollback", S, "--to", "c2", "--store", url, "--tenant", T])
    flip(store, f"t/{T}/s/{S}/ckpt/c1.json", b"Do not", b"Do now")
    before = snapshot(store)
    capsys.readouterr()
    rc = main(["rollback", S, "--to", "c1", "--store", url, "--tenant", T])
    err = capsys.readouterr().err
    assert rc == 1 and f"t/{T}/s/{S}/ckpt/c1.json" in err and len(err.strip().splitlines()) == 1
    assert snapshot(store) == before
    # off a damaged current checkpoint is how an operator recovers: allowed
    flip(store, f"t/{T}/s/{S}/ckpt/c2.json", b"Do not", b"Do now")
    assert main(["rollback", S, "--to", "none", "--store", url, "--tenant", T]) == 0
    assert SessionLog(store, T, S).head().checkpoint is None


# --- verify --------------------------------------------------------------------------------------


def test_a_clean_session_verifies(store, capsys, cli_url):
    log = build(store)
    ref = log.put_artifact(b"big tool output " * 400)
    log.write_checkpoint(ckpt("c2", 5).model_copy(update={"artifacts": [ref.sha256]}))
    log.set_checkpoint("c2", expected_etag=None)
    report = verify_session(SessionLog(store, T, S))
    assert report.ok and report.findings == []
    assert report.checked == {"segments": 3, "records": 1, "checkpoints": 2, "artifacts": 1}
    rc, out = verify_cli(cli_url, capsys, S)
    assert rc == 0 and out.rstrip().endswith(": ok")


def test_verify_finds_a_damaged_artifact_and_every_problem_of_a_session(store, capsys, cli_url):
    log = build(store)
    ref = log.put_artifact(b"big tool output " * 400)
    log.write_checkpoint(ckpt("c2", 5).model_copy(update={"artifacts": [ref.sha256]}))
    log.set_checkpoint("c2", expected_etag=None)
    SessionLog(store, T, "other").append([ev("x")])
    art = flip(store, f"t/{T}/a/sha256/{ref.sha256}", b"big", b"BIG")
    old = checkpoint_byte_flipped(store)  # c1: not current, checked against its record
    report = verify_session(SessionLog(store, T, S))
    assert sorted(f.key for f in report.problems) == sorted([art, old])
    rc, out = verify_cli(cli_url, capsys, "--all")
    assert rc == 1 and f"{T}/other" in out and art in out and old in out
    rc, out = verify_cli(cli_url, capsys, "other", "--json")
    assert rc == 0 and json.loads(out)[0]["ok"] is True


def test_a_legacy_head_without_digest_still_reads_and_is_upgraded(store):
    """Heads written before this change: read, reported unverified; the next append adds it."""
    log = build(store)
    view = [e.id for e in log.read_view()]
    edit_head(store, lambda d: d.pop("checkpoint_sha256"))
    for path in store.list(f"t/{T}/s/{S}/records/"):
        doc = json.loads(store.get(path)[0])
        doc.pop("sha256"), doc.pop("checkpoint_sha256")
        store.put(path, json.dumps(doc).encode())
    fresh = SessionLog(store, T, S)
    assert fresh.head().checkpoint_sha256 is None
    assert [e.id for e in fresh.read_view()] == view
    report = verify_session(SessionLog(store, T, S))
    assert report.ok and {f.kind for f in report.findings} == {"note"}
    assert len(report.findings) == 2  # the head's checkpoint and the record: not verified
    fresh.append([ev("g")])
    digest = hashlib.sha256(store.get(f"t/{T}/s/{S}/ckpt/c1.json")[0]).hexdigest()
    assert SessionLog(store, T, S).head().checkpoint_sha256 == digest
