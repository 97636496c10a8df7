"""The structured summary's sections, in order, and its drop tiers (split from ``structured``).

A summary is ``## Name`` sections in ``SECTION_NAMES`` order (the Anthropic summarizer asks the
model for the same headings); when it is over its budget, items leave by their tier, least
valuable first (``structured._fit``); the protected sections never leave. The ranks and headings
below are what ``document`` and ``structured`` order and render lines by.
"""

from __future__ import annotations


GOAL = "Goal"
REQUESTS = "User requests"
CONSTRAINTS = "Constraints (verbatim)"
TODOS = "Current plan / todos"
FILES_CHANGED = "Files changed"
FILES_READ = "Files read"
COMMANDS = "Commands run"
TESTS = "Tests"
ERRORS = "Errors and failed approaches"
DECISIONS = "Decisions"
REPORTS = "Agent's reports (newest first)"
REASONS = "Reasons and rules"
UNKNOWN = "Outcome unknown (not confirmed — verify before relying on them)"
ARTIFACTS = "Artifacts"
LINKS = "Links the user gave"
LAST_ACTION = "Last action (where this summary ends)"
LATEST = "Latest request"

SECTION_NAMES: tuple[str, ...] = (
    GOAL,
    REQUESTS,
    CONSTRAINTS,
    TODOS,
    REPORTS,
    FILES_CHANGED,
    FILES_READ,
    COMMANDS,
    TESTS,
    ERRORS,
    DECISIONS,
    REASONS,
    UNKNOWN,
    ARTIFACTS,
    LINKS,
    LAST_ACTION,
    LATEST,
)
"""The template, in order; the Anthropic summarizer asks the model for the same headings."""
section_names = SECTION_NAMES

PROTECTED_SECTIONS = frozenset({GOAL, CONSTRAINTS, UNKNOWN, LATEST})
"""Sections whose content never leaves the summary for budget."""

ANSWERED_REQUEST_CHARS = 220
"""An older request the agent answered is one line of this many characters at most."""
OPEN_REQUEST_CHARS = 420
"""An older request no report answered (it may still be pending): a longer line."""

SHORT_QUOTE_CHARS = 600
"""Last resort when even the protected items do not fit: goal/latest shrink to a head quote."""

# Drop tiers, least valuable first. Within a tier the oldest item goes first.
_TIER_COMMAND_OK = 10
_TIER_FILE_READ = 20
_TIER_READ_DETAIL = 36  # a file read and what it defines (within READ_SHARE): after the reasons
_TIER_QUOTED_CONSTRAINT = 25  # a duplicate: also verbatim inside a request shown in full
_TIER_DECISION = 30
_TIER_REASON = 35
_TIER_EXTRA_REPORT = 38  # an older report past the reports' share: kept while room lasts
_EXTRA_REPORT_TOKENS = 70
_TIER_OLD_REPORT = 45
_TIER_MIDDLE_REQUEST = 40
_TIER_COMMAND_FAILED = 50
_TIER_COMMAND_EXPLAINED = 33  # a failed run whose failure line (command, cause, outcome) is under Errors
_TIER_COMMAND_RECENT_OK = 46  # one of the newest commands that worked
_RECENT_OK_COMMANDS = 4
_TIER_OUTPUT_GIST = 45  # what a fetch or query answered (within GIST_SHARE): what the agent learned
GIST_SHARE = 0.1
GIST_COMMAND_CHARS = 90
"""Share of the summary budget for the answers of fetches and queries (``got: ...`` details)."""
_TIER_INSTALL = 39  # an install (what it brought in) or a partial fetch (its limit): where the environment stands
_TIER_ARTIFACT = 55
_TIER_ERROR_RESOLVED = 62  # an error name whose failures were all fixed
_TIER_OLD_TEST = 65
_TIER_ERROR = 88  # one short line per distinct error name: cheap and telling
_TIER_RECENT_REPORT = 72
_TIER_TODO_DONE = 75
_TIER_RECENT_REASON = 58
_TIER_LINK = 80
_TIER_FILE_CHANGED = 85
_TIER_TODO_OPEN = 90
_TIER_NEWEST_REPORT = 92  # the agent's own account of the latest turn, clipped to its share
_TIER_LAST_TEST = 95
_TIER_FILE_DETAIL = 56  # what one of the 3 newest changed files holds: after the older requests and reports
_TIER_OLD_FILE_DETAIL = 41  # what an older changed file holds: after the older requests, before the older reports
_RECENT_DETAIL_FILES = 3
_TIER_LAST_CALL = 93  # a call whose result never came, or failed: the next turn starts there
_TIER_LAST_DONE = 37  # a call that worked, or a reply: the reports say as much; goes before them
_TIER_RECENT_FINDING = 64  # one of the 3 most telling findings: outranks a failure a rerun fixed
_TIER_NEGATIVE_FINDING = 47  # what did not work or why: outranks the newest ok command listings
_TIER_FINDING = 36  # an older conclusion: after the reasons, before the older requests and reports
_TIER_EXTRA_FINDING = 32  # past the findings' share: fills what ok command listings and files read leave
_RECENT_FINDINGS = 3

ESSENTIAL_TIER = _TIER_MIDDLE_REQUEST
"""Items at or above this tier are what the budget split protects: the engine prefers a shorter
verbatim tail over leaving one of them out (ok command listings, files only read and duplicate
constraint quotes are cheap to lose: the log has them and they rarely decide the next step)."""


_SECTION_RANK = {name: k for k, name in enumerate(SECTION_NAMES)}
_RANKED = {name: k << 32 for k, name in enumerate(SECTION_NAMES)}
"""A line's ``order`` is its section's rank << 32 with its place in the section: the same sort
as its place in the document (``_build`` adds the sections in ``SECTION_NAMES`` order), and
fixed for a file read or a command (its index in the state's list), so the ladder memo's lines
keep theirs from rung to rung."""
_HEADINGS = {name: f"## {name}\n" for name in SECTION_NAMES}
_BASE_COMMAND = _RANKED[COMMANDS]
_BASE_READ = _RANKED[FILES_READ]


_FIXED_SECTIONS = frozenset({FILES_CHANGED, FILES_READ, COMMANDS, TESTS, ARTIFACTS})
"""Sections whose item lines a budget can only thin (``_build``): without one every line is
there, and no fewer of them (a file only read keeps its ``defines:`` line within a share,
and everything without a budget; a changed file's detail line is budgeted and not counted)."""
