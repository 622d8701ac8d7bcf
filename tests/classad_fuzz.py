"""Random ClassAd inputs and the one property every one of them must keep (issue #14, part 4).

The generators take a :class:`random.Random`, so the same code feeds the bounded hypothesis
tests (tests/unit/test_fuzz_classad.py, through ``st.randoms()``) and a longer count run::

    python tests/classad_fuzz.py --inputs 20000 [--seed 1]

which prints, per input family, how many inputs were tried and how many broke the property
(the figures of the issue's closing note).  The property: parsing returns an expression or
ad, or raises :class:`~htc.classad.ClassAdParseError`; everything done with what was parsed
(evaluating, matching, printing, comparing, hashing, listing references) returns; no other
exception, ever.
"""

from __future__ import annotations

import argparse
import random
import sys
import traceback

NAMES = ["a", "b", "c", "d", "x", "Memory", "Cpus", "MY", "TARGET", "parent", "RequestMemory",
         "'odd name'", "Requirements", "Rank", "ad", "lst"]
LITERALS = ["0", "1", "-1", "42", "2.5", "-0.0", "1e308", "1E-320", "9223372036854775807",
            "-9223372036854775808", "9223372036854775808", '"x"', '"LINUX"', '""', '"a\\"b"',
            "true", "false", "undefined", "error", 'absTime("2024-01-01T00:00:00Z")',
            'relTime("1+02:03:04")', "7" * 5000, "-" + "3" * 4400, "1." + "5" * 5000]
BINARY = ["||", "&&", "|", "^", "&", "==", "!=", "=?=", "=!=", "is", "isnt", "<", "<=", ">",
          ">=", "<<", ">>", ">>>", "+", "-", "*", "/", "%"]
PREFIX = ["-", "+", "!", "~"]
FUNCTIONS = ["strcat", "ifThenElse", "eval", "unparse", "unresolved", "member", "size", "split",
             "regexp", "substr", "int", "real", "string", "pow", "evalInEachContext",
             "countMatches", "isUndefined", "stringListMember", "join", "sum", "max", "floor",
             "debug", "toUpper", "random", "time", "nosuchfunction"]
PUNCT = ["(", ")", "{", "}", "[", "]", ",", ";", "=", "?", ":", "?:", ".", "'", '"', "/*", "*/",
         "//", "\\", "\n"]

#: the scope and target every parsed expression is evaluated in
SCOPE_TEXT = ('[ a = 1; b = "x"; c = { 1, 2, [ e = 3 ] }; d = [ e = 1; f = d.e + 1 ]; '
              'x = a + 1; lst = { [ Memory = 2 ], [ Memory = 4 ] }; loop = loop + 1; '
              'Requirements = TARGET.Memory >= 1; Memory = 1024; Cpus = 2 ]')
TARGET_TEXT = '[ Memory = 2048; Cpus = 4; Requirements = MY.Memory > TARGET.Memory; b = "y" ]'


