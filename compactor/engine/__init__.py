"""The engine (pure): policy and budgets, safe cut points, layers, the view, invariants, and the
plan/compact loop that ties them (``compact.compact``)."""
