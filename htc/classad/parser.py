"""Parser for ClassAd expressions and new-syntax ads (recursive descent, precedence climbing).

Grammar (HTCondor manual, "ClassAd Syntax"; lowest precedence first)::

    expr      := or_expr [ '?' expr ':' expr ]                     (right associative)
    or_expr   := binary operators by level, all left associative:
                 ||  /  &&  /  |  /  ^  /  &  /  == != =?= =!= is isnt  /  < <= > >=
                 /  << >> >>>  /  + -  /  * / %
    unary     := ('-' | '+' | '!' | '~') unary | elvis
    elvis     := postfix ( '?' ':' postfix )*       (binds tightest: 2 * x ?: 3 is 2 * (x ?: 3))
    postfix   := primary ( '.' name | '[' expr ']' )*
    primary   := literal | name | name '(' [expr (',' expr)*] ')' | '(' expr ')'
               | '{' [expr (',' expr)*] '}' | ad
    ad        := '[' [';'*] [attr (';'+ attr)* ';'*] ']'      ('[;]' alone is an error)
    attr      := (name | 'quoted name') '=' expr

A ``-`` written directly against a number literal (``-1``, no space) folds into a negative
literal, as HTCondor's parser does; ``- 1`` stays a unary minus.  That is also how
``-9223372036854775808`` is representable.

Depth and length
----------------
A chain of operators of one precedence level is read in a loop, so ``a || b || ...`` may
have any number of terms (a 700-term ``||`` in a job's ``Requirements`` is ordinary).  What
nests is bounded: parentheses, lists, ads, calls, subscripts, prefix operators, ``? :`` and
each step to a tighter precedence level for a right operand (``a || b && c`` nests ``b && c``
one level) count one level each, and an expression nested more than :data:`MAX_DEPTH` levels
is refused with a :class:`ClassAdParseError` that says so (the brackets of a top-level ad
do not count: its values may nest as deeply as an expression alone).  The syntax trees that result are
deep only along their left spines (the chains), which every walk follows with a loop (see
:mod:`htc.classad.ast`); so no later step (compiling, evaluating, printing, comparing) can
run out of Python's stack on an expression the parser accepted.

Shared trees
------------
The same expression texts come back again and again: every slot ad of a pool has the same
``START``, every job of a cluster the same ``Requirements``, every update of a slot the same
expressions with new literals. Nodes are immutable and may be shared (:mod:`htc.classad.ast`),
so the parser keeps the tree of each text it read (HTCondor's collector does the same with
its ClassAd cache, ``ENABLE_CLASSAD_CACHING``): :func:`parse_expr` of a text seen before,
and an attribute value of a top-level ad whose source text (from its first token to its
last) was seen before, give the tree built then, without parsing. The tree is then compiled
once (its ``fn``) and walked once by the caches that key on a tree's identity (what a
tree reads, :mod:`htc.daemons.tree_reads`), for every ad that holds it.

Identity is a saving, never a meaning: the same text gives the same node while the cache
keeps it (it is emptied when full), and a literal (``5``, ``"slot1@node7"``, ``-1``) is
built afresh each time: cheap, and most are the one value of one ad, which would only crowd
out the expressions. Two texts never share a tree, even when they parse alike (``1`` and
``1.0`` differ; so do ``a+1`` and ``a + 1``, which is merely a missed saving).

The quick reading
-----------------
Tokenizing an ad whole costs most of reading it (a slot ad is ~110 tokens, ~30 attributes,
nearly all literals). :func:`parse_ad_prefix` first tries to read the ad one attribute at a
time with one regular expression (:data:`_PAIR`): a name, ``=``, and either a string of
printable ASCII without escapes or a run that holds only such strings and, outside them, no
quoted name, list, ad or comment, up to the ``;`` or ``]`` that ends it. Such a run is a
number or ``true``/``false``/``undefined``/``error`` (read as the lexer and
:meth:`Parser.unary` read them, the ``-`` of ``-1`` folded in), else an expression: the shared
tree of its text, or the text parsed alone, which gives the tree the full reading gives (the
same tokens; nothing before or after a value changes how it is read). Anything else -- a
keyword as a name, a quoted name, ``;;``, a comment, a value that does not parse alone -- and
the ad is read the full way, which also words every error.
"""

from __future__ import annotations

import re

from htc.classad import lexer as L
from htc.classad.ast import (AbsRef, AdExpr, AttrRef, Binary, Call, Conditional, ListExpr, Literal,
                             Node, Paren, Select, Subscript, Unary)
