"""The lifted state's models: what ``lift_state`` extracts, stored in ``Checkpoint.state``.

Payloads of durable contracts: new fields are optional with defaults, so checkpoints written
before a field existed still load.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from compactor.events import SharedFieldsSet, _new, _set_slot, _shared_fields_set
from compactor.lifting.narrative import Finding, Reason, TurnOutcome


class _Item(SharedFieldsSet):
    """Frozen items; instances share their fields-set object (issue 17, memory: a fresh one
    per instance was 216-728 bytes of each ``Command`` and ``FileRef``, one per call of a
    session, alive for the whole compaction)."""

    model_config = ConfigDict(frozen=True)


# --- item models ------------------------------------------------------------------------------


class Request(_Item):
    seq: int = Field(description="Seq of the user event.")
    text: str = Field(description="Verbatim text, or a head quote when ``truncated``.")
    tokens: int = Field(default=0, description="Tokens of the full request text.")
    truncated: bool = Field(default=False, description="True when only a head quote is kept.")


class Constraint(_Item):
    seq: int
    text: str = Field(description="The user's sentence, verbatim.")


class Decision(_Item):
    seq: int
    text: str


class FileRef(_Item):
    path: str
    seq: int = Field(description="Seq of the latest event that touched the file.")
    ops: list[str] = Field(default_factory=list, description="Operations, deduplicated, in order.")
    count: int = 1
    tool_use_id: str | None = None
    digest: str = Field(default="", description="What the latest change put in the file, short.")
    facts: list[str] = Field(
        default_factory=list,
        description="What the file defines, from the text the agent wrote (compactor.lifting.content): "
        "constants and values, signatures, config keys, data files, ids, its own one-line 'about'.")
    note: str = Field(default="", description="The agent's own one-line explanation of the file, if it gave one.")


class FileNote(_Item):
    """A sentence of the agent's that names a file (carried for files it changes next)."""

    key: str = Field(description="The path or file name the sentence names.")
    seq: int
    text: str


CommandStatus = Literal["ok", "failed", "unknown"]


class Command(_Item):
    seq: int = Field(description="Seq of the tool_use (or the text line that ran it).")
    command: str
    tool: str = ""
    tool_use_id: str | None = None
    exit_code: int | None = None
    status: CommandStatus = "unknown"
    result_seq: int | None = Field(default=None, description="Seq of the result, if any.")
    detail: str = Field(default="", description="An install's outcome (what it installed, its first warning or error), or "
                        "'partial: ...' when a fetch's response says it holds part of the answer, or 'got: ...' / 'got code: ...': what "
                        "a fetch or query answered (a JSON answer's fields and item names, code lines it printed).")


# --- the per-call items, built without validation ------------------------------------------------
# A lift makes a ``Command`` and a ``FileRef`` per tool call (issue 17: their validation was a tenth of
# a lift). The builders below take exactly the keywords of the validated call they replace, build
# the same values and record the same fields-set, so dumps, equality and ``exclude_unset`` read the
# same; ``tests/unit/test_lift_trusted.py`` lifts with the validated models in their place and
# compares. Callers pass values of the fields' exact types.
#
# The lists are kept as given, not copied as validation copies them (issue 17, memory: a copy of
# ``ops`` and ``facts`` per file touched was two lists of ~70 bytes, alive with the state): a
# ``FileRef``'s lists are values, never changed in place, so the items may share them - one
# ``[op]`` per usual op (``op_list``), one empty list, a file's ``ops`` from one touch to the next.
# Callers pass lists nothing changes afterwards (new ones, or ones taken from an item).

_NO_ITEMS: list[str] = []
"""The ``ops``/``facts`` of every built item that has none (shared, never changed)."""
_ONE_OP = {op: [op] for op in ("read", "edit", "write", "create", "shell", "patch", "delete", "deleted", "moved")}


def op_list(op: str) -> list[str]:
    """``[op] if op else []``, shared for the usual ops (a ``FileRef``'s first ``ops``)."""
    return _ONE_OP.get(op) or ([op] if op else _NO_ITEMS)


_bind = _set_slot.__get__
"""``_bind(m)``: ``object.__setattr__`` bound to ``m`` (a method-wrapper), called once per field of an
item built here (issue 17: ~2.6 k instructions of an item's ~15 k fewer than ``_set_slot(m, name, value)``
each time: a call of the bound wrapper skips the unbound one's argument-tuple slice and type check).
The fields are stored as ``_set_slot`` stores them, in the class's shared-key values array."""


