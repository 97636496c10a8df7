"""Test doubles that speak real protocols over real sockets.

``FakeAnthropic`` is a local HTTP server for the subset of the Anthropic Messages API the
summarizers use (create, SSE streaming, count_tokens, the beta on-demand compaction), with a
deterministic template "model", a scriptable fault queue and a request log. Tests drive the
real ``anthropic`` client against it, so every byte goes through the SDK's own request
building, SSE parsing and error classes.
"""

from compactor.testing.anthropic_server import Fault, FakeAnthropic, RecordedRequest

__all__ = ["FakeAnthropic", "Fault", "RecordedRequest"]
