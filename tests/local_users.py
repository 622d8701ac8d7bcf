"""Real local users for the tests of who may do what on one host.

The security tests act as a second and third person on this machine: they submit jobs, run
tools and plant files as ``htctest-alice`` and ``htctest-bob``, two real accounts in the password
database, so that the kernel's own checks (peer credentials, file modes) are what is tested.

:func:`local_user` makes such an account the first time a test asks for it (``useradd --system``,
no home, no login shell) and returns its password entry; it needs root, and tests that use it
are skipped with that reason when not run as root. :func:`run_as` runs a command as the user,
with its own primary group and no supplementary groups, the way a login of that user would.
Several test processes may ask at once (pytest-xdist): a ``useradd`` that loses the race finds
the account made by the other and goes on.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ALICE = "htctest-alice"
BOB = "htctest-bob"

#: why a test of local users cannot run here (None: it can)
CANNOT = (None if os.geteuid() == 0 and shutil.which("useradd")
          else "acting as other local users needs root and useradd")
needs_users = pytest.mark.skipif(CANNOT is not None, reason=CANNOT or "")


def local_user(name: str) -> pwd.struct_passwd:
    """The password entry of ``name``, made with ``useradd --system`` when missing."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            pass
        done = subprocess.run(["useradd", "--system", "--no-create-home", "--user-group",
                               "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True)
        if done.returncode not in (0, 9):  # 9: the name is taken (another process made it)
            if time.monotonic() > deadline:
                raise RuntimeError(f"useradd {name} failed: {done.stderr.strip()}")
            time.sleep(0.2)  # /etc/passwd locked by a concurrent useradd


def run_as(name: str, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run ``argv`` as user ``name`` (its uid and primary gid, no supplementary groups)."""
    entry = local_user(name)
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    env = dict(kwargs.pop("env", None) or os.environ)
    env.update(HOME=kwargs.pop("home", env.get("HOME", "/")), USER=name, LOGNAME=name)
    return subprocess.run(argv, user=entry.pw_uid, group=entry.pw_gid, extra_groups=[], env=env, **kwargs)


def private_dir(name: str, parent: Path | None = None) -> Path:
    """A new directory owned by user ``name`` (mode 0700), for its submit files and outputs."""
    entry = local_user(name)
    path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=parent))
    os.chown(path, entry.pw_uid, entry.pw_gid)
    path.chmod(0o700)
    return path
