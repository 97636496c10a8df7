"""Activity failures keep conversation text out of Temporal history (workers/redaction.py)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError
from temporalio.exceptions import ApplicationError

from compactor.errors import IntegrityError
from compactor.store.ids import parse_problem
from workers.redaction import redact

SECRET = "ZQX-SECRET-7731"


class _M(BaseModel):
    n: int


def _validation_error() -> ValidationError:
    with pytest.raises(ValidationError) as info:
        _M.model_validate({"n": f"text from the session: {SECRET}"})
    return info.value


def test_unexpected_exceptions_lose_their_text_but_keep_their_type():
    out = redact(_validation_error(), "lift_state")
    assert isinstance(out, ApplicationError)
    assert out.type == "ValidationError" and not out.non_retryable  # retry policies see the same type
    assert SECRET not in out.message and "lift_state" in out.message


def test_our_errors_keep_their_message_but_not_their_cause():
    err = IntegrityError("segment 't/a/s/b/log/1.jsonl' does not match its sha256")
    try:
        raise err from KeyError(SECRET)
    except IntegrityError as caught:
        out = redact(caught, "freeze_snapshot")
    assert out is err and out.__cause__ is None and out.__suppress_context__


def test_parse_problems_name_the_field_not_the_value():
    text = parse_problem(_validation_error())
    assert text.startswith("n: ") and SECRET not in text
