"""htc.daemons.owner_files alone: the per-thread switch to a job owner's rights, and the path rules.

The switch is tested as root against the real second local user ``htctest-alice``: the kernel
itself must refuse what alice could not do, only in the thread that switched, and give root its
rights back after. The path rules (no link written through, no FIFO opened, no name leaving a
directory, no NUL) hold whoever acts.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htc.daemons import owner_files as ofs
from htc.daemons.starter.sandbox import Sandbox, TransferError
from htc.daemons.schedd.callfiles import WriteCallFiles, read_input, write_call_files
from local_users import ALICE, local_user, needs_users, private_dir, run_as
from user_python import python_argv


def _status(field: str) -> str:
    with open("/proc/thread-self/status") as f:
        return next(line.split(":", 1)[1].split() for line in f if line.startswith(field + ":"))


@pytest.fixture
def alice() -> ofs.Identity:
    local_user(ALICE)
    return ofs.Identity.owner(ALICE)


@pytest.fixture
def open_tmp():
    """A fresh directory every user may traverse (pytest's own tmp_path may be root's only)."""
    path = Path(tempfile.mkdtemp(prefix="htc-owner-files-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def root_dir(open_tmp) -> Path:
    path = open_tmp / "root-only"
    path.mkdir(mode=0o700)
    (path / "secret").write_text("ROOT SECRET\n")
    (path / "secret").chmod(0o600)
    return path


@pytest.fixture
def alice_dir(open_tmp) -> Path:
    return private_dir(ALICE, open_tmp)


# ------------------------------------------------------------------------------ the switch

@needs_users
def test_acting_as_switches_only_this_thread_and_gives_root_its_rights_back(alice, root_dir):
    assert alice.switch and alice.uid != 0
    ready, seen, done = threading.Event(), {}, threading.Event()

    def other():  # started before the switch: keeps root's credentials throughout
        ready.wait()
        seen["fsuid"] = _status("Uid")[3]
        seen["read"] = (root_dir / "secret").read_text()
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with ofs.acting_as(alice):
        assert _status("Uid")[3] == str(alice.uid) and _status("Gid")[3] == str(alice.gid)
        assert _status("Groups") == [str(g) for g in alice.groups]
        with pytest.raises(PermissionError):
            (root_dir / "secret").read_text()
        ready.set()
        done.wait(10)
    thread.join()
    assert seen == {"fsuid": "0", "read": "ROOT SECRET\n"}
    assert _status("Uid") == ["0", "0", "0", "0"] and _status("Groups") == [str(g) for g in os.getgroups()]
    assert (root_dir / "secret").read_text() == "ROOT SECRET\n"


@needs_users
def test_acting_as_gives_the_credentials_back_when_the_block_raises(alice):
    with pytest.raises(RuntimeError), ofs.acting_as(alice):
        raise RuntimeError("boom")
    assert _status("Uid")[3] == "0"
    assert open("/etc/shadow").read()  # root's file capabilities are back


def test_root_and_a_missing_owner_act_as_the_daemon():
    assert not ofs.Identity.owner(None).switch
    assert ofs.Identity.owner("root").uid == os.geteuid() and not ofs.Identity.owner("root").switch


def test_an_owner_without_an_account_is_refused_or_acted_for_as_the_fallback():
    if os.geteuid() != 0:
        pytest.skip("only root looks owners up (a daemon that is not root acts as itself)")
    with pytest.raises(ofs.OwnerFileError, match="'no-such-user-htc' has no account on this machine"):
        ofs.Identity.owner("no-such-user-htc")
    fallback = ofs.Identity("nobody", 65534, 65534, (), switch=True)
    assert ofs.Identity.owner("no-such-user-htc", fallback) is fallback
    with pytest.raises(ofs.OwnerFileError):
        ofs.Identity.owner("a\0b")


@needs_users
def test_a_daemon_that_is_not_root_acts_as_itself_and_confines_others(tmp_path):
    """Run as alice: her own jobs are the kernel's to judge, another owner's are confined."""
    script = ("from htc.daemons.owner_files import Identity as I\n"
              "me, other = I.owner('htctest-alice'), I.owner('root')\n"
              "print(me.switch, me.kernel_checks, other.switch, other.kernel_checks, other.uid == me.uid)\n")
    done = run_as(ALICE, python_argv(script), cwd="/")
    assert done.stdout.split() == ["False", "True", "False", "False", "True"], done.stderr


# ------------------------------------------------------------------------------ path rules

@needs_users
def test_open_write_creates_the_owners_file_and_refuses_root_only_places(alice, alice_dir, root_dir):
    fd = ofs.open_write(alice_dir / "out", alice, what="output file", job="1.0")
    os.close(fd)
    assert (alice_dir / "out").stat().st_uid == alice.uid
    with pytest.raises(ofs.OwnerFileError) as info:
        ofs.open_write(root_dir / "out", alice, what="output file", job="1.0")
    assert str(info.value) == (f"cannot write output file {root_dir}/out for job 1.0: permission denied "
                               f"for user {ALICE}")
    assert isinstance(info.value, OSError) and info.value.errno == errno.EACCES
    assert sorted(p.name for p in root_dir.iterdir()) == ["secret"]


def test_open_write_never_writes_through_a_link_even_as_root(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    (tmp_path / "pwn").symlink_to(victim)
    with pytest.raises(ofs.OwnerFileError, match="pwn for job 2.0: it is a symbolic link"):
        ofs.open_write(tmp_path / "pwn", ofs.Identity.daemon(), what="output file", job="2.0", truncate=True)
    assert victim.read_text() == "untouched"


def test_open_write_refuses_a_fifo_without_hanging(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ofs.OwnerFileError):
        ofs.open_write(tmp_path / "fifo", None, what="user log")
    (tmp_path / "dev").symlink_to("/dev/null")
    with pytest.raises(ofs.OwnerFileError, match="symbolic link"):
        ofs.open_write(tmp_path / "dev", None)


def test_a_nul_byte_in_a_path_is_a_clear_error(tmp_path):
    with pytest.raises(ofs.OwnerFileError, match="contains a NUL byte"):
        ofs.open_write(f"{tmp_path}/a\0b", None, what="output file", job="3.0")
    with pytest.raises(ofs.OwnerFileError, match="contains a NUL byte"):
        ofs.open_read(f"{tmp_path}/a\0b", None)


@needs_users
def test_open_read_is_the_owners_read(alice, root_dir):
    with pytest.raises(ofs.OwnerFileError, match=f"cannot read input file /etc/shadow: permission denied for "
                                                 f"user {ALICE}"):
        ofs.open_read("/etc/shadow", alice, what="input file")
    fd, info = ofs.open_read("/etc/passwd", alice)
    os.close(fd)
    assert stat.S_ISREG(info.st_mode)



@needs_users
def test_reading_as_holds_the_owners_rights_for_a_batch_of_reads(alice, alice_dir, root_dir, monkeypatch):
    from htc.daemons.schedd.callfiles import reading_as

    for i in range(3):
        (alice_dir / f"{i}.call").write_bytes(b"CALL%d" % i)
        os.chown(alice_dir / f"{i}.call", alice.uid, alice.gid)
    switches = []
    real = ofs._set_groups
    monkeypatch.setattr(ofs, "_set_groups", lambda groups: (switches.append(tuple(groups)), real(groups))[1])
    with reading_as(ALICE):
        assert _status("Uid")[3] == str(alice.uid)
        assert [read_input(str(alice_dir / f"{i}.call"), ALICE) for i in range(3)] == [b"CALL0", b"CALL1", b"CALL2"]
        with pytest.raises(OSError, match=f"permission denied for user {ALICE}"):
            read_input(str(root_dir / "secret"), ALICE)  # still the owner's reads, not root's
    assert len(switches) == 2  # taken once and given back once, for four reads
    assert _status("Uid")[3] == "0" and (root_dir / "secret").read_text() == "ROOT SECRET\n"
    # An owner without an account here takes nothing: each read says why it cannot.
    with reading_as("htc-no-such-user"):
        assert _status("Uid")[3] == "0"
        with pytest.raises(ofs.OwnerFileError, match="no account"):
            read_input(str(alice_dir / "0.call"), "htc-no-such-user")


def test_open_beneath_stays_in_its_directory(tmp_path):
    (tmp_path / "box" / "sub").mkdir(parents=True)
    (tmp_path / "box" / "sub" / "f").write_text("in the box")
    (tmp_path / "box" / "up").symlink_to(tmp_path)
    (tmp_path / "box" / "link").symlink_to("/etc/shadow")
    box = os.open(tmp_path / "box", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd, info = ofs.open_beneath(box, "sub/f", None)
        assert os.read(fd, 100) == b"in the box"
        os.close(fd)
        for bad in ("../box/sub/f", "/etc/shadow", "sub/../../x"):
            with pytest.raises(ofs.OwnerFileError, match="may not be absolute or contain '..'"):
                ofs.open_beneath(box, bad, None)
        with pytest.raises(ofs.OwnerFileError, match="a directory on the way is a symbolic link"):
            ofs.open_beneath(box, "up/box/sub/f", None)
        fd, info = ofs.open_beneath(box, "link", None)  # the link itself, to copy as a link
        assert stat.S_ISLNK(info.st_mode) and os.readlink("", dir_fd=fd) == "/etc/shadow"
        os.close(fd)
    finally:
        os.close(box)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "..", ".", "", "out", "in", "f", "/"]), min_size=1, max_size=6))
def test_open_beneath_never_opens_anything_outside_the_directory(tmp_path_factory, parts):
    root = tmp_path_factory.mktemp("beneath")
    box = root / "box"
    (box / "a" / "b").mkdir(parents=True)
    (box / "a" / "f").write_text("inside")
    (root / "f").write_text("outside")
    (box / "out").symlink_to(root)
    (box / "a" / "in").symlink_to("f")
    dir_fd = os.open(box, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd, info = ofs.open_beneath(dir_fd, "/".join(parts), None)
    except (ofs.OwnerFileError, FileNotFoundError):
        return
    finally:
        os.close(dir_fd)
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
        assert where == str(box) or where.startswith(str(box) + "/"), where
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------ sandbox and call files

@needs_users
def test_sandbox_transfer_reads_and_writes_as_the_owner(alice, alice_dir, root_dir, open_tmp):
    execute = open_tmp / "execute"
    execute.mkdir(mode=0o755)
    box = Sandbox.create(execute, 65534, 65534)
    (alice_dir / "in.txt").write_text("alice's input")
    os.chown(alice_dir / "in.txt", alice.uid, alice.gid)
    dest = box.bring_in("in.txt", alice_dir, owner=alice, job="4.0")
    assert dest.read_text() == "alice's input" and dest.stat().st_uid == 65534
    with pytest.raises(TransferError, match=f"permission denied for user {ALICE}"):
        box.bring_in(str(root_dir / "secret"), alice_dir, owner=alice, job="4.0")
    (box.path / "result").write_text("done")
    os.chown(box.path / "result", 65534, 65534)
    (box.path / "leak").symlink_to("/etc/shadow")
    written = box.send_out(["result"], alice_dir, {}, owner=alice, job="4.0")
    assert written == [alice_dir / "result"] and (alice_dir / "result").stat().st_uid == alice.uid
    box.send_out(["leak"], alice_dir, {}, owner=alice, job="4.0")
    assert (alice_dir / "leak").is_symlink()  # a link comes back as a link, never read through
    with pytest.raises(TransferError, match="symbolic link"):
        box.send_out(["result"], alice_dir, {"result": "leak"}, owner=alice, job="4.0")
    for remap in ("../escaped", str(root_dir / "r")):
        with pytest.raises(TransferError, match=f"permission denied for user {ALICE}"):
            box.send_out(["result"], alice_dir, {"result": remap}, owner=alice, job="4.0")
    confined = ofs.Identity("bob", 12345, 12345, (), switch=False, kernel_checks=False)
    with pytest.raises(TransferError, match="leaves the job's directory"):
        box.send_out(["result"], alice_dir, {"result": "../x"}, owner=confined, job="4.0")
    with pytest.raises(TransferError, match="may not be absolute or contain"):
        box.send_out(["../../etc/passwd"], alice_dir, {}, owner=alice, job="4.0")
    box.remove()


@needs_users
def test_call_files_are_written_as_the_owner_and_never_through_a_link(alice, alice_dir, root_dir):
    victim = root_dir / "secret"
    (alice_dir / "1.out").symlink_to(victim)
    os.lchown(alice_dir / "1.out", alice.uid, alice.gid)
    with pytest.raises(ofs.OwnerFileError, match="symbolic link"):
        write_call_files(WriteCallFiles(str(alice_dir), (("1.result", b"R"), ("1.out", b"printed")), owner=ALICE))
    assert victim.read_text() == "ROOT SECRET\n"
    assert (alice_dir / "1.result").read_bytes() == b"R" and (alice_dir / "1.result").stat().st_uid == alice.uid
    # The recycled call file is written and renamed over whatever is at the result's name.
    (alice_dir / "2.call").write_bytes(b"call")
    os.chown(alice_dir / "2.call", alice.uid, alice.gid)
    (alice_dir / "2.result").symlink_to(victim)
    write_call_files(WriteCallFiles(str(alice_dir), (("2.result", b"R2"),), recycle="2.call", owner=ALICE))
    assert not (alice_dir / "2.result").is_symlink() and (alice_dir / "2.result").read_bytes() == b"R2"
    # Alice's results go only where alice may write.
    with pytest.raises(OSError, match=f"permission denied for user {ALICE}"):
        write_call_files(WriteCallFiles(str(root_dir), (("3.result", b"R3"),), owner=ALICE))
    with pytest.raises(ofs.OwnerFileError, match="not a plain file name"):
        write_call_files(WriteCallFiles(str(alice_dir), (("../x", b"R"),), owner=ALICE))
    assert victim.read_text() == "ROOT SECRET\n"
    with pytest.raises(OSError, match=f"permission denied for user {ALICE}"):
        read_input(str(victim), ALICE)


def test_the_starters_own_files_are_made_afresh_over_a_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    execute = tmp_path / "execute"
    box = Sandbox.create(execute)
    (box.path / "_condor_stdout").symlink_to(victim)
    made = box.fresh_file("_condor_stdout", b"")
    assert not made.is_symlink() and made.read_bytes() == b"" and victim.read_text() == "untouched"
    (box.path / ".job.ad").mkdir()
    with pytest.raises(TransferError, match="an input of that name is in the way"):
        box.fresh_file(".job.ad", b"[]")
    box.remove()
