"""Translate PCRE2 patterns into Python ``re`` patterns over bytes.

Theory of operation
-------------------
HTCondor compiles ClassAd regular expressions with PCRE2 in 8-bit, non-UTF mode: a
pattern and its subject are byte strings, ``.`` matches one byte, ``\\w`` and caseless
matching know ASCII only.  Python's ``re`` on ``bytes`` behaves the same way for the
common subset, so a pattern is rewritten token by token into an equivalent ``re``
pattern and compiled with ``re.IGNORECASE`` / ``MULTILINE`` / ``DOTALL`` as asked.

What the rewrite covers, because the two dialects differ there:

* character classes are expanded into explicit byte sets (so POSIX ``[:alpha:]``,
  ``[:^digit:]``, ``\\h``, ``\\p{L}`` and PCRE's class syntax all work, and Python's
  nested-set warnings never trigger);
* ``\\Q...\\E``, ``\\h \\H \\v \\V \\R \\N \\e \\cX \\o{..} \\x{..}``, ``\\z \\Z``,
  ``\\g`` and ``\\k`` back references, and named groups ``(?<n>..)`` / ``(?'n'..)``;
* an inline option group such as ``a(?i)b`` applies to the rest of its enclosing group
  in PCRE; Python only accepts flags at the start, so it becomes a scoped ``(?i:...)``
  closed where the enclosing group closes;
  (a ``|`` inside that group closes and reopens it, since the option carries over);
* extended mode (``x``) is applied here by dropping whitespace and ``#`` comments;
* ``{`` that does not start a PCRE quantifier is a literal (PCRE2 before 10.43 reads
  ``a{,2}`` literally, Python would read it as ``{0,2}``);
* ``\\12`` is a back reference only if that many groups precede it, else octal;
* a lookbehind with alternatives of different lengths becomes one lookbehind per
  alternative (PCRE2 allows it, ``re`` does not);
* errors PCRE2 raises and ``re`` would not: a quantifier after an assertion, an option
  setting or another quantifier (``^*``, ``(?i)+``, ``a**``), POSIX classes outside a
  class (``[:alpha:]``), ranges with a class escape as an end (``[\\d-z]``).

Anything Python cannot express (recursion, backtracking verbs, ``\\K``, ``\\G``, a
back reference to a later group) raises :class:`PatternError`, which the builtins report
as ERROR, as HTCondor does for a pattern PCRE2 rejects.  A branch-reset group ``(?|..)``
becomes a plain group: right unless its alternatives capture.
"""

from __future__ import annotations

import re

from htc.classad.builtins_pcre_sets import (
    ALL,
    CLASS_ESCAPES,
    POSIX_CLASSES,
    SPACE,
    SIMPLE_ESCAPES,
    PatternError,
    byte_class,
    unicode_property,
)


_QUANTIFIER = re.compile(rb"\{[0-9]+(?:,[0-9]*)?\}")
_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def _literal(byte: int) -> bytes:
    return b"\\x%02x" % byte