from htc.classad.errors import ClassAdParseError
from htc.classad.values import Error, Undefined

_LEVELS = (
    ("||",), ("&&",), ("|",), ("^",), ("&",),
    ("==", "!=", "=?=", "=!=", "is", "isnt"),
    ("<", "<=", ">", ">="),
    ("<<", ">>", ">>>"),
    ("+", "-"),
    ("*", "/", "%"),
)
_PREC = {op: level for level, ops in enumerate(_LEVELS) for op in ops}
_CANON = {"=?=": "is", "=!=": "isnt"}
_CONSTS = {"true": True, "false": False, "undefined": Undefined, "error": Error}

#: deepest nesting accepted: parentheses, lists, ads, calls, subscripts, prefix operators,
#: conditionals and right operands of a tighter precedence level (see the module docstring)
MAX_DEPTH = 120

#: Syntax trees by source text, shared by :func:`parse_expr` and the values of top-level ads
#: (see "Shared trees" above). Literals are not kept (see :func:`_remember`).
_TREES: dict[str, Node] = {}
#: at most this many texts, and this many characters of them in all (a tree and its key take
#: ~20 bytes per character of its text, ~60 once compiled: 40 MB at the bound, 120 MB if every
#: tree kept was evaluated; the 50,000 texts alone, before, allowed any length): a pool's
#: expressions are a few hundred distinct texts, a schedd's job ads a few per cluster; a
#: collector fed millions of distinct texts empties the cache whenever either bound is reached
#: (then each text still in use is parsed once more: no worse than no cache).
_TREES_MAX = 50_000
_TREES_MAX_CHARS = 2_000_000
_trees_chars = 0
_OPENERS = frozenset("([{")
#: what may follow a top-level ad's value: the end of the value
_VALUE_ENDS = frozenset(";]")
_CLOSERS = frozenset(")]}")


