"""Exceptions of the ClassAd language."""

from __future__ import annotations

from htc.errors import UsageError


class ClassAdParseError(UsageError, ValueError):
    """ClassAd text does not follow the language's grammar; fix the text at the reported position."""

    def __init__(self, text: str, pos: int, expected: str, found: str | None = None):
        self.text = text
        self.pos = pos
        self.expected = expected
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        self.line = line
        self.column = col
        if found is None:
            found = repr(text[pos:pos + 12]) if pos < len(text) else "end of input"
        self.found = found
        snippet = text if len(text) <= 60 else text[:57] + "..."
        super().__init__(
            f"ClassAd parse error at line {line}, column {col} (offset {pos}): expected "
            f"{expected}, found {found}, in {snippet!r}; correct the text there and parse again")


class ClassAdValueError(UsageError, ValueError):
    """A Python value cannot be represented as a ClassAd value; convert it first."""


class ClassAdEvaluationError(UsageError, ValueError):
    """An expression cannot be evaluated at all where it is evaluated (classad2 raises too):
    ``.x`` or ``root`` with no ad to look in. Give a scope ad."""
