"""Pickling calls: what gets recorded, what is shipped by value, and errors that name the culprit."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading

import msgspec
import pytest

from htc.wire import callfile as cf
from htc.executors.errors import OptionError, SerializationError, VersionMismatch
from htc.executors.serialize import check_versions, dumps_call, loads, loads_call, package_version, python_version


class Point(msgspec.Struct):
    x: int
    y: int


def test_a_call_records_the_packages_its_objects_come_from():
    pickled = dumps_call(len, (Point(1, 2),), {})
    assert pickled.packages["msgspec"] == msgspec.__version__
    assert "builtins" not in pickled.packages and "__main__" not in pickled.packages


def test_standard_library_objects_need_no_version():
    import fractions

    pickled = dumps_call(str, (fractions.Fraction(1, 3),), {})
    assert pickled.packages == {}


def test_futures_become_parents_through_the_persistent_hook():
    marker = object()
    pickled = dumps_call(max, (marker, [marker, 3]), {}, persistent=lambda o: "p7" if o is marker else None)
    assert pickled.parents == ("p7",)
    fn, args, _ = loads_call(pickled.payload, persistent_load=lambda pid: 99)
    assert fn is max and args == (99, [99, 3])


def test_an_unpicklable_argument_is_named_with_its_path():
    conn = socket.socket()
    try:
        with pytest.raises(SerializationError) as info:
            dumps_call(print, (1, {"conn": conn}), {})
    finally:
        conn.close()
    text = str(info.value)
    assert "args[1]['conn']" in text and "socket" in text
    assert "serializer='dill'" in text


def test_an_unpicklable_closure_variable_is_named():
    lock = threading.Lock()

    def guarded(x):
        with lock:
            return x

    with pytest.raises(SerializationError) as info:
        dumps_call(guarded, (1,), {})
    assert "closure variable 'lock'" in str(info.value) and "lock" in str(info.value)


def test_an_unpicklable_keyword_argument_is_named():
    with pytest.raises(SerializationError, match=r"keyword argument stream= \(of print\(\)\)"):
        dumps_call(print, (), {"stream": threading.Lock()})


def test_serialization_error_is_a_pickling_error_and_a_usage_error():
    import pickle

    from htc.errors import UsageError

    assert issubclass(SerializationError, pickle.PicklingError) and issubclass(SerializationError, UsageError)


def test_dill_can_be_chosen():
    pickled = dumps_call(lambda a: a + 1, (41,), {}, serializer="dill")
    fn, args, kwargs = loads_call(pickled.payload, "dill")
    assert fn(*args) == 42


def test_an_unknown_serializer_is_refused():
    with pytest.raises(OptionError, match="serializer='marshal' is not known"):
        dumps_call(len, ("a",), {}, serializer="marshal")


def test_versions_must_match_on_the_execute_side():
    check_versions(python_version(), {"msgspec": msgspec.__version__})
    with pytest.raises(VersionMismatch, match="msgspec 0.1 on the submit side but"):
        check_versions(python_version(), {"msgspec": "0.1"})
    with pytest.raises(VersionMismatch, match="nosuchpackage 1.0 on the submit side but missing here"):
        check_versions(python_version(), {"nosuchpackage": "1.0"})
    assert package_version("nosuchpackage") is None


def test_functions_of_a_local_module_travel_by_value(tmp_path):
    """A helper module next to the script is not installed on the execute side: it is pickled by value."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "sweephelpers.py").write_text(textwrap.dedent("""
        FACTOR = 3

        def scaled(x):
            return x * FACTOR
    """))
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(src)!r})
        import sweephelpers
        from pathlib import Path
        from htc.wire import callfile as cf
        from htc.executors.serialize import dumps_call, python_version
        pickled = dumps_call(sweephelpers.scaled, (14,), {{}})
        header = cf.CallHeader(call_id="c", function="scaled", python=python_version(), packages=pickled.packages)
        cf.write_call(Path({str(sandbox)!r}) / cf.CALL_FILE, header, pickled.payload)
        print(sorted(pickled.packages))
    """)
    made = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert "sweephelpers" not in made.stdout
    ran = subprocess.run([sys.executable, "-m", "htc.executors.worker", str(sandbox)], capture_output=True,
                         text=True, timeout=60, cwd=sandbox)
    assert ran.returncode == 0, ran.stderr
    header, payload = cf.read_result(sandbox / cf.RESULT_FILE)
    assert loads(payload) == 42


