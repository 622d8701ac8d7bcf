"""Function nodes: a DAG node whose job runs a Python function, as the executor's calls do.

A function node ``NAME`` of a DAG written to directory ``D`` is three files there:

==================  ==========================================================================
``NAME.call``       the call (:mod:`htc.wire.callfile`): a JSON header, then ``(fn, args,
                    kwargs)`` pickled with cloudpickle
``NAME.sub``        the node's submit description: ``python -m htc.executors.worker`` (the
                    executor's worker, run by module name: htc.dag does not import the executor)
                    with the call file and its parents' results as input files
``NAME.result``     written by the job: ``htc_result.pkl`` brought back under the node's name
                    (``transfer_output_remaps``); :func:`read_result` reads it
==================  ==========================================================================

A parent function node given as an argument (``dag.function("b", f, a)`` where ``a`` is
another function node) is pickled as a reference, the way an executor future is: the pickle
holds the parent's call id (its node name), the child's job gets ``PARENT.result`` as an input
file, and the worker puts the parent's return value in the argument's place.

The worker's exit status decides the node: 0 the function returned, 1 it raised, 3 it could
not run (a version mismatch, an unreadable call).
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import sys
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cloudpickle

from htc.errors import UsageError
from htc.submit.argsenv import environment_command
from htc.wire import callfile as cf

__all__ = ["FunctionCall", "read_result", "result_file", "submit_text", "write_call"]

#: the worker, run by module name (the executor's machinery; see the module docstring)
WORKER_MODULE = "htc.executors.worker"


class FunctionCall:
    """A function, its arguments and the parent nodes whose results some arguments stand for."""

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, refers: Callable[[Any], str | None]):
        if not callable(fn):
            raise TypeError(f"a function node needs a callable, not a {type(fn).__name__}")
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self._refers = refers
        self.parents: list[str] = []
        self._scan(args)
        self._scan(kwargs)

    def _scan(self, obj: Any) -> None:
        """Record the parent nodes found among the arguments (inside lists, tuples, dicts too)."""
        ref = self._refers(obj)
        if ref is not None:
            if ref not in self.parents:
                self.parents.append(ref)
        elif isinstance(obj, (list, tuple, set, frozenset)):
            for item in obj:
                self._scan(item)
        elif isinstance(obj, dict):
            for item in obj.values():
                self._scan(item)

    @property
    def label(self) -> str:
        """``module.qualname`` of the function, for messages."""
        fn = self.fn
        return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"

    def pickle(self) -> bytes:
        """``(fn, args, kwargs)`` pickled, each parent node replaced by a reference to its result."""
        refers = self._refers

        class CallPickler(cloudpickle.Pickler):
            def persistent_id(self, obj):  # noqa: D102 - pickle hook
                return refers(obj)

        buffer = io.BytesIO()
        with _local_code_by_value(self.fn):
            try:
                CallPickler(buffer, protocol=5).dump((self.fn, self.args, self.kwargs))
            except Exception as exc:  # noqa: BLE001 - any pickling failure becomes one clear error
                raise TypeError(f"the call of {self.label} cannot be pickled ({type(exc).__name__}: {exc}); "
                                "a function node's function and arguments must be picklable by cloudpickle "
                                "(no open files, sockets or locks)") from exc
        return buffer.getvalue()


def _installed(path: str) -> bool:
    paths = sysconfig.get_paths()
    roots = {paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"]}
    real = os.path.realpath(path)
    return any(real.startswith(os.path.realpath(r) + os.sep) for r in roots if r)


@contextlib.contextmanager
def _local_code_by_value(fn: Callable) -> Iterator[None]:
    """Pickle the function's module by value when the job could not import it (a test file, a
    script's helper module): modules of the standard library, of installed distributions and of
    htc itself are pickled by reference as usual."""
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    name = getattr(module, "__name__", "")
    file = getattr(module, "__file__", None)
    local = (module is not None and file and name != "__main__" and name.split(".")[0] != "htc"
             and not _installed(file) and name not in cloudpickle.list_registry_pickle_by_value())
    if local:
        cloudpickle.register_pickle_by_value(module)
    try:
        yield
    finally:
        if local:
            cloudpickle.unregister_pickle_by_value(module)


def write_call(directory: Path, node: str, call: FunctionCall) -> Path:
    """Write ``NODE.call`` in ``directory`` and return its path."""
    header = cf.CallHeader(call_id=node, function=call.label, python=".".join(map(str, sys.version_info[:3])),
                           parents=tuple(call.parents))
    path = directory / f"{node}{cf.CALL_SUFFIX}"
    cf.write_call(path, header, call.pickle())
    return path


def _others_can_run(path: str) -> bool:
    """True if an account that is neither owner nor group can run ``path`` (every directory on
    the way searchable by others, the file executable by others), as given and resolved."""
    for candidate in {os.path.abspath(path), os.path.realpath(path)}:
        try:
            if not os.stat(candidate).st_mode & 0o001:
                return False
            parent = os.path.dirname(candidate)
            while parent and parent != os.path.dirname(parent):
                if not os.stat(parent).st_mode & 0o001:
                    return False
                parent = os.path.dirname(parent)
        except OSError:
            return False
    return True


def check_python_for_root(python: str | None) -> None:
    """Refuse, before submitting, function-node jobs that a root pool could not start.

    A pool started by root runs root's jobs as slot accounts, never as root; they cannot run an
    interpreter behind a directory only root may enter (a venv under ``/root``, say), and the
    jobs would go on hold.

    Raises:
        UsageError: this process is root and the slot accounts cannot run ``python``.
    """
    python = python or sys.executable
    if os.geteuid() == 0 and not _others_can_run(python):
        raise UsageError(
            f"function nodes would run {python}, which the pool's slot accounts cannot reach (root's jobs run "
            "as slot accounts, not as root); give DAG(..., python=PYTHON, environment={'PYTHONPATH': ...}) an "
            "interpreter they can run with htc importable, e.g. what htc.executors.shared_python(directory) "
            "prepares")


def result_file(directory: str | os.PathLike, node: str) -> Path:
    """Where function node ``node``'s result comes back (``NODE.result`` in the DAG's directory)."""
    return Path(directory) / cf.parent_file(node)



def submit_text(node: str, parents: list[str], *, python: str | None = None,
                environment: dict[str, str] | None = None, extra: dict[str, str] | None = None) -> str:
    """The submit description of function node ``node`` (files relative to the DAG's directory).

    Args:
        node: the node's name (also its call id).
        parents: the function nodes whose results are arguments of this one.
        python: the interpreter the job runs (default: this one). The slot account that runs
            the job must be able to run it and import htc from it: a root pool runs jobs as
            other accounts, which may not reach a venv under ``/root``
            (``htc.executors.shared_python`` prepares one they can, as for the executor).
        environment: the job's environment variables (default: this process's PYTHONPATH, if
            set, so the job imports what this process imports).
        extra: more submit commands (``request_memory``...), added last.
    """
    inputs = [f"{node}{cf.CALL_SUFFIX}", *(cf.parent_file(p) for p in parents)]
    lines = {
        "universe": "vanilla",
        "executable": python or sys.executable,
        "transfer_executable": "false",
        "arguments": f"-m {WORKER_MODULE}",
        "should_transfer_files": "YES",
        "when_to_transfer_output": "ON_EXIT",
        "transfer_input_files": ", ".join(inputs),
        "transfer_output_files": cf.RESULT_FILE,
        "transfer_output_remaps": f'"{cf.RESULT_FILE} = {cf.parent_file(node)}"',
        "output": f"{node}.out",
        "error": f"{node}.err",
    }
    env = dict(environment) if environment is not None else (
        {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {})
    if env:
        lines["environment"] = environment_command(env)
    lines.update(extra or {})
    return "".join(f"{k} = {v}\n" for k, v in lines.items()) + "queue\n"


def read_result(directory: str | os.PathLike, node: str) -> Any:
    """The value function node ``node`` returned.

    Raises:
        the function's own exception, re-raised here, when it raised one.
        htc.wire.callfile.CallFileError: there is no result yet (the node has not finished), or
            the call could not run (the message says why).
    """
    path = result_file(directory, node)
    try:
        header, payload = cf.read_result(path)
    except cf.CallFileError:
        raise cf.CallFileError(f"function node {node!r} has no result yet ({path} does not exist); wait for the "
                               "DAG (handle.wait()) or check the node's state (handle.status())") from None
    value = pickle.loads(payload)
    if header.outcome == "value":
        return value
    if header.outcome == "exception" and isinstance(value, BaseException):
        raise value
    raise cf.CallFileError(f"function node {node!r} could not run on {header.host}: {value}\n{header.traceback}")
