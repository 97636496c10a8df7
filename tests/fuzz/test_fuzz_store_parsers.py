"""Fuzz the stored-object parsers: head, checkpoint, record and segment bytes as found in a
store (reshaped from real ones, or damaged byte by byte).

Reading a session then either works or raises our typed errors (IntegrityError, NotFound,
InvalidInput), never anything else; ``verify`` reports instead of raising; and nothing of
another tenant is ever read (every key read lies under the session's prefixes).
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

import compactor.store.log as logmod
from compactor import operator
from compactor.errors import CompactorError
from compactor.events import Event, TextBlock
from compactor.records import Checkpoint, CompactionRecord, SeqRange
from compactor.store import LocalStore, SessionLog
from compactor.store.verify import verify_session
from tests.fuzz.strategies import mutated_bytes, perturbed_json

T, S = "acme", "s"


class Recording(LocalStore):
    """A LocalStore that remembers every key read."""

    def __init__(self, root) -> None:
        super().__init__(root, fsync=False)
        self.read: list[str] = []

    def get(self, key):
        self.read.append(key)
        return super().get(key)


def build(root) -> tuple[Recording, dict[str, bytes]]:
    store = Recording(root)
    other = SessionLog(store, "other", "x")
    other.append([Event(id="o1", role="user", blocks=[TextBlock(text="other tenant")])])
    log = SessionLog(store, T, S, merge=False)
    log.append([Event(id=f"e{i}", role="user" if i % 2 else "assistant",
                      blocks=[TextBlock(text=f"text {i}")]) for i in range(1, 5)])
    log.append([Event(id="e5", role="user", blocks=[TextBlock(text="five")], kind="pinned")])
    log.write_checkpoint(Checkpoint(id="c1", tenant=T, session=S, covers=SeqRange(start=1, end=3), summary="sum"))
    head = log.set_checkpoint("c1", expected_etag=None)
    log.write_record(CompactionRecord(id="r1", tenant=T, session=S, checkpoint="c1",
                                      checkpoint_sha256=head.checkpoint_sha256))
    keys = [k for k in store.list(f"t/{T}/") if not k.endswith("/")]
    return store, {k: store.get(k)[0] for k in keys}


def read_everything(store: Recording) -> None:
    logmod._VERIFIED_CKPTS.clear()
    logmod._INDEXES.clear()
    store.read.clear()
    log = SessionLog(store, T, S)
    for op in (log.head, log.read_view, log.read_events, log.list_records, log.list_checkpoints,
               lambda: operator.inspect_session(log), lambda: operator.checkpoint_diff(log)):
        try:
            op()
        except CompactorError:
            pass
    verify_session(log)  # reports, never raises (but NotFound for a missing head)
    foreign = [k for k in store.read if not (k.startswith(f"t/{T}/s/{S}/") or k.startswith(f"t/{T}/a/"))]
    assert not foreign, foreign


def target(objects: dict[str, bytes]):
    return st.sampled_from(sorted(objects))


@given(data=st.data())
def test_reshaped_objects(tmp_path_factory, data):
    store, objects = build(tmp_path_factory.mktemp("p"))
    key = data.draw(target(objects).filter(lambda k: not k.endswith(".jsonl")))
    doc = data.draw(perturbed_json(json.loads(objects[key])))
    store.put(key, json.dumps(doc).encode())
    read_everything(store)


@given(data=st.data())
def test_damaged_objects(tmp_path_factory, data):
    store, objects = build(tmp_path_factory.mktemp("p"))
    key = data.draw(target(objects))
    store.put(key, data.draw(mutated_bytes(objects[key])))
    read_everything(store)


@given(data=st.data(), key=st.sampled_from(["t/other/s/x/log/000000000001-000000000001.jsonl",
                                              "t/acme/s/s/../../../other/s/x/head.json",
                                              "t/acme/s/s/log/../../x/log/a.jsonl", "/etc/passwd", ""]))
def test_heads_naming_foreign_keys(tmp_path_factory, data, key):
    store, objects = build(tmp_path_factory.mktemp("p"))
    head_key = f"t/{T}/s/{S}/head.json"
    doc = json.loads(objects[head_key])
    i = data.draw(st.integers(0, len(doc["segments"]) - 1))
    doc["segments"][i]["key"] = key
    store.put(head_key, json.dumps(doc).encode())
    read_everything(store)
