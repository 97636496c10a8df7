"""Ids, digests and parse errors shared by the store's modules (pure: no I/O).

Every id that becomes part of a key (tenant, session, checkpoint, record) is validated here
before any I/O; stored JSON that fails to parse is described without quoting it.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone

from pydantic import ValidationError

from compactor.errors import InvalidId

ID_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")  # used with fullmatch ($ allows a final \n)
HEX64 = re.compile(r"[0-9a-f]{64}")


def parse_problem(exc: Exception) -> str:
    """Where and why stored JSON failed to parse, without the offending value.

    pydantic's own message quotes the input (``input_value=...``), which for a segment or a
    checkpoint is conversation text; this message reaches Temporal history, the text may not.
    """
    if isinstance(exc, ValidationError):
        errs = exc.errors(include_input=False, include_url=False)
        first = errs[0] if errs else {}
        loc = ".".join(str(p) for p in first.get("loc", ())) or "(document)"
        more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
        return f"{loc}: {first.get('type', 'invalid')}{more}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON (line {exc.lineno} column {exc.colno})"
    return type(exc).__name__


def validate_id(value: str, what: str) -> str:
    """Check a tenant/session/checkpoint/record id; raise InvalidId (before any I/O)."""
    if not isinstance(value, str) or not ID_RE.fullmatch(value) or ".." in value or value == ".":
        raise InvalidId(
            f"invalid {what} {value!r}: use 1-128 characters from A-Z a-z 0-9 . _ - "
            f"(no '/', no '..')",
            what=what,
            value=value,
        )
    return value


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


__all__ = ["HEX64", "ID_RE", "parse_problem", "sha256_hex", "utc_now", "validate_id"]
