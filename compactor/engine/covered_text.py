"""What the invariants learn from a compaction's events once for all its candidates (issue
17): where identifiers occur, which calls have results, which artifact refs came with the log.
Every candidate is validated against the same events; only the cut and the view differ, so
these whole-session facts were recomputed per candidate for nothing.

``invariants.check_identifiers`` accepts an identifier the summary states when it occurs in
the session's events (covered range and tail, pinned events included), the previous checkpoint
or the state's artifact list. The events are the same for every candidate of the shrink
ladder, so whether an identifier occurs in them is one search for the whole ladder (a whole
word is known without one), not one per candidate. An identifier holding a newline (it could
span two texts of the joined haystack) is left to the full search.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from itertools import accumulate
from operator import itemgetter
from typing import Any, Container, Sequence

from compactor.engine.boundary import body
from compactor.engine.identifiers import _block_texts, _collect_strings, _result_texts
from compactor.engine.invariants import _refs
from compactor.engine.word_index import WordIndex, piece_size
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.tokens import _input_json, count_event


class CoveredText:
    """The searchable texts of ``events`` (as given to ``invariants.validate``), with a cache of
    the identifiers looked up. Build once per compaction; pass to ``validate``."""

    def __init__(self, events: Sequence[Event], *, body: tuple[int, list[Event]] | None = None) -> None:
        """``body``: (prev_end, ``boundary.body(events, prev_end)``) when the caller has it
        (the engine: the same list, not another walk of the session)."""
        self.events = events
        self._built = False
        self._bulk_built = False
        self._found: dict[str, bool] = {}
        self._not_in_calls: set[str] = set()  # (occurs_in_calls: searched there, not found)
        self._answered: set[str] | None = None
        self._source_refs: set[tuple[str, str]] | None = None
        self._memo: dict[Any, Any] = {}
        if body is not None:
            self._memo[("body", body[0])] = body[1]

    def answered(self) -> Container[str]:
        """Ids of the calls a result in the events answers (read-only: shared; ``in`` only: the
        keys of ``_call_facts``' dict when the body is all of the events)."""
        if self._answered is None:
            self._walk_events()
        return self._answered  # type: ignore[return-value]

    def source_refs(self) -> set[tuple[str, str]]:
        """(sha256, uri) of every artifact ref the events carry (read-only: shared)."""
        if self._source_refs is None:
            self._walk_events()
        return self._source_refs  # type: ignore[return-value]

    def _walk_events(self) -> None:
        """``answered``, ``source_refs`` and ``range_facts`` in one walk of the events: every
        validation with the index asks for all three, and each was a walk of the session of
        its own (issue 17)."""
        # every call id a result answers: when a body of the events is all of them (nothing pinned,
        # nothing before its end), the keys of its calls' last results, the same ids (issue 17,
        # memory: a set of every call id, ~4 MB at 300k events, held through the ladder)
        whole = self._whole_body()
        answered: set[str] = set()
        refs: set[tuple[str, str]] = set()
        seqs: list[int] = []
        pinned: list[int] = []
        add_seq = seqs.append
        ordered = True
        repeats = 0
        last = None
        for i, e in enumerate(self.events):
            seq = e.seq
            add_seq(seq)
            if last is not None and seq <= last:
                if seq < last:
                    ordered = False
                repeats += 1
            last = seq
            if e.kind == "pinned":
                pinned.append(i)
            results = e.tool_results
            if results and whole is None:
                if len(results) == 1:
                    answered.add(results[0].tool_use_id)
                else:
                    answered.update(r.tool_use_id for r in results)
            for b in e.blocks:
                t = type(b)
                if t is TextBlock or t is ToolUseBlock:
                    continue  # (no ref in them: most blocks)
                if t is ToolResultBlock:
                    content = b.content
                    if (len(content) == 1 and type(content[0]) is TextBlock) or \
                            all(type(c) is TextBlock for c in content):
                        continue  # (most results: one text)
                refs.update((r.sha256, r.uri) for r in _refs((b,)))
        self._answered = answered if whole is None else self._call_facts(whole)[0]
        self._source_refs = refs
        if ordered and whole is not None and ("seqs", whole) in self._memo:
            seqs = self._memo[("seqs", whole)]  # (the same seqs: one list of them held, not two)
        if "range" not in self._memo:
            self._memo["range"] = ((_BySeq(self.events, seqs, len(seqs) - repeats), seqs, max(seqs, default=0), pinned)
                                   if ordered else None)

    def _whole_body(self) -> int | None:
        """A ``prev_end`` whose body (``body``, made) holds every event (a filter of them that
        drops none: the same events, in seq order); None if no such body was made."""
        n = len(self.events)
        for key, got in self._memo.items():
            if type(key) is tuple and key[0] == "body" and len(got) == n:
                return key[1]
        return None

    def _build(self) -> None:
        # _block_texts of every block, inlined for the common blocks (a generator per block
        # was a third of the build at 100k events, issue 17): the same texts but the calls'
        # input JSON, which is searched last and made only then (``_inputs_text``)
        calls: list[str] = []
        add = calls.append
        inputs: list[Any] = []
        add_input = inputs.append
        # a result's call id is a text already when its call's is (a search finds the same in
        # either): left out for the calls of the last event that made any (issue 17, memory: each
        # call's id twice in the pieces, ~2 MB at 300k events, held through the ladder)
        last_ids: list[str] = []
        for e in self.events:
            ids: list[str] | None = None
            for b in e.blocks:
                t = type(b)
                if t is TextBlock:
                    add(b.text)
                elif t is ToolResultBlock:
                    if b.tool_use_id not in last_ids:
                        add(b.tool_use_id)
                elif t is ToolUseBlock:
                    if ids is None:
                        ids = last_ids = []
                    ids.append(b.id)
                    add(b.name)
                    inp = b.input
                    if type(inp) is dict:  # (_collect_strings without a call per str value)
                        for v in inp.values():
                            if type(v) is str:
                                add(v)
                            else:
                                _collect_strings(v, calls)
                    else:
                        _collect_strings(inp, calls)
                    add_input(inp)
                    add(b.id)
                else:
                    calls.extend(_block_texts(b))
        # an identifier that stands as a whole word somewhere occurs, found in the one piece
        # the words' index names; else it is searched in every piece (no join of them all)
        self._calls, self._words = _pieces_and_words(calls)
        self._inputs: list[Any] | None = inputs
        self._inputs_text: str | None = None
        self._built = True

    def _in_inputs(self, ident: str) -> bool:
        """Whether ``ident`` occurs in a call's input as JSON (``tokens._input_json``): its
        string values are searched with the other texts already, so this JSON (a dump per
        call: a sixth of the build at 100k events, issue 17) is made only for an identifier
        found nowhere else."""
        if self._inputs_text is None:
            self._inputs_text = "\n".join(map(_input_json, self._inputs or ()))
            self._inputs = None
        return ident in self._inputs_text

    def _build_bulk(self) -> None:
        """The tool results' bodies and their words: most of a session's text, read only for
        an identifier the calls, requests and answers lack (rare: a summary names what the
        agent asked for or said), so built only then (issue 17)."""
        bulk: list[str] = []
        for e in self.events:
            for r in e.tool_results:
                bulk.extend(_result_texts(r))
        self._bulk, self._bulk_words = _pieces_and_words(bulk)
        self._bulk_built = True

    def occurs(self, ident: str) -> bool | None:
        """Whether ``ident`` occurs in the events; None when this index cannot tell (a newline
        in ``ident``): search in full.

        The texts are searched in pieces (a few hundred texts joined by newlines each): an
        identifier without a newline lies within one text, so within one piece, and a whole
        word of a text is a part of it (the words only answer sooner)."""
        if "\n" in ident:
            return None
        if not self._built:
            self._build()
        got = self._found.get(ident)
        if got is None:
            got = ident not in self._not_in_calls and self._in_calls(ident)
            if not got:
                if not self._bulk_built:
                    self._build_bulk()
                got = ident in self._bulk_words or any(ident in p for p in self._bulk)
            self._found[ident] = got
        return got

    def occurs_in_calls(self, ident: str) -> bool | None:
        """Whether ``ident`` occurs in the events' texts but the tool results' bodies (the
        calls, requests and answers: ``occurs``' first search): True means ``occurs`` is True;
        False, that only ``occurs`` (the bodies, built for it) can tell. None as ``occurs``."""
        if "\n" in ident:
            return None
        if not self._built:
            self._build()
        got = self._found.get(ident)
        if got is not None:
            return got
        if ident in self._not_in_calls:
            return False
        if self._in_calls(ident):
            self._found[ident] = True
            return True
        self._not_in_calls.add(ident)
        return False

    def _in_calls(self, ident: str) -> bool:
        return ident in self._words or any(ident in p for p in self._calls) or self._in_inputs(ident)

    # --- per-cut facts: computed once, answered for each candidate's cut (issue 17, round 3) ---
    # The shrink ladder's candidates differ in the cut only; the checks below used to walk the
    # whole session per candidate for what is the same list read up to a different cut.

    def body(self, prev_end: int) -> list[Event]:
        """``boundary.body(events, prev_end)`` (read-only: shared)."""
        got = self._memo.get(("body", prev_end))
        if got is None:
            got = self._memo[("body", prev_end)] = body(self.events, prev_end)
        return got

    def body_seqs(self, prev_end: int) -> list[int]:
        """The seqs of ``body(prev_end)``, in order (read-only: shared with the engine's ladder)."""
        got = self._memo.get(("seqs", prev_end))
        if got is None:
            evs = self.body(prev_end)
            facts = self._memo.get("range")  # (all the events' seqs, in order: the same list when evs is all of them)
            got = self._memo[("seqs", prev_end)] = (
                facts[1] if facts is not None and len(facts[1]) == len(evs) else [e.seq for e in evs])
        return got

    def prefix_sums(self, prev_end: int) -> array[int]:
        """``[0, *accumulate(count_event(e) for e in body(prev_end))]``: the tokens of each
        prefix of the body (read-only: shared with the engine's ladder, which made its own
        list of the same sums, issue 17), as machine ints (held through the ladder: 8 bytes
        a sum, not a list slot and an int object, ~36 bytes, issue 17, memory)."""
        sums = self._memo.get(("sums", prev_end))
        if sums is None:
            sums = self._memo[("sums", prev_end)] = array("q", [0])
            sums.extend(accumulate(map(count_event, self.body(prev_end))))
        return sums

    def covered(self, prev_end: int, end: int) -> list[Event]:
        """``[e for e in body(events, prev_end) if e.seq <= end]``."""
        return self.body(prev_end)[:bisect_right(self.body_seqs(prev_end), end)]

    def covered_tokens(self, prev_end: int, end: int) -> int:
        """``sum(count_event(e) for e in covered(prev_end, end))``, from prefix sums."""
        return self.prefix_sums(prev_end)[bisect_right(self.body_seqs(prev_end), end)]

    def latest_request(self, prev_end: int = 0) -> Event | None:
        """``boundary.latest_request(events, prev_end)``."""
        key = ("latest", prev_end)
        if key not in self._memo:
            evs = self.body(prev_end)
            self._memo[key] = next((evs[i] for i in range(len(evs) - 1, -1, -1) if evs[i].is_user_request),
                                   None)
        return self._memo[key]

    def batch_splits(self, end: int, prev_end: int) -> list[tuple[Event, list[ToolUseBlock], str]]:
        """What ``invariants.check_batches`` finds over the events as given, for a cut at
        ``end``: (event, its calls, the first call whose last result lies past the cut), in
        event order. Calls whose last result comes after the cut are few (the kept tail and
        the calls the cut straddles), and are read in the order of that result, latest first:
        machine ints in three arrays (the events' positions, their calls' last result, that
        order), not a tuple and a list per call held through the ladder (issue 17, memory)."""
        blocked = self._memo.get(("blocked", prev_end))
        if blocked is not None:
            # A call at seq s split from its last result at r (s <= end < r) puts ``end`` in
            # [its first call's seq, r), a span of ``blocked``: a cut in none splits nothing
            # (every rung of the ladder cuts at a safe point), without the calls' list below,
            # a walk of every call of the session (issue 17).
            starts, stops = blocked
            i = bisect_right(starts, end) - 1  # (the last span starting at or before the cut)
            if i < 0 or end >= stops[i]:
                return []
        evs = self.body(prev_end)
        last_result, with_uses = self._call_facts(prev_end)
        get = last_result.get
        calls = self._memo.get(("calls", prev_end))
        if calls is None:
            where, latest = array("q"), array("q")
            for pos in with_uses:
                uses = evs[pos].tool_uses
                if len(uses) == 1:  # (most calls: the list below without the generators)
                    lr = get(uses[0].id)
                else:
                    lr = max((x for x in map(get, [u.id for u in uses]) if x is not None), default=None)
                if lr is not None:
                    where.append(pos)
                    latest.append(lr)
            # (stable with reverse, as the sort by -latest was: equal results in event order)
            order = array("q", sorted(range(len(latest)), key=latest.__getitem__, reverse=True))
            calls = self._memo[("calls", prev_end)] = (order, where, latest)
        order, where, latest = calls
        hits = []
        for k in order:
            if latest[k] <= end:
                break
            e = evs[where[k]]
            if e.seq > end:
                continue
            uses = e.tool_uses
            first = next(u.id for u in uses if (lr := get(u.id)) is not None and e.seq <= end < lr)
            hits.append((k, e, uses, first))
        hits.sort(key=itemgetter(0))  # (in event order: the positions ascend with k)
        return [(e, uses, first) for _, e, uses, first in hits]

    def request_constraints(self, prev_end: int, end: int) -> list[tuple[int, list[str]]]:
        """(seq, ``constraint_sentences``) of each genuine request of ``covered(prev_end, end)``,
        in order (the requests are classified once for every cut)."""
        from compactor.lifting.lift import constraint_sentences, is_genuine_request

        reqs = self._memo.get(("requests", prev_end))
        if reqs is None:
            reqs = self._memo[("requests", prev_end)] = [
                (e.seq, constraint_sentences(e.text)) for e in self.body(prev_end) if is_genuine_request(e)]
        return [(seq, sents) for seq, sents in reqs if seq <= end]

    def unanswered_calls(self, prev_end: int) -> list[tuple[int, ToolUseBlock]]:
        """(seq, call) of each call in ``body(events, prev_end)`` that no result in the events
        answers, in order: the only calls ``check_unknown`` can find unlisted."""
        got = self._memo.get(("unanswered", prev_end))
        if got is None:
            answered = self.answered()
            evs = self.body(prev_end)
            got = self._memo[("unanswered", prev_end)] = [
                (e.seq, u) for e in map(evs.__getitem__, self._call_facts(prev_end)[1])
                for u in e.tool_uses if u.id not in answered]
        return got

    def take_calls(self, prev_end: int, calls: dict[str, Any] | None) -> None:
        """What ``boundary.safe_cut_points_both(..., calls=)`` learnt walking the body of these
        events for ``prev_end`` (the engine's plan walks it for the safe cuts): used instead of
        another walk when it was that very list."""
        if calls and calls.get("body") is self.body(prev_end):
            self._memo[("call_facts", prev_end)] = (calls["last_result"], calls["with_uses"])
            blocked = calls.pop("blocked", None)  # (let go of the list: ~65 bytes a call)
            if blocked is not None:  # its starts and ends as machine ints, held through the ladder
                self._memo[("blocked", prev_end)] = (array("q", [s for s, _ in blocked]),
                                                     array("q", [t for _, t in blocked]))

    def _call_facts(self, prev_end: int) -> tuple[dict[str, int], list[int]]:
        """(call id -> the seq of its last result, the positions of the events holding calls)
        in ``body(prev_end)`` (read-only: shared). The body is in seq order, so the last
        result written is the last one."""
        got = self._memo.get(("call_facts", prev_end))
        if got is None:
            evs = self.body(prev_end)
            got = self._memo[("call_facts", prev_end)] = (
                {r.tool_use_id: e.seq for e in evs if e.tool_results for r in e.tool_results},
                [i for i, e in enumerate(evs) if e.tool_uses])
        return got

    def range_facts(self) -> tuple[_BySeq, list[int], int, list[int]] | None:
        """The events by seq (read as a dict of them), their seqs, the snapshot (the largest
        seq) and the positions of the pinned events; None when the events are not in seq
        order (the checks then walk them)."""
        if "range" not in self._memo:
            self._walk_events()
        return self._memo["range"]


class _BySeq:
    """``{e.seq: e for e in events}`` read by bisection of the events' ascending seqs: ``in``,
    ``[seq]`` (the last event of that seq, as the dict keeps) and ``len`` (the distinct seqs),
    instead of a dict of every event held through the ladder (issue 17, memory: ~50 bytes an
    event, 15 MB at 300k events)."""

    __slots__ = ("_events", "_seqs", "_n")

    def __init__(self, events: Sequence[Event], seqs: list[int], distinct: int) -> None:
        self._events, self._seqs, self._n = events, seqs, distinct

    def __len__(self) -> int:
        return self._n

    def _at(self, seq: int) -> int:
        i = bisect_right(self._seqs, seq) - 1
        return i if i >= 0 and self._seqs[i] == seq else -1

    def __contains__(self, seq: object) -> bool:
        return type(seq) is int and self._at(seq) >= 0

    def __getitem__(self, seq: int) -> Event:
        i = self._at(seq)
        if i < 0:
            raise KeyError(seq)
        return self._events[i]


def _pieces_and_words(texts: list[str]) -> tuple[list[str], WordIndex]:
    """``texts`` joined by newlines a few hundred at a time, and an index of every
    whitespace-separated word of them (``word_index.WordIndex``: a hash a word, its hits
    checked in their piece; not a set of every word's string, ~30 MB at 300k events, issue 17,
    memory), and the pieces searched for what is not a word (one join of all the texts fewer)."""
    size = piece_size(len(texts))
    pieces = ["\n".join(texts[i:i + size]) for i in range(0, len(texts), size)]
    return pieces, WordIndex(pieces)