class Parser:
    """Parse one token stream; use the module functions rather than this class directly."""

    def __init__(self, text: str, tokens: list[L.Token] | None = None):
        self.text = text
        self.toks = tokens if tokens is not None else L.tokenize(text)
        self.i = 0
        self.depth = 0

    # -- helpers ---------------------------------------------------------------------
    @property
    def tok(self) -> L.Token:
        return self.toks[self.i]

    def error(self, expected: str, tok: L.Token | None = None) -> ClassAdParseError:
        tok = tok or self.tok
        found = "end of input" if tok.kind == L.EOF else repr(self.text[tok.pos:tok.end])
        return ClassAdParseError(self.text, tok.pos, expected, found)

    def is_op(self, op: str) -> bool:
        t = self.toks[self.i]
        return t.kind == L.OP and t.value == op

    def expect_op(self, op: str, what: str | None = None) -> L.Token:
        t = self.toks[self.i]
        if t.kind == L.OP and t.value == op:
            self.i += 1
            return t
        raise self.error(what or f"'{op}'")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"an expression nested at most {MAX_DEPTH} levels deep")

    # -- expressions -----------------------------------------------------------------
    def expr(self) -> Node:
        cond = self.binary(0)
        if self.is_op("?"):
            self.enter()
            self.i += 1
            then = self.expr()
            self.expect_op(":", "':' of the conditional expression")
            node = Conditional(cond, then, self.expr())
            self.depth -= 1
            return node
        return cond

    def binary(self, min_level: int) -> Node:
        # Precedence climbing: an operand, then every operator binding at least as tightly as
        # ``min_level``; its right operand takes only tighter ones, so all levels associate left.
        # (One call per operand, where a call per level and operand would cost ten.)
        left = self.unary()
        toks = self.toks
        while True:
            t = toks[self.i]
            if t.kind == L.OP or t.kind == L.KEYWORD:
                op = t.value
                level = _PREC.get(op)
                if level is not None and level >= min_level:
                    self.i += 1
                    self.depth += 1  # (enter(), inlined: this is the parser's hottest loop)
                    if self.depth > MAX_DEPTH:
                        raise self.error(f"an expression nested at most {MAX_DEPTH} levels deep")
                    right = self.binary(level + 1)
                    self.depth -= 1
                    left = Binary(_CANON.get(op, op), left, right)
                    continue
            return left

    def unary(self) -> Node:
        t = self.toks[self.i]
        if t.kind == L.OP and t.value in ("-", "+", "!", "~"):
            nxt = self.toks[self.i + 1]
            if t.value == "-" and nxt.kind in (L.INT, L.REAL) and nxt.pos == t.end:
                self.i += 2
                lit = self.text[nxt.pos:nxt.end]
                value = -nxt.value if nxt.kind == L.REAL else L.negative_int(lit)
                return self.elvis(self.postfix(Literal(value)))
            self.enter()
            self.i += 1
            node = Unary(t.value, self.unary())
            self.depth -= 1
            return node
        return self.elvis(self.postfix(self.primary()))

    def elvis(self, node: Node) -> Node:
        # HTCondor binds ``a ?: b`` tighter than any other operator: both operands are
        # postfix expressions, so ``2 * x ?: 3`` is ``2 * (x ?: 3)``.
        while self.is_op("?") and self.toks[self.i + 1].kind == L.OP and \
                self.toks[self.i + 1].value == ":":
            self.i += 2
            t = self.toks[self.i]
            # (t may be the end of input: then primary() says what is missing)
            nxt = self.toks[self.i + 1] if t.kind == L.OP else t
            if (t.kind == L.OP and t.value == "-" and nxt.kind in (L.INT, L.REAL)
                    and nxt.pos == t.end):
                self.i += 2
                lit = self.text[nxt.pos:nxt.end]
                value = -nxt.value if nxt.kind == L.REAL else L.negative_int(lit)
                right = self.postfix(Literal(value))
            else:
                right = self.postfix(self.primary())
            node = Conditional(node, None, right)
        return node

    def postfix(self, node: Node) -> Node:
        while True:
            t = self.toks[self.i]
            if t.kind != L.OP:
                return node
            if t.value == ".":
                self.i += 1
                n = self.toks[self.i]
                if n.kind not in (L.NAME, L.QNAME):
                    raise self.error("an attribute name after '.'")
                self.i += 1
                node = Select(node, n.value)
            elif t.value == "[":
                self.enter()
                self.i += 1
                index = self.expr()
                self.expect_op("]", "']' closing the subscript")
                self.depth -= 1
                node = Subscript(node, index)
            else:
                return node

    def primary(self) -> Node:
        t = self.toks[self.i]
        k = t.kind
        if k == L.INT or k == L.REAL or k == L.STRING:
            self.i += 1
            return Literal(t.value)
        if k == L.KEYWORD:
            if t.value in _CONSTS:
                self.i += 1
                return Literal(_CONSTS[t.value])
            raise self.error("an operand")
        if k == L.NAME:
            self.i += 1
            if self.is_op("("):
                return self.call(t.value)
            return AttrRef(t.value)
        if k == L.QNAME:
            self.i += 1
            return AttrRef(t.value)
        if k == L.OP:
            if t.value == "(":
                self.enter()
                self.i += 1
                inner = self.expr()
                self.expect_op(")", "')' closing the parenthesis")
                self.depth -= 1
                return Paren(inner)
            if t.value == "." and self.toks[self.i + 1].kind in (L.NAME, L.QNAME):
                self.i += 2
                return AbsRef(self.toks[self.i - 1].value)
            if t.value == "{":
                return self.list_literal()
            if t.value == "[":
                return self.ad_literal()
        raise self.error("an operand (literal, attribute name, '(', '{' or '[')")

    def call(self, name: str) -> Node:
        self.enter()
        self.i += 1  # '('
        args: list[Node] = []
        if not self.is_op(")"):
            args.append(self.expr())
            while self.is_op(","):
                self.i += 1
                args.append(self.expr())
        self.expect_op(")", f"',' or ')' in the arguments of {name}()")
        self.depth -= 1
        lname = name.lower()
        if lname in ("abstime", "reltime") and len(args) == 1 and isinstance(args[0], Literal) \
                and isinstance(args[0].value, str):
            # HTCondor's parser turns a time function of a string literal into a time literal
            # (and refuses a literal it cannot read); a computed string stays a call.
            return self.time_literal(lname, args[0].value)
        return Call(name, args)

    def time_literal(self, lname: str, text: str) -> Node:
        from htc.classad.builtins_time import parse_abstime_literal, parse_reltime_literal

        value = (parse_abstime_literal if lname == "abstime" else parse_reltime_literal)(text)
        if value is None:
            raise self.error(f"a valid {'absTime' if lname == 'abstime' else 'relTime'} literal, not {text!r}")
        return Literal(value)

    def list_literal(self) -> Node:
        self.enter()
        self.i += 1  # '{'
        items: list[Node] = []
        if not self.is_op("}"):
            items.append(self.expr())
            while self.is_op(","):
                self.i += 1
                items.append(self.expr())
        self.expect_op("}", "',' or '}' in the list")
        self.depth -= 1
        return ListExpr(items)

    def ad_literal(self) -> AdExpr:
        self.enter()
        open_tok = self.expect_op("[")
        pairs: list[tuple[str, Node]] = []
        semis = 0
        while True:
            t = self.toks[self.i]
            if t.kind == L.OP and t.value == ";":
                self.i += 1
                semis += 1
                continue
            if t.kind == L.OP and t.value == "]":
                if semis and not pairs:
                    raise self.error("an attribute definition in the ad", t)
                self.i += 1
                break
            if pairs and not semis:
                raise self.error("';' or ']' after the attribute definition")
            if t.kind not in (L.NAME, L.QNAME):
                if t.kind == L.EOF:
                    raise self.error(f"']' closing the ad opened at offset {open_tok.pos}")
                raise self.error("an attribute name (keywords need 'quotes')")
            self.i += 1
            self.expect_op("=", f"'=' after the attribute name {t.value!r}")
            pairs.append((t.value, self.value() if self.depth == 0 else self.expr()))
            semis = 0
        self.depth -= 1
        return AdExpr(pairs)


    def value(self) -> Node:
        """An attribute's value in a top-level ad: the tree of its text when that was seen
        before (see "Shared trees" in the module docstring)."""
        toks, start = self.toks, self.i
        t = toks[start]
        k = t.kind
        if k == L.INT or k == L.REAL or k == L.STRING or k == L.KEYWORD and t.value in _CONSTS:
            nxt = toks[start + 1]
            if nxt.kind == L.EOF or nxt.kind == L.OP and nxt.value in _VALUE_ENDS:
                # a literal alone (most values of an ad): what primary() builds, not kept
                self.i = start + 1
                return Literal(t.value if k != L.KEYWORD else _CONSTS[t.value])
        depth, j = 0, start
        while True:  # the value runs to the ';' or ']' that closes it (or the end of input)
            t = toks[j]
            if t.kind == L.EOF:
                break
            if t.kind == L.OP:
                op = t.value
                if op in _OPENERS:
                    depth += 1
                elif op in _CLOSERS:
                    if depth == 0:
                        break
                    depth -= 1
                elif op == ";" and depth == 0:
                    break
            j += 1
        if j == start:
            return self.expr()  # nothing there: let the parser say so
        source = self.text[toks[start].pos:toks[j - 1].end]
        node = _TREES.get(source)
        if node is not None:
            self.i = j
            return node
        node = self.expr()
        if self.i == j:  # the whole text was the value (else the caller reports what follows)
            _remember(source, node)
        return node


