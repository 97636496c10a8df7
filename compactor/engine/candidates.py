"""The candidate views of one compaction and the pick among them (``compact.apply_layers``).

A candidate is one checkpoint with its view and token count; its checks may run lazily and
its checkpoint and view may be let go and made again (the replacement layers' candidate while
the summary ladder runs): a big session's candidates are O(session) each (issue 17). The
picker keeps only the candidates it may still return.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

from pydantic import BaseModel, TypeAdapter

from compactor.engine.invariants import Violation
from compactor.events import Event
from compactor.records import Checkpoint


class Candidate:
    """One candidate view. Its violations may be checked lazily (``check``): a candidate over
    its target never fits whatever else it breaks, and the replacement layers' candidate over
    a whole big session (the cleared view) is rarely chosen - validating it only when the
    engine asks whether it is valid saves a full pass over the session (issue 17)."""

    def __init__(self, checkpoint: Checkpoint | None, view: list[Event] | None, tokens: int,
                 violations: list[Violation] | None = None, repaired: int = 0, *,
                 check: Callable[[], list[Violation]] | None = None, target: int | None = None,
                 rebuild: Callable[[], list[Event]] | None = None,
                 remake: Callable[[], Checkpoint] | None = None) -> None:
        assert violations is not None or check is not None
        assert view is not None or rebuild is not None
        self._checkpoint: Checkpoint | None = checkpoint
        self._remake = remake
        self._view = view
        self._rebuild = rebuild
        self.tokens = tokens
        self._violations = violations
        self._check = check
        self._target = target
        self.repaired = repaired
        self.past_request = False
        self.left_out: dict[str, int] = {}
        self.left_out_weight = 0
        self.lifted: Any = None  # a summary candidate's LiftedState: its checkpoint holds the checked fields only

    @property
    def checkpoint(self) -> Checkpoint:
        """The candidate's checkpoint; one let go (``release``) is made again when asked for."""
        if self._checkpoint is None:
            assert self._remake is not None
            self._checkpoint = self._remake()
        return self._checkpoint

    @checkpoint.setter
    def checkpoint(self, value: Checkpoint) -> None:
        self._checkpoint = value

    def release(self) -> None:
        """Let go of the checkpoint and view until asked for (a lazy candidate that can make
        its checkpoint again: the replacement layers' candidate while the summary ladder runs,
        whose checkpoint holds a replacement for every cleared event, issue 17)."""
        if self._remake is not None and self._rebuild is not None:
            self._checkpoint = self._view = None

    def complete_state(self) -> None:
        """The whole lifted state into the checkpoint (done for the candidate picked only). The
        candidate lets go of its lifted state: its items are let go of as they are dumped."""
        if self.lifted is not None:
            lifted, self.lifted = self.lifted, None
            self.checkpoint = self.checkpoint.model_copy(update={"state": dump_releasing(lifted)})

    @property
    def view(self) -> list[Event]:
        """The candidate's view; a lazy candidate's is built again when asked for (memory:
        the cleared view of a whole big session is a copy of every cleared event, and a
        summary usually beats it unread)."""
        if self._view is None:
            assert self._rebuild is not None
            self._view = self._rebuild()
        return self._view

    @property
    def violations(self) -> list[Violation]:
        if self._violations is None:
            assert self._check is not None
            self._violations, self._check = self._check(), None
        return self._violations

    @property
    def fits(self) -> bool:
        if self._violations is None and self._target is not None and self.tokens > self._target:
            return False  # over_budget: a violation whatever the other checks say
        return not self.violations

    @property
    def valid(self) -> bool:
        """Every invariant holds except, perhaps, the budget."""
        return all(v.code == "over_budget" for v in self.violations)


class Picker:
    """The summary candidate the engine keeps: among those that fit, the one leaving out the
    least essential state (ties: the first, i.e. the longest tail); else the valid one with
    the fewest tokens; else the one with the fewest violations, then tokens (ties: the first).
    Kept as the candidates come, holding only those three - not every candidate's view and
    lifted state, which is O(session) each (issue 17) - and, once one fits (is valid), not
    the other two (the last), which ``pick`` can no longer return."""

    def __init__(self) -> None:
        self.n = 0
        self._fit: Candidate | None = None
        self._valid: Candidate | None = None
        self._any: Candidate | None = None

    def add(self, c: Candidate) -> None:
        self.n += 1
        if c.fits and (self._fit is None or c.left_out_weight < self._fit.left_out_weight):
            self._fit = c
        if self._fit is not None:  # picked before the others from now on: hold none of them
            self._valid = self._any = None
            return
        if c.valid and (self._valid is None or c.tokens < self._valid.tokens):
            self._valid = c
        if self._valid is not None:  # likewise before any other
            self._any = None
            return
        if self._any is None or (len(c.violations), c.tokens) < (len(self._any.violations), self._any.tokens):
            self._any = c

    def min_fitting_weight(self) -> int | None:
        return None if self._fit is None else self._fit.left_out_weight

    def pick(self) -> Candidate:
        got = self._fit or self._valid or self._any
        assert got is not None
        return got


_CHUNK = 4096  # items dumped at a time


def dump_releasing(state: BaseModel) -> dict[str, Any]:
    """``state.model_dump(mode="json")``, field by field, a long list's items a few thousand at a
    time, each let go of by ``state`` once dumped (issue 17, memory: the picked lifted state of
    300k events is ~600k items; their dump, a dict and lists each, ~114 MB, was made while
    every item was still held; now an item is freed as its dump is made, when nothing else
    holds it). ``state`` is left with its fields emptied: the caller's last use of it."""
    out: dict[str, Any] = {}
    fields = state.__dict__
    for name, info in type(state).model_fields.items():
        value = fields[name]
        adapter = _adapter(info.annotation)
        if type(value) is not list or len(value) <= _CHUNK:
            out[name] = adapter.dump_python(value, mode="json")
            continue
        items = value[:]  # (a copy: the list may be another state's too; it is not changed)
        fields[name] = value = []
        got: list[Any] = []
        while items:
            got += adapter.dump_python(items[:_CHUNK], mode="json")
            del items[:_CHUNK]
        out[name] = got
    return out


@lru_cache(maxsize=None)
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)
