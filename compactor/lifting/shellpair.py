"""The lifter's short path for the commonest tool pair: a plain shell command that worked.

Most pairs of a long agent session are a shell tool's call of a plain command (``cat src/x.py``,
``ls -la``, ``grep -n foo a.py``: no quote, pipe, redirect or heredoc) that reads files and
changes none, answered by a result that worked (issue 17: the generated benchmark sessions are
nothing else). The general path classifies the call into an ``_Action`` (15 fields, a summary
and a ``ShellFiles``), remembers it as the pass's last call, and ``add_pair`` walks every
branch of what a pair may be (todo lists, reads and changes by file tools, SWE-agent's markers,
failures, tests). ``ShellPairs.shell_pair`` checks the pair's shape first, changing nothing,
and declines any other pair (the general path then folds it); for a pair of that shape it
makes the same changes to the accumulator in the same order, with no ``_Action``:

* the agent's move and the pass's last call (``note_move``, ``on_call``; ``build`` classifies
  the last call again when it is one of these, the same call giving the same ``_Action``);
* the command run (``Command``, with the detail ``run_detail`` gives both paths), the files it
  read (``_touch``, with the read text's facts when it read one file);
* the soft failures of a result that worked, the unkeyed run a later failure may be resolved
  by, and the errors a result that worked names (``error_names``).

The shape, all of which the general path reads the same way: ``actions.plain_command`` gives
the call's command (the path ``classify`` takes without its general machinery); the command is
plain (``shell.plain_reads``: no character the scanner treats specially) and changes no file;
it runs no tests; the result is within the cut and did not fail (``_outcome``) and holds none
of SWE-agent's file markers; the call is the agent's (role ``assistant``).
``tests/unit/test_lift_shell_pair.py`` lifts sessions with this path turned off and compares.
"""

from __future__ import annotations

from typing import Any

from compactor.events import Event, ToolResultBlock, ToolUseBlock
from compactor.lifting import content as _content
from compactor.lifting import failures as _failures
from compactor.lifting import outputs as _outputs
from compactor.lifting.actions import (_TEST_NEEDLES, _clip, _outcome, _route, error_names, is_test_command,
                                       plain_command)
from compactor.lifting.needles import any_needle
from compactor.lifting.shell import plain_reads
from compactor.lifting.state import ErrorItem, first_file_ref, op_list, run_command

ON = True
"""False: every pair takes the general path (the tests compare the two)."""
_READ = op_list("read")  # (the ``ops`` of a file's first read, shared: ``lifting.state``)
_TEST_OR_INSTALL = any_needle(_TEST_NEEDLES + _outputs._INSTALLERS)
"""Every test command (``is_test_command``) and every install (``outputs.is_install``) holds one of these:
a command without any is neither, found by one search of the command instead of the two checks' own
(issue 17: ~2.8 k instructions of a pair fewer; most commands name neither)."""


def run_detail(command: str, text: str, plain_ok: bool, install: bool | None = None) -> str:
    """A command run's ``detail``: an install's outcome, or a partial answer's, and (``plain_ok``: it
    worked and reads or changes no file) the gist of what a fetch or a query answered. ``install``:
    ``outputs.is_install(command)``, when the caller knows it."""
    if install is None:
        install = _outputs.is_install(command)
    detail = ((_outputs.install_outcome(text) if install else _failures.partial_result(text)) if text else "")
    if text and plain_ok and not install:
        gist = _outputs.output_gist(text)  # what a fetch or a query answered
        detail = f"{detail}; {gist}" if detail and gist else detail or gist
    return detail


class ShellPairs:
    """The short path of ``lift._Acc`` (a base class of it: the accumulator's fields and methods are
    ``_Acc``'s, set in its ``__init__``)."""

    def shell_pair(self: Any, e: Event, use: ToolUseBlock, seq: int, got: tuple[ToolResultBlock, int],
                   use_id: str, alone: bool = False) -> bool:
        """Fold the agent's call ``use`` in ``e`` (at ``seq``; ``use_id``: its ``id``, as the fold read it;
        ``alone``: it is the event's one call) and its result ``got`` (block, seq) as ``classify``,
        ``note_move``, ``on_call`` and ``add_pair`` do, when the pair is a plain shell command that worked
        and changed no file; False, having changed nothing, for any other pair."""
        inp, name = use.input, use.name
        if not ON or type(inp) is not dict or (command := plain_command(_route(name), inp)) is None:
            return False
        reads = plain_reads(command)
        if reads is None:
            return False
        neither = _TEST_OR_INSTALL.search(command) is None  # (no test run, no install: one search)
        if not neither and is_test_command(command):
            return False
        result, result_seq = got
        out = _outcome(result)
        text = out.text
        if out.failed or text and ("(Open file: " in text or "[File: " in text):
            return False
        command = _clip(command)  # (``_command_action``'s ``act.command``)
        self.note_move(seq, command, True)  # (the text is the command, stripped, not blank)
        if seq >= self._last_seq:  # (``on_call``; the classification is made again when build reads it)
            self._last, self._last_seq, self._last_out = ("call", e, use, None), seq, (out, result_seq)
        else:
            self._last_result(use_id, out, result_seq)
        self._soft.on_command(use_id, command, seq, result_seq, True)
        if use_id not in self._command_ids:  # (not added: see ``_command_ids``)
            self.commands.append(run_command(seq=seq, command=command, tool=name, tool_use_id=use_id,
                                             exit_code=out.exit_code, status="ok", result_seq=result_seq,
                                             detail=run_detail(command, text, not reads, False if neither else None)))
        files = self.files_read
        for p in reads:
            facts = _content.read_facts(p, text) if len(reads) == 1 else []
            path = p.strip()  # (a plain command's word holds no quote or backtick for ``_touch`` to strip)
            if path in files or not path:
                self._touch(files, p, seq, "read", use_id, facts=facts)
            else:  # (``_touch``'s first touch of a file read)
                files[path] = first_file_ref(path=path, seq=seq, ops=_READ, tool_use_id=use_id, digest="",
                                             facts=facts)
        soft = _failures.soft_failures(command, text, use_id, seq, result_seq, "", True) if text else None
        if soft:  # (rare: a soft failure carries the key; the same call, keyed)
            key = _failures.action_key(name, command, (), "command")
            soft = _failures.soft_failures(command, text, use_id, seq, result_seq, key, True)
            for f in soft:
                self._add_failed(f)
            if any(f.key == key for f in soft):
                return self._pair_errors(text, use_id, result_seq)
            self._note_ok(key, seq, inp)
        elif alone:  # (the event of its one call: ``_ok_keys`` reads the call and seq from it)
            self._unkeyed_ok.append(e)
        else:
            self._unkeyed_ok += (use, seq)  # (``_ok_keys`` reads its name, input and command from the call)
        return self._pair_errors(text, use_id, result_seq)

    def _pair_errors(self: Any, text: str, use_id: str, result_seq: int) -> bool:
        """The errors a result that worked names (lines that start with one); True."""
        for name, line in error_names(text, False) if text else ():
            self._add_error(ErrorItem(seq=result_seq, name=name, message=line, tool_use_id=use_id))
        return True
