"""The execute side of a function job: read the call, check versions, run it, write the outcome.

``python -m htc.executors.worker [SANDBOX]`` is a function job's executable (the starter runs
it in the job's sandbox; the local backend's zygote calls :func:`run` in a forked child). Under
``checkpoint="transparent"`` it is a standard-universe job's program, run under the
checkpointing runtime in the job's remote ``Iwd``: it must stay single-threaded, with no
sockets or subprocesses (the runtime stops a process that starts one), so nothing here starts
a thread -- the function alone decides.

Theory of operation
-------------------
1. Read the call file, ``htc_call.pkl`` or ``<call id>.call`` (:mod:`htc.wire.callfile`;
   the sandbox holds exactly one). Its header is plain JSON, so the
   versions recorded at submit time are compared with this interpreter's *before* anything
   is unpickled; a mismatch ends the call with a :class:`VersionMismatch` naming each one.
2. Unpickle ``(fn, args, kwargs)``; every future that was an argument is replaced by its
   parent's value, read from ``<parent id>.result``.
3. Install the checkpoint context: ``htc.resume()`` returns what ``htc_checkpoint.pkl``
   holds, if an earlier run left one; a :class:`~htc.executors.checkpointing.Checkpointable`
   callable gets it through ``set_checkpoint``.
4. Run the call. The soft-kill signal (SIGTERM: the job is being evicted) saves a
   Checkpointable's ``get_checkpoint()`` and ends the process by that signal, so the starter
   sees an eviction. A ``timeout=`` arms a timer that raises :class:`CallTimedOut` inside the
   call; the job's ``AllowedExecuteDuration`` stays as the starter's hard backstop.
5. Write ``htc_result.pkl``: the value, the exception with its formatted traceback, or the
   htc error that kept the call from running.

The exit status tells the schedd's policy what happened without reading any file:
``EXIT_VALUE`` (0) the call returned, ``EXIT_EXCEPTION`` (1) it raised (``max_retries`` runs
it again), ``EXIT_ERROR`` (3) it could not run or timed out (retrying cannot help; the job ad's
``retry_until`` stops on it).
"""

from __future__ import annotations

import _signal  # the C module: signal.signal's enum round trip costs more than a quick call
import contextlib
import functools
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from htc.wire import callfile as cf
from htc.executors.checkpointing import Checkpointable, RunContext, install
from htc.executors.errors import CallTimedOut, UnpicklableRemoteException
from htc.executors.serialize import check_versions, dumps_value, loads, loads_call, package_version, python_version

__all__ = ["EXIT_ERROR", "EXIT_EXCEPTION", "EXIT_VALUE", "main", "run"]

EXIT_VALUE = 0
EXIT_EXCEPTION = 1
EXIT_ERROR = 3


def _qualname(obj: Any) -> str:
    t = obj if isinstance(obj, type) else type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


_HOST: list[str] = []  # this process's host name, asked once (a lane reports it for every call)
#: (python, packages) the versions of which this process found to agree (a lane's calls ask again and again)
_VERSIONS_OK: set[tuple[str, tuple[tuple[str, str], ...]]] = set()


def _host() -> str:
    if not _HOST:
        _HOST.append(socket.gethostname())
    return _HOST[0]


def _check_versions(python: str, packages: dict[str, str]) -> None:
    """:func:`check_versions`, remembered when they agree (installed versions do not change under
    a running process: a lane that imported a package keeps that version whatever is installed)."""
    key = (python, tuple(sorted(packages.items())))
    if key not in _VERSIONS_OK:
        check_versions(python, packages)
        _VERSIONS_OK.add(key)


class _Outcome:
    def __init__(self, call_id: str, serializer: str, started: float):
        self.call_id = call_id
        self.serializer = serializer
        self.started = started
        self.resumed = False

    def header(self, outcome: cf.Outcome, **extra: Any) -> cf.ResultHeader:
        return cf.ResultHeader(call_id=self.call_id, outcome=outcome, serializer=self.serializer,
                               host=_host(), pid=os.getpid(), started_at=self.started,
                               finished_at=time.time(), resumed=self.resumed, **extra)


def _write_exception(path: Path | Callable[[bytes], None], out: _Outcome, exc: BaseException,
                     outcome: cf.Outcome) -> None:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        payload, packages = dumps_value(exc, out.serializer)
    except Exception:  # noqa: BLE001 - an unpicklable exception still reaches the caller, as a stand-in
        payload, packages = dumps_value(UnpicklableRemoteException(_qualname(exc), str(exc)), out.serializer)
    _deliver(path, out.header(outcome, exception_type=_qualname(exc), traceback=tb, packages=packages), payload)


def _deliver(target: Path | Callable[[bytes], None], header: cf.ResultHeader, payload: bytes) -> None:
    if callable(target):
        target(cf.pack_result(header, payload))
    else:
        cf.write_result(target, header, payload)


def _parents_loader(sandbox: Path, serializer: str):
    cache: dict[str, Any] = {}

    def load(pid: Any) -> Any:
        key = str(pid)
        if key not in cache:
            header, payload = cf.read_result(sandbox / cf.parent_file(key))
            if header.outcome != "value":
                raise cf.CallFileError(f"parent call {key} did not return a value ({header.outcome}: "
                                       f"{header.exception_type}); its dependants should not have run")
            cache[key] = loads(payload, header.serializer)
        return cache[key]

    return load


