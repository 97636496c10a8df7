"""Lifting: what happened in a session (requests, constraints, tool actions and their outcomes,
failures, changed files, the agent's narrative) as a ``LiftedState``. Entry point: ``lift.lift_state``."""
