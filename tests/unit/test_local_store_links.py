"""The local store never follows a symbolic link below its root, on read or write.

Each case is a link an attacker (or a careless restore) could plant inside the store: a tenant
directory, a session's log directory, the head file, the store's own temp directory. Writes
through it are refused and land nowhere outside; reads through it are refused; ``verify``
names the link; nothing outside the root changes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from compactor.cli import main
from compactor.errors import IntegrityError, InvalidId
from compactor.events import Event, TextBlock
from compactor.store import LocalStore, SessionLog
from compactor.store.verify import verify_session


def ev(i: str, text: str = "text") -> Event:
    return Event(id=i, role="user", blocks=[TextBlock(text=f"{text} {i}")])


def tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture
def stores(tmp_path):
    root, outside = tmp_path / "store", tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("outside the store")
    store = LocalStore(root)
    SessionLog(store, "acme", "mine").append([ev("a"), ev("b")])
    return store, root, outside


def test_a_linked_tenant_directory_is_not_written_through(stores):
    store, root, outside = stores
    os.symlink(outside, root / "t" / "evil")
    before = tree(outside)
    with pytest.raises(IntegrityError) as exc:
        SessionLog(store, "evil", "s").append([ev("x")])
    assert "symbolic link" in str(exc.value) and exc.value.details["key"] == "t/evil"
    with pytest.raises(IntegrityError):
        store.put("t/evil/s/s/head.json", b"{}")
    assert tree(outside) == before


def test_a_linked_log_directory_is_not_written_through(stores):
    store, root, outside = stores
    log_dir = root / "t/acme/s/mine/log"
    for p in log_dir.iterdir():
        p.unlink()
    log_dir.rmdir()
    os.symlink(outside, log_dir)
    before = tree(outside)
    with pytest.raises(IntegrityError):
        SessionLog(store, "acme", "mine").append([ev("c")])
    assert tree(outside) == before


def test_a_linked_head_is_not_read_or_replaced(stores):
    store, root, outside = stores
    head = root / "t/acme/s/mine/head.json"
    target = outside / "head.json"
    target.write_bytes(head.read_bytes())
    head.unlink()
    os.symlink(target, head)
    before = tree(outside)
    log = SessionLog(store, "acme", "mine")
    for op in (log.head, log.read_view, lambda: log.append([ev("c")])):
        with pytest.raises(IntegrityError) as exc:
            op()
        assert "symbolic link" in str(exc.value)
    assert tree(outside) == before and head.is_symlink()


def test_a_linked_temp_directory_is_refused(stores, tmp_path):
    store, root, outside = stores
    (root / ".tmp").rmdir()
    os.symlink(outside, root / ".tmp")
    before = tree(outside)
    fresh = LocalStore(root)
    with pytest.raises(IntegrityError):
        fresh.put("t/acme/s/other/x.json", b"data")
    assert tree(outside) == before


def test_listing_through_a_linked_directory_is_refused(stores):
    store, root, outside = stores
    os.symlink(outside, root / "t" / "evil")
    with pytest.raises(IntegrityError):
        store.list("t/evil/s/")
    with pytest.raises(IntegrityError):
        store.list_children("t/evil/s/")


def test_verify_reports_links(stores, capsys):
    store, root, outside = stores
    seg = next((root / "t/acme/s/mine/log").iterdir())
    copy = outside / seg.name
    copy.write_bytes(seg.read_bytes())
    seg.unlink()
    os.symlink(copy, seg)  # same bytes, same digest: only the link is wrong
    rep = verify_session(SessionLog(store, "acme", "mine"))
    link_key = f"t/acme/s/mine/log/{seg.name}"
    assert [f.key for f in rep.problems] == [link_key]  # once: the refused read does not say it again
    capsys.readouterr()
    rc = main(["verify", "mine", "--tenant", "acme", "--store", f"file://{root}"])
    out = capsys.readouterr().out
    assert rc == 1 and "symbolic link" in out and link_key in out


def test_a_linked_session_directory_is_reported_by_verify(stores, capsys):
    store, root, outside = stores
    os.symlink(root / "t/acme/s/mine", root / "t/acme/s/alias")
    capsys.readouterr()
    rc = main(["verify", "alias", "--tenant", "acme", "--store", f"file://{root}"])
    out = capsys.readouterr().out
    assert rc == 1 and "t/acme/s/alias" in out and "symbolic link" in out


def test_keys_stay_under_the_root():
    store = LocalStore("/nonexistent-root-for-test")
    for key in ("../x", "a/../../x", "/etc/passwd", "a//b", "a\\b", ".tmp/x", ".locks/01.lock"):
        with pytest.raises(InvalidId):
            store.get(key)


def test_a_planted_fifo_does_not_hang_a_read(stores):
    store, root, _ = stores
    head = root / "t/acme/s/mine/head.json"
    head.unlink()
    os.mkfifo(head)
    assert store.head("t/acme/s/mine/head.json") is None  # not a regular file: not an object
