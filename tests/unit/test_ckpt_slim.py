"""Views, reports and ``verify`` read a checkpoint without building its lifted state
(``store/ckpt_slim.py``, issue 17: a compacted 300k-event session's checkpoint cost +523 MB to
parse whole): the same checkpoint but ``state``, the same commands' output, the same errors
for documents that do not parse, the same integrity checks."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from pydantic import ValidationError

from compactor.bench.synthetic import synthetic_sessions
from compactor.cli import main
from compactor.engine.compact import compact
from compactor.engine.measure import view_tokens
from compactor.engine.policy import make_policy
from compactor.errors import IntegrityError
from compactor.events import Event
from compactor.importers import import_file
from compactor.records import Checkpoint, SeqRange
from compactor.store import LocalStore, SessionLog, caches, ckpt_slim
from compactor.store.ckpt_slim import parse_slim
from compactor.tokens import with_tokens
from tests.conftest import corpus_files, fixture_sessions


def _kept(full: Checkpoint) -> Checkpoint:
    """What the slim read must give: the full checkpoint with only ``unknown_actions``."""
    state = {"unknown_actions": full.state["unknown_actions"]} if "unknown_actions" in full.state else {}
    return full.model_copy(update={"state": state})


def _outcome(fn, data: bytes):
    try:
        return "ok", fn(data)
    except ValidationError as exc:
        return "error", str(exc)


def _sessions() -> list[tuple[str, list[Event]]]:
    out = [(name.replace("/", "-"), events) for name, events in synthetic_sessions(2, seed=5)]
    out += [(f"fixture-{i}", evs) for i, evs in enumerate(fixture_sessions()) if evs]
    out += [(f"corpus-{i}", import_file(p).events) for i, p in enumerate(corpus_files())]
    return out


def _cli(capsys, tmp_path, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main([*argv, "--store", f"file://{tmp_path / 'store'}", "--tenant", "acme"])
    return rc, capsys.readouterr().out


READERS = (("view",), ("view", "--json"), ("inspect",), ("inspect", "--json"), ("verify", "--json"))


def test_compacted_sessions_read_slim_show_what_the_full_checkpoint_shows(tmp_path, capsys, monkeypatch) -> None:
    """Generated, fixture and corpus sessions compacted: the slim read is the full checkpoint
    but its state, and view, view --json, inspect and verify print the same bytes as with
    the full parse (``slim_json`` refusing everything sends parse_slim to the full parse)."""
    store = LocalStore(tmp_path / "store")
    names = []
    stated = unknown = 0
    for name, events in _sessions():
        log = SessionLog(store, "acme", name)
        for i in range(0, len(events), 40):
            log.append(with_tokens(events[i:i + 40]))
        target = max(1_000, view_tokens(with_tokens(events)) // 5)
        res = compact(log.read_events(), make_policy("default"), target, session=name, tenant="acme")
        if res.checkpoint is None:
            continue
        head = log.head()
        log.write_checkpoint(res.checkpoint)
        for sha in res.artifacts:
            log.put_artifact(res.artifacts[sha])
        log.set_checkpoint(res.checkpoint.id, expected_etag=head.etag, sha256=log.checkpoint_sha256(res.checkpoint.id))
        data = (tmp_path / "store" / f"t/acme/s/{name}/ckpt/{res.checkpoint.id}.json").read_bytes()
        full = Checkpoint.model_validate_json(data)
        assert parse_slim(data) == _kept(full), name
        names.append(name)
        stated += len(full.state) > 1  # a lifted state left out
        unknown += bool(full.state.get("unknown_actions"))
    assert len(names) >= 4 and stated >= 4, (names, stated)
    slim = {(n, argv): _cli(capsys, tmp_path, *argv, n) for n in names for argv in READERS}

    def refuse(_data: bytes) -> bytes:
        raise ckpt_slim._Refused(0)

    monkeypatch.setattr(ckpt_slim, "slim_json", refuse)
    for (n, argv), got in slim.items():
        assert got == _cli(capsys, tmp_path, *argv, n), (n, argv)
        assert got[0] == 0, (n, argv)


def _doc(state: dict | None = None, **extra) -> dict:
    doc = Checkpoint(
        id="ck-1", tenant="acme", session="s", covers=SeqRange(start=1, end=9), summary="sé 漢 \U0001f600",
        sections={"goal": "x"}, replacements={12: [{"type": "text", "text": "[cleared]"}]},
    ).model_dump(mode="json")
    if state is not None:
        doc["state"] = state
    doc.update(extra)
    return doc


STATE = {
    "files_read": [{"path": f"src/é{i}.py", "facts": ["def f(x)", "a \"quoted\" \\ line\n"], "n": i} for i in range(50)],
    "commands": [[1, 2.5, None, True, {"k": []}], "漢字", -3e-7, 10**30],
    "unknown_actions": [{"tool_use_id": "toolu_1", "name": "Bash"}, {"tool_use_id": "t2", "name": "é"}],
    "todos_seq": 4, "goal": {"text": "x"}, "empty": {}, "none": None,
}


@pytest.mark.parametrize("dump", [
    lambda d: json.dumps(d).encode(),
    lambda d: json.dumps(d, ensure_ascii=False).encode(),
    lambda d: json.dumps(d, indent=2, ensure_ascii=False).encode(),
    lambda d: json.dumps(dict(reversed(list(d.items()))), separators=(",", ":")).encode(),
    lambda d: (" \n" + json.dumps(d, indent="\t") + "\r\n ").encode(),
    lambda d: Checkpoint.model_validate(d).model_dump_json().encode(),
])
@pytest.mark.parametrize("state", [STATE, {k: v for k, v in STATE.items() if k != "unknown_actions"}, {}, None])
def test_any_layout_of_a_checkpoint_reads_as_the_full_one_but_the_state(dump, state) -> None:
    data = dump(_doc(state))
    full = Checkpoint.model_validate_json(data)
    slim = parse_slim(data)
    assert slim == _kept(full)
    assert slim.state.get("unknown_actions") == (state or {}).get("unknown_actions")


GOOD = json.dumps(_doc(STATE))


@pytest.mark.parametrize("data", [
    GOOD[:-1].encode(),  # truncated
    GOOD.replace('"n": 7}', '"n": 7,}').encode(),  # a bad item inside the state
    GOOD.replace('"todos_seq": 4', '"todos_seq": 4 5').encode(),
    GOOD.replace('"todos_seq": 4', '"todos_seq": tru').encode(),
    GOOD.replace('"todos_seq": 4', '"todos_seq" 4').encode(),
    GOOD.replace('"todos_seq": 4', 'todos_seq: 4').encode(),
    GOOD.replace('src/\\u00e90.py', 'src/\xe90.py').encode("latin-1", "replace"),  # not UTF-8, inside the state
    json.dumps(_doc({"files_read": [{"path": "a\x01b"}]})).replace("\\u0001", "\x01").encode(),  # control char
    (GOOD + " x").encode(),  # trailing text
    json.dumps(_doc(["not", "an", "object"])).encode(),
    json.dumps({**_doc(), "state": None}).encode(),
    json.dumps(_doc(STATE, covers={"start": 2, "end": 9})).encode(),  # fails the model's own check
    json.dumps(_doc(STATE, id=7)).encode(),
    b"[]",
    b"",
    GOOD.replace('"state": {', '"state": {"todos_seq": 1, "state": {}, "x": ').replace('"summarizer"', '"state": {"a": 1}, "summarizer"', 1).encode(),  # repeated key
    GOOD.replace('"todos_seq": 4', '"todos_seq": 4, "unknown_actions": []').encode(),  # repeated key in the state
    GOOD.replace('"todos_seq": 4', '"todos_seq": NaN').encode(),
    GOOD.replace('"todos_seq": 4', '"todos_seq": "\\ud800"').encode(),  # json takes it, pydantic does not
    GOOD.replace('"todos_seq": 4', '"todos_seq": "\\udc00"').encode(),
    GOOD.replace('"todos_seq": 4', '"todos_seq": "\\ud83d\\ude00"').encode(),  # a pair: the full parse decides
    GOOD.replace('"todos_seq": 4', '"todos_seq": "\\\\ud800"').encode(),  # only looks like one
])
def test_documents_the_walk_refuses_give_what_the_full_parse_gives(data) -> None:
    """Bad JSON anywhere (the state's items included), a state that is not an object, a
    repeated key, a model error: the same error (or the same checkpoint) as a full read."""
    full = _outcome(Checkpoint.model_validate_json, data)
    slim = _outcome(parse_slim, data)
    if full[0] == "ok":
        assert slim[0] == "ok" and slim[1] in (full[1], _kept(full[1]))
    else:
        assert slim == full


def test_the_lifted_state_is_never_built() -> None:
    """A 6 MB state: the full parse allocates several times the document, the slim read about
    one copy of its bytes (its Latin-1 text) and one item at a time."""
    state = {"files_read": [{"path": f"src/mod_{i}.py", "seq": i, "ops": ["read"], "facts": [f"def f_{i}(x)"]}
                            for i in range(60_000)], "unknown_actions": []}
    data = json.dumps(_doc(state)).encode()

    def peak(fn) -> int:
        tracemalloc.start()
        try:
            fn(data)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak(Checkpoint.model_validate_json) > 5 * len(data)
    assert peak(parse_slim) < 1.5 * len(data)


def test_the_store_checks_a_slim_read_as_strictly_and_keeps_it_apart(tmp_path) -> None:
    store = LocalStore(tmp_path / "store")
    log = SessionLog(store, "acme", "s")
    log.append(with_tokens(next(iter(synthetic_sessions(1, seed=3)))[1][:30]))
    ckpt = Checkpoint.model_validate(_doc(STATE, tenant="acme", session="s"))
    log.write_checkpoint(ckpt)
    head = log.set_checkpoint(ckpt.id, expected_etag=log.head().etag)
    fresh = SessionLog(store, "acme", "s")
    slim = fresh.current_checkpoint(slim=True)
    assert slim == _kept(ckpt)
    assert fresh.read_checkpoint(ckpt.id, head.checkpoint_sha256) == ckpt  # not the slim one
    assert SessionLog(store, "acme", "s").read_view() == fresh.read_view(slim=True)
    key = tmp_path / "store" / f"t/acme/s/s/ckpt/{ckpt.id}.json"
    key.write_bytes(key.read_bytes().replace(b"src/", b"SRC/"))  # inside the state
    caches._VERIFIED_CKPTS.clear()  # verified bytes are cached by digest for the process
    with pytest.raises(IntegrityError, match="does not match the sha256"):
        SessionLog(store, "acme", "s").current_checkpoint(slim=True)
    other = Checkpoint.model_validate(_doc(STATE, tenant="acme", session="other"))
    key.write_bytes(other.model_dump_json().encode())
    with pytest.raises(IntegrityError, match="names acme/other/ck-1"):
        SessionLog(store, "acme", "s").read_checkpoint_slim(ckpt.id)
