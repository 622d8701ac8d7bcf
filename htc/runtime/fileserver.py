"""The remote-I/O request handler: bytes of requests in, bytes of replies out (sans-IO).

Theory of operation
-------------------
:class:`FileServer` serves one job connection. :meth:`FileServer.feed` takes whatever bytes
arrived, executes every complete request (see :mod:`htc.runtime.protocol`) against the file
system beneath ``root`` and returns the replies' bytes; it never touches the socket, so it can
be driven by an asyncio protocol (:mod:`htc.runtime.remote_io`), by a test, or by a benchmark.
The calls run with the credentials of the process that runs the server: to act as the job's
owner, that process drops to the owner's uid/gid first (:func:`htc.runtime.remote_io.serve_fd`).

The shim is not trusted. Every path is resolved beneath the root with ``openat2(2)``
``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS``: an absolute path, a ``..`` that climbs out, or a
symlink that points out fails, and the program sees ``EACCES``. Calls that act on a name (unlink,
mkdir, rename, lstat) resolve the parent directory that way and then act on the last component
relative to that directory fd, never following a symlink in it. On a kernel without openat2
(before 5.6) the fallback opens relative to the root and checks where the result landed through
``/proc/self/fd`` (refusing O_CREAT through a symlink in the last component). Handles are the
server's own fds, and only those this connection opened are accepted.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat as stat_mod

from htc.errors import PeerError
from htc.runtime import protocol as P

_O_PATH_DIR = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # x86-64 and every architecture that added it after 5.6 (the generic table)

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_REPLY_PACK = P.REPLY.pack


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_HOW_SIZE = ctypes.sizeof(_OpenHow)


class ProtocolError(PeerError):
    """The job side sent bytes that are not a well-formed remote-I/O request."""


def _openat2_works() -> bool:
    how = _OpenHow(_O_PATH_DIR, 0, _RESOLVE_BENEATH)
    fd = _libc.syscall(_SYS_OPENAT2, -100, b".", ctypes.byref(how), ctypes.sizeof(how))
    if fd >= 0:
        os.close(fd)
        return True
    return False


HAVE_OPENAT2 = _openat2_works()

_DTYPES = ((stat_mod.S_ISDIR, 4), (stat_mod.S_ISREG, 8), (stat_mod.S_ISLNK, 10),
           (stat_mod.S_ISFIFO, 1), (stat_mod.S_ISCHR, 2), (stat_mod.S_ISBLK, 6), (stat_mod.S_ISSOCK, 12))


class FileServer:
    """Executes one connection's remote-I/O requests beneath ``root``."""

    def __init__(self, root: str | os.PathLike, *, use_openat2: bool | None = None):
        self.root = os.path.realpath(root)
        self.root_fd = os.open(self.root, _O_PATH_DIR)
        self.use_openat2 = HAVE_OPENAT2 if use_openat2 is None else use_openat2
        #: handle -> first errno of a failed NOREPLY request (0: none)
        self.handles: dict[int, int] = {}
        self.requests = 0
        self._buf = bytearray()
        self._hows: dict[tuple[int, int], object] = {}
        self._ops = {
            P.Op.OPEN: self._open, P.Op.CLOSE: self._close, P.Op.READ: self._read,
            P.Op.PREAD: self._pread, P.Op.WRITE: self._write, P.Op.PWRITE: self._pwrite,
            P.Op.LSEEK: self._lseek, P.Op.FSTAT: self._fstat, P.Op.STAT: self._stat,
            P.Op.LSTAT: self._lstat, P.Op.ACCESS: self._access, P.Op.UNLINK: self._unlink,
            P.Op.RMDIR: self._rmdir, P.Op.MKDIR: self._mkdir, P.Op.RENAME: self._rename,
            P.Op.LISTDIR: self._listdir, P.Op.TRUNCATE: self._truncate,
            P.Op.FTRUNCATE: self._ftruncate, P.Op.FSYNC: self._fsync, P.Op.DUP: self._dup,
        }

    # ---- the sans-IO interface ----

    def feed(self, data: bytes) -> bytes:
        """Execute every complete request in the bytes received so far; return the replies."""
        if self._buf:
            self._buf += data
            data = bytes(self._buf)
            self._buf.clear()
        view = memoryview(data)
        out = []
        off = 0
        hsize = P.REQUEST.size
        unpack = P.REQUEST.unpack_from
        while len(data) - off >= hsize:
            magic, op, flags, h, a1, a2, plen, dlen = unpack(data, off)
            if magic != P.MAGIC or plen > 65536 or dlen > P.MAX_DATA:
                raise ProtocolError(
                    f"remote I/O: malformed request header (magic {magic:#x}, op {op}, path "
                    f"{plen} bytes, data {dlen} bytes); closing the job's file connection"
                )
            start = off + hsize
            end = start + plen + dlen
            if len(data) < end:
                break
            off = end
            ret, err, aux, rdata = self.execute(op, h, a1, a2, bytes(view[start:start + plen]),
                                                view[start + plen:end] if dlen else b"")
            self.requests += 1
            if flags & P.NOREPLY:
                if ret < 0 and h in self.handles and not self.handles[h]:
                    self.handles[h] = err
            else:
                out.append(_REPLY_PACK(ret, aux, err, len(rdata)))
                if rdata:
                    out.append(rdata)
        if off < len(data):
            self._buf += view[off:]
        return b"".join(out)

    def execute(self, op: int, h: int, a1: int, a2: int, path: bytes, data) -> tuple[int, int, int, bytes]:
        """Run one request; return (ret, errno, aux, reply data)."""
        fn = self._ops.get(op)
        if fn is None:
            return -1, errno.ENOSYS, 0, b""
        if h != -1 and h not in self.handles:
            return -1, errno.EBADF, 0, b""
        try:
            return fn(h, a1, a2, path, data)
        except OSError as err:
            code = err.errno or errno.EIO
            return -1, errno.EACCES if code == errno.EXDEV else code, 0, b""
        except (ValueError, OverflowError):  # NUL in a path, an out-of-range argument
            return -1, errno.EINVAL, 0, b""

    def close(self) -> None:
        """Close every handle the connection left open, and the root."""
        for h in list(self.handles):
            os.close(h)
        self.handles.clear()
        if self.root_fd >= 0:
            os.close(self.root_fd)
            self.root_fd = -1

    # ---- resolution beneath the root ----

    def resolve(self, path: bytes, flags: int, mode: int = 0) -> int:
        """Open ``path`` beneath the root (``flags`` as for open(2)); raise OSError, with EXDEV
        (shown to the program as EACCES) for a path that escapes."""
        if b"\0" in path:
            raise ValueError("NUL in a path")
        if not path or path.startswith(b"/"):
            raise OSError(errno.EXDEV if path else errno.ENOENT, "outside the job's root")
        flags |= os.O_CLOEXEC
        if self.use_openat2:
            key = (flags, mode if flags & (os.O_CREAT | os.O_TMPFILE) else 0)
            how = self._hows.get(key)
            if how is None:   # (built once per flags/mode: ctypes structures are slow to make)
                how = self._hows[key] = ctypes.byref(_OpenHow(*key, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS))
            fd = _syscall(_SYS_OPENAT2, self.root_fd, path, how, _HOW_SIZE)
            if fd < 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            return fd
        return self._resolve_by_check(path, flags, mode)

    def _resolve_by_check(self, path: bytes, flags: int, mode: int) -> int:
        if flags & os.O_CREAT:   # create only through a checked parent, never through a symlink
            parent, name = self._parent(path)
            try:
                return os.open(name, flags | os.O_NOFOLLOW, mode, dir_fd=parent)
            finally:
                os.close(parent)
        fd = os.open(path, flags, mode, dir_fd=self.root_fd)
        where = os.readlink(f"/proc/self/fd/{fd}")
        if where != self.root and not where.startswith(self.root.rstrip("/") + "/"):
            os.close(fd)
            raise OSError(errno.EXDEV, "outside the job's root")
        return fd

    def _parent(self, path: bytes) -> tuple[int, bytes]:
        """Resolve the directory holding ``path``'s last component; return (dir fd, name)."""
        path = path.rstrip(b"/") or b"."
        head, _, name = path.rpartition(b"/")
        if name in (b".", b".."):
            raise OSError(errno.EINVAL, "names no entry")
        return self.resolve(head or b".", _O_PATH_DIR), name

    # ---- the calls ----

    def _open(self, h, flags, mode, path, data):
        fd = self.resolve(path, flags & ~os.O_PATH, mode)
        self.handles[fd] = 0
        aux = os.fstat(fd).st_size if flags & os.O_APPEND else 0
        return fd, 0, aux, b""

    def _close(self, h, a1, a2, path, data):
        kept = self.handles.pop(h)
        os.close(h)
        return (-1, kept, 0, b"") if kept else (0, 0, 0, b"")

    def _offset(self, h) -> int:
        try:
            return os.lseek(h, 0, os.SEEK_CUR)
        except OSError:
            return 0

    def _read(self, h, count, a2, path, data):
        got = os.read(h, min(count, P.MAX_DATA))
        return len(got), 0, self._offset(h), got

    def _pread(self, h, count, offset, path, data):
        got = os.pread(h, min(count, P.MAX_DATA), offset)
        return len(got), 0, 0, got   # (pread leaves the offset alone: the shim keeps its own)

    def _write(self, h, a1, a2, path, data):
        n = os.write(h, data)
        return n, 0, self._offset(h), b""

    def _pwrite(self, h, a1, offset, path, data):
        return os.pwrite(h, data, offset), 0, 0, b""

    def _lseek(self, h, offset, whence, path, data):
        pos = os.lseek(h, offset, whence)
        return pos, 0, pos, b""

    def _fstat(self, h, a1, a2, path, data):
        return 0, 0, 0, P.pack_stat(os.fstat(h))

    def _stat(self, h, a1, a2, path, data):
        fd = self.resolve(path, os.O_PATH)
        try:
            return 0, 0, 0, P.pack_stat(os.fstat(fd))
        finally:
            os.close(fd)

    def _lstat(self, h, a1, a2, path, data):
        try:
            parent, name = self._parent(path)
        except OSError as err:
            if err.errno == errno.EINVAL:   # "." or "..": no link to not follow
                return self._stat(h, a1, a2, path, data)
            raise
        try:
            return 0, 0, 0, P.pack_stat(os.stat(name, dir_fd=parent, follow_symlinks=False))
        finally:
            os.close(parent)

    def _access(self, h, mode, a2, path, data):
        fd = self.resolve(path, os.O_PATH)
        try:
            ok = os.access(f"/proc/self/fd/{fd}", mode)
        finally:
            os.close(fd)
        return (0, 0, 0, b"") if ok else (-1, errno.EACCES, 0, b"")

    def _by_name(self, path, fn):
        parent, name = self._parent(path)
        try:
            fn(name, parent)
        finally:
            os.close(parent)
        return 0, 0, 0, b""

    def _unlink(self, h, a1, a2, path, data):
        return self._by_name(path, lambda name, d: os.unlink(name, dir_fd=d))

    def _rmdir(self, h, a1, a2, path, data):
        return self._by_name(path, lambda name, d: os.rmdir(name, dir_fd=d))

    def _mkdir(self, h, mode, a2, path, data):
        return self._by_name(path, lambda name, d: os.mkdir(name, mode, dir_fd=d))

    def _rename(self, h, a1, a2, path, data):
        src, sname = self._parent(path)
        try:
            dst, dname = self._parent(bytes(data))
            try:
                os.rename(sname, dname, src_dir_fd=src, dst_dir_fd=dst)
            finally:
                os.close(dst)
        finally:
            os.close(src)
        return 0, 0, 0, b""

    def _listdir(self, h, a1, a2, path, data):
        fd = self.resolve(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            here = os.fstat(fd)
            parts = [P.DIRENT.pack(here.st_ino, 4, 1), b".", P.DIRENT.pack(0, 4, 2), b".."]
            count = 2
            with os.scandir(fd) as it:
                for entry in it:
                    name = os.fsencode(entry.name)
                    parts += [P.DIRENT.pack(entry.inode(), _dtype(entry), len(name)), name]
                    count += 1
        finally:
            os.close(fd)
        return count, 0, 0, b"".join(parts)

    def _truncate(self, h, length, a2, path, data):
        fd = self.resolve(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, length)
        finally:
            os.close(fd)
        return 0, 0, 0, b""

    def _ftruncate(self, h, length, a2, path, data):
        os.ftruncate(h, length)
        return 0, 0, 0, b""

    def _fsync(self, h, a1, a2, path, data):
        kept, self.handles[h] = self.handles[h], 0
        if kept:
            return -1, kept, 0, b""
        os.fsync(h)
        return 0, 0, 0, b""

    def _dup(self, h, a1, a2, path, data):
        fd = os.dup(h)
        self.handles[fd] = 0
        return fd, 0, self._offset(fd), b""


def _dtype(entry: os.DirEntry) -> int:
    """The d_type of a scandir entry (0, DT_UNKNOWN, if it cannot be told)."""
    try:
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError:
        return 0
    return next((code for test, code in _DTYPES if test(mode)), 0)
