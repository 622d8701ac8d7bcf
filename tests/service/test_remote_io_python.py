"""Remote I/O for an unmodified python3 running a script that exists only on the server side."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pytest

from remote_io_jobs import PREFIX, run_job

SCRIPT = """\
import os, sys
import helper                      # imported from the script's (remote) directory
print("helper", helper.X)
with open("PREFIX/in.txt") as f:
    print("read", f.read())
with open("PREFIX/in.txt", "rb") as f:
    f.seek(6)
    print("seek", f.read())
with open("PREFIX/new.txt", "w") as f:
    f.write("from python\\n")
with open("PREFIX/new.txt", "a") as f:
    f.write("appended\\n")
print("size", os.stat("PREFIX/new.txt").st_size)
print("exists", os.path.exists("PREFIX/new.txt"), os.path.isfile("PREFIX/nope"), os.path.isdir("PREFIX/d0"))
os.mkdir("PREFIX/d")
os.rename("PREFIX/new.txt", "PREFIX/d/n.txt")
print("list", sorted(os.listdir("PREFIX")), os.listdir("PREFIX/d"))
print("scandir", sorted((e.name, e.is_dir()) for e in os.scandir("PREFIX/d0")))
try:
    open("PREFIX/../escape.txt", "w")
except PermissionError:
    print("refused")
os.chdir("PREFIX/d")
print("cwd", os.getcwd())
with open("n.txt") as f:
    print("relative", f.read().split())
os.unlink("n.txt")
os.chdir("/")
print("local", os.getcwd(), os.path.exists("/etc/hostname"))
""".replace("PREFIX", PREFIX)


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "script.py").write_text(SCRIPT)
    (root / "helper.py").write_text("X = 42\n")
    (root / "in.txt").write_text("hello world")
    (root / "d0").mkdir()
    (root / "d0" / "f").write_text("")
    (root / "d0" / "sub").mkdir()
    return root


def _python():
    # An interpreter outside the test's venv: the job is an ordinary program on the execute host.
    return shutil.which("python3", path="/usr/bin:/usr/local/bin") or sys.executable


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "unpipelined"])
def test_python_runs_a_script_that_exists_only_on_the_server(root, pipeline):
    assert not os.path.exists(f"{PREFIX}/script.py")
    run = run_job([_python(), f"{PREFIX}/script.py"], root, pipeline=pipeline)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "helper 42", "read hello world", "seek b'world'", "size 21", "exists True False True",
        "list ['d', 'd0', 'helper.py', 'in.txt', 'script.py'] ['n.txt']",
        "scandir [('f', False), ('sub', True)]", "refused", f"cwd {PREFIX}/d",
        "relative ['from', 'python', 'appended']", "local / True",
    ]
    assert not (root / "d" / "n.txt").exists() and (root / "d").is_dir()
    assert not (root.parent / "escape.txt").exists()
    assert run.server_rc == 0


def test_job_starting_in_the_remote_directory_uses_relative_paths(root):
    (root / "rel.py").write_text("print(open('in.txt').read()); open('made', 'w').write('m')\n")
    run = run_job([_python(), "rel.py"], root, cwd=".")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "hello world\n"
    assert (root / "made").read_text() == "m"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs to switch users: run the tests as root, as CI does")
def test_calls_run_as_the_jobs_owner():
    nobody = 65534
    base = tempfile.mkdtemp(prefix="htc-rio-")
    try:
        os.chmod(base, 0o755)
        root = os.path.join(base, "root")
        os.mkdir(root)
        os.chmod(root, 0o777)
        with open(os.path.join(root, "private"), "w") as f:
            f.write("root only")
        os.chmod(os.path.join(root, "private"), 0o600)
        with open(os.path.join(root, "t.py"), "w") as f:
            f.write("import os\n"
                    f"try:\n    open('{PREFIX}/private').read()\nexcept PermissionError:\n    print('denied')\n"
                    f"open('{PREFIX}/mine', 'w').write('x')\n"
                    f"print(os.stat('{PREFIX}/mine').st_uid)\n")
        run = run_job([_python(), f"{PREFIX}/t.py"], root, uid=nobody)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == ["denied", str(nobody)]
        assert os.stat(os.path.join(root, "mine")).st_uid == nobody
    finally:
        shutil.rmtree(base)
