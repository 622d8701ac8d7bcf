"""docs/executor.md runs as written, against a real personal pool; the examples run too."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import linecache
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from executor_contract import wait_for
from executor_pool import ExecutorPool

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pool():
    started = ExecutorPool().start()
    try:
        wait_for(lambda: started.pool.slots(), what="the startd's slot ad")
        yield started
    finally:
        started.stop()


def _blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def _deployed(pool, monkeypatch) -> None:
    """When tests run as root, jobs run as nobody: point them at a Python nobody can run (what
    an administrator configures for execute nodes) by giving the real HTCExecutor and attach
    those two options; otherwise change nothing."""
    import htc.executors as hx

    if pool.python == sys.executable and not pool.environment:
        return
    extra = {"python": pool.python, "environment": pool.environment}
    executor_class, attach = hx.HTCExecutor, hx.attach  # the real ones (imported lazily)
    monkeypatch.setattr(hx, "HTCExecutor", functools.partial(executor_class, **extra))
    monkeypatch.setattr(hx, "attach", functools.partial(attach, **extra))


def test_the_tutorial_runs_as_written(pool, monkeypatch):
    monkeypatch.setenv("HTC_HOME", str(pool.pool.home))
    _deployed(pool, monkeypatch)
    text = (ROOT / "docs" / "executor.md").read_text()
    blocks = _blocks(text)
    assert len(blocks) >= 8
    namespace: dict = {"__name__": "tutorial"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for number, block in enumerate(blocks):
            name = f"<docs/executor.md block {number}>"
            linecache.cache[name] = (len(block), None, block.splitlines(True), name)  # as IPython does for cells
            exec(compile(block, name, "exec"), namespace)  # noqa: S102 - the docs' own code
    printed = out.getvalue()
    for expected in ("1024", "[1, 2, 3]", "42", "45", "refused: no slot of the pool can ever run this call",
                     "cannot pickle args[0]['lock']", "invalid literal for int() with base 10: 'forty-two'",
                     "return int(text)", "hello from a job", "print", "90", "1.0", "[27]"):
        assert expected in printed, f"{expected!r} not in the tutorial's output:\n{printed}"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["parameter_sweep", "monte_carlo"])
def test_the_examples_run_on_the_pool(pool, name, capsys):
    module = _load(name)
    result = module.main(**pool.executor_args())
    printed = capsys.readouterr().out
    assert printed.strip(), "an example says what it found"
    if name == "parameter_sweep":
        best, score = result
        assert best == {"alpha": 0.5, "beta": 2} and score == pytest.approx(0.0)
    else:
        assert abs(result - 3.14159) < 0.05


@pytest.mark.parametrize("name", ["parameter_sweep", "monte_carlo"])
def test_the_examples_run_as_scripts_without_a_pool(name, tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "examples" / f"{name}.py"), "--local"], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
