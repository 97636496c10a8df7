"""Typed errors. Tests assert the kind (``code``), not the text; messages say what to do."""

from __future__ import annotations


class CompactorError(Exception):
    """Base of every error a user can cause or meet. ``code`` is stable, the text is for people."""

    code = "compactor_error"
    exit_code = 1

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.details = details


class InvalidInput(CompactorError):
    code = "invalid_input"
    exit_code = 2


class UnknownFormat(InvalidInput):
    code = "unknown_format"


class EmptyInput(InvalidInput):
    code = "empty_input"


class ParseError(InvalidInput):
    code = "parse_error"


class InvalidId(InvalidInput):
    code = "invalid_id"


class InputTooLarge(InvalidInput):
    """A line, document or value over a configured import limit (``details["limit"]`` names it)."""

    code = "input_too_large"


class TenantNotAllowed(CompactorError):
    """A request names a tenant the client, CLI or worker is not bound to (``COMPACTOR_TENANTS``,
    ``CompactorClient(tenant=..., tenants=[...])``); refused before any I/O. Exit 2: retrying
    cannot help, the caller must use credentials bound to that tenant."""

    code = "tenant_not_allowed"
    exit_code = 2


class NotFound(CompactorError):
    """A session, checkpoint, workflow or bucket that does not exist. Exit 2 like a usage
    error: every command says the same thing about the same missing thing (docs/cli.md)."""

    code = "not_found"
    exit_code = 2


class BucketNotFound(NotFound):
    code = "bucket_not_found"


class PreconditionFailed(CompactorError):
    """A conditional write lost: the object exists (if_none_match) or changed (if_match)."""

    code = "precondition_failed"


class ConcurrentModification(CompactorError):
    """The head moved underneath a writer and retries ran out."""

    code = "concurrent_modification"


class IntegrityError(CompactorError):
    """Stored bytes do not match their recorded sha256."""

    code = "integrity_error"


class CorruptState(IntegrityError):
    """A small mutable state file (e.g. a circuit breaker) does not parse; the message says how
    to reset it. Exit 2: an operator must act, retrying cannot help."""

    code = "corrupt_state"
    exit_code = 2


class InvariantViolation(CompactorError):
    code = "invariant_violation"


class PolicyError(InvalidInput):
    code = "policy_error"


class StoreUnavailable(CompactorError):
    """The object store could not be reached (network, endpoint, credentials)."""

    code = "store_unavailable"


class SetupRequired(InvalidInput):
    """The Temporal namespace lacks what compactor needs (search attributes): the message names
    the command to run (``compactor setup``). Exit 2: nothing ran, an operator must act."""

    code = "setup_required"


class TemporalUnavailable(CompactorError):
    """The Temporal frontend could not be reached; the message names the address."""

    code = "temporal_unavailable"
