"""Pickling calls and results: cloudpickle (or dill), the versions a pickle needs, and clear errors.

Theory of operation
-------------------
A call travels as ``(fn, args, kwargs)`` pickled with the chosen serializer (``"cloudpickle"``
by default, ``"dill"`` on request). The pickler is a subclass that watches every object it
saves, for two reasons:

* **Versions.** Each object's module (a class or function pickled by reference, an instance's
  class, a module a closure imports) names a top-level package. Packages that belong to an
  installed distribution are recorded with their version; the worker on the execute side
  compares them with its own and refuses to unpickle on a mismatch
  (:func:`check_versions`), naming each difference, instead of failing deep inside pickle.
* **Local code.** A module that is neither in the standard library nor in an installed
  distribution (a ``helpers.py`` next to the script) would be pickled *by reference* and fail
  to import on the execute side. Such modules are registered with cloudpickle to be pickled
  *by value* and the call is pickled again, so functions from local modules work like ones
  from ``__main__``.

Futures passed as arguments are not pickled: the pickler's ``persistent_id`` replaces each by
its call id (a dependency), and the worker's unpickler puts the parent's result in its place.

A function pickled by value whose pickle depends on nothing mutable is pickled once and kept
while its key (:mod:`htc.executors.function_key`) stays the same; its calls travel as two
pickles, the function's then ``(args, kwargs)``'s (:func:`loads_call` reads both forms).

When pickling fails, :func:`diagnose` pickles the parts one by one (the function's closure
cells and globals, each argument, inside containers and object attributes) and names the
smallest part that fails, with the path to it (``args[1]['conn']``).
"""

from __future__ import annotations

import functools
import io
import weakref
import pickle
import sys
import threading
import types
from collections import ChainMap
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from htc.executors.errors import OptionError, SerializationError, VersionMismatch
from htc.executors.function_key import function_key

__all__ = [
    "SERIALIZERS", "PickledCall", "check_versions", "diagnose", "dumps_call", "dumps_value", "loads", "loads_call",
    "package_version", "python_version",
]

SERIALIZERS = ("cloudpickle", "dill")
PROTOCOL = 5
#: modules whose objects never need a version check (they travel with the interpreter)
_ALWAYS_THERE = frozenset({"builtins", "__main__", "__mp_main__", "copyreg", "_codecs"})

_versions: dict[str, str | None] = {}
_dists: dict[str, list[str]] | None = None
_by_value: set[str] = set()
#: the pickles of functions kept by identity (see _kept_function), with what they depend on
_kept: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_kept_lock = threading.Lock()
_lock = threading.Lock()


def python_version() -> str:
    """This interpreter's version, ``"3.11.7"``."""
    return ".".join(map(str, sys.version_info[:3]))


def _distribution_version(top: str) -> str | None:
    """The version of the installed distribution providing top-level module ``top`` (None: none)."""
    global _dists
    if top in _versions:
        return _versions[top]
    import importlib.metadata as metadata  # only when a package needs a version: it costs ~25 ms

    version = None
    for guess in (top, top.replace("_", "-")):
        try:
            version = metadata.version(guess)
            break
        except metadata.PackageNotFoundError:
            continue
    if version is None:
        with _lock:
            if _dists is None:
                _dists = metadata.packages_distributions()
        for dist in _dists.get(top, ()):
            try:
                version = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    _versions[top] = version
    return version


def package_version(top: str) -> str | None:
    """The installed version of top-level package ``top`` here, or None when it is not installed.

    Args:
        top: an importable top-level name (``"numpy"``).

    Returns:
        The version string, or None.
    """
    return _distribution_version(top)


def _is_stdlib(top: str) -> bool:
    return top in sys.stdlib_module_names or top in _ALWAYS_THERE or top.startswith("_")


