"""The ClassAd language: values, expressions, ads, and matchmaking.

The public API mirrors HTCondor's ``classad2`` bindings::

    >>> from htc.classad import ClassAd, ExprTree
    >>> ad = ClassAd('[ Memory = 4096; Cpus = 4 ]')
    >>> ExprTree('Memory / Cpus').eval(ad)
    1024

See ``docs/classad.md`` for the language and the few deliberate differences.
"""

from htc.classad.ad import ClassAd, ExprTree, quote, unquote
from htc.classad.errors import ClassAdParseError, ClassAdValueError
from htc.classad.syntax import ParserType, parseAds, parseNext, parseOne
from htc.classad.values import AbsTime, Error, RelTime, Undefined, Value

#: classad2 calls its parse exception ClassAdException; ours is ClassAdParseError
ClassAdException = ClassAdParseError

__all__ = [
    "ClassAd", "ExprTree", "Value", "Undefined", "Error", "AbsTime", "RelTime",
    "ParserType", "parseAds", "parseOne", "parseNext", "quote", "unquote",
    "ClassAdParseError", "ClassAdValueError", "ClassAdException",
]
