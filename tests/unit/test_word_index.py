"""The validator's words as sorted hashes (``engine.word_index``, issue 17, memory) answer as the
set of the words did: every whole word of the texts is found, and nothing is found that the
texts do not hold - also when every word shares its hash's bits with others (a collision is
checked against the text) - so ``unknown_identifier`` rejects and accepts the same summaries."""

from __future__ import annotations

import functools
import random
import tracemalloc

import pytest

from compactor.bench.synthetic import synthetic_sessions
from compactor.engine import covered_text
from compactor.engine.covered_text import CoveredText
from compactor.engine.identifiers import _block_texts, _result_texts
from compactor.engine.word_index import WordIndex, piece_size
from compactor.events import Event
from tests.conftest import corpus_files, fixture_sessions


def _sessions() -> list[list[Event]]:
    from compactor.importers import import_file

    out = [evs for _, evs in synthetic_sessions(3, seed=23)]
    out += fixture_sessions()[:8]
    out += [import_file(p).events for p in corpus_files()[:4]]
    return out


def _pieces(texts: list[str], size: int) -> list[str]:
    return ["\n".join(texts[i:i + size]) for i in range(0, len(texts), size)]


def _probes(texts: list[str], rnd: random.Random) -> list[str]:
    """Whole words, parts of words, runs across words, and strings held nowhere."""
    joined = "\n".join(texts)
    probes = joined.split()
    for _ in range(300):
        if not joined:
            break
        i = rnd.randrange(len(joined))
        probe = joined[i:i + rnd.randint(1, 20)].split("\n")[0]
        if probe:
            probes.append(probe)
    probes += [w + "x" for w in probes[:200]] + ["src/never_seen_anywhere.py", "toolu_0000deadbeef", ""]
    return probes


@pytest.mark.parametrize("hash_bits", [None, 2, 1])
def test_every_word_is_found_and_nothing_the_texts_lack(hash_bits: int | None) -> None:
    """``hash_bits`` 1-2: every word shares its key's hash bits with a quarter to a half of the
    others, so nearly every lookup meets another word's keys first."""
    rnd = random.Random(5)
    checked = words_found = 0
    for events in _sessions():
        texts = [t for e in events for b in e.blocks for t in _block_texts(b)]
        for size in (1, 7, piece_size(len(texts))):
            pieces = _pieces(texts, size)
            index = WordIndex(pieces, hash_bits=hash_bits)
            words = {w for p in pieces for w in p.split()}
            for probe in _probes(texts, rnd):
                got = probe in index
                if probe in words:
                    assert got, probe
                    words_found += 1
                else:  # (found: a piece holds it, e.g. within a word; the caller's answer too)
                    assert not got or any(probe in p for p in pieces), probe
                checked += 1
    assert checked > 5000 and words_found > 2000


def test_a_word_of_many_pieces_and_a_hash_shared_by_all() -> None:
    # 3,000 pieces (13 bits of piece number: wider keys), a word repeated in every tenth one
    pieces = [f"text {k} id_{k}" + (" common" if k % 10 == 9 else "") for k in range(3000)]
    for bits in (None, 1):
        index = WordIndex(pieces, hash_bits=bits)
        assert all(f"id_{k}" in index for k in range(0, 3000, 7))
        assert "common" in index and "text" in index
        assert "id_3000" not in index and "commons" not in index and "id_1 text" not in index
        if bits is None:  # (with one bit "commo" may share common's: held within a word, found)
            assert "commo" not in index
        assert 1 not in index  # (not a str: no word)
    assert len(WordIndex(pieces)) <= 3000 * 3 + 300  # (a word once per piece it is in, at most)


@pytest.mark.parametrize("hash_bits", [None, 1])
def test_occurs_gives_the_full_searchs_verdict(monkeypatch: pytest.MonkeyPatch, hash_bits: int | None) -> None:
    """``CoveredText.occurs`` and ``occurs_in_calls`` as a search of every text joined."""
    monkeypatch.setattr(covered_text, "WordIndex", functools.partial(WordIndex, hash_bits=hash_bits))
    rnd = random.Random(11)
    compared = 0
    for events in _sessions():
        texts = [t for e in events for b in e.blocks for t in _block_texts(b)]
        haystack = "\n".join(texts)
        bulk = "\n".join(t for e in events for r in e.tool_results for t in _result_texts(r))
        index, fresh = CoveredText(events), CoveredText(events)
        for probe in _probes(texts, rnd)[:1500]:
            if "\n" in probe:
                continue
            want = probe in haystack or probe in bulk
            assert index.occurs(probe) is want, probe
            assert fresh.occurs_in_calls(probe) in ((False, True) if want else (False,)), probe
            compared += 1
    assert compared > 3000


def test_the_index_holds_a_fraction_of_the_words_set() -> None:
    """The words' memory through the ladder: 4 bytes a key, not a string and a set's slot."""
    rnd = random.Random(3)
    texts = [" ".join(f"w{rnd.getrandbits(40):x}/{i}" for _ in range(5)) for i in range(20_000)]
    pieces = _pieces(texts, piece_size(len(texts)))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        index = WordIndex(pieces)
        held = tracemalloc.get_traced_memory()[0] - before
        before = tracemalloc.get_traced_memory()[0]
        words = {w for p in pieces for w in p.split()}
        as_set = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(words) == 100_000 and len(index) > 99_900  # (two words of a piece may share a key)
    assert held < as_set / 10