class _Translator:
    """One pass over a PCRE2 pattern, producing ``re`` syntax."""

    def __init__(self, pattern: bytes, extended: bool):
        self.p = pattern
        self.i = 0
        self.out = bytearray()
        # One entry per open group: [flag groups opened inside it by "(?i)"-style
        # settings, extended mode to restore when it closes, what a top-level '|' in it
        # becomes (None for a plain '|')].
        self.groups: list[list] = [[[], extended, None]]
        self.extended = extended
        # What the last item was, for PCRE2's "quantifier does not follow a repeatable
        # item" error: "none" (start, '|', '(' or an assertion), "atom", or "quant" /
        # "quant2" after a quantifier and after its lazy/possessive suffix.
        self.state = "none"

    def error(self, message: str) -> PatternError:
        return PatternError(f"{message} at offset {self.i}")

    def peek(self, k: int = 0) -> int | None:
        j = self.i + k
        return self.p[j] if j < len(self.p) else None

    def run(self) -> bytes:
        while self.i < len(self.p):
            self.step()
        if len(self.groups) != 1:
            raise self.error("missing )")
        self.out += b")" * len(self.groups[0][0])
        return bytes(self.out)

    def step(self) -> None:
        c = self.p[self.i]
        if self.extended and c in SPACE:
            self.i += 1
        elif self.extended and c == ord("#"):
            end = self.p.find(b"\n", self.i)
            self.i = len(self.p) if end < 0 else end + 1
        elif c == ord("\\"):
            self.escape()
        elif c == ord("["):
            self.char_class()
            self.state = "atom"
        elif c == ord("("):
            self.open_group()
        elif c == ord(")"):
            if len(self.groups) == 1:
                raise self.error("unmatched )")
            scoped, self.extended, alternation = self.groups.pop()
            self.out += b")" * (1 + len(scoped) + (alternation is not None))
            self.i += 1
            self.state = "atom"
        elif c == ord("{") and _QUANTIFIER.match(self.p, self.i):
            m = _QUANTIFIER.match(self.p, self.i)
            self.quantifier(m.group())
            self.i = m.end()
        elif c in b"*+?":
            self.quantifier(bytes([c]))
            self.i += 1
        elif c == ord("|"):
            # An option set by "(?i)" carries over to the next alternative, but the '|'
            # must still split the enclosing group: close the scoped groups and reopen.
            scoped, _, alternation = self.groups[-1]
            self.out += (b")" * len(scoped) + (alternation or b"|")
                         + b"".join(b"(?" + f + b":" for f in scoped))
            self.i += 1
            self.state = "none"
        elif c in b"^$":
            self.out.append(c)
            self.i += 1
            self.state = "none"
        else:
            # '.' and literal bytes (a '{' or '}' that is not a quantifier is literal).
            self.out += b"." if c == ord(".") else _literal(c)
            self.i += 1
            self.state = "atom"

    def quantifier(self, text: bytes) -> None:
        if self.state == "atom":
            self.state = "quant"
        elif self.state == "quant" and text in (b"?", b"+"):
            self.state = "quant2"
        else:
            raise self.error("quantifier does not follow a repeatable item")
        self.out += text

    # -- escapes outside classes -------------------------------------------------
    def escape(self) -> None:
        c = self.peek(1)
        if c is None:
            raise self.error("\\ at end of pattern")
        self.i += 2
        before = self.state
        self.state = "atom"
        if c == ord("Q"):
            end = self.p.find(b"\\E", self.i)
            end = len(self.p) if end < 0 else end
            self.out += b"".join(_literal(b) for b in self.p[self.i:end])
            if end == self.i:
                self.state = before  # an empty \Q\E is invisible
            self.i = min(end + 2, len(self.p))
        elif c == ord("E"):
            self.state = before
        elif c in b"bBAG":
            if c == ord("G"):
                raise self.error("unsupported escape \\G")
            self.out += b"\\" + bytes([c])
            self.state = "none"
        elif c in CLASS_ESCAPES and c not in b"dDwWsS":
            self.out += byte_class(CLASS_ESCAPES[c])
        elif c == ord("R"):
            self.out += rb"(?:\r\n|[\n\x0b\x0c\r\x85])"
        elif c == ord("N"):
            if self.peek() == ord("{") and not _QUANTIFIER.match(self.p, self.i):
                raise self.error("\\N{...} is only supported in UTF mode")
            self.out += rb"[^\n]"
        elif c == ord("z"):
            self.out += rb"\Z"
            self.state = "none"
        elif c == ord("Z"):
            self.out += rb"(?=\n?\Z)"
            self.state = "none"
        elif c in (ord("g"), ord("k")):
            self.backreference(c)
        elif c in (ord("p"), ord("P")):
            self.out += byte_class(self.property(c == ord("P")))
        elif c in b"KXCuUL":
            raise self.error(f"unsupported escape \\{chr(c)}")
        elif 0x31 <= c <= 0x39:
            self.numeric_escape()
        else:
            self.i -= 1
            value = self.escaped_byte()
            if value is None:
                self.out += b"\\" + bytes([c])
                self.i += 1
            else:
                self.out += _literal(value)

    def numeric_escape(self) -> None:
        """``\\1``..``\\9...`` outside a class: a back reference or an octal character.

        PCRE2 reads all the digits as a decimal number; it is a back reference when it is
        below 10, starts with 8 or 9, or does not exceed the groups opened so far.
        Otherwise up to three octal digits form a character and the rest are literal.
        """
        start = self.i - 1  # at the first digit
        m = re.compile(rb"[0-9]+").match(self.p, start)
        number = int(m.group())
        if number < 10 or m.group()[:1] in b"89" or number <= self.groups_before(start):
            self.out += b"\\" + m.group()
            self.i = m.end()
            return
        octal = re.compile(rb"[0-7]{1,3}").match(self.p, start)
        value = int(octal.group(), 8)
        if value > 0xFF:
            raise self.error("octal value greater than \\377 in 8-bit non-UTF mode")
        self.out += _literal(value)
        self.i = octal.end()

    def groups_before(self, end: int) -> int:
        """Capturing groups opened in ``self.p[:end]`` (escapes and classes skipped)."""
        count, i, in_class = 0, 0, False
        while i < end:
            c = self.p[i]
            if c == 0x5C:
                i += 2
                continue
            if in_class:
                in_class = c != 0x5D
            elif c == 0x5B:
                in_class = True
                if self.p[i + 1:i + 2] == b"]":
                    i += 1
            elif c == 0x28:
                rest = self.p[i + 1:i + 3]
                if not rest.startswith(b"?") and not rest.startswith(b"*"):
                    count += 1
                elif rest[1:2] in (b"<", b"'", b"P") and self.p[i + 3:i + 4] not in (b"=", b"!"):
                    count += 1
            i += 1
        return count

    def escaped_byte(self) -> int | None:
        """Decode an escape that stands for one byte (self.i is just past the backslash).

        Returns None (without consuming) for escapes that are not a single byte.
        """
        c = self.p[self.i]
        if c in SIMPLE_ESCAPES:
            self.i += 1
            return SIMPLE_ESCAPES[c]
        if c == ord("c"):
            ch = self.peek(1)
            if ch is None:
                raise self.error("\\c at end of pattern")
            self.i += 2
            return (ch - 32 if 0x61 <= ch <= 0x7A else ch) ^ 0x40
        if c == ord("x"):
            self.i += 1
            if self.peek() == ord("{"):
                end = self.p.find(b"}", self.i)
                digits = self.p[self.i + 1:end] if end > 0 else b""
                if end < 0 or not re.fullmatch(rb"[0-9a-fA-F]+", digits):
                    raise self.error("bad \\x{...}")
                self.i = end + 1
                value = int(digits, 16)
            else:
                m = re.compile(rb"[0-9a-fA-F]{0,2}").match(self.p, self.i)
                self.i = m.end()
                value = int(m.group(), 16) if m.group() else 0
            if value > 0xFF:
                raise self.error("character value too large in non-UTF mode")
            return value
        if c == ord("o") and self.peek(1) == ord("{"):
            end = self.p.find(b"}", self.i)
            digits = self.p[self.i + 2:end] if end > 0 else b""
            if end < 0 or not re.fullmatch(rb"[0-7]+", digits):
                raise self.error("bad \\o{...}")
            self.i = end + 1
            value = int(digits, 8)
            if value > 0xFF:
                raise self.error("character value too large in non-UTF mode")
            return value
        if c == ord("0"):
            m = re.compile(rb"0[0-7]{0,2}").match(self.p, self.i)
            self.i = m.end()
            return int(m.group(), 8)
        if not (0x30 <= c <= 0x39) and not (0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A):
            # Any escaped non-alphanumeric character is itself.
            self.i += 1
            return c
        return None

    def backreference(self, kind: int) -> None:
        c = self.peek()
        if kind == ord("g") and c is not None and c in b"{" and self.p[self.i + 1:self.i + 2].isdigit():
            end = self.p.find(b"}", self.i)
            number = self.p[self.i + 1:end]
            self.i = end + 1
            self.out += b"(?:\\" + number + b")"
        elif kind == ord("g") and c is not None and 0x30 <= c <= 0x39:
            m = re.compile(rb"[0-9]+").match(self.p, self.i)
            self.i = m.end()
            self.out += b"(?:\\" + m.group() + b")"
        elif c is not None and c in b"<'{":
            close = {ord("<"): b">", ord("'"): b"'", ord("{"): b"}"}[c]
            end = self.p.find(close, self.i + 1)
            name = self.p[self.i + 1:end] if end > 0 else b""
            if not _NAME.fullmatch(name):
                raise self.error("bad group name in back reference")
            self.i = end + 1
            self.out += b"(?P=" + name + b")"
        else:
            raise self.error("bad back reference")

    def property(self, negate: bool) -> set[int]:
        if self.peek() == ord("{"):
            end = self.p.find(b"}", self.i)
            if end < 0:
                raise self.error("bad \\p{...}")
            name = self.p[self.i + 1:end]
            self.i = end + 1
        else:
            name = self.p[self.i:self.i + 1]
            self.i += 1
        return unicode_property(name, negate)

    # -- groups -------------------------------------------------------------------
    def open_group(self) -> None:
        rest = self.p[self.i:]
        if rest.startswith(b"(*"):
            raise self.error("backtracking verbs are not supported")
        if not rest.startswith(b"(?"):
            self.push(b"(")
            return
        if rest.startswith(b"(?#"):
            end = self.p.find(b")", self.i)
            if end < 0:
                raise self.error("missing ) after comment")
            self.i = end + 1
            return
        for prefix in (b"(?:", b"(?=", b"(?!", b"(?<=", b"(?<!", b"(?>"):
            if rest.startswith(prefix):
                self.push(prefix)
                return
        if rest.startswith(b"(?|"):
            # Branch reset only renumbers captures; without captures it is a plain group.
            self.push(b"(?|", b"(?:")
            return
        m = re.compile(rb"\(\?(?:P?<|')([A-Za-z_][A-Za-z0-9_]*)[>']").match(self.p, self.i)
        if m:
            self.push(m.group(), b"(?P<" + m.group(1) + b">")
            return
        m = re.compile(rb"\(\?P=([A-Za-z_][A-Za-z0-9_]*)\)").match(self.p, self.i)
        if m:
            self.out += m.group()
            self.i = m.end()
            self.state = "atom"
            return
        m = re.compile(rb"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])").match(self.p, self.i)
        if not m:
            raise self.error("unsupported group syntax")
        on, off = m.group(1), m.group(2) or b""
        if set(on + off) - set(b"imsx"):
            raise self.error("unsupported inline option")
        flags = self.flag_text(on, off)
        extended = self.extended
        if b"x" in on:
            extended = True
        if b"x" in off:
            extended = False
        if m.group(3) == b":":
            self.push(m.group(), b"(?" + flags + b":")
            self.extended = extended
            return
        # "(?i)" lasts to the end of the enclosing group: open a scoped group there.
        self.i = m.end()
        self.state = "none"
        if flags != b"":
            self.out += b"(?" + flags + b":"
            self.groups[-1][0].append(flags)
        self.extended = extended

    @staticmethod
    def flag_text(on: bytes, off: bytes) -> bytes:
        # Extended mode is applied by the translator itself, so it never reaches ``re``.
        on = on.replace(b"x", b"")
        off = off.replace(b"x", b"")
        return on + (b"-" + off if off else b"")

    def push(self, source: bytes, emitted: bytes | None = None) -> None:
        self.state = "none"
        # The third field is what a top-level '|' of the group becomes; lookbehinds need
        # one assertion per alternative because Python wants each of fixed width, while
        # PCRE2 only wants each *alternative* fixed.
        alternation = {b"(?<=": b")|(?<=", b"(?<!": b")(?<!"}.get(source)
        self.groups.append([[], self.extended, alternation])
        if alternation is not None:
            emitted = b"(?:" + source
        self.out += source if emitted is None else emitted
        self.i += len(source)

    # -- character classes --------------------------------------------------------
    def posix_end(self, at: int) -> int | None:
        """PCRE2 ``check_posix_syntax`` for ``[:``, ``[.`` or ``[=`` at ``at``.

        Returns the offset of the closing ``:]`` (or ``.]`` / ``=]``), or None.
        """
        if at + 1 >= len(self.p) or self.p[at + 1] not in b":.=":
            return None
        terminator = self.p[at + 1]
        k = at + 2
        while len(self.p) - k >= 2:
            c, nxt = self.p[k], self.p[k + 1]
            if c == 0x5C and nxt in (0x5D, 0x5C):
                k += 1
            elif (c == 0x5B and nxt == terminator) or c == 0x5D:
                return None
            elif c == terminator and nxt == 0x5D:
                return k
            k += 1
        return None

    def char_class(self) -> None:
        if self.posix_end(self.i) is not None:
            raise self.error("POSIX named classes are supported only within a class")
        self.i += 1
        negate = self.peek() == ord("^")
        if negate:
            self.i += 1
        members: set[int] = set()
        first = True
        while True:
            c = self.peek()
            if c is None:
                raise self.error("missing terminating ] for character class")
            if c == ord("]") and not first:
                self.i += 1
                break
            first = False
            end = self.posix_end(self.i) if c == ord("[") else None
            if end is not None:
                if self.p[self.i + 1] != ord(":"):
                    raise self.error("POSIX collating elements are not supported")
                name = self.p[self.i + 2:end]
                inverted = name.startswith(b"^")
                name = name[1:] if inverted else name
                if name not in POSIX_CLASSES:
                    raise self.error("unknown POSIX class name")
                cls = POSIX_CLASSES[name]
                members |= (ALL - cls) if inverted else cls
                self.i = end + 2
                continue
            low = self.class_atom()
            if isinstance(low, set):
                if self.peek() == ord("-") and self.peek(1) not in (None, ord("]")):
                    raise self.error("invalid range in character class")
                members |= low
                continue
            if self.peek() == ord("-") and self.peek(1) not in (None, ord("]")):
                save = self.i
                self.i += 1
                high = self.class_atom()
                if isinstance(high, set):
                    raise self.error("invalid range in character class")
                if high < low:
                    self.i = save
                    raise self.error("range out of order in character class")
                members |= set(range(low, high + 1))
                continue
            members.add(low)
        self.out += byte_class(members, negate)

    def class_atom(self) -> int | set[int]:
        c = self.p[self.i]
        if c != ord("\\"):
            self.i += 1
            return c
        nxt = self.peek(1)
        if nxt is None:
            raise self.error("\\ at end of pattern")
        self.i += 1
        if nxt in CLASS_ESCAPES:
            self.i += 1
            return CLASS_ESCAPES[nxt]
        if nxt == ord("b"):
            self.i += 1
            return 0x08
        if nxt in (ord("p"), ord("P")):
            self.i += 1
            return self.property(nxt == ord("P"))
        if nxt in b"QE":
            # \Q...\E inside a class: the quoted bytes are members.
            self.i += 1
            if nxt == ord("E"):
                return set()
            end = self.p.find(b"\\E", self.i)
            end = len(self.p) if end < 0 else end
            quoted = set(self.p[self.i:end])
            self.i = min(end + 2, len(self.p))
            return quoted
        if 0x31 <= nxt <= 0x37:
            m = re.compile(rb"[0-7]{1,3}").match(self.p, self.i)
            self.i = m.end()
            value = int(m.group(), 8)
            if value > 0xFF:
                raise self.error("octal value greater than \\377 in 8-bit non-UTF mode")
            return value
        if nxt in b"89gk":
            # Inside a class there are no back references: \8, \9, \g and \k are
            # the plain characters.
            self.i += 1
            return nxt
        value = self.escaped_byte()
        if value is None:
            raise self.error(f"unrecognized escape \\{chr(nxt)} in character class")
        return value


def compile_pcre(pattern: str, options: str = "") -> re.Pattern:
    """Compile a PCRE2 pattern for matching UTF-8 encoded byte strings.

    Args:
        pattern: the pattern text.
        options: HTCondor option letters; ``i``, ``m``, ``s`` and ``x`` are honoured.

    Raises:
        PatternError: PCRE2 would reject the pattern, or ``re`` cannot express it.
    """
    data = pattern.encode("utf-8", "surrogateescape")
    # C strings end at the first NUL byte.
    data = data.split(b"\0", 1)[0]
    flags = 0
    if "i" in options:
        flags |= re.IGNORECASE
    if "m" in options:
        flags |= re.MULTILINE
    if "s" in options:
        flags |= re.DOTALL
    translated = _Translator(data, extended="x" in options).run()
    try:
        return re.compile(translated, flags)
    except (re.error, OverflowError, RecursionError) as exc:
        raise PatternError(str(exc)) from exc
