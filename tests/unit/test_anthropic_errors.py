"""activities._anthropic_errors: each provider failure -> retryable or not, with retry-after.

Status errors are produced by the real ``anthropic`` client against the local fake server,
so the exceptions are exactly what the SDK raises.
"""

from __future__ import annotations

from datetime import timedelta

import anthropic
import httpx2
import pytest

from activities._anthropic_errors import (
    ProviderErrorType,
    StreamIncomplete,
    retry_after,
    to_application_error,
)
from activities.contracts import ErrorType
from compactor.testing import FakeAnthropic, Fault

MSG = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def fake():
    with FakeAnthropic() as f:
        yield f


@pytest.fixture
def client(fake):
    fake.reset()
    return anthropic.AsyncAnthropic(api_key="sk-unit", base_url=fake.base_url, max_retries=0)


async def _raise(client, fake, fault: Fault, stream: bool = False) -> BaseException:
    fake.push(fault)
    try:
        if stream:
            async with client.messages.stream(model="m", max_tokens=50, messages=MSG) as s:
                async for _ in s:
                    pass
        else:
            await client.messages.create(model="m", max_tokens=50, messages=MSG)
    except BaseException as e:  # noqa: BLE001
        return e
    raise AssertionError("no error raised")


@pytest.mark.parametrize(
    ("fault", "etype", "delay"),
    [
        (Fault.rate_limit(retry_after=7), ProviderErrorType.RATE_LIMITED, 7),
        (Fault.overloaded(), ProviderErrorType.OVERLOADED, None),
        (Fault.overloaded(retry_after=2), ProviderErrorType.OVERLOADED, 2),
        (Fault.server_error(500), ProviderErrorType.UNAVAILABLE, None),
        (Fault.server_error(503), ProviderErrorType.UNAVAILABLE, None),
        (Fault("status", status=408, error_type="timeout_error", message="timeout"), ProviderErrorType.UNAVAILABLE, None),
        (Fault("status", status=409, error_type="conflict", message="conflict"), ProviderErrorType.UNAVAILABLE, None),
    ],
)
async def test_transient_statuses_are_retryable_with_retry_after(client, fake, fault, etype, delay):
    err = to_application_error(await _raise(client, fake, fault))
    assert err is not None
    assert err.type == etype
    assert not err.non_retryable
    assert err.next_retry_delay == (timedelta(seconds=delay) if delay else None)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
async def test_other_4xx_are_not_retryable(client, fake, status):
    err = to_application_error(await _raise(client, fake, Fault.bad_request("model: no such model", status=status)))
    assert err is not None
    assert err.type == ErrorType.SUMMARIZER_FAILED
    assert err.non_retryable
    assert err.details[0]["status"] == status
    # Account/service errors keep the API's words; request errors (which may quote the
    # request, i.e. the conversation) keep them out of the message that reaches history.
    assert ("model: no such model" in err.message) == (status in (401, 403, 404))


async def test_provider_text_echoing_the_request_never_reaches_the_failure(client, fake):
    echo = "messages.0.content: unexpected 'ZQX-SECRET-7731 in the prompt'"
    for fault in (Fault.bad_request(echo), Fault("status", status=500, message=echo)):
        exc = await _raise(client, fake, fault)
        err = to_application_error(exc)
        assert err is not None and "ZQX-SECRET-7731" not in err.message
        assert "ZQX-SECRET-7731" not in repr(err.details)


async def test_prompt_too_long_that_escapes_is_not_retryable(client, fake):
    err = to_application_error(await _raise(client, fake, Fault.prompt_too_long(limit=1)))
    assert err is not None and err.non_retryable
    assert "prompt is too long" in err.message


async def test_error_event_inside_a_stream_is_classified_by_its_type(client, fake):
    err = to_application_error(await _raise(client, fake, Fault.stream_error("overloaded_error"), stream=True))
    assert err is not None and err.type == ProviderErrorType.OVERLOADED and not err.non_retryable
    err2 = to_application_error(await _raise(client, fake, Fault.stream_error("invalid_request_error"), stream=True))
    assert err2 is not None and err2.non_retryable


async def test_stream_cut_mid_body_is_retryable(client, fake):
    exc = await _raise(client, fake, Fault.cut_stream(after_deltas=1), stream=True)
    err = to_application_error(exc)
    assert err is not None
    assert err.type == ProviderErrorType.STREAM_INCOMPLETE and not err.non_retryable


def test_timeouts_connections_and_incomplete_streams_are_retryable():
    req = httpx2.Request("POST", "http://127.0.0.1:1/v1/messages")
    for exc, etype in [
        (anthropic.APITimeoutError(request=req), ProviderErrorType.TIMEOUT),
        (anthropic.APIConnectionError(request=req), ProviderErrorType.CONNECTION),
        (StreamIncomplete("ended early"), ProviderErrorType.STREAM_INCOMPLETE),
        (httpx2.RemoteProtocolError("peer closed"), ProviderErrorType.STREAM_INCOMPLETE),
    ]:
        err = to_application_error(exc)
        assert err is not None and err.type == etype and not err.non_retryable


def test_x_should_retry_false_wins_over_status():
    req = httpx2.Request("POST", "http://x/v1/messages")
    body = {"type": "error", "error": {"type": "api_error", "message": "nope"}}
    resp = httpx2.Response(500, headers={"x-should-retry": "false"}, json=body, request=req)
    exc = anthropic.InternalServerError("nope", response=resp, body=body)
    err = to_application_error(exc)
    assert err is not None and err.non_retryable


def test_unrelated_exceptions_are_not_mapped():
    assert to_application_error(KeyError("bug")) is None


def test_retry_after_forms():
    assert retry_after(httpx2.Headers({"retry-after-ms": "1500"})) == timedelta(milliseconds=1500)
    assert retry_after(httpx2.Headers({"retry-after": "3"})) == timedelta(seconds=3)
    assert retry_after(httpx2.Headers({"retry-after": "0"})) is None
    assert retry_after(httpx2.Headers({"retry-after": "999999"})) == timedelta(minutes=10)
    assert retry_after(httpx2.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) is None  # past
    assert retry_after(httpx2.Headers({})) is None