_FIRST_REF = _shared_fields_set({"path", "seq", "ops", "tool_use_id", "digest", "facts"})
_NEXT_REF = _shared_fields_set({"path", "seq", "ops", "count", "tool_use_id", "digest", "facts", "note"})


def first_file_ref(*, path: str, seq: int, ops: list[str], tool_use_id: str | None, digest: str,
                   facts: list[str]) -> FileRef:
    """``FileRef(path=, seq=, ops=, tool_use_id=, digest=, facts=)``, unvalidated."""
    return _file_ref(path, seq, ops, 1, tool_use_id, digest, facts, "", _FIRST_REF)


def next_file_ref(*, path: str, seq: int, ops: list[str], count: int, tool_use_id: str | None, digest: str,
                  facts: list[str], note: str) -> FileRef:
    """``FileRef(path=, seq=, ops=, count=, tool_use_id=, digest=, facts=, note=)``, unvalidated."""
    return _file_ref(path, seq, ops, count, tool_use_id, digest, facts, note, _NEXT_REF)


def _file_ref(path: str, seq: int, ops: list[str], count: int, tool_use_id: str | None, digest: str,
              facts: list[str], note: str, names: set[str]) -> FileRef:
    """``trusted(FileRef, {...}, names)`` with the fields set one by one, in field order (issue 17:
    no dict of the values to build and loop over, ~0.4 us of each of a lift's file touches), then
    what ``events._validated_state`` sets (here: a call fewer per item). ``ops`` and ``facts`` are
    kept as given (an empty one as the shared empty list)."""
    m = _new(FileRef)
    put = _bind(m)  # (one ``object.__setattr__`` bound to the item: see ``_bind``)
    put("path", path)
    put("seq", seq)
    put("ops", ops or _NO_ITEMS)
    put("count", count)
    put("tool_use_id", tool_use_id)
    put("digest", digest)
    put("facts", facts or _NO_ITEMS)
    put("note", note)
    put("__pydantic_fields_set__", names)
    put("__pydantic_extra__", None)
    put("__pydantic_private__", None)
    return m


TestStatus = Literal["passed", "failed", "unknown"]


class TestRun(_Item):
    __test__ = False  # not a pytest class

    seq: int
    command: str
    tool_use_id: str | None = None
    status: TestStatus = "unknown"
    exit_code: int | None = None
    summary: str = Field(default="", description="Runner summary line, e.g. '2 failed, 9 passed'.")
    result_seq: int | None = Field(default=None, description="The log version the run reported at.")


_RUN_COMMAND = _shared_fields_set({"seq", "command", "tool", "tool_use_id", "exit_code", "status", "result_seq",
                                   "detail"})


def run_command(*, seq: int, command: str, tool: str, tool_use_id: str | None, exit_code: int | None,
                status: CommandStatus, result_seq: int | None, detail: str) -> Command:
    """``Command(seq=, command=, tool=, tool_use_id=, exit_code=, status=, result_seq=, detail=)``, unvalidated:
    ``trusted(Command, {...}, _RUN_COMMAND)`` with the fields set one by one, in field order (as ``next_file_ref``)."""
    m = _new(Command)
    put = _bind(m)
    put("seq", seq)
    put("command", command)
    put("tool", tool)
    put("tool_use_id", tool_use_id)
    put("exit_code", exit_code)
    put("status", status)
    put("result_seq", result_seq)
    put("detail", detail)
    put("__pydantic_fields_set__", _RUN_COMMAND)  # (``events._validated_state``'s, a call fewer)
    put("__pydantic_extra__", None)
    put("__pydantic_private__", None)
    return m


class ErrorItem(_Item):
    seq: int
    name: str = Field(description="Error name, e.g. TypeError, or 'error' when unnamed.")
    message: str = Field(default="", description="The line that reported it, cut short.")
    tool_use_id: str | None = None


class FailedApproach(_Item):
    seq: int
    what: str = Field(description="The action that failed (command, tool + target) or a statement.")
    error: str = ""
    tool_use_id: str | None = None
    cause: str = Field(default="", description="The most telling line(s) of the output.")
    next: str = Field(default="", description="The agent's next move after the failure, with its seq.")
    resolved_at: int | None = Field(
        default=None, description="Seq of a later successful run of the same action; None = open.")
    result_seq: int | None = Field(default=None, description="Seq of the failed result.")
    failed_again: int | None = Field(
        default=None, description="Seq of the next run of the same action that failed too (None: not rerun).")
    key: str = Field(default="", description="The action normalized, to match a later run.")
    params: dict[str, str] | None = Field(
        default=None, description="The call's short parameters beside its command (compactor.lifting.failures); "
        "None in checkpoints written before they were kept.")
    fixed_by: str = Field(default="", description="What the run that resolved it set differently, e.g. "
                          "'sandbox_permissions=require_escalated'; empty when the same call worked on a rerun.")