def _classify(modules: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """Split module names into (installed packages -> version, local modules to pickle by value)."""
    packages: dict[str, str] = {}
    local: list[str] = []
    for name in modules:
        top = name.partition(".")[0]
        if not top or _is_stdlib(top) or top in packages:
            continue
        version = _distribution_version(top)
        if version is not None:
            packages[top] = version
            continue
        module = sys.modules.get(top)
        if module is not None and getattr(module, "__file__", None) and top not in _by_value:
            local.append(top)
    return packages, local


def _make_pickler(serializer: str, buffer: io.BytesIO, modules: set[str],
                  persistent: Callable[[Any], str | None] | None):
    return _pickler_class(serializer)(buffer, modules, persistent)


#: types whose instances never stand for another call's result (a future is none of them)
_NEVER_PERSISTENT = frozenset({
    str, bytes, bytearray, int, float, complex, bool, type(None), tuple, list, dict, set, frozenset, type,
    types.CodeType, types.FunctionType, types.BuiltinFunctionType, types.ModuleType, types.MethodType,
    types.CellType,
})


@functools.cache  # one class per serializer: a class per call cost more than pickling a small call
def _pickler_class(serializer: str) -> type:
    if serializer == "cloudpickle":
        base = cloudpickle.Pickler
    elif serializer == "dill":
        import dill

        base = dill.Pickler
    else:
        raise OptionError(f"serializer={serializer!r} is not known; use one of {', '.join(SERIALIZERS)}")

    class CallPickler(base):  # type: ignore[valid-type,misc]
        def __init__(self, buffer: io.BytesIO, modules: set[str], persistent: Callable[[Any], str | None] | None):
            super().__init__(buffer, protocol=PROTOCOL)
            self._htc_modules = modules
            self._htc_persistent = persistent
            self._htc_avoid = None

        def persistent_id(self, obj):  # noqa: D102 - pickle hook
            # (Called for every object pickled: the plain ones, most of them, are never a
            # future, and need not ask.)
            if obj.__class__ in _NEVER_PERSISTENT or self._htc_persistent is None:
                return None
            return self._htc_persistent(obj)

        if serializer == "cloudpickle":
            if _CLOUDPICKLE_CODE_REDUCE is not None:
                dispatch_table = ChainMap({types.CodeType: _code_reduce_keeping_filename},
                                          cloudpickle.Pickler.dispatch_table)

            def reducer_override(self, obj):  # noqa: D102 - pickle hook
                if obj is self._htc_avoid and obj is not None:
                    raise _FunctionInArguments()
                _note(obj, self._htc_modules)
                return super().reducer_override(obj)
        else:
            def save(self, obj, save_persistent_id=True):  # noqa: D102 - pickle hook
                _note(obj, self._htc_modules)
                return super().save(obj, save_persistent_id)

    return CallPickler


#: cloudpickle's code-object reducer; cloudpickle >= 3.1 names every function pickled by value
#: "<dynamic-code>", which leaves a remote traceback without the file and the failing line.
_CLOUDPICKLE_CODE_REDUCE = getattr(getattr(cloudpickle, "cloudpickle", None), "_code_reduce", None)


def _code_reduce_keeping_filename(code: types.CodeType):
    """cloudpickle's reduction of ``code`` with the real ``co_filename`` put back, so a remote
    traceback names the caller's file and line (and shows the line where the file is readable)."""
    reducer, args = _CLOUDPICKLE_CODE_REDUCE(code)
    return reducer, tuple(code.co_filename if arg == "<dynamic-code>" else arg for arg in args)


def _note(obj: Any, modules: set[str]) -> None:
    if isinstance(obj, types.ModuleType):
        modules.add(obj.__name__)
    elif isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
        name = getattr(obj, "__module__", None)
        if isinstance(name, str):
            modules.add(name)
    else:
        modules.add(type(obj).__module__)


def _dump(obj: Any, serializer: str, persistent: Callable[[Any], str | None] | None,
          avoid: Any = None) -> tuple[bytes, set[str]]:
    buffer = io.BytesIO()
    modules: set[str] = set()
    pickler = _make_pickler(serializer, buffer, modules, persistent)
    pickler._htc_avoid = avoid
    pickler.dump(obj)
    return buffer.getvalue(), modules


@dataclass(frozen=True)
class PickledCall:
    """A call ready to travel: its bytes, the calls it depends on, and the packages it needs."""

    payload: bytes
    parents: tuple[str, ...] = ()
    packages: dict[str, str] = field(default_factory=dict)


def dumps_call(fn: Callable, args: tuple, kwargs: dict, *, serializer: str = "cloudpickle",
               persistent: Callable[[Any], str | None] | None = None) -> PickledCall:
    """Pickle one call for a job.

    Args:
        fn: the callable.
        args, kwargs: its arguments.
        serializer: ``"cloudpickle"`` or ``"dill"``.
        persistent: maps an object to a call id when it stands for another call's result (a
            future), else None; those objects become the call's parents. It is not asked about
            plain values (strings, numbers, containers, functions, code: ``_NEVER_PERSISTENT``).

    Returns:
        A :class:`PickledCall`.

    Raises:
        SerializationError: something could not be pickled; the message names it and where it
            sits (``args[0]``, a closure variable, a global of the function).
        OptionError: an unknown serializer.
    """
    parents: list[str] = []

    def record(obj: Any) -> str | None:
        pid = persistent(obj) if persistent is not None else None
        if pid is not None and pid not in parents:
            parents.append(pid)
        return pid

    if serializer == "cloudpickle":
        kept = _kept_function(fn)
        if kept is not None:
            try:
                rest = _dump_arguments(fn, args, kwargs, record)
            except (OptionError, SerializationError):
                raise
            except Exception as exc:  # noqa: BLE001
                raise SerializationError(diagnose(fn, args, kwargs, exc, serializer)) from exc
            if rest is not None:
                packages, local = _classify(rest[1] | kept[1])
                if not local:
                    return PickledCall(kept[0] + rest[0], tuple(parents), packages)
            parents.clear()
    call = (fn, args, kwargs)
    for _attempt in range(3):
        parents.clear()
        try:
            payload, modules = _dump(call, serializer, record)
        except (OptionError, SerializationError):
            raise
        except Exception as exc:  # noqa: BLE001 - any pickling failure becomes one clear error
            raise SerializationError(diagnose(fn, args, kwargs, exc, serializer)) from exc
        packages, local = _classify(modules)
        if not local or serializer != "cloudpickle":
            return PickledCall(payload, tuple(parents), packages)
        for name in local:  # local code: ship it by value and pickle again
            cloudpickle.register_pickle_by_value(sys.modules[name])
            _by_value.add(name)
    return PickledCall(payload, tuple(parents), packages)


class _FunctionInArguments(Exception):
    """The kept function is among the arguments too: pickle them together."""


def _dump_arguments(fn: Any, args: tuple, kwargs: dict,
                    record: Callable[[Any], str | None]) -> tuple[bytes, set[str]] | None:
    """``(args, kwargs)``'s pickle and modules; None when ``fn`` is among them (then the three
    travel in one pickle, so that they share it on the other side)."""
    try:
        return _dump((args, kwargs), "cloudpickle", record, avoid=fn)
    except _FunctionInArguments:
        return None


def _kept_function(fn: Any) -> tuple[bytes, set[str]] | None:
    """The pickle of ``fn`` and the modules it names, kept while nothing it holds has changed
    (None: ``fn`` is not such a function, or its pickle names local code still to be registered)."""
    try:
        key = function_key(fn, len(_by_value))
    except Exception:  # noqa: BLE001 - (cloudpickle's helpers it uses are not public): pickle as usual
        return None
    if key is None:
        return None
    with _kept_lock:
        entry = _kept.get(fn)
    if entry is not None and entry[0] == key:
        return entry[1], entry[2]
    try:
        data, modules = _dump(fn, "cloudpickle", None)
    except Exception:  # noqa: BLE001 - the whole call is pickled, and fails, as usual
        return None
    if _classify(modules)[1]:
        return None  # local code: the usual path registers it first
    with _kept_lock:
        _kept[fn] = (key, data, modules)
    return data, modules


def dumps_value(value: Any, serializer: str = "cloudpickle") -> tuple[bytes, dict[str, str]]:
    """Pickle a result (or an exception) and the packages its objects come from.

    Raises:
        SerializationError: the value cannot be pickled; the message names its type.
    """
    try:
        payload, modules = _dump(value, serializer, None)
    except Exception as exc:  # noqa: BLE001
        raise SerializationError(f"the result, a {_type_name(value)}, cannot be pickled ({type(exc).__name__}: "
                                 f"{exc}); return plain data, or write it to a file and list the file in "
                                 "transfer_output_files") from exc
    return payload, _classify(modules)[0]


def loads(data: bytes, serializer: str = "cloudpickle", persistent_load: Callable[[Any], Any] | None = None) -> Any:
    """Unpickle ``data`` (from :func:`dumps_call` or :func:`dumps_value`).

    Args:
        data: the bytes.
        serializer: the one that made them.
        persistent_load: resolves a parent's call id to its value.

    Returns:
        The object.
    """
    return _unpickler_class(serializer)(io.BytesIO(data), persistent_load).load()


def loads_call(data: bytes, serializer: str = "cloudpickle",
               persistent_load: Callable[[Any], Any] | None = None) -> tuple[Callable, tuple, dict]:
    """Unpickle a call from :func:`dumps_call`: ``(fn, args, kwargs)``, whichever of its two
    forms it travels in (one pickle of the three, or the function's then the arguments')."""
    stream = io.BytesIO(data)
    first = _unpickler_class(serializer)(stream, persistent_load).load()
    if type(first) is tuple:
        return first
    args, kwargs = _unpickler_class(serializer)(stream, persistent_load).load()
    return first, args, kwargs


@functools.cache
def _unpickler_class(serializer: str) -> type:
    """The unpickler of ``serializer`` that resolves parents (made once: a class per call costs more
    than unpickling a small call)."""
    if serializer == "dill":
        import dill

        base = dill.Unpickler
    else:
        base = pickle.Unpickler

    class CallUnpickler(base):  # type: ignore[valid-type,misc]
        def __init__(self, file, parent_load: Callable[[Any], Any] | None):
            super().__init__(file)
            self._parent_load = parent_load

        def persistent_load(self, pid):  # noqa: D102 - pickle hook
            if self._parent_load is None:
                raise pickle.UnpicklingError(f"the pickle refers to another call's result ({pid!r}) "
                                             "but no parent results were given")
            return self._parent_load(pid)

    return CallUnpickler


# --- versions on the execute side -------------------------------------------------------------


def check_versions(python: str, packages: dict[str, str]) -> None:
    """Compare the submit side's versions with this interpreter's.

    Python must agree on major.minor (pickled code objects are specific to it); each package
    must be installed at exactly the recorded version.

    Args:
        python: the submit side's Python version (``"3.11.7"``).
        packages: top-level package -> version recorded at submit time.

    Raises:
        VersionMismatch: naming every difference and what to do.
    """
    mismatches: list[tuple[str, str, str]] = []
    here = python_version()
    if python.split(".")[:2] != here.split(".")[:2]:
        mismatches.append(("Python", python, here))
    for top, wanted in sorted(packages.items()):
        have = _distribution_version(top)
        if have != wanted:
            mismatches.append((top, wanted, have or "missing"))
    if mismatches:
        parts = ", ".join(f"{name} {want} on the submit side but {have} here" for name, want, have in mismatches)
        raise VersionMismatch(
            f"this execute node cannot run the call: {parts}. Install the same versions on the execute side, "
            "pin them in the submit environment, or pass check_versions=False to try anyway",
            tuple(mismatches))


# --- diagnosis ----------------------------------------------------------------------------------


def _type_name(obj: Any) -> str:
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _fails(obj: Any, serializer: str) -> BaseException | None:
    try:
        _dump(obj, serializer, lambda o: "future" if _looks_like_future(o) else None)
    except Exception as exc:  # noqa: BLE001
        return exc
    return None


def _looks_like_future(obj: Any) -> bool:
    return type(obj).__name__ == "HTCFuture"


def _children(obj: Any) -> Iterable[tuple[str, Any]]:
    if isinstance(obj, dict):
        for key, value in list(obj.items())[:200]:
            yield f"[{key!r}]", value
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj[:200]):
            yield f"[{i}]", value
    elif isinstance(obj, (set, frozenset)):
        for value in list(obj)[:200]:
            yield "{...}", value
    elif isinstance(obj, types.FunctionType):
        if obj.__closure__:
            for name, cell in zip(obj.__code__.co_freevars, obj.__closure__):
                try:
                    yield f" (closure variable {name!r})", cell.cell_contents
                except ValueError:
                    continue
        for name in _global_names(obj.__code__):
            if name in obj.__globals__:
                yield f" (global {name!r})", obj.__globals__[name]
        for i, value in enumerate(obj.__defaults__ or ()):
            yield f" (default #{i})", value
    elif hasattr(obj, "__dict__") and not isinstance(obj, (type, types.ModuleType)):
        for key, value in list(vars(obj).items())[:200]:
            yield f".{key}", value


