"""A root client's HTCExecutor() in a venv only root can read (issue #16, "The executor, as root").

The README's install run by root in ``/root/project`` puts the interpreter's packages and htc's
sources behind ``/root`` (0700). Calls run as the pool's slot accounts (``htc-slot<N>``), never
as root, and must still import what the client installed -- with no ``python=`` and no
``shared_python``. :func:`private_venv.make_private_venv` makes that venv under a 0700 directory;
the client runs with it as root, as a user would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from htc.executors.client_env import MIRROR_ROOT
from poolutil import Pool
from private_venv import make_private_venv

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only a root client's calls run as another user; run the tests as root, as CI does")

CLIENT = r'''
import json, os, sys
from htc import HTCExecutor

def probe(path):
    import msgspec, psutil  # installed in the client's venv, not in the job interpreter's base
    tried = {}
    for name, target in (("mirror", msgspec.__file__), ("client", path)):
        try:
            with open(target, "a"):
                tried[name] = "written"
        except OSError as exc:
            tried[name] = type(exc).__name__
    return {"uid": os.getuid(), "msgspec": msgspec.__file__, "version": msgspec.__version__,
            "psutil": psutil.__version__, "python": sys.executable, "tried": tried}

with HTCExecutor(pool=sys.argv[1], progress=False) as ex:
    lane = ex.submit(probe, sys.argv[2])  # a plain call: the schedd may run it on a call lane
    job = ex.options(timeout=120).submit(probe, sys.argv[2])  # a timeout: a job of its own
    print(json.dumps([lane.result(timeout=180), job.result(timeout=180)]))
'''


@pytest.fixture(scope="module")
def private():
    before = set(MIRROR_ROOT.iterdir()) if MIRROR_ROOT.is_dir() else set()
    root, python = make_private_venv()
    yield root, python
    shutil.rmtree(root, ignore_errors=True)
    for made in (set(MIRROR_ROOT.iterdir()) if MIRROR_ROOT.is_dir() else set()) - before:
        shutil.rmtree(made, ignore_errors=True)  # the mirrors of the venv this module made


@pytest.fixture(scope="module")
def pool():
    p = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD").start()
    yield p
    p.stop()


def client_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith("_HTC_") and k not in ("HTC_CONFIG", "HTC_HOME", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def test_a_call_imports_what_a_root_clients_private_venv_installed(private, pool):
    root, python = private
    project = root / "project"
    assert os.stat(root).st_mode & 0o777 == 0o700, "as private as /root"
    target = project / "htc" / "__init__.py"
    done = subprocess.run([str(python), "-c", CLIENT, str(pool.home), str(target)], cwd=project, env=client_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(answers) == 2
    for answer in answers:
        check(answer)


def check(answer: dict) -> None:
    import msgspec
    import psutil

    assert answer["uid"] != 0, "jobs never run as root"
    assert (answer["version"], answer["psutil"]) == (msgspec.__version__, psutil.__version__)
    assert answer["msgspec"].startswith(str(MIRROR_ROOT) + "/"), answer  # the mirror of the private venv
    assert answer["python"].startswith(str(MIRROR_ROOT) + "/"), answer
    # The job can write neither the mirror nor the client's own files.
    assert answer["tried"] == {"mirror": "PermissionError", "client": "PermissionError"}, answer


def test_the_readme_demo_runs_as_root_from_a_private_project(private):
    root, python = private
    project = root / "project"
    done = subprocess.run([str(python), "examples/demo.py"], cwd=project, env=client_env(),
                          capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert str([x * x for x in range(10)]) in done.stdout
    assert "demo finished" in done.stdout
