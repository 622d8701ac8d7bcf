"""HTCondor's V2 argument syntax: the one copy of the rule every layer uses.

A job's ``Arguments`` and ``Environment`` attributes hold words in "V2 raw" form (HTCondor's
``ArgList``): whitespace separates words, single quotes group, and ``''`` inside quotes is a
literal quote (``'it''s'`` is ``it's``; ``''`` alone is an empty word). The ClassAd functions
``splitArgs``/``joinArgs`` (:mod:`htc.classad.builtins_env`), the submit language
(:mod:`htc.submit.argsenv`) and the starter that runs the job all split and join with these
two functions; each turns :class:`UnbalancedQuote` into its own kind of error.
"""

from __future__ import annotations

__all__ = ["SPACE", "UnbalancedQuote", "join_v2", "split_v2"]

#: the characters that separate words
SPACE = " \t\n\r"


class UnbalancedQuote(ValueError):
    """A single quote opens and never closes; ``rest`` is the text from that quote on."""

    def __init__(self, rest: str):
        super().__init__(f"Unbalanced quote starting here: {rest}")
        self.rest = rest


def split_v2(text: str) -> list[str]:
    """Split V2 raw text into words (HTCondor's ``split_args``).

    Raises:
        UnbalancedQuote: a quote that does not close.
    """
    args: list[str] = []
    buf: list[str] = []
    token = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "'":
            start = i
            i += 1
            token = True
            while i < n:
                if text[i] == "'":
                    if i + 1 < n and text[i + 1] == "'":
                        buf.append("'")
                        i += 2
                        continue
                    break
                buf.append(text[i])
                i += 1
            if i >= n:
                raise UnbalancedQuote(text[start:])
            i += 1
        elif c in SPACE:
            i += 1
            if token:
                args.append("".join(buf))
                buf = []
                token = False
        else:
            token = True
            buf.append(c)
            i += 1
    if token:
        args.append("".join(buf))
    return args


def join_v2(args: list[str]) -> str:
    """Quote and join words as V2 raw text (``join_args`` / ``append_arg``): a run of special
    characters shares one quoted section (``a  b`` -> ``a'  'b``)."""
    out: list[str] = []
    for arg in args:
        if out:
            out.append(" ")
        if not arg:
            out.append("''")
            continue
        for c in arg:
            if c in " \t\n\r'":
                if out and out[-1] == "'":
                    out.pop()  # join with the preceding quoted run instead of repeating quotes
                else:
                    out.append("'")
                if c == "'":
                    out.append("'")
                out.append(c)
                out.append("'")
            else:
                out.append(c)
    return "".join(out)
