"""The ``queue`` statement: its arguments, its item list, and the procs it makes.

Grammar (HTCondor ``SubmitForeachArgs::parse_queue_args``)::

    queue [<count>] [<var>[,<var>...] (in|from|matching) [files|dirs|any] [<slice>] <items>]

``<count>`` is an integer expression (default 1) of procs per item; without ``in``/``from``/
``matching`` there is one implicit empty item.  ``<items>`` is a list on the same line,
a ``(`` ... ``)`` list that may span lines (the ``)`` starts a line of its own), a file name
(``from``), or a command ending in ``|`` (``from``).  ``in`` and ``matching`` items are split
on commas and spaces; ``from`` items are whole lines, split into the variables on commas or
spaces with the last variable taking the rest.  ``<slice>`` is Python's ``[start:stop:step]``
over the items; ``$(ItemIndex)``/``$(Row)`` keep the index in the full list.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from dataclasses import dataclass, field

from htc.submit import exprtext
from htc.submit.errors import SubmitError
from htc.submit.functions import split_list

_FOREACH = ("in", "from", "matching")
_SEP = re.compile(r"[, \t]")
_WS = re.compile(r"[ \t]*")


@dataclass
class QueueArgs:
    """The parsed arguments of one queue statement."""

    count: int = 1
    vars: list[str] = field(default_factory=list)
    mode: str = ""  # "", "in", "from" or "matching"
    match: str = ""  # with "matching": "", "files", "dirs" or "any"
    slice: tuple[int | None, int | None, int | None] | None = None
    items: list[str] = field(default_factory=list)
    source: str = ""  # "<" (lines follow in the description), a file, or "cmd |"

    @property
    def loop_vars(self) -> list[str]:
        """The loop variable names; ``Item`` when a foreach mode names none."""
        return self.vars or (["Item"] if self.mode else [])


def _scan_token(s: str, pos: int, words: tuple[str, ...], until_match: bool):
    """Port of ``queue_token_scan``: find a keyword delimited by whitespace or '('.

    Returns ``(stop, token_start, keyword)``; keyword is None when nothing matched.
    """
    tok_start = None
    i = pos
    while i < len(s):
        ch = s[i]
        if ch.isspace() or ch == "(":
            if tok_start is not None:
                word = s[tok_start:i].lower()
                if word in words:
                    return i, tok_start, word
            if not until_match:
                return i, tok_start, None
            tok_start = None
        elif tok_start is None:
            tok_start = i
        i += 1
    return i, None, None


def _parse_slice(s: str, i: int) -> tuple[tuple[int | None, int | None, int | None], int] | None:
    """Parse ``[a:b:c]`` at ``s[i]``; returns the slice and the index after ']'."""
    close = s.find("]", i)
    if close < 0:
        return None
    fields = s[i + 1:close].split(":")
    if len(fields) > 3:
        return None
    out: list[int | None] = []
    for f in fields:
        f = f.strip()
        if not f:
            out.append(None)
            continue
        try:
            out.append(int(f))
        except ValueError:
            return None
    while len(out) < 3:
        out.append(None)
    if out[2] is not None and out[2] <= 0:
        return None
    return (out[0], out[1], out[2]), close + 1


def parse_queue_args(text: str) -> QueueArgs:
    """Parse the (already macro-expanded) text after ``queue``.

    Raises:
        SubmitError: the count, slice or keywords are malformed.
    """
    s = text.strip()
    qa = QueueArgs()
    if not s:
        return qa
    stop, kw_start, kw = _scan_token(s, 0, _FOREACH, True)
    num_end = len(s)
    if kw is not None:
        qa.mode = kw
        p = stop
        while p < len(s) and s[p].isspace():
            p += 1
        while p < len(s) and s[p] != "(":
            p2, tstart, word = _scan_token(s, p, ("files", "dirs", "any"), False)
            if tstart is not None and s[tstart] == "[":
                parsed = _parse_slice(s, tstart)
                if parsed is None:
                    raise SubmitError(f"invalid Queue statement: bad slice in '{text}'")
                qa.slice, p2 = parsed
            elif word is not None:
                if qa.mode != "matching":
                    raise SubmitError(f"invalid Queue statement: '{word}' is only valid after 'matching'")
                qa.match = word
            else:
                break
            if p2 == p:
                break
            p = p2
            while p < len(s) and s[p].isspace():
                p += 1
        rest = s[p:]
        if rest.startswith("("):
            if rest.endswith(")") and len(rest) > 1:
                inner = rest[1:-1].strip()
                if qa.mode == "from":
                    qa.items = [inner]
                else:
                    qa.items = split_list(inner)
            else:
                first = rest[1:].strip()
                if first:
                    qa.items = [first] if qa.mode == "from" else split_list(first)
                qa.source = "<"
        elif qa.mode == "from":
            qa.source = rest.strip()
        else:
            qa.items = split_list(rest)
        num_end = _scan_vars(s, kw_start, qa)
    count_text = s[:num_end].strip()
    if count_text:
        n = exprtext.eval_int(count_text)
        if n is None:
            raise SubmitError(f"invalid Queue statement: '{count_text}' is not a valid Queue count expression")
        if n < 0 or n >= 2**31 - 1:
            raise SubmitError(f"invalid Queue statement: Queue count {n} is out of range")
        qa.count = n
    return qa


def _scan_vars(s: str, kw_start: int, qa: QueueArgs) -> int:
    """Walk back from the keyword over ``var1,var2``; return where the count ends."""
    pvars = kw_start
    while pvars > 0 and s[pvars - 1].isspace():
        pvars -= 1
    end_vars = pvars
    pt = pvars
    while pt > 0:
        ch = s[pt - 1]
        if ch.isdigit():
            pt -= 1
            while pt > 0:
                ch = s[pt - 1]
                if ch.isalpha():
                    break
                if not ch.isdigit():
                    ch = "!"
                    break
                pt -= 1
        if ch.isspace() or ch.isalpha() or ch in ",_.":
            pvars = pt - 1
        else:
            break
        pt -= 1
    qa.vars = split_list(s[pvars:end_vars], ", \t")
    return pvars


def read_item_lines(text: str) -> list[str]:
    """Item lines of a file or command output: trimmed, continuation lines joined.

    Raises:
        SubmitError: an item holds a NUL byte (it would end up in a path or an argument).
    """
    nul = text.find("\0")
    if nul >= 0:
        raise SubmitError(f"invalid Queue statement: item line {text.count(chr(10), 0, nul) + 1} holds a "
                          "NUL byte (\\0), which no item may contain")
    lines = text.splitlines()
    if not any(line.rstrip().endswith("\\") for line in lines):
        return [line.strip() for line in lines]
    from htc.submit.parser import logical_lines

    return [line for _, line in logical_lines(lines, comments=False)]


#: why a description expanded without host access (by the schedd, as root) may not read
#: files, list directories or run commands
NO_HOST_ACCESS = ("the schedd expands this description with its own rights, so it reads no file, lists no "
                  "directory and runs no command for it; list the items in the description "
                  "(queue x from ( ... )), or let htc submit expand it (no $(Cluster) in the job's commands)")


def load_items(qa: QueueArgs, cwd: str, env: dict[str, str], host_access: bool = True) -> list[str]:
    """The item list of a queue statement, reading files, commands and globs.

    Args:
        host_access: whether files may be read, commands run and directories listed (False
            when the schedd expands a description for a user).

    Raises:
        SubmitError: the file cannot be read, the command fails, stdin is named, or the
            items need host access that is not given.
    """
    if not host_access and (qa.mode == "matching" or (qa.mode == "from" and qa.source not in ("", "<"))):
        raise SubmitError(f"invalid Queue statement: 'queue ... {qa.mode} {qa.source or ' '.join(qa.items)}': "
                          + NO_HOST_ACCESS)
    if qa.mode == "from" and qa.source not in ("", "<"):
        src = qa.source
        if src == "-":
            raise SubmitError("QUEUE FROM - (read from stdin) is not allowed here; "
                              "list the items in the description or in a file")
        if src.rstrip().endswith("|"):
            return read_item_lines(run_command(src.rstrip()[:-1].strip(), cwd, env))
        path = src if os.path.isabs(src) else os.path.join(cwd, src)
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                text = f.read()
        except OSError as e:
            raise SubmitError(f"invalid Queue statement: can't open file {src}: {e.strerror}") from None
        return read_item_lines(text)
    if qa.mode == "matching":
        return _glob_items(qa.items, qa.match, cwd)
    return list(qa.items)


def run_command(cmd: str, cwd: str, env: dict[str, str]) -> str:
    """Run ``cmd`` (split like V1 arguments, no shell) and return its output."""
    from htc.submit.argsenv import parse_args_v1raw

    argv = parse_args_v1raw(cmd)
    if not argv:
        raise SubmitError(f"'{cmd} |' is not a valid command")
    try:
        r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        raise SubmitError(f"command '{cmd}' could not run: {e}") from None
    if r.returncode != 0:
        raise SubmitError(f"command '{cmd}' terminated with exit code {r.returncode}")
    return r.stdout


def _glob_items(patterns: list[str], match: str, cwd: str) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for pat in patterns:
        for name in sorted(glob.glob(pat, root_dir=cwd)):
            is_dir = os.path.isdir(os.path.join(cwd, name))
            if (match == "files" and is_dir) or (match == "dirs" and not is_dir):
                continue
            item = name + "/" if is_dir and not name.endswith("/") else name
            if item not in seen:
                seen.add(item)
                out.append(item)
    return out


def split_item(item: str, nvars: int) -> list[str] | None:
    """Split one item into ``nvars`` values (``SubmitForeachArgs::split_item``).

    Returns None for an empty item: HTCondor then leaves the loop variables as they were.
    """
    if item == "":
        return None
    if "\x1f" in item:
        fields = [f.strip(" \t") for f in item.rstrip("\r\n").split("\x1f")]
        return (fields + [""] * nvars)[:nvars]
    data = item.lstrip(" \t")
    values = []
    pos = 0
    for _ in range(nvars - 1):
        m = _SEP.search(data, pos)
        if m is None:
            values.append(data[pos:])
            break
        values.append(data[pos:m.start()])
        pos = _WS.match(data, m.end()).end()
    else:
        values.append(data[pos:])
    return values + [""] * (nvars - len(values))


def selected_rows(qa: QueueArgs, nitems: int) -> list[int]:
    """Indices of the items the slice selects (all of them without a slice)."""
    if qa.slice is None:
        return list(range(nitems))
    start, end, step = qa.slice
    lo = 0 if start is None else (start + nitems if start < 0 else start)
    hi = nitems if end is None else (end + nitems if end < 0 else end)
    step = step or 1
    return [i for i in range(max(lo, 0), min(hi, nitems)) if (i - lo) % step == 0]
