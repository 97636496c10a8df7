"""Test doubles that speak real protocols over real sockets.

``FakeAnthropic`` is a local HTTP server for the subset of the Anthropic Messages API the
summarizers use (create, SSE streaming, count_tokens, the beta on-demand compaction), with a
deterministic template "model", a scriptable fault queue and a request log. Tests drive the
real ``anthropic`` client against it, so every byte goes through the SDK's own request
building, SSE parsing and error classes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FakeAnthropic", "Fault", "RecordedRequest"]


def __getattr__(name: str) -> Any:
    # Lazy, so `python -m compactor.testing.anthropic_server` does not import the module twice.
    if name in __all__:
        from compactor.testing import anthropic_server

        return getattr(anthropic_server, name)
    raise AttributeError(name)
