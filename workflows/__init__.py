"""Deterministic orchestration only (one workflow per module)."""
