"""Keep conversation text out of activity failures (a worker interceptor).

Why: an activity failure's message, its chained causes and their messages are recorded in
Temporal history in plain text (unless the payload codec is on and encrypts them). Our own
errors are written to name ids, keys, counts and check names only; an unexpected exception
is not (pydantic's ``ValidationError`` quotes the input, a ``KeyError`` its key, a provider
client its response body). So every exception leaving an activity passes here:

* ``ApplicationError``, our typed ``CompactorError`` and I/O errors (which name store keys
  and endpoints) keep their message but lose their chained causes;
* anything else becomes an ``ApplicationError`` of the same type name (so retry policies
  and the workflow branch on it as before) whose message names the activity and says the
  text was withheld; the original, traceback included, goes to the worker log.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from compactor.errors import CompactorError

log = logging.getLogger(__name__)


def _keeps_message(exc: BaseException) -> bool:
    if isinstance(exc, (ApplicationError, CompactorError, OSError)):
        return True
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:  # pragma: no cover - boto3 is a dependency
        return False
    return isinstance(exc, (BotoCoreError, ClientError))


def redact(exc: Exception, where: str) -> Exception:
    """The exception to raise in place of ``exc`` (see the module docstring)."""
    if isinstance(exc, FailureError) and not isinstance(exc, ApplicationError):
        return exc  # cancellation and the like: Temporal's own, no text of ours
    if _keeps_message(exc):
        exc.__cause__ = None
        exc.__suppress_context__ = True
        return exc
    log.warning("activity %s failed (message withheld from history)", where, exc_info=exc)
    return ApplicationError(
        f"{type(exc).__name__} in {where}: message withheld from history (it may quote the "
        "session); see the worker log",
        type=type(exc).__name__,
    )


class _Inbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:  # noqa: A002
        try:
            return await super().execute_activity(input)
        except Exception as exc:
            try:
                where = activity.info().activity_type
            except RuntimeError:  # no activity context (should not happen): name the function
                where = getattr(input.fn, "__name__", "activity")
            out = redact(exc, where)
            if out is exc:
                raise
            raise out from None


class RedactingInterceptor(Interceptor):
    """Worker interceptor applying :func:`redact` to every activity (local ones included)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:  # noqa: A002
        return _Inbound(next)
