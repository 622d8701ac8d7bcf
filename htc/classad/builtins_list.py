"""Type predicates and list builtins (classad fnCall.cpp isType, testMember, sumAvg, ...).

The list functions apply ClassAd operators element by element, so they inherit the
operators' quirks: ``member("A", {"a"})`` is true because ``==`` ignores case on strings,
and ``min({2, 2.0})`` is the real 2.0 because comparing promotes both operands in place.
"""

from __future__ import annotations

from htc.classad.builtins_common import is_number
from htc.classad.builtins_ops import COMPARISON_OPS, add, compare, divide, promote
from htc.classad.values import AbsTime, Error, RelTime, Undefined, is_classad


def _predicate(test):
    def fn(args: list) -> object:
        if len(args) != 1:
            return Error
        return test(args[0])
    return fn


TYPE_PREDICATES = {
    "isundefined": _predicate(lambda v: v is Undefined),
    "iserror": _predicate(lambda v: v is Error),
    "isstring": _predicate(lambda v: isinstance(v, str)),
    "isinteger": _predicate(lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "isreal": _predicate(lambda v: isinstance(v, float)),
    "islist": _predicate(lambda v: isinstance(v, list)),
    "isclassad": _predicate(is_classad),
    "isboolean": _predicate(lambda v: isinstance(v, bool)),
    "isabstime": _predicate(lambda v: isinstance(v, AbsTime)),
    "isreltime": _predicate(lambda v: isinstance(v, RelTime)),
}


def _member(args: list, identical: bool) -> object:
    if len(args) != 2:
        return Error
    item, items = args
    # A missing list is UNDEFINED; so is a missing item, except for identicalMember,
    # which can look for UNDEFINED itself.
    if items is Undefined or (not identical and item is Undefined):
        return Undefined
    if not isinstance(items, list) or isinstance(item, list) or is_classad(item):
        return Error
    if not identical and item is Error:
        return Error
    op = "is" if identical else "=="
    for element in items:
        if compare(op, element, item) is True:
            return True
    return False


def fn_member(args: list) -> object:
    """``member(x, list)``: true when some element ``== x``."""
    return _member(args, identical=False)


def fn_identicalmember(args: list) -> object:
    """``identicalMember(x, list)``: true when some element ``=?= x``."""
    return _member(args, identical=True)


def _list_argument(args: list) -> object:
    if len(args) != 1:
        return Error
    if args[0] is Undefined:
        return Undefined
    if not isinstance(args[0], list):
        return Error
    return args[0]


def _sum_avg(args: list, average: bool) -> object:
    items = _list_argument(args)
    if not isinstance(items, list):
        return items
    total: object = 0
    count = 0
    for element in items:
        # UNDEFINED elements are skipped and do not count toward the average.
        if element is Undefined:
            continue
        if not is_number(element):
            return Error
        total = element if count == 0 else add(total, element)
        count += 1
    if average and count > 0:
        return divide(total, float(count))
    return total


def fn_sum(args: list) -> object:
    """``sum(list)``: 0 for an empty list; UNDEFINED elements are ignored."""
    return _sum_avg(args, average=False)


def fn_avg(args: list) -> object:
    """``avg(list)``: the real mean of the numeric elements (integer 0 when there are none)."""
    return _sum_avg(args, average=True)


def _min_max(args: list, op: str) -> object:
    items = _list_argument(args)
    if not isinstance(items, list):
        return items
    result: object = Undefined
    first = True
    for element in items:
        if element is Undefined:
            continue
        if not is_number(element):
            return Error
        if first:
            result, first = element, False
            continue
        # Operation::Operate promotes both operands in place before comparing, so the
        # running bound keeps the promoted type even when it wins.
        candidate, result = promote(element, result)
        if compare(op, candidate, result) is True:
            result = candidate
    return result


def fn_min(args: list) -> object:
    """``min(list)``: the smallest number; UNDEFINED for an empty list."""
    return _min_max(args, "<")


def fn_max(args: list) -> object:
    """``max(list)``: the largest number; UNDEFINED for an empty list."""
    return _min_max(args, ">")


def _list_compare(args: list, need_all: bool) -> object:
    if len(args) != 3:
        return Error
    op, items, target = args
    if op is Undefined:
        return Undefined
    if not isinstance(op, str) or op not in COMPARISON_OPS:
        return Error
    if items is Undefined:
        return Undefined
    if not isinstance(items, list):
        return Error
    for element in items:
        outcome = compare(op, element, target)
        if outcome is Undefined:
            # An UNDEFINED comparison stops the scan with false for both functions.
            return False
        if outcome is Error:
            return Error
        if outcome and not need_all:
            return True
        if not outcome and need_all:
            return False
    return need_all


def fn_anycompare(args: list) -> object:
    """``anyCompare(op, list, x)``: true when ``element op x`` holds for some element."""
    return _list_compare(args, need_all=False)


def fn_allcompare(args: list) -> object:
    """``allCompare(op, list, x)``: true when ``element op x`` holds for every element."""
    return _list_compare(args, need_all=True)


FUNCTIONS = {
    **TYPE_PREDICATES,
    "member": fn_member,
    "identicalmember": fn_identicalmember,
    "sum": fn_sum,
    "avg": fn_avg,
    "min": fn_min,
    "max": fn_max,
    "anycompare": fn_anycompare,
    "allcompare": fn_allcompare,
}
