"""htc.runtime.fileserver: requests in, replies out, beneath the root and nowhere else."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from htc.runtime import fileserver
from htc.runtime import protocol as P
from htc.runtime.protocol import Op

MODES = [pytest.param(False, id="checked-walk")]
if fileserver.HAVE_OPENAT2:
    MODES.insert(0, pytest.param(True, id="openat2"))


@pytest.fixture(params=MODES)
def server(request, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "in.txt").write_bytes(b"hello world")
    (root / "dir").mkdir()
    (root / "dir" / "a").write_bytes(b"A")
    (tmp_path / "secret").write_bytes(b"outside")
    os.symlink(tmp_path / "secret", root / "out-link")
    os.symlink(tmp_path, root / "out-dir")
    os.symlink("in.txt", root / "in-link")
    srv = fileserver.FileServer(root, use_openat2=request.param)
    yield srv
    srv.close()


def call(srv, op, h=-1, a1=0, a2=0, path=b"", data=b"", flags=0):
    out = srv.feed(P.encode_request(op, h, a1, a2, path, data, flags))
    if flags & P.NOREPLY:
        assert out == b""
        return None
    ret, err, aux, rdata, used = P.decode_reply(out)
    assert used == len(out)
    return ret, err, aux, rdata


def test_open_read_seek_stat_close(server):
    h, err, _, _ = call(server, Op.OPEN, a1=os.O_RDONLY, path=b"in.txt")
    assert h >= 0 and err == 0
    assert call(server, Op.READ, h, 5) == (5, 0, 5, b"hello")
    assert call(server, Op.LSEEK, h, 6, os.SEEK_SET)[0] == 6
    assert call(server, Op.PREAD, h, 3, 0)[3] == b"hel"
    assert call(server, Op.READ, h, 100)[3] == b"world"
    st = P.STAT.unpack(call(server, Op.FSTAT, h)[3])
    assert st[8] == 11 and stat.S_ISREG(st[3])
    assert call(server, Op.CLOSE, h)[:2] == (0, 0)
    assert call(server, Op.READ, h, 1)[:2] == (-1, errno.EBADF)


def test_write_append_rename_listdir_unlink(server):
    h = call(server, Op.OPEN, a1=os.O_WRONLY | os.O_CREAT | os.O_APPEND, a2=0o644, path=b"dir/log")[0]
    call(server, Op.WRITE, h, data=b"one\n")
    call(server, Op.WRITE, h, data=b"two\n", flags=P.NOREPLY)
    assert call(server, Op.FSYNC, h)[:2] == (0, 0)
    call(server, Op.CLOSE, h)
    assert call(server, Op.MKDIR, a1=0o755, path=b"new")[:2] == (0, 0)
    assert call(server, Op.RENAME, path=b"dir/log", data=b"new/log")[:2] == (0, 0)
    assert Path(server.root, "new", "log").read_bytes() == b"one\ntwo\n"
    count, _, _, listing = call(server, Op.LISTDIR, path=b"new")
    names = [name for _, _, name in P.unpack_listing(listing)]
    assert count == 3 and sorted(names) == [".", "..", "log"]
    assert call(server, Op.UNLINK, path=b"new/log")[:2] == (0, 0)
    assert call(server, Op.RMDIR, path=b"new")[:2] == (0, 0)
    assert call(server, Op.STAT, path=b"new")[:2] == (-1, errno.ENOENT)


def test_lstat_sees_the_link_and_stat_follows_it_inside(server):
    assert stat.S_ISLNK(P.STAT.unpack(call(server, Op.LSTAT, path=b"in-link")[3])[3])
    assert P.STAT.unpack(call(server, Op.STAT, path=b"in-link")[3])[8] == 11


@pytest.mark.parametrize("path", [b"/etc/passwd", b"../secret", b"dir/../../secret", b"out-link",
                                  b"out-dir/secret"])
def test_paths_escaping_the_root_are_refused(server, path):
    for op, a1 in ((Op.OPEN, os.O_RDONLY), (Op.STAT, 0), (Op.ACCESS, os.R_OK)):
        assert call(server, op, a1=a1, path=path)[:2] == (-1, errno.EACCES), (op, path)
    # creating through an escaping link or parent is refused too, and creates nothing outside
    assert call(server, Op.OPEN, a1=os.O_WRONLY | os.O_CREAT | os.O_TRUNC, a2=0o644, path=path)[0] == -1
    if path != b"out-link":   # (removing the link itself, which is inside, is fine)
        assert call(server, Op.UNLINK, path=path)[:2] != (0, 0)
    assert Path(server.root).parent.joinpath("secret").read_bytes() == b"outside"


def test_creating_through_a_dangling_link_out_is_refused(server):
    outside = os.path.dirname(server.root) + "/created"
    os.symlink(outside, server.root + "/dangling")
    assert call(server, Op.OPEN, a1=os.O_WRONLY | os.O_CREAT, a2=0o644, path=b"dangling")[0] == -1
    assert not os.path.exists(outside)


def test_only_the_connections_own_handles_are_accepted(server):
    assert call(server, Op.FSTAT, server.root_fd)[:2] == (-1, errno.EBADF)
    assert call(server, Op.READ, 0, 10)[:2] == (-1, errno.EBADF)


def test_a_failed_pipelined_write_is_reported_by_close(server):
    h = call(server, Op.OPEN, a1=os.O_RDONLY, path=b"in.txt")[0]
    call(server, Op.WRITE, h, data=b"x", flags=P.NOREPLY)   # EBADF: opened read-only
    assert call(server, Op.CLOSE, h)[:2] == (-1, errno.EBADF)


def test_pipelined_requests_split_anywhere(server):
    h = call(server, Op.OPEN, a1=os.O_RDWR | os.O_CREAT, a2=0o600, path=b"p")[0]
    stream = b"".join(P.encode_request(Op.WRITE, h, data=b"%d," % i, flags=P.NOREPLY) for i in range(50))
    stream += P.encode_request(Op.FSTAT, h)
    out = b"".join(server.feed(stream[i:i + 7]) for i in range(0, len(stream), 7))
    assert P.STAT.unpack(P.decode_reply(out)[3])[8] == len(b"".join(b"%d," % i for i in range(50)))


def test_a_malformed_header_is_a_protocol_error(server):
    with pytest.raises(fileserver.ProtocolError, match="malformed request header"):
        server.feed(b"\0" * P.REQUEST.size)


def test_unknown_op_and_bad_argument(server):
    assert call(server, 99)[:2] == (-1, errno.ENOSYS)
    assert call(server, Op.OPEN, a1=os.O_RDONLY, path=b"in\0.txt")[:2] == (-1, errno.EINVAL)
