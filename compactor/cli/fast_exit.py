"""The process ends without tearing itself down after a command that asked for it (issue 17).

At the end of a big ``compact --inline`` the interpreter's exit frees, one by one, every object
the run still holds (the imported session's events, the result, the tokenizer, every module's
dict): ~0.1 s of CPU at any size, and ~0.1 s more per 100k events for the session's objects,
for memory the operating system takes back at once anyway. A command whose output is written
asks for the short exit (``ask``); the process's own entry (``python -m compactor``, the
``compactor`` script: ``entry``) then flushes stdout and stderr and leaves with
``os._exit(code)``. Everything written is written: the files a command opens are closed
before it returns, and the streams and logging's handlers (``logging.shutdown``, the one atexit
hook the inline path registers) are flushed here; only teardown is skipped (the inline path
starts no thread).

``main()`` called by a test or any other caller in its own process is not the process's entry
(``enable`` is not called): ``ask`` then holds nothing and the process ends as usual.
"""

from __future__ import annotations

import gc
import os
import sys

_state: dict[str, bool] = {"enabled": False, "asked": False}
_held: list[object] = []


def enable() -> None:
    """Called by the process's entry before ``main``: a command may ask for the short exit."""
    _state["enabled"] = True


def enabled() -> bool:
    """Whether this process ends by the short exit when a command asks (``entry`` ran)."""
    return _state["enabled"]


def ask(*held: object) -> bool:
    """The command's work is written: the process may end without its teardown. ``held``:
    objects kept alive until then, so they are not freed one by one just before the exit.
    Returns whether the short exit will happen (only at the process's entry)."""
    if not _state["enabled"]:
        return False
    _state["asked"] = True
    _held.extend(held)
    # Nothing the process holds now will be collected before it ends: out of the cyclic
    # collector's sight (its permanent generation). Asked inside the CLI's pause of the
    # collector (``engine.gc_pause``), whose end would otherwise start a collection walking
    # every object made in the pause and still held (0.25 s of CPU at 100k events).
    gc.freeze()
    return True


def leave(code: int) -> int:
    """After ``main`` at the process's entry: when a command asked, flush the streams and end
    the process now with ``code``; otherwise (or if a stream cannot be flushed: the usual exit
    then reports it as before) return ``code`` for ``sys.exit``."""
    if not _state["asked"]:
        return code
    try:
        logging = sys.modules.get("logging")
        if logging is not None:
            logging.shutdown()  # (the one atexit hook the inline path registers: its handlers flushed)
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        _held.clear()
        return code
    os._exit(code)
