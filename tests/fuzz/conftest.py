"""Fuzz harness settings: a bounded budget that runs in CI (the ``ci`` profile, the default),
and a ``deep`` one for a long local run (``pytest tests/fuzz --hypothesis-profile=deep``).

No example database is written (a clean clone stays clean); a failure prints its example and
the seed to reproduce it.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

_COMMON = dict(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.register_profile("ci", max_examples=40, phases=[Phase.explicit, Phase.generate, Phase.shrink],
                          **_COMMON)
settings.register_profile("deep", max_examples=2000, **_COMMON)
settings.load_profile("ci")