def _on_timeout(limit: float):
    def handler(_signum, _frame):
        raise CallTimedOut(f"the call ran longer than its timeout of {limit:g} s and was stopped; raise "
                           "timeout= in options() if it needs longer")

    return handler


def _on_vacate(fn: Any, context: RunContext):
    def handler(signum, _frame):
        if isinstance(fn, Checkpointable):
            try:
                context.save(fn.get_checkpoint())
            except Exception as exc:  # noqa: BLE001 - leaving matters more than this checkpoint
                print(f"htc worker: could not save the checkpoint on eviction: {exc}", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    return handler


def run(sandbox: Path | str = ".", *, call_data: bytes | None = None,
        result_sink: Callable[[bytes], None] | None = None) -> int:
    """Run the call in ``sandbox`` and write its result there.

    Args:
        sandbox: the job's directory (holds the call, parents' results, the checkpoint).
        call_data: the call file's bytes when the caller already has them (the zygote).
        result_sink: takes the result file's bytes instead of a file in ``sandbox`` (a call
            lane sends them over the wire: creating a file costs more than most calls).

    Returns:
        The exit status for the process: ``EXIT_VALUE``, ``EXIT_EXCEPTION`` or ``EXIT_ERROR``.
    """
    sandbox = sandbox if isinstance(sandbox, Path) else Path(sandbox)
    result_path: Path | Callable[[bytes], None] = result_sink or sandbox / cf.RESULT_FILE
    started = time.time()
    out = _Outcome("?", "cloudpickle", started)
    try:
        if call_data is None:
            header, payload = cf.read_call(sandbox / cf.call_file_in(os.listdir(sandbox), str(sandbox)))
        else:
            header, payload = cf.unpack_call(call_data)
        out = _Outcome(header.call_id, header.serializer, started)
        if header.check_versions:
            _check_versions(header.python, header.packages)
        try:
            fn, args, kwargs = loads_call(payload, header.serializer, _parents_loader(sandbox, header.serializer))
        except cf.CallFileError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise cf.CallFileError(
                f"could not unpickle the call of {header.function} ({type(exc).__name__}: {exc}); a module it "
                f"needs may be missing on the execute side (Python {python_version()} here)") from exc
        ckpt_path = _checkpoint_path(sandbox)
        context = RunContext(ckpt_path, header.serializer)
        if _size(ckpt_path) > 0:  # the pool backend seeds an empty one
            context = RunContext(ckpt_path, header.serializer, loads(ckpt_path.read_bytes(), header.serializer))
            out.resumed = True
            if isinstance(fn, Checkpointable):
                fn.set_checkpoint(context.state(None))
    except Exception as exc:  # noqa: BLE001 - the call cannot run; say why in the result
        _write_exception(result_path, out, exc, "error")
        return EXIT_ERROR

    install(context)
    previous_term = _signal.signal(signal.SIGTERM, _on_vacate(fn, context))
    if header.timeout:
        signal.signal(signal.SIGALRM, _on_timeout(header.timeout))
        signal.setitimer(signal.ITIMER_REAL, header.timeout)
    try:
        if header.chunked:
            value = [fn(*one) for one in args[0]]
        else:
            value = fn(*args, **kwargs)
    except CallTimedOut as exc:
        _write_exception(result_path, out, exc, "error")
        return EXIT_ERROR
    except BaseException as exc:  # noqa: BLE001 - whatever the function raised goes back to the caller
        if header.timeout:
            signal.setitimer(signal.ITIMER_REAL, 0)
        _write_exception(result_path, out, exc, "exception")
        return EXIT_EXCEPTION
    finally:
        if header.timeout:
            signal.setitimer(signal.ITIMER_REAL, 0)
        _signal.signal(signal.SIGTERM, previous_term)
        install(None)
    try:
        data, packages = dumps_value(value, header.serializer)
    except Exception as exc:  # noqa: BLE001
        _write_exception(result_path, out, exc, "error")
        return EXIT_ERROR
    _deliver(result_path, out.header("value", packages=packages), data)
    return EXIT_VALUE


@functools.lru_cache(maxsize=4)
def _checkpoint_path(sandbox: Path) -> Path:
    """The checkpoint file of ``sandbox`` (a lane's calls all run in one: joined once)."""
    return sandbox / cf.CHECKPOINT_FILE


def _size(path: Path) -> int:
    """The size of the file at ``path`` (-1: there is none)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def main(argv: list[str] | None = None) -> int:
    """``python -m htc.executors.worker [SANDBOX]``: run the call in SANDBOX (default: here)."""
    argv = sys.argv[1:] if argv is None else argv
    status = run(Path(argv[0]) if argv else Path.cwd())
    sys.stdout.flush()
    sys.stderr.flush()
    return status


def _warm() -> None:
    """Answer the commonest version question once, at import.

    The first ``importlib.metadata`` lookup scans every ``sys.path`` entry (~13 ms); each call
    made that lookup again. The starter's zygote imports this module once and forks every call
    from it, so the calls inherit this answer (and the path caches behind it) for free.
    """
    with contextlib.suppress(Exception):  # a broken environment is reported when a call checks versions
        package_version("cloudpickle")


_warm()

if __name__ == "__main__":
    raise SystemExit(main())
