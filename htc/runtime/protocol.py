"""The remote-I/O wire format between the preload shim (``jobrt_io*.c``) and the file server.

Theory of operation
-------------------
One connected stream socket per job process carries requests from the shim and replies from
the server, strictly in order. Everything is little-endian and fixed-width (the C side declares
the same layouts in ``c/jobrt_io.h``); flag values and errnos are Linux x86-64's, carried
unchanged (a server on another architecture would have to translate them).

Request: a 40-byte header ``<IHHqqqII``, then ``plen`` bytes of path, then ``dlen`` bytes of
data::

    magic  u32   0x4a525431, catches a desynchronised stream
    op     u16   an :class:`Op`
    flags  u16   bit 0 (NOREPLY): send no reply (pipelined writes, closes)
    h      i64   the server's handle for fd calls, -1 for path calls
    a1 a2  i64   arguments, per op (below)
    plen   u32   length of the path (UTF-8 bytes as the program gave them, no NUL)
    dlen   u32   length of the data

Reply (not sent for NOREPLY requests): a 24-byte header ``<qqiI``, then ``dlen`` bytes::

    ret    i64   the call's result; -1 on failure
    aux    i64   for fd calls: the file offset after the call (for an O_APPEND open: the size)
    err    i32   errno when ret is -1, else 0
    dlen   u32   length of the reply data

Ops and their arguments (path = the request's path, data = its data):

=========  =====================  ============================================
op         arguments              reply
=========  =====================  ============================================
OPEN       path, a1=flags, a2=mode  ret=handle
CLOSE      h                       ret=0 (or a kept write error)
READ       h, a1=count             data=bytes read, ret=len
PREAD      h, a1=count, a2=offset  data=bytes read, ret=len
WRITE      h, data                 ret=bytes written
PWRITE     h, a2=offset, data      ret=bytes written
LSEEK      h, a1=offset, a2=whence ret=new offset
FSTAT      h                       data=stat record
STAT/LSTAT path                    data=stat record
ACCESS     path, a1=mode           ret=0
UNLINK     path                    ret=0
RMDIR      path                    ret=0
MKDIR      path, a1=mode           ret=0
RENAME     path=old, data=new      ret=0
LISTDIR    path                    data=entries, ret=count
TRUNCATE   path, a1=length         ret=0
FTRUNCATE  h, a1=length            ret=0
FSYNC      h                       ret=0 (or a kept write error)
DUP        h                       ret=new handle (same open file description)
=========  =====================  ============================================

A stat record is ``<QQQIIIIQqqqqqqqqq`` (120 bytes): dev, ino, nlink, mode, uid, gid, (pad),
rdev, size, blksize, blocks, atime s/ns, mtime s/ns, ctime s/ns. A listing is a run of entries
``<QBH`` (inode, d_type, name length) followed by the name, "." and ".." included.

A NOREPLY request that fails (a pipelined write to a full disk) does not go unnoticed: the
server keeps the first such errno per handle and returns it from the handle's next CLOSE or
FSYNC, the way NFS reports a failed write-behind.
"""

from __future__ import annotations

import enum
import struct

MAGIC = 0x4A525431
REQUEST = struct.Struct("<IHHqqqII")
REPLY = struct.Struct("<qqiI")
STAT = struct.Struct("<QQQIIIIQqqqqqqqqq")
DIRENT = struct.Struct("<QBH")
NOREPLY = 1
#: the most one request may carry (the shim splits bigger transfers)
MAX_DATA = 16 << 20


class Op(enum.IntEnum):
    """Request codes (``enum jobrt_op`` in ``c/jobrt_io.h``)."""

    OPEN = 1
    CLOSE = 2
    READ = 3
    PREAD = 4
    WRITE = 5
    PWRITE = 6
    LSEEK = 7
    FSTAT = 8
    STAT = 9
    LSTAT = 10
    ACCESS = 11
    UNLINK = 12
    RMDIR = 13
    MKDIR = 14
    RENAME = 15
    LISTDIR = 16
    TRUNCATE = 17
    FTRUNCATE = 18
    FSYNC = 19
    DUP = 20


def encode_request(op: int, h: int = -1, a1: int = 0, a2: int = 0, path: bytes = b"",
                   data: bytes = b"", flags: int = 0) -> bytes:
    """Return one request as bytes (what the shim sends; used by tests and the benchmark)."""
    return REQUEST.pack(MAGIC, op, flags, h, a1, a2, len(path), len(data)) + path + data


def encode_reply(ret: int, err: int = 0, aux: int = 0, data: bytes = b"") -> bytes:
    """Return one reply as bytes."""
    return REPLY.pack(ret, aux, err, len(data)) + data


def decode_reply(buf: bytes) -> tuple[int, int, int, bytes, int]:
    """Split one reply off the front of ``buf``: (ret, err, aux, data, bytes used).

    Raises ValueError when ``buf`` holds less than one whole reply.
    """
    if len(buf) < REPLY.size:
        raise ValueError("short reply header")
    ret, aux, err, dlen = REPLY.unpack_from(buf)
    end = REPLY.size + dlen
    if len(buf) < end:
        raise ValueError("short reply data")
    return ret, err, aux, bytes(buf[REPLY.size:end]), end


def pack_stat(st) -> bytes:
    """Return the wire stat record of an ``os.stat_result``."""
    return STAT.pack(st.st_dev, st.st_ino, st.st_nlink, st.st_mode, st.st_uid, st.st_gid, 0,
                     st.st_rdev, st.st_size, st.st_blksize, st.st_blocks,
                     st.st_atime_ns // 10**9, st.st_atime_ns % 10**9,
                     st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9,
                     st.st_ctime_ns // 10**9, st.st_ctime_ns % 10**9)


def unpack_listing(data: bytes) -> list[tuple[int, int, str]]:
    """Return the (inode, d_type, name) entries of a LISTDIR reply."""
    out, off = [], 0
    while off < len(data):
        ino, dtype, n = DIRENT.unpack_from(data, off)
        off += DIRENT.size
        out.append((ino, dtype, data[off:off + n].decode("utf-8", "surrogateescape")))
        off += n
    return out
