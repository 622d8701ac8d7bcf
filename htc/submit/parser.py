"""Reading a submit description into macros and queue statements.

Theory of operation
-------------------
This is HTCondor's ``Parse_macros`` in submit syntax (condor_utils/config.cpp).  Physical
lines become logical lines (:func:`logical_lines`: trimmed, ``\\`` continues a line, ``#``
starts a comment line).  Each logical line is one of:

* ``name = value`` -- defines a macro.  References to ``name`` itself in ``value`` are
  expanded at once so ``x = $(x) more`` appends; everything else stays lazy.
* ``+Attr = value`` / ``-Attr =`` -- a job attribute, stored as macro ``MY.Attr``.
* ``name @=tag`` ... ``@tag`` -- a multi-line value.
* ``if`` / ``elif`` / ``else`` / ``endif`` with ``defined name``, ``version >= x.y.z``,
  numbers and booleans; ``include [ifexists] [command] : target``; ``error : msg``;
  ``warning : msg``.
* ``queue ...`` -- snapshots the macro set for the jobs of that statement.  Several queue
  statements put all their procs in one cluster, each with the macros in force at it.

Anything else is a syntax error naming the line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from htc.submit.errors import DAG_COMMANDS, DagFileError, SubmitError
from htc.submit.functions import split_list
from htc.submit.macros import Expander, MacroTable, expand_self
from htc.submit.queue import NO_HOST_ACCESS, QueueArgs, parse_queue_args, run_command

#: the HTCondor version ``if version >= x.y.z`` compares against (the semantics htc follows)
CONDOR_VERSION = (25, 14, 1)
_NAME_RE = re.compile(r"[A-Za-z0-9_./]+\Z")
_MAX_INCLUDE_DEPTH = 20


@dataclass
class QueueStatement:
    """One ``queue`` statement with the macros in force where it stands."""

    text: str  # the arguments as written (unexpanded)
    args: QueueArgs
    line: int
    file: str | None
    macros: MacroTable


@dataclass
class Description:
    """A parsed submit description."""

    macros: MacroTable
    queues: list[QueueStatement] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def logical_lines(lines: Iterable[str], comments: bool = True) -> Iterator[tuple[int, str]]:
    """Join continuation lines and trim, as HTCondor's ``getline_implementation`` does.

    Args:
        lines: physical lines.
        comments: whether a ``#`` line ends a continuation (submit files) or not (item files).
    Yields:
        ``(first line number, text)`` for every logical line, blank ones included.
    """
    it = iter(enumerate(lines, 1))
    for lineno, raw in it:
        buf = ""
        first = True
        cur = raw
        while True:
            text = cur.rstrip()
            stripped = text.lstrip()
            in_comment = stripped.startswith("#")
            if in_comment and not first and comments:
                # a commented-out line inside a continuation reads as whitespace,
                # but HTCondor keeps its last character (so a trailing '\' continues)
                stripped = text[-1:]
            # a comment line ending in '\' does not continue onto the next line
            may_continue = not (in_comment and first and comments)
            buf += stripped
            first = False
            if buf.endswith("\\") and may_continue:
                buf = buf[:-1]
                nxt = next(it, None)
                if nxt is None:
                    break
                cur = nxt[1]
                continue
            break
        yield lineno, buf


class _IfStack:
    """The if/elif/else/endif state (``ConfigIfStack``)."""

    def __init__(self):
        self.frames: list[list[bool]] = []  # [active, any_branch_taken, else_seen]

    def enabled(self) -> bool:
        return all(f[0] for f in self.frames)

    def outer_enabled(self) -> bool:
        return all(f[0] for f in self.frames[:-1])


class _Parser:
    def __init__(self, *, filename: str | None, cwd: str, defaults: Mapping[str, str],
                 env: Mapping[str, str], host_access: bool = True):
        self.host_access = host_access
        self.filename = filename
        self.cwd = cwd
        self.defaults = defaults
        self.env = env
        self.desc = Description(MacroTable())
        self.current = ""  # the logical line being read, for error messages

    def error(self, msg: str, line: int, file: str | None, command: str | None = None):
        if command is None:
            words = re.split(r"[\s=:]+", self.current.strip(), maxsplit=1)
            command = words[0] if words and words[0] else "(end of file)"
        return SubmitError(msg, file=file or self.filename, line=line, command=command)

    def expander(self) -> Expander:
        return Expander(self.desc.macros, self.defaults, {}, self.env, self.cwd)

    def parse(self, text: str, file: str | None, depth: int = 0) -> None:
        nul = text.find("\0")
        if nul >= 0:  # no NUL reaches a value: paths, arguments and names are C strings downstream
            lineno = text.count("\n", 0, nul) + 1
            self.current = text.splitlines()[lineno - 1] if text.splitlines() else ""
            raise self.error("the line holds a NUL byte (\\0), which no command, value or path may "
                             "contain; remove it", lineno, file)
        lines = logical_lines(text.splitlines())
        ifs = _IfStack()
        here: tuple[str, str, int] | None = None
        here_data: list[str] = []
        lineno = 0
        for lineno, line in lines:
            if not line or line.startswith("#"):
                continue
            self.current = line
            if here is not None:
                if line.startswith("@") and line[1:] == here[1]:
                    value = expand_self("\n".join(here_data), here[0], self.desc.macros)
                    self.desc.macros.set(here[0], value, here[2], file)
                    here, here_data = None, []
                else:
                    here_data.append(line)
                continue
            if line.startswith(":") and (ifs.frames or re.match(r":if(\s|$)", line)):
                line = line[1:]
            if self.conditional(line, ifs, lineno, file):
                continue
            if not ifs.enabled():
                continue
            here = self.statement(line, lines, lineno, file, depth)
        if here is not None:
            raise self.error(f"Found end-of-file while scanning for '@{here[1]}'", here[2], file,
                             here[0])
        if ifs.frames:
            raise self.error("endif(s) not found before end-of-file", lineno, file)

    # -- if / elif / else / endif ------------------------------------------------------
    def conditional(self, line: str, ifs: _IfStack, lineno: int, file: str | None) -> bool:
        word = line.split(None, 1)[0].lower() if line.split() else ""
        rest = line[len(word):].strip()
        if word == "if":
            value = ifs.enabled() and self.test_if(rest, lineno, file, "if")
            ifs.frames.append([value, value, False])
        elif word == "elif":
            if not ifs.frames or ifs.frames[-1][2]:
                raise self.error("elif is not allowed after else" if ifs.frames else
                                 "elif without matching if", lineno, file)
            f = ifs.frames[-1]
            value = (not f[1]) and ifs.outer_enabled() and self.test_if(rest, lineno, file, "elif")
            f[0] = value
            f[1] = f[1] or value
        elif word == "else":
            if not ifs.frames or ifs.frames[-1][2]:
                raise self.error("else is not allowed after else" if ifs.frames else
                                 "else without matching if", lineno, file)
            f = ifs.frames[-1]
            f[0], f[2] = not f[1], True
        elif word == "endif":
            if not ifs.frames:
                raise self.error("endif without matching if", lineno, file)
            ifs.frames.pop()
        else:
            return False
        return True

    def test_if(self, expr: str, lineno: int, file: str | None, kw: str) -> bool:
        """``Test_config_if_expression``: numbers, booleans, ``defined``, ``version``."""
        expanded = "$" in expr
        if expanded:
            expr = self.expander().expand(expr).rstrip()
        expr = expr.strip()
        inverted = expr.startswith("!")
        if inverted:
            expr = expr[1:].strip()
        if expanded and not expr:
            return inverted
        value = self.eval_if(expr, lineno, file, kw)
        return value != inverted

    def eval_if(self, expr: str, lineno: int, file: str | None, kw: str) -> bool:
        low = expr.lower()
        if re.fullmatch(r"-?(\d+\.?\d*|\.\d+)", expr):
            return float(expr) != 0
        if low in ("true", "yes", "t"):
            return True
        if low in ("false", "no", "f"):
            return False
        m = re.match(r"version\b\s*(!?)([<=>]?)(=?)\s*(.*)", expr, re.I)
        if m:
            return self.version_test(m, expr, lineno, file, kw)
        m = re.match(r"defined\b\s*(.*)", expr, re.I)
        if m:
            arg = m.group(1).strip()
            if not arg:
                return False
            if re.fullmatch(r"-?\d+(\.\d*)?", arg) or arg.lower() in ("true", "false"):
                return True
            if _NAME_RE.match(arg):
                v = self.expander().lookup(arg)
                if v is None and arg.lower() in ("yes", "no", "t", "f"):
                    return True
                return bool(v)
            raise self.error(f"{expr} is not a valid {kw} condition because defined argument "
                             "must be param name, boolean, or number", lineno, file)
        raise self.error(f"{expr} is not a valid {kw} condition because complex conditionals "
                         "are not supported", lineno, file)

    def version_test(self, m, expr, lineno, file, kw) -> bool:
        negated, opch, eq, ver = m.group(1), m.group(2), m.group(3), m.group(4).strip()
        op = {"<": -1, "=": 0, ">": 1, "": 0}[opch]
        or_equal = eq == "=" or (opch == "=" and not eq)
        ver = ver[1:] if ver[:1] in ("v", "V") else ver
        nums = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", ver)
        if not nums or int(nums.group(1)) < 6:
            raise self.error(f"{expr} is not a valid {kw} condition because the version literal "
                             "is invalid", lineno, file)
        given = (int(nums.group(1)), int(nums.group(2)),
                 int(nums.group(3)) if nums.group(3) else CONDOR_VERSION[2])
        diff = (CONDOR_VERSION > given) - (CONDOR_VERSION < given)
        result = diff == op or (or_equal and diff == 0)
        return not result if negated else result

    # -- statements --------------------------------------------------------------------
    def statement(self, line, lines, lineno, file, depth):
        """Handle one enabled logical line; returns heredoc state when ``@=`` starts one."""
        n = len(line)
        i = 0
        while i < n and not (line[i].isspace() or line[i] in "=:"):
            i += 1
        if i == n:
            self.queue(line, lines, lineno, file, depth)
            return None
        name = line[:i]
        op = line[i] if line[i] in "=:" else ""
        j = i + 1
        word_before_op = False
        if not op:
            while j < n and line[j].isspace():
                j += 1
            word_before_op = j < n and line[j] not in "=:@"
            while j < n and line[j] not in "=:@":
                j += 1
            if j < n:
                op = line[j]
                j += 1
                if op == "@":
                    if j < n and line[j] == "=":
                        j += 1
                    else:
                        op = ""
        while j < n and line[j].isspace():
            j += 1
        rhs = line[j:]
        bare = name[1:] if name.startswith("@") else name
        if op == ":" and bare.lower() in ("error", "warning"):
            msg = self.expander().expand(rhs)
            if bare.lower() == "error":
                raise self.error(f"Error : {msg}", lineno, file)
            self.desc.warnings.append(f"Line {lineno}: Warning : {msg}")
            return None
        if op == ":" and bare.lower() == "include":
            self.include(line[len(name):line.index(":", len(name))].strip(), rhs, lineno, file,
                         depth)
            return None
        if word_before_op:
            self.queue(line, lines, lineno, file, depth)
            return None
        if "$" in name:
            name = self.expander().expand(name)
        if op in ("=", "@") and not name.lstrip("+-"):  # ' = 3', '+ = 3': a value with no name
            raise self.error(f"Illegal Identifier: <{name}>: a line 'name = value' needs a name "
                             "before the '='", lineno, file, name or "=")
        if op == ":" and bare.lower() == "use":
            raise self.error(f"'use {rhs}' submit templates are not supported by htc; "
                             "write the commands out", lineno, file)
        if op == "=" and name[:1] in "+-":
            self.desc.macros.set("MY." + name[1:], rhs if name[0] == "+" else "", lineno, file)
            return None
        if op not in ("=", "@") or name.lower() == "queue":
            if op == ":":
                raise self.error(f"'{line}': ':' is not an assignment in a submit description; "
                                 "write 'name = value'", lineno, file, name)
            self.queue(line, lines, lineno, file, depth)
            return None
        if not _NAME_RE.match(name):
            raise self.error(f"Illegal Identifier: <{name}>", lineno, file)
        if op == "@":
            return (name, rhs, lineno)
        self.desc.macros.set(name, expand_self(rhs, name, self.desc.macros), lineno, file)
        return None

    def include(self, opts: str, target: str, lineno: int, file: str | None, depth: int) -> None:
        words = opts.split()
        must_exist = True
        is_command = False
        if words[:1] and words[0] in ("ifexist", "ifexists"):
            must_exist = False
            words = words[1:]
        if words[:1] and words[0] in ("command", "output"):
            is_command = True
            words = words[1:]
        if words:
            raise self.error(f"unexpected keyword(s) '{' '.join(words)}' after include", lineno, file)
        if depth + 1 >= _MAX_INCLUDE_DEPTH:
            raise self.error("includes nested too deep", lineno, file)
        if not self.host_access:
            raise self.error(f"include : {target.strip()}: {NO_HOST_ACCESS}", lineno, file, "include")
        target = self.expander().expand(target).strip()
        if is_command or target.endswith("|"):
            cmd = target.rstrip("|").strip()
            try:
                text = run_command(cmd, self.cwd, dict(self.env))
            except SubmitError as e:
                raise e.located(file=file or self.filename, line=lineno, command="include")
            self.parse(text, f"{cmd} |", depth + 1)
            return
        path = target if os.path.isabs(target) else os.path.join(self.cwd, target)
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                text = f.read()
        except OSError as e:
            if not must_exist:
                return
            raise self.error(f"can't open file {target}: {e.strerror}", lineno, file, "include")
        self.parse(text, target, depth + 1)

    def queue(self, line: str, lines, lineno: int, file: str | None, depth: int) -> None:
        m = re.match(r"queue(\s|$)", line, re.I)
        if not m:
            words = line.split(None, 1)
            if words and words[0].lower() in DAG_COMMANDS:
                raise DagFileError(file=file or self.filename, line=lineno, text=line)
            raise self.error(f"Syntax error: '{line}' is neither 'name = value' nor a queue "
                             "statement", lineno, file)
        if depth > 0:
            raise self.error("Queue statement not allowed in include file or command", lineno,
                             file, "queue")
        text = line[5:].strip()
        try:
            args = parse_queue_args(self.expander().expand(text))
        except SubmitError as e:
            raise e.located(file=file or self.filename, line=lineno, command="queue")
        if args.source == "<":
            closed = False
            for _, item_line in lines:
                if item_line.startswith("#"):
                    continue
                if item_line.startswith(")"):
                    closed = True
                    break
                if args.mode == "from":
                    args.items.append(item_line)
                else:
                    args.items.extend(split_list(item_line))
            if not closed:
                raise self.error("Reached end of file without finding closing brace ')' for "
                                 f"Queue command on line {lineno}", lineno, file, "queue")
            args.source = ""
        self.desc.queues.append(QueueStatement(text, args, lineno, file,
                                               self.desc.macros.copy()))


def parse_description(text: str, *, filename: str | None, cwd: str, defaults: Mapping[str, str],
                      env: Mapping[str, str], host_access: bool = True) -> Description:
    """Parse submit-description text.

    Args:
        text: the description.
        filename: its file name, for error messages (None for a string).
        cwd: the submit directory (includes and item files are relative to it).
        defaults: built-in macros (see :func:`htc.submit.macros.default_macros`).
        env: the environment for ``$ENV()`` and include commands.
        host_access: whether includes may read files and run commands (see ``Submit``).
    Returns:
        The macros and queue statements.
    Raises:
        SubmitError: a line cannot be parsed; the error names the file and line.
    """
    p = _Parser(filename=filename, cwd=cwd, defaults=defaults, env=env, host_access=host_access)
    p.parse(text, filename)
    return p.desc
