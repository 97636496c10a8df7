"""Which files a shell command reads and changes, without ever inventing a path.

The lifter states these paths in the summary, and the validator rejects any identifier that
is not in the covered range; a path mangled from a command (``ci.ymln+name`` from a heredoc
whose newlines were stored as ``\\n``) makes a whole compaction fail. So the rules here are:

- a small quote-aware scanner, not ``shlex`` on regex-split pieces: heredoc bodies are data
  (``cat > f <<'EOF' ... EOF`` changes ``f`` and nothing in the body is parsed), here-strings
  and command substitutions are skipped;
- commands whose newlines are stored as the two characters ``\\n`` (a JSON-escaped string, a
  Codex ``exec`` script calling ``exec_command({cmd: "..."})``) are decoded first;
- every path reported is checked last against the original text: it must occur there
  verbatim and look like a path (no newline, no backslash, no shell syntax).

``printf``/``echo``/``cat <<EOF`` redirected to a file, and ``tee [-a] f`` report what they
wrote (``ShellFiles.writes``) so the file's change can be digested.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_READ_PROGRAMS = {"cat", "nl", "head", "tail", "less", "more", "bat", "sed", "wc", "open"}
_CHANGE_PROGRAMS = {"rm", "touch", "mv", "cp", "tee", "truncate", "unlink"}
_PREFIX_WORDS = {"sudo", "time", "nohup", "then", "do", "else", "elif", "if", "while", "until",
                 "!", "{", "exec", "command", "builtin"}
_SEPARATORS = (";;", "&&", "||", "|&", ";", "|", "&", "(", ")")
_REDIRECTS = ("<<<", "<<-", "<<", "<>", "<&", "<", "&>>", "&>", ">>", ">&", ">|", ">")
_CODE_CMD_RE = re.compile(r"""\b(?:cmd|command|script)["']?\s*:\s*("(?:[^"\\\n]|\\.)*")""")
_CODE_TEMPLATE_RE = re.compile(r"""\b(?:cmd|command|script)["']?\s*:\s*`([^`]*)`""")
_MAX_SCAN_CHARS = 200_000


@dataclass
class Word:
    """A shell word: its value with quotes removed, and whether it holds expansions."""

    value: str = ""
    dynamic: bool = False  # $VAR, $(...), `...`, globs: not a literal file name


@dataclass
class SimpleCommand:
    words: list[Word] = field(default_factory=list)
    redirects: list[tuple[str, Word]] = field(default_factory=list)
    heredocs: list[str] = field(default_factory=list)  # bodies fed on stdin (data, not code)
    piped: bool = False  # stdin comes from the previous command's `|`


@dataclass(slots=True)
class ShellFiles:
    """What a shell command does to files."""

    reads: list[str] = field(default_factory=list)
    changes: dict[str, str] = field(default_factory=dict)  # path -> how ("shell redirect", ...)
    writes: dict[str, str] = field(default_factory=dict)  # path -> text written, when known


# --- decoding ---------------------------------------------------------------------------------


def scripts_of(command: str) -> list[str]:
    """The shell scripts a command text holds, decoded.

    A code wrapper (``exec_command({cmd: "..."})``) yields its JSON string literals; a text
    with no real newline but literal ``\\n`` sequences is a JSON-escaped script.
    """
    wrapped = ":" in command and ("cmd" in command or "command" in command or "script" in command)
    inner = [m.group(1) for m in _CODE_TEMPLATE_RE.finditer(command)] if wrapped else []
    for m in (_CODE_CMD_RE.finditer(command) if wrapped else ()):
        try:
            value = json.loads(m.group(1))
        except ValueError:
            continue
        if isinstance(value, str):
            inner.append(value)
    if inner:
        return inner
    if "\n" not in command and ("\\n" in command or '\\"' in command):
        try:
            decoded = json.loads('"' + command + '"')
        except ValueError:
            decoded = command.replace("\\n", "\n").replace("\\t", "\t")
        if isinstance(decoded, str):
            return [decoded]
    return [command]


# --- scanning ---------------------------------------------------------------------------------


class _Scanner:
    """Splits a script into simple commands; heredoc bodies are read as data."""

    def __init__(self, text: str) -> None:
        self.s = text[:_MAX_SCAN_CHARS]
        self.i = 0
        self.out: list[SimpleCommand] = []
        self.cur = SimpleCommand()
        self.pending: list[tuple[str, bool, SimpleCommand]] = []  # (delimiter, strip tabs, cmd)

    def run(self) -> list[SimpleCommand]:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r":
                self.i += 1
            elif c == "\n" or s.startswith("\\n", self.i):
                self.i += 1 if c == "\n" else 2
                self._end(piped_next=False)
                self._read_heredocs()
            elif s.startswith("\\\n", self.i):
                self.i += 2  # line continuation
            elif c == "#" and self._at_word_start():
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
            elif self._separator():
                pass
            elif self._redirect():
                pass
            else:
                self.cur.words.append(self._word())
        self._end(piped_next=False)
        return self.out

    def _at_word_start(self) -> bool:
        return self.i == 0 or self.s[self.i - 1] in " \t\n;|&()"

    def _end(self, piped_next: bool) -> None:
        cmd = self.cur
        if cmd.words or cmd.redirects or cmd.heredocs:
            self.out.append(cmd)
        self.cur = SimpleCommand(piped=piped_next)

    def _separator(self) -> bool:
        s = self.s
        if s.startswith("&>", self.i):
            return False
        for sep in _SEPARATORS:
            if s.startswith(sep, self.i):
                self.i += len(sep)
                self._end(piped_next=sep in ("|", "|&"))
                return True
        return False

    def _redirect(self) -> bool:
        s = self.s
        # a leading fd number belongs to the operator (2>err.log), not to the words
        j = self.i
        while j < len(s) and s[j].isdigit():
            j += 1
        op = next((r for r in _REDIRECTS if s.startswith(r, j)), None)
        if op is None or (j > self.i and not self._at_word_start()):
            return False
        self.i = j + len(op)
        while self.i < len(s) and s[self.i] in " \t":
            self.i += 1
        if op in ("<<", "<<-"):
            delim = self._word().value
            if delim:
                self.pending.append((delim, op == "<<-", self.cur))
            return True
        target = self._word()
        if op in (">&", "<&") and (target.value.isdigit() or target.value == "-"):
            return True
        self.cur.redirects.append((op, target))
        return True

    def _read_heredocs(self) -> None:
        """Consume the bodies of heredocs opened on the line just ended."""
        if not self.pending:
            return
        s = self.s
        # A script stored with literal \n separators has its body lines split the same way.
        newline = "\n" if "\n" in s else "\\n"
        for delim, strip_tabs, cmd in self.pending:
            lines: list[str] = []
            while self.i < len(s):
                end = s.find(newline, self.i)
                end = len(s) if end < 0 else end
                line = s[self.i:end]
                self.i = min(len(s), end + len(newline))
                if (line.lstrip("\t") if strip_tabs else line).rstrip("\r") == delim:
                    break
                lines.append(line)
            cmd.heredocs.append("\n".join(lines) + ("\n" if lines else ""))
        self.pending = []

    def _word(self) -> Word:
        s = self.s
        w = Word()
        parts: list[str] = []
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r\n;|&<>()" or s.startswith("\\n", self.i):
                break
            if c == "'":
                end = s.find("'", self.i + 1)
                end = len(s) if end < 0 else end
                parts.append(s[self.i + 1:end])
                self.i = end + 1
            elif c == '"':
                self.i += 1
                while self.i < len(s) and s[self.i] != '"':
                    if s[self.i] == "\\" and self.i + 1 < len(s):
                        parts.append(s[self.i + 1])
                        self.i += 2
                        continue
                    if s[self.i] in "$`":
                        w.dynamic = True
                    parts.append(s[self.i])
                    self.i += 1
                self.i += 1
            elif c == "\\":
                parts.append(s[self.i + 1:self.i + 2])
                self.i += 2
            elif c == "$" and s.startswith("$(", self.i):
                w.dynamic = True
                self.i = self._skip_group(self.i + 1, "(", ")")
                parts.append("$()")
            elif c == "`":
                w.dynamic = True
                end = s.find("`", self.i + 1)
                self.i = len(s) if end < 0 else end + 1
                parts.append("``")
            else:
                if c in "$*?[{":
                    w.dynamic = True
                parts.append(c)
                self.i += 1
        w.value = "".join(parts)
        return w

    def _skip_group(self, i: int, open_: str, close: str) -> int:
        depth = 0
        s = self.s
        while i < len(s):
            c = s[i]
            if c == "'":
                end = s.find("'", i + 1)
                i = len(s) if end < 0 else end + 1
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return i


# Characters the scanner treats as anything but part of a plain word (quotes, escapes,
# separators, redirects, expansions, comments, line ends). A script without any of them is
# one simple command of literal words split on spaces - most agent commands (``cat src/x.py``,
# ``pytest -q tests``): the character-by-character scan was 20% of a lift (issue 17).
_SPECIAL_RE = re.compile(r"[\t\r\n;|&<>()'\"\\$`*?\[{#]")


def parse(script: str) -> list[SimpleCommand]:
    """The simple commands of ``script`` (heredoc bodies attached as data)."""
    text = script[:_MAX_SCAN_CHARS]
    if _SPECIAL_RE.search(text) is None:
        words = [Word(value=w) for w in text.split(" ") if w]
        return [SimpleCommand(words=words)] if words else []
    return _Scanner(script).run()


# --- classification ---------------------------------------------------------------------------

_PATHY_EXT_RE = re.compile(r"\.[A-Za-z0-9]{1,6}$")
_BAD_PATH_CHARS = set("|&;<>$`*{}()=\n\r\t\\\"'")
_BAD_PATH_RE = re.compile("[" + re.escape("".join(sorted(_BAD_PATH_CHARS))) + "]")
"""A character of ``_BAD_PATH_CHARS`` (one search: no set look-up per character)."""


def plausible_path(tok: str) -> bool:
    """A token that reads as a file path: no shell syntax, escapes or newlines."""
    if not tok or tok.startswith("-") or tok in (".", "..") or len(tok) > 300:
        return False
    if _BAD_PATH_RE.search(tok) is not None or "://" in tok:  # (a URL, ``http://`` ones too)
        return False
    return "/" in tok or bool(_PATHY_EXT_RE.search(tok))


def _literal(w: Word) -> str | None:
    return None if w.dynamic else w.value


_ASSIGN_RE = re.compile(r"^[A-Za-z_]\w*=")


def _program(cmd: SimpleCommand) -> tuple[str, list[Word]]:
    words = list(cmd.words)
    while words and (_ASSIGN_RE.match(words[0].value) or words[0].value in _PREFIX_WORDS):
        words = words[1:]
    if not words:
        return "", []
    return words[0].value.rsplit("/", 1)[-1], words[1:]


def _args(words: list[Word]) -> list[str]:
    return [v for v in (_literal(w) for w in words) if v is not None and not v.startswith("-")]


def _sed_files(args: list[Word]) -> list[str]:
    """sed's file operands: the script (first operand, or the -e/-f argument) is not one."""
    files: list[str] = []
    script_given = False
    skip = False
    for w in args:
        if skip:
            skip = False
            continue
        if w.value in ("-e", "-f", "--expression", "--file"):
            script_given, skip = True, True
        elif w.value.startswith("-"):
            continue
        elif not script_given:
            script_given = True
        elif not w.dynamic:
            files.append(w.value)
    return files


def _content(prog: str, args: list[Word], cmd: SimpleCommand, prev: SimpleCommand | None) -> str | None:
    """Text a command writes to stdout when it is data: echo/printf args or a heredoc body."""
    if cmd.heredocs and prog in ("cat", "tee", ""):
        return cmd.heredocs[-1]
    if prog == "echo":
        vals = [w.value for w in args]
        while vals and re.match(r"^-[neE]+$", vals[0]):
            vals = vals[1:]
        return " ".join(vals) + "\n"
    if prog == "printf":
        vals = [w.value for w in args if not w.value.startswith("-")]
        return vals[0] if vals else None
    if prog == "tee" and cmd.piped and prev is not None:
        p_prog, p_args = _program(prev)
        return _content(p_prog, p_args, prev, None)
    return None


def _classify(cmd: SimpleCommand, prev: SimpleCommand | None, out: ShellFiles) -> None:
    prog, args = _program(cmd)
    content = _content(prog, args, cmd, prev)
    for op, target in cmd.redirects:
        path = _literal(target)
        if op in ("<", "<>", "<<<") or path is None or path.startswith("/dev/"):
            continue
        append = op in (">>", "&>>")
        how = {"printf": "printf", "echo": "echo", "cat": "heredoc"}.get(prog, "shell redirect")
        if prog == "cat" and not cmd.heredocs:
            how = "shell redirect"
        out.changes.setdefault(path, how + (" append" if append and how != "shell redirect" else ""))
        if content is not None and how != "shell redirect":
            out.writes[path] = content
    values = _args(args)
    if prog == "sed":
        inplace = any(w.value.startswith("-i") or w.value == "--in-place" for w in args)
        for f in _sed_files(args):
            if inplace:
                out.changes.setdefault(f, "sed -i")
            else:
                out.reads.append(f)
    elif prog in _READ_PROGRAMS:
        out.reads.extend(values)
    elif prog in _CHANGE_PROGRAMS:
        files = values[-1:] if prog in ("cp",) else values  # mv: both the old and the new name change
        append = any(w.value in ("-a", "--append") for w in args)
        for f in files:
            how = {"rm": "deleted", "unlink": "deleted", "mv": "moved"}.get(prog, prog)
            out.changes.setdefault(f, "tee -a" if prog == "tee" and append else how)
            if prog == "tee" and content is not None:
                out.writes[f] = content
    elif prog == "git" and values[:1] in (["mv"], ["rm"]):
        for f in values[1:]:
            out.changes.setdefault(f, "git " + values[0])


def _one_read(command: str) -> list[str] | None:
    """The files a plain ``PROG FILE`` of a read program other than ``sed`` reads: its one operand if
    ``plausible_path``, as ``_plain_files``' word loop finds; None for any other command."""
    prog, _, arg = command.partition(" ")
    if prog in _READ_PROGRAMS and prog != "sed" and arg and " " not in arg:
        return [arg] if plausible_path(arg) else []
    return None


def _plain_files(command: str) -> ShellFiles:
    """``shell_files`` of a plain command (no character of ``_SPECIAL_RE``, at most
    ``_MAX_SCAN_CHARS``): one simple command of literal words split on spaces, no redirects, no
    heredocs, nothing piped, so nothing is written and only the program's operands count. The
    same rules as ``_classify`` over those words, without building ``Word``/``SimpleCommand``s
    (issue 17: most agent commands are plain); ``tests/unit/test_shell_plain.py`` holds them equal."""
    reads = _one_read(command)
    if reads is not None:  # (``cat FILE``, the commonest plain command)
        return ShellFiles(reads, {}, {})
    words = command.split(" ")
    if "" in words:  # (runs of spaces, or one at either end: most commands have none)
        words = [w for w in words if w]
    i = 0
    while i < len(words) and (words[i] in _PREFIX_WORDS or "=" in words[i] and _ASSIGN_RE.match(words[i])):
        i += 1
    if i >= len(words):
        return ShellFiles()
    prog = words[i].rsplit("/", 1)[-1]
    args = words[i + 1:]
    reads: list[str] = []
    changes: dict[str, str] = {}
    if prog == "sed":
        inplace = any(w.startswith("-i") or w == "--in-place" for w in args)
        for f in _sed_files([Word(value=w) for w in args]):
            if inplace:
                changes.setdefault(f, "sed -i")
            else:
                reads.append(f)
    elif prog in _READ_PROGRAMS:  # (its operands, read; nothing changed. plausible_path drops "-" flags)
        return ShellFiles([w for w in (dict.fromkeys(args) if len(args) > 1 else args) if plausible_path(w)], {}, {})
    elif prog in _CHANGE_PROGRAMS:
        values = [w for w in args if not w.startswith("-")]
        append = "-a" in args or "--append" in args
        how = {"rm": "deleted", "unlink": "deleted", "mv": "moved"}.get(prog, prog)
        for f in (values[-1:] if prog == "cp" else values):
            changes.setdefault(f, "tee -a" if prog == "tee" and append else how)
    elif prog == "git":
        values = [w for w in args if not w.startswith("-")]
        if values[:1] in (["mv"], ["rm"]):
            for f in values[1:]:
                changes.setdefault(f, "git " + values[0])
    # (every word is a piece of the command: it occurs verbatim in it, as ``shell_files`` promises)
    reads = [p for p in (dict.fromkeys(reads) if len(reads) > 1 else reads) if plausible_path(p)]
    if not changes:
        return ShellFiles(reads, {}, {})  # (by position: no default factories called)
    return ShellFiles(reads=reads, changes={p: how for p, how in changes.items() if plausible_path(p)})


def shell_files(command: str) -> ShellFiles:
    """Files ``command`` reads and changes; every path occurs verbatim in ``command``."""
    if len(command) <= _MAX_SCAN_CHARS and _SPECIAL_RE.search(command) is None:
        return _plain_files(command)
    return _scanned_files(command)


def plain_reads(command: str) -> list[str] | None:
    """``shell_files(command).reads`` of a plain command (``_plain_files``) that changes no file; None
    for any other command (the lifter's short path for a tool pair takes those to the general one)."""
    if len(command) > _MAX_SCAN_CHARS or _SPECIAL_RE.search(command) is not None:
        return None
    reads = _one_read(command)
    if reads is not None:  # (no ``ShellFiles`` for ``cat FILE``)
        return reads
    files = _plain_files(command)
    return None if files.changes else files.reads


def _scanned_files(command: str) -> ShellFiles:
    """``shell_files`` by the scanner: any command."""
    out = ShellFiles()
    for script in scripts_of(command):
        cmds = parse(script)
        for i, cmd in enumerate(cmds):
            _classify(cmd, cmds[i - 1] if i and cmd.piped else None, out)
    # (the one rule: a path that reads as one and occurs verbatim in the command)
    reads = [p for p in (dict.fromkeys(out.reads) if len(out.reads) > 1 else out.reads)
             if plausible_path(p) and p in command]
    if not out.changes and not out.writes:
        out.reads = reads
        return out  # (nothing changed, nothing written)
    changes = {p: how for p, how in out.changes.items() if plausible_path(p) and p in command}
    writes = {p: text for p, text in out.writes.items() if p in changes}
    return ShellFiles(reads=reads, changes=changes, writes=writes)