def atom(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.45:
        return rng.choice(NAMES)
    if r < 0.85:
        return rng.choice(LITERALS)
    if r < 0.92:
        return f"{rng.choice(['MY', 'TARGET', 'd', 'c[2]'])}.{rng.choice(NAMES)}"
    return f"{rng.choice(FUNCTIONS)}({', '.join(rng.choice(LITERALS + NAMES) for _ in range(rng.randrange(3)))})"


def expression(rng: random.Random, depth: int = 0) -> str:
    """A mostly well-formed expression of random shape."""
    r = rng.random()
    if depth > 6 or r < 0.3:
        return atom(rng)
    if r < 0.55:
        return f"{expression(rng, depth + 1)} {rng.choice(BINARY)} {expression(rng, depth + 1)}"
    if r < 0.62:
        return f"{rng.choice(PREFIX)}{expression(rng, depth + 1)}"
    if r < 0.7:
        return f"({expression(rng, depth + 1)})"
    if r < 0.76:
        return f"{expression(rng, depth + 1)} ? {expression(rng, depth + 1)} : {expression(rng, depth + 1)}"
    if r < 0.8:
        return f"{expression(rng, depth + 1)} ?: {expression(rng, depth + 1)}"
    if r < 0.86:
        return "{ " + ", ".join(expression(rng, depth + 1) for _ in range(rng.randrange(4))) + " }"
    if r < 0.91:
        return "[ " + "; ".join(f"{n} = {expression(rng, depth + 1)}"
                                for n in rng.sample(["a", "b", "e", "f"], rng.randrange(4))) + " ]"
    if r < 0.96:
        return f"{rng.choice(FUNCTIONS)}(" + ", ".join(
            expression(rng, depth + 1) for _ in range(rng.randrange(4))) + ")"
    return f"{expression(rng, depth + 1)}[{expression(rng, depth + 1)}]"


def chain(rng: random.Random) -> str:
    """A chain of operators: one operator or a mix, up to thousands of terms, maybe nested."""
    n = rng.choice([2, 10, 50, 400, 700, 1000, 3000]) + rng.randrange(10)
    kind = rng.random()
    if kind < 0.1:
        return atom(rng) + "".join(f".{rng.choice(NAMES)}" for _ in range(n))
    if kind < 0.2:
        return atom(rng) + "".join(f"[{rng.choice(LITERALS)}]" for _ in range(n))
    if kind < 0.3:
        return " ?: ".join(atom(rng) for _ in range(n))
    if kind < 0.6:
        op = rng.choice(BINARY)
        parts = [atom(rng) for _ in range(n)]
        text = f" {op} ".join(parts)
    else:
        text = atom(rng)
        for _ in range(n):
            text += f" {rng.choice(BINARY)} {atom(rng)}"
    if rng.random() < 0.3:
        text = f"({text}) {rng.choice(BINARY)} ({chain_small(rng)})"
    return text


def chain_small(rng: random.Random) -> str:
    op = rng.choice(BINARY)
    return f" {op} ".join(atom(rng) for _ in range(rng.randrange(1, 30)))


def nesting(rng: random.Random) -> str:
    """Deep nesting of every kind, around the parser's limit."""
    from htc.classad.parser import MAX_DEPTH

    k = rng.choice([MAX_DEPTH // 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 2 * MAX_DEPTH, 2000])
    kind = rng.randrange(7)
    if kind == 0:
        return "(" * k + atom(rng) + ")" * k
    if kind == 1:
        return rng.choice(PREFIX) * k + atom(rng)
    if kind == 2:
        return "{" * k + atom(rng) + "}" * k
    if kind == 3:
        return "f(" * k + atom(rng) + ")" * k
    if kind == 4:
        return "[a = " * k + atom(rng) + "]" * k
    if kind == 5:  # every precedence level, again and again
        unit = "a || b && c | d ^ e & f == g < h << i + j * ("
        return unit * (k // 10 + 1) + "1" + ")" * (k // 10 + 1)
    return "a ? " * k + "1" + " : 2" * k


def token_soup(rng: random.Random) -> str:
    """Tokens of the language in random order: mostly wrong, sometimes right."""
    pool = NAMES + LITERALS + BINARY + PREFIX + PUNCT + [f + "(" for f in FUNCTIONS]
    n = rng.randrange(0, 60)
    sep = rng.choice(["", " ", " "])
    return sep.join(rng.choice(pool) for _ in range(n))


def random_text(rng: random.Random) -> str:
    """Bytes off the wire: random, in one of the ways a daemon could decode them."""
    data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
    if rng.random() < 0.5:
        data = bytes(rng.choice(b'[]{}()"\'=;,.\\/*\n aAzZ019+-&|!?:') for _ in range(rng.randrange(0, 200)))
    return data.decode("utf-8", "replace") if rng.random() < 0.5 else data.decode("latin-1")


FAMILIES = {
    "expressions": expression,
    "operator chains": chain,
    "deep nesting": nesting,
    "token soup": token_soup,
    "random bytes": random_text,
}


def check(text: str) -> None:
    """Run ``text`` through the parsers and everything done with what they give back.

    Raises:
        AssertionError: something raised another exception than ClassAdParseError (the
            message names the step and carries the traceback).
    """
    from htc.classad import ClassAd, ClassAdParseError, ExprTree, ParserType, parseAds
    from htc.classad.match import match_many, rank, symmetric_match

    step = "setup"
    try:
        scope, target = ClassAd(SCOPE_TEXT), ClassAd(TARGET_TEXT)
        step = "parse_expr"
        try:
            expr = ExprTree(text)
        except ClassAdParseError:
            expr = None
        if expr is not None:
            step = "evaluate"
            expr.eval()
            expr.eval(scope)
            expr.eval(scope, target)
            step = "print"
            printed = repr(expr)
            str(expr)
            step = "print and parse again"
            again = ExprTree(printed)
            step = "compare"
            assert again == expr or again != expr
            hash(expr)
            step = "references"
            expr.attributes()
            scope.externalRefs(expr)
            step = "in an ad"
            ad = ClassAd(SCOPE_TEXT)
            # (through one attribute: the expression may name Requirements and Rank, and two
            # copies naming each other would cost a walk of the whole chain per reference)
            ad["Fuzz"] = expr
            ad["Requirements"] = ExprTree("Fuzz")
            ad["Rank"] = ExprTree("Fuzz")
            ad.eval("Requirements", target)
            symmetric_match(ad, target)
            rank(ad, target)
            match_many(ad, [target, scope])
            step = "print the ad"
            ad.printOld()
            ad.printJson()
            str(ad)
            ClassAd(repr(ad))
            step = "unresolved()"
            ExprTree("unresolved(Requirements)").eval(ad, target)
            ExprTree("unparse(Requirements)").eval(ad, target)
        for syntax in (ParserType.New, ParserType.Old, ParserType.JSON, ParserType.Auto):
            step = f"parseAds {syntax.name}"
            try:
                for ad in parseAds(text, syntax):
                    repr(ad)
                    for name in list(ad):
                        ad.eval(name)
            except ClassAdParseError:
                pass
        step = "ad text"
        try:
            ClassAd(f"[ v = {text} ]").eval("v")
        except ClassAdParseError:
            pass
    except AssertionError:
        raise
    except BaseException as exc:  # noqa: BLE001 - any other exception is the finding
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise AssertionError(f"{step}: {type(exc).__name__}: {str(exc)[:200]} for "
                             f"{text[:120]!r}{'...' if len(text) > 120 else ''} "
                             f"({len(text)} chars)\n{traceback.format_exc(limit=-6)}") from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=2000, help="inputs per family")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=3, help="failures to print per family")
    args = ap.parse_args(argv)
    sys.setrecursionlimit(1000)
    total_bad = 0
    for name, gen in FAMILIES.items():
        rng = random.Random(f"{args.seed}:{name}")
        bad = 0
        kinds: dict[str, int] = {}
        for _ in range(args.inputs):
            text = gen(rng)
            try:
                check(text)
            except AssertionError as exc:
                bad += 1
                key = str(exc).split(" for ")[0]
                kinds[key] = kinds.get(key, 0) + 1
                if bad <= args.show:
                    print(f"  {name}: {str(exc).splitlines()[0][:300]}")
        total_bad += bad
        print(f"{name}: {args.inputs} inputs, {bad} broke the property"
              + (f" ({', '.join(f'{k} x{v}' for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:4])})"
                 if kinds else ""))
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