def _global_names(code: types.CodeType) -> list[str]:
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.extend(_global_names(const))
    return names


def _culprit(obj: Any, path: str, serializer: str, depth: int = 0) -> tuple[str, Any, BaseException] | None:
    """The deepest part of ``obj`` that fails to pickle on its own, with its path."""
    exc = _fails(obj, serializer)
    if exc is None:
        return None
    if depth < 6:
        for suffix, child in _children(obj):
            found = _culprit(child, path + suffix, serializer, depth + 1)
            if found is not None:
                return found
    return path, obj, exc


def diagnose(fn: Callable, args: tuple, kwargs: dict, exc: BaseException, serializer: str = "cloudpickle") -> str:
    """A sentence naming what in a call could not be pickled, and what to do about it."""
    label = getattr(fn, "__qualname__", None) or _type_name(fn)
    candidates: list[tuple[str, str, Any]] = [(f"the function {label}", "", fn)]
    candidates += [(f"args[{i}]", f" (an argument of {label}())", a) for i, a in enumerate(args)]
    candidates += [(f"keyword argument {k}=", f" (of {label}())", v) for k, v in kwargs.items()]
    for where, context, obj in candidates:
        found = _culprit(obj, where, serializer)
        if found is None:
            continue
        path, culprit, cause = found
        if _looks_like_future(culprit):
            break
        hint = ("pass something picklable instead (for a connection, lock or open file: what is needed "
                "to make it, and make it inside the function)")
        if serializer == "cloudpickle":
            hint += ", or try serializer='dill'"
        return (f"cannot pickle {path}{context}: it is a {_type_name(culprit)} ({type(cause).__name__}: {cause}); "
                f"{hint}")
    return f"cannot pickle the call of {label}: {type(exc).__name__}: {exc}"
