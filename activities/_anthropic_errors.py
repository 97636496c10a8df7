"""One place that turns Anthropic client failures into Temporal ``ApplicationError``s.

Why: the client runs with ``max_retries=0`` so that Temporal owns every retry and each
attempt is visible in the workflow history. That only works if each failure is classified
once, consistently: transient ones (408, 409, 429, 5xx, 529 overloaded, timeouts, dropped
connections, a stream cut off mid-way) are retryable and carry the provider's
``retry-after`` as ``next_retry_delay``; everything else the provider rejects (other 4xx) is
non-retryable with the API's own message, so the workflow falls back at once instead of
burning attempts. Prompt-too-long is handled before this, inside the activity (shrink and
retry); when it still reaches here the shrinking ran out and it is non-retryable.

Messages carry the status, the API's error type and the request id, never request headers
(the API key lives only in the client). They reach Temporal history, so the API's own message
is kept only for error types that describe the account or the service (authentication,
permission, not found, rate limit, overload) and for prompt-too-long (re-rendered from its
numbers); an ``invalid_request_error`` or ``api_error`` message may quote the request, i.e. the
conversation, so it stays out of history and out of the worker log, which gets its length
(:func:`provider_message`) beside the status and request id.
Exceptions and their text are never chained (``from None``) for the same reason.
"""

from __future__ import annotations

import email.utils
import time
from datetime import timedelta
from typing import Any

import anthropic
import httpx2
from temporalio.exceptions import ApplicationError

from activities.contracts import ErrorType

RETRYABLE_STATUS = frozenset({408, 409, 429})
RETRYABLE_ERROR_TYPES = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error", "gateway_timeout_error"}
)
SAFE_MESSAGE_TYPES = frozenset(
    {"authentication_error", "permission_error", "not_found_error", "rate_limit_error",
     "overloaded_error", "billing_error"}
)
"""API error types whose message describes the account or the service, never the request."""
MAX_RETRY_DELAY = timedelta(minutes=10)
"""Cap on a provider-requested delay (a bogus header must not park a workflow for days)."""


class ProviderErrorType:
    """``ApplicationError.type`` of provider failures. Non-retryable ones use
    ``ErrorType.SUMMARIZER_FAILED`` so the workflow's retry policy stops on them too."""

    RATE_LIMITED = "ProviderRateLimited"
    OVERLOADED = "ProviderOverloaded"
    UNAVAILABLE = "ProviderUnavailable"
    TIMEOUT = "ProviderTimeout"
    CONNECTION = "ProviderConnection"
    STREAM_INCOMPLETE = "ProviderStreamIncomplete"
    REJECTED = str(ErrorType.SUMMARIZER_FAILED)


class StreamIncomplete(Exception):
    """The stream ended without ``message_stop`` (connection closed cleanly mid-message)."""


def retry_after(headers: Any) -> timedelta | None:
    """The provider's requested delay: ``retry-after-ms``, ``retry-after`` seconds or date."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return _cap(float(ms) / 1000.0)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return _cap(float(ra))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(ra)
    if parsed is None:
        return None
    return _cap(email.utils.mktime_tz(parsed) - time.time())


def _cap(seconds: float) -> timedelta | None:
    if seconds <= 0:
        return None
    return min(timedelta(seconds=seconds), MAX_RETRY_DELAY)


def to_application_error(exc: BaseException) -> ApplicationError | None:
    """Map a client failure to an ApplicationError; ``None`` for anything that is not one
    (a bug of ours: let it propagate as-is)."""
    if isinstance(exc, ApplicationError):
        return exc
    if isinstance(exc, anthropic.APIStatusError):
        return _status_error(exc)
    if isinstance(exc, anthropic.APITimeoutError):
        return ApplicationError("Anthropic API request timed out", type=ProviderErrorType.TIMEOUT)
    if isinstance(exc, anthropic.APIConnectionError):
        cause = type(exc.__cause__).__name__ if exc.__cause__ else type(exc).__name__
        return ApplicationError(
            f"could not reach the Anthropic API ({cause})", type=ProviderErrorType.CONNECTION
        )
    if isinstance(exc, StreamIncomplete):
        return ApplicationError(str(exc), type=ProviderErrorType.STREAM_INCOMPLETE)
    if isinstance(exc, httpx2.TransportError):
        # Raised while iterating a stream whose connection dropped mid-body.
        return ApplicationError(
            f"Anthropic API stream broke off: {type(exc).__name__}",
            type=ProviderErrorType.STREAM_INCOMPLETE,
        )
    return None


def provider_message(exc: BaseException) -> str:
    """The provider's full error text (it may quote the request: measured for the log, never
    written to it or to history)."""
    if isinstance(exc, anthropic.APIStatusError):
        return exc.api_message or str(exc)
    return f"{type(exc).__name__}: {exc}"


def _history_message(etype: str, api_message: str) -> str:
    """What of the API's message may go to history (see the module docstring)."""
    from compactor.summarize.prompting import parse_prompt_too_long

    too_long = parse_prompt_too_long(api_message)
    if too_long is not None:
        return f"prompt is too long: {too_long[0]} tokens > {too_long[1]} maximum"
    if etype in SAFE_MESSAGE_TYPES:
        return api_message[:300]
    return "message withheld (it may quote the request; the request id identifies it to the provider)"


def _status_error(exc: anthropic.APIStatusError) -> ApplicationError:
    status = exc.status_code
    etype = exc.type or ""
    api_message = _history_message(etype, exc.api_message or "")
    details = {
        "status": status,
        "error_type": etype or None,
        "error_code": getattr(exc, "error_code", None),
        "request_id": exc.request_id,
    }
    headers = exc.response.headers if exc.response is not None else None
    should_retry = (headers.get("x-should-retry") if headers is not None else None) or ""
    if status == 200:
        # An `error` event inside a 200 stream: classify by the error type it names.
        retryable = etype in RETRYABLE_ERROR_TYPES
    else:
        retryable = status in RETRYABLE_STATUS or status >= 500
    # The API can override the status-based rule, as the SDK's own retry logic honours.
    if should_retry.lower() == "false":
        retryable = False
    elif should_retry.lower() == "true" and 400 <= status < 500:
        retryable = True
    where = f"Anthropic API {status}" + (f" {etype}" if etype else "")
    rid = f" (request {exc.request_id})" if exc.request_id else ""
    if not retryable:
        return ApplicationError(
            f"{where}: {api_message}{rid}; not retried (the request itself was rejected)",
            details,
            type=ProviderErrorType.REJECTED,
            non_retryable=True,
        )
    if status == 429 or etype == "rate_limit_error":
        kind = ProviderErrorType.RATE_LIMITED
    elif status == 529 or etype == "overloaded_error":
        kind = ProviderErrorType.OVERLOADED
    else:
        kind = ProviderErrorType.UNAVAILABLE
    delay = retry_after(headers)
    after = f", retry after {delay.total_seconds():g}s" if delay else ""
    return ApplicationError(f"{where}: {api_message}{rid}{after}", details, type=kind, next_retry_delay=delay)
