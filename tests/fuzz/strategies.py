"""Hypothesis strategies shared by the fuzz tests: JSON values, mutations of real files."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40),
    st.sampled_from(["", "user", "assistant", "tool", "system", "tool_use", "tool_result", "text",
                     "message", "function_call", "\x1b[2J", "../../etc/passwd", "a" * 300]),
)
JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=12)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


def _replace(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        return {k: (_replace(v, rest, value) if k == head else v) for k, v in doc.items()}
    return [(_replace(v, rest, value) if i == head else v) for i, v in enumerate(doc)]


@st.composite
def perturbed_json(draw: Any, doc: Any, max_edits: int = 4) -> Any:
    """``doc`` with a few nodes replaced by arbitrary JSON values (or removed from a dict)."""
    for _ in range(draw(st.integers(1, max_edits))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        doc = _replace(doc, path, draw(JSON))
    return doc


@st.composite
def mutated_bytes(draw: Any, data: bytes) -> bytes:
    """Byte-level damage: truncation, flipped bytes, inserted junk."""
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["truncate", "flip", "insert"]))
        pos = draw(st.integers(0, max(0, len(b) - 1)))
        if op == "truncate":
            del b[pos:]
        elif op == "flip" and b:
            b[pos] = draw(st.integers(0, 255))
        else:
            b[pos:pos] = draw(st.binary(min_size=1, max_size=8))
    return bytes(b)


def dumps_like(original: bytes, doc: Any) -> bytes:
    """``doc`` serialized the way ``original`` was: JSON lines or one document."""
    if isinstance(doc, list) and original.lstrip()[:1] != b"[":
        return b"\n".join(json.dumps(x).encode() for x in doc) + b"\n"
    return json.dumps(doc).encode()


def load_like(data: bytes) -> Any:
    """A fixture as JSON: one document, or a list of its lines (JSON lines)."""
    try:
        return json.loads(data)
    except ValueError:
        return [json.loads(line) for line in data.splitlines() if line.strip()]