def _remember(text: str, node: Node) -> None:
    """Keep ``node`` as the tree of ``text`` (not a literal: see the module docstring),
    emptying the cache first when it is full."""
    global _trees_chars
    if node.__class__ is Literal:
        return
    if len(_TREES) >= _TREES_MAX or _trees_chars + len(text) > _TREES_MAX_CHARS:
        _TREES.clear()
        _trees_chars = 0
    _TREES[text] = node
    _trees_chars += len(text)


def _guard(fn, text: str):
    try:
        return fn()
    except RecursionError:
        raise ClassAdParseError(text, 0, "an expression that nests less deeply") from None


def parse_expr(text: str) -> Node:
    """Parse a whole string as one expression.

    Args:
        text: the expression source.
    Returns:
        The syntax tree: for a text parsed before, the same tree, shared (see "Shared trees"
        in the module docstring); treat it as immutable.
    Raises:
        ClassAdParseError: the text is not exactly one expression.
    """
    if not isinstance(text, str):
        raise TypeError(f"a ClassAd expression must be given as str, not {type(text).__name__}")

    node = _TREES.get(text)
    if node is not None:
        return node

    node = _guard(lambda: _parse_whole(text), text)
    _remember(text, node)
    return node


def _parse_whole(text: str) -> Node:
    """``text`` parsed as exactly one expression (not kept)."""
    p = Parser(text)
    node = p.expr()
    if p.tok.kind != L.EOF:
        raise p.error("an operator or end of input")
    return node