ActionKind = Literal["command", "read", "change", "todo", "other"]


class UnknownAction(_Item):
    """A tool call whose result is not in the log: it may or may not have happened."""

    seq: int
    tool_use_id: str
    name: str
    kind: ActionKind = "other"
    summary: str = Field(description="Name and key arguments, for people.")
    command: str | None = None
    paths: list[str] = Field(default_factory=list, description="Files it would change (or read).")
    reads: list[str] = Field(default_factory=list, description="Files a shell command would read.")
    is_test: bool = False
    digests: dict[str, str] = Field(default_factory=dict, description="File -> what it would put there.")
    facts: dict[str, list[str]] = Field(
        default_factory=dict, description="File -> what its text would define (compactor.lifting.content).")


LastStatus = Literal["ok", "failed", "unknown", "reply"]


class LastAction(_Item):
    """What the agent was doing where the covered range ends, and whether its result came."""

    seq: int = Field(description="Seq of the agent's last call or message in the range.")
    kind: Literal["call", "reply"] = "call"
    what: str = Field(description="The call (command, tool + target) or the reply's first sentence.")
    intent: str = Field(default="", description="The agent's words beside the call, clipped.")
    tool_use_id: str | None = None
    status: LastStatus = Field(
        default="unknown",
        description="ok / failed: its result came; unknown: no result in the log; reply: a message, no call.")
    result_seq: int | None = None
    detail: str = Field(default="", description="Exit code and the telling line of the result.")


class Todo(_Item):
    text: str
    status: str = ""


class Artifact(_Item):
    uri: str
    sha256: str
    bytes: int = 0
    seq: int = 0


class Url(_Item):
    url: str
    seq: int


class LiftedState(BaseModel):
    """Everything lifted from a covered range; stored in ``Checkpoint.state`` as JSON."""

    goal: Request | None = Field(default=None, description="The first genuine user request.")
    requests: list[Request] = Field(default_factory=list)
    constraints: list[Constraint] = Field(default_factory=list)
    decisions: list[Decision] = Field(default_factory=list)
    files_read: list[FileRef] = Field(default_factory=list)
    files_changed: list[FileRef] = Field(default_factory=list)
    commands: list[Command] = Field(default_factory=list)
    tests: list[TestRun] = Field(default_factory=list)
    errors: list[ErrorItem] = Field(default_factory=list)
    failed_approaches: list[FailedApproach] = Field(default_factory=list)
    unknown_actions: list[UnknownAction] = Field(default_factory=list)
    todos: list[Todo] = Field(default_factory=list, description="Latest plan/todo list.")
    todos_seq: int = Field(default=0, description="Seq of the event that set ``todos``.")
    artifacts: list[Artifact] = Field(default_factory=list)
    urls: list[Url] = Field(default_factory=list, description="URLs the user gave.")
    covers_end: int = Field(default=0, description="Last seq folded into this state.")
    outcomes: list[TurnOutcome] = Field(
        default_factory=list,
        description="The agent's closing report of each user turn, clipped (compactor.lifting.narrative).",
    )
    reasons: list[Reason] = Field(
        default_factory=list,
        description="Sentences where the agent gave a reason or stated a rule or number.",
    )
    file_notes: list[FileNote] = Field(
        default_factory=list,
        description="Sentences of the agent's last message that name files: the note of a file it "
        "changes after this range (compactor.lifting.notes).")
    last_action: LastAction | None = Field(
        default=None, description="The agent's last call or message in the covered range and its outcome.")
    findings: list[Finding] = Field(
        default_factory=list,
        description="The agent's own conclusions after tool results (a result or a cause it stated), "
        "in order, newest kept (compactor.lifting.narrative).")

    @property
    def latest_request(self) -> Request | None:
        return self.requests[-1] if self.requests else None


def built_state(**fields: object) -> LiftedState:
    """``LiftedState(**fields)`` for the lifter's own values (``lift._Acc.build``): every item an
    instance of its field's model, every list a new one (not one the lifter goes on changing).
    Validation of such values only checks each item's type and copies each list (issue 17: ~20 ms
    a shrink-ladder rung at 300k events, each rung's state built over the same ~300k items); this
    is the same state - the same fields, fields set and items - unchecked and uncopied
    (``tests/unit/test_lift_built_state.py`` compares it with the validated one)."""
    return LiftedState.model_construct(**fields)
