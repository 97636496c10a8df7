"""The Claude Code line's path, round fourteen (issue 17): a short line's brackets are not
counted (a whole JSON object of at most ``2 * depth`` characters cannot nest deeper than
``depth``), a result's content list is made once at its final size, short texts are counted
without ``_count``'s length tests. Whatever the line, the result must be what the slow
readers give: the same objects, the same "too deep" stop, the same block sizes and counts."""

from __future__ import annotations

import random
import sys

import pytest

from compactor import tokens
from compactor.events import ToolResultBlock
from compactor.importers import import_file
from compactor.importers._common import ImportLimits, ParseError, Source, iter_jsonl
from compactor.importers._drafts import Builder
from tests.unit.test_importers_common import _read_before
from tests.unit.test_importers_fast_path import _transcripts


def _nested(k: int, pad: int) -> str:
    """A Claude Code line nesting ``k`` + 1 containers deep (its object and ``k`` lists),
    ``pad`` characters of string in it: lengths on both sides of ``2 * depth``."""
    return '{"a":"' + "x" * pad + '","b":' + "[" * k + "]" * k + "}"


@pytest.mark.parametrize("depth", [8, 9, 12, 40])
def test_short_and_long_nested_lines_are_read_as_loads_reads_them(depth) -> None:
    seen = set()
    for k in range(depth + 3):
        for pad in range(0, 2 * depth + 8, 5):
            line = _nested(k, pad)
            seen.add((len(line) <= 2 * depth, k + 1 > depth))
            b = Builder("claude-code", "k")
            got: list[tuple[int, object]] = []
            try:
                got.extend(iter_jsonl(Source("t", ImportLimits(max_json_depth=depth), data=line.encode()), b))
            except ParseError as exc:
                got.append((exc.details["line"], "too deep"))
            assert [(no, repr(o)) for no, o in got] == [(no, repr(o)) for no, o in _read_before(line, depth)[0]], line
    # both sides of the bound were read: short lines, and long ones too deep
    assert (True, False) in seen and (False, True) in seen


def test_tool_results_hold_a_content_list_of_the_size_validation_gives(tmp_path) -> None:
    paths = _transcripts(tmp_path)
    checked = 0
    for path in paths:
        for count in (False, True):
            events: list = []
            try:
                import_file(path, sink=events.extend, count=count)
            except Exception:  # (a fixture of broken input)
                continue
            for e in events:
                for b in e.blocks:
                    if type(b) is ToolResultBlock:
                        valid = ToolResultBlock(tool_use_id=b.tool_use_id, content=list(b.content), is_error=b.is_error)
                        assert b == valid and b.model_dump_json() == valid.model_dump_json()
                        assert sys.getsizeof(b.content) == sys.getsizeof(valid.content)
                        assert b.model_fields_set == valid.model_fields_set
                        checked += 1
    assert checked > 300


def test_short_texts_count_as_the_tokenizer_counts_them() -> None:
    r = random.Random(7)
    alphabet = "abcXYZ019 \t\n\r'.,:;()[]{}\"-_/\\é€😀\u00a0\u2028"
    texts = ["", " ", "\n", "Checking module 7.", "def f_2(x):\n    return x + 97\n", "x" * tokens.SHORT_TEXT]
    texts += ["".join(r.choice(alphabet) for _ in range(r.randint(1, 80))) for _ in range(3000)]
    enc = tokens.encoding()
    for t in texts:
        assert tokens._count_small(t) == tokens._count(t) == len(enc.encode_ordinary(t)), repr(t)