def parse_ad_prefix(text: str, start: int = 0) -> tuple[AdExpr, int] | None:
    """Parse one new-syntax ad ``[ ... ]`` beginning at offset ``start`` (after white space).

    Args:
        text: source text holding one or more ads.
        start: offset to begin at.
    Returns:
        ``(ad_node, end_offset)``, or None when only white space/comments remain.
    Raises:
        ClassAdParseError: the next thing in the text is not a well-formed ad.
    """
    def run():
        i = L.skip_space(text, start, len(text))
        if i >= len(text):
            return None
        if text[i] != "[":
            raise ClassAdParseError(text, i, "'[' starting a ClassAd")
        quick = _quick_ad(text, i)
        if quick is not None:
            return quick
        toks = L.tokenize(text, i, one_group=True)
        p = Parser(text, toks)
        # The brackets of a top-level ad are no nesting: its values may nest as deeply as an
        # expression parsed alone, so that every expression an ad holds reads back in the ad.
        p.depth = -1
        node = p.ad_literal()
        if p.tok.kind != L.EOF:
            raise p.error("end of the ad")
        return node, toks[-1].end
    return _guard(run, text)


# The quick reading of a top-level ad (see "The quick reading" in the module docstring): one
# match per attribute for the usual ``Name = value;`` of a slot or job ad. White space is the
# lexer's; a name is ASCII; a string has printable ASCII and no escape (so it ends at the next
# '"', as the lexer reads it); outside its strings a value holds no quoted name, list or ad,
# and no comment (a value with '//' or '/*' anywhere is left to the full reading).
_WS = r"[ \t\n\r\f\v]*+"  # (possessive: a long run of it is never tried again)
_PAIR = re.compile(
    _WS + r"(?!(?i:true|false|undefined|error|isnt|is)\b)"  # (a keyword is no name unquoted)
    r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)" + _WS + "=" + _WS +
    r'(?:"(?P<str>[ !#-\[\]-~]*)"'                     # a string: printable ASCII, no escape
    r"|(?P<int>-?(?:0|[1-9][0-9]{0,17}))"             # an integer in range, '-' folded in
    r"|(?P<real>-?[0-9]+(?:\.[0-9]+(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+))"
    r"|(?P<const>(?i:true|false|undefined|error))"
    # else an expression: what may stand outside a string, and strings (possessive: a value
    # that does not end well fails at once, with no backtracking through its characters)
    r'|(?P<value>(?:[A-Za-z0-9_.()+\-*/%<>=!&|^~?:, \t\n\r\f\v]++|"[ !#-\[\]-~]*+")++))'
    + _WS + r"(?P<end>\]|;(?:" + _WS + r"\])?)")  # (the ad's end, after a ';' or not)
_WS_CHARS = " \t\n\r\f\v"


def _quick_ad(text: str, i: int) -> tuple[AdExpr, int] | None:
    """The ad at ``text[i]`` (its ``[``) and the offset after it, read an attribute at a time
    ("The quick reading" in the module docstring); None when it is not made of the attributes
    :data:`_PAIR` reads, or a value does not parse alone (the full reading reads those, and
    words the errors)."""
    table: dict[str, tuple[str, Node]] = {}
    match, pos = _PAIR.match, i + 1
    while True:
        m = match(text, pos)
        if m is None:
            return None
        name, string, integer, real, const, value, end = m.groups()
        if string is not None:
            node = Literal(string)
        elif integer is not None:
            # (as the lexer reads the digits, and Parser.unary a '-' against them)
            node = Literal(int(integer) if integer[0] != "-" else L.negative_int(integer[1:]))
        elif real is not None:
            node = Literal(float(real) if real[0] != "-" else -float(real[1:]))
        elif const is not None:
            node = Literal(_CONSTS[const.lower()])
        else:
            value = value.strip(_WS_CHARS)
            if not value or "/" in value and ("//" in value or "/*" in value):
                return None  # (a comment, or a string that looks like one: read in full)
            node = _TREES.get(value)
            if node is None:
                node = _whole_expr(value)
                if node is None:
                    return None
                _remember(value, node)
        low = name.lower()
        prev = table.get(low)
        # a repeated name keeps its first spelling and takes the last value (as AdExpr)
        table[low] = (name if prev is None else prev[0], node)
        pos = m.end()
        if end[-1] == "]":
            return AdExpr.of_table(table), pos


def _whole_expr(text: str) -> Node | None:
    """``text`` parsed as one expression (as :func:`parse_expr`, not kept), or None when it is
    not one: the full reading finds the error and words it."""
    try:
        return _parse_whole(text)
    except (ClassAdParseError, RecursionError):
        return None