def test_functions_defined_in_main_of_a_script_run_elsewhere(tmp_path):
    """A closure defined in a script's __main__ is pickled by value and runs in another process."""
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    script = textwrap.dedent(f"""
        from pathlib import Path
        from htc.wire import callfile as cf
        from htc.executors.serialize import dumps_call, python_version

        def make_adder(n):
            def add(x):
                return x + n + helper()
            return add

        def helper():
            return 100

        pickled = dumps_call(make_adder(5), (1,), {{}})
        header = cf.CallHeader(call_id="c", function="add", python=python_version(), packages=pickled.packages)
        cf.write_call(Path({str(sandbox)!r}) / cf.CALL_FILE, header, pickled.payload)
    """)
    script_path = tmp_path / "main_script.py"
    script_path.write_text(script)
    made = subprocess.run([sys.executable, str(script_path)], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    ran = subprocess.run([sys.executable, "-m", "htc.executors.worker", str(sandbox)], capture_output=True,
                         text=True, timeout=60, cwd=sandbox)
    assert ran.returncode == 0, ran.stderr
    assert loads(cf.read_result(sandbox / cf.RESULT_FILE)[1]) == 106


def test_a_function_pickled_by_value_keeps_its_file_name_for_remote_tracebacks():
    # cloudpickle >= 3.1 renames by-value code "<dynamic-code>"; ours puts the real file back,
    # so a traceback from the execute side names this file and can show the failing line.
    def inner():
        raise ValueError("here")

    fn, _, _ = loads_call(dumps_call(inner, (), {}).payload)
    assert fn.__code__.co_filename == __file__
    assert fn.__code__.co_firstlineno == inner.__code__.co_firstlineno


def _main_function(source: str, **scope):
    """A function defined in a ``__main__``-like namespace: cloudpickle pickles it by value."""
    namespace = {"__name__": "__main__", **scope}
    exec(compile(source, "<main>", "exec"), namespace)
    return namespace["f"], namespace


def test_a_by_value_function_is_pickled_once_while_nothing_it_reads_changes():
    from htc.executors import serialize
    f, scope = _main_function("import math\nK = 3\ndef f(x, y=2):\n    return math.floor(x * K + y)\n")
    first = dumps_call(f, (1,), {})
    assert f in serialize._kept  # kept: it reads a module and a plain constant
    again = dumps_call(f, (2,), {"y": 5})
    fn, args, kwargs = loads_call(again.payload)
    assert (fn(*args, **kwargs), args, kwargs) == (11, (2,), {"y": 5})
    assert loads_call(first.payload)[0](1) == 5
    scope["K"] = 10  # a new value for a global it reads: pickled afresh
    fn, args, _ = loads_call(dumps_call(f, (1,), {}).payload)
    assert fn(*args) == 12
    f.__defaults__ = (0,)  # new defaults too
    fn, args, _ = loads_call(dumps_call(f, (1,), {}).payload)
    assert fn(*args) == 10
    f.__defaults__ = (False,)  # equal to 0, but not the same value
    assert loads_call(dumps_call(f, (1,), {}).payload)[0].__defaults__ == (False,)
    assert type(loads_call(dumps_call(f, (1,), {}).payload)[0].__defaults__[0]) is bool


def test_a_function_that_reads_something_mutable_is_pickled_afresh_for_each_call():
    from htc.executors import serialize
    f, scope = _main_function("SEEN = []\ndef f(x):\n    return SEEN + [x]\n")
    assert loads_call(dumps_call(f, (1,), {}).payload)[0](1) == [1]
    scope["SEEN"].append(0)  # changed in place: the next call must carry it
    fn, args, _ = loads_call(dumps_call(f, (1,), {}).payload)
    assert fn(*args) == [0, 1] and f not in serialize._kept
    counter = 0

    def closure(x):
        return x + counter
    counter = 5
    assert loads_call(dumps_call(closure, (1,), {}).payload)[0](1) == 6 and closure not in serialize._kept
    g, _ = _main_function("def f(x, acc=[]):\n    return acc\n")  # a mutable default
    dumps_call(g, (1,), {})
    assert g not in serialize._kept


def test_a_kept_function_that_is_also_an_argument_is_one_object_on_the_other_side():
    f, _ = _main_function("def f(g):\n    return g\n")
    dumps_call(f, (1,), {})  # kept
    fn, args, _ = loads_call(dumps_call(f, (f,), {}).payload)
    assert args[0] is fn


def test_a_call_pickled_whole_still_loads():
    import pickle as std_pickle
    assert loads_call(std_pickle.dumps((max, (1, 3), {}))) == (max, (1, 3), {})


def test_without_cloudpickles_helpers_a_function_is_pickled_whole_as_before(monkeypatch):
    from htc.executors import serialize

    def gone(*_args):  # the key uses helpers cloudpickle does not promise to keep
        raise AttributeError("module 'cloudpickle.cloudpickle' has no attribute '_extract_code_globals'")
    monkeypatch.setattr(serialize, "function_key", gone)
    f, _ = _main_function("K = 2\ndef f(x):\n    return x * K\n")
    fn, args, _ = loads_call(dumps_call(f, (4,), {}).payload)
    assert fn(*args) == 8 and f not in serialize._kept
