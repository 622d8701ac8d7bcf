"""Checkpoint images: read, verify and describe them from Python.

Theory of operation
-------------------
An image is written by the in-process handler (``jobrt_ckpt.c`` in libjobrt.so) or by the
ptrace dumper (``jobrt-dump``) and read back by the restarter (``jobrt-restart``); the layout is
defined once, in ``c/jobrt_ckpt_fmt.h``, and mirrored here with :mod:`struct`:

    header (4096 bytes) | state | sigactions | files | remote files | regions | pad | region data

The header names the host the image was taken on (architecture, kernel release, XSAVE feature
mask and size, vDSO/vvar sizes), the checkpoint's sequence number and generation, and the offsets
of the tables.  The checksum is zlib's CRC-32 of the header (checksum field zeroed) followed by
the rest of the file, so :func:`verify` needs only :func:`zlib.crc32`; a receiver that writes
an image can take that sum in the same pass (:class:`StreamChecksum`) and hand it to
:func:`verify`, which then reads only the header and tables.

Whether an image fits *this* host is decided by the restarter itself (``jobrt-restart --check``),
which reads the host's facts the same way the dumpers do; :func:`host_facts` parses
``jobrt-restart --host`` for people and tools.  This module never imports the C side.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from htc.errors import UsageError

MAGIC = b"HTCJRTI1"
VERSION = 1
HEADER_SIZE = 4096
PATH_MAX = 4096
SOURCES = {1: "in-process handler", 2: "ptrace dumper"}

# struct jr_header up to exe[] (see c/jobrt_ckpt_fmt.h)
_HEADER = struct.Struct("<8sIIII16s72sQII3Q2QqqQ4I6QQQQQ1024s")
_CHECKSUM_OFFSET = 16
# struct jr_file
_FILE = struct.Struct(f"<iiIIqqQQqq{PATH_MAX}s")
# struct jr_rfile
_RFILE = struct.Struct(f"<iiq{PATH_MAX}s")
# struct jr_region
_REGION = struct.Struct("<QQIIQ256s")
_REGION_FLAGS = {1: "data", 2: "stack", 4: "vvar", 8: "vvar_vclock", 16: "vdso"}


class ImageError(UsageError):
    """A file is not a usable checkpoint image (not one, truncated, or damaged)."""


@dataclass(frozen=True)
class Region:
    """One memory mapping recorded in an image."""

    start: int
    end: int
    prot: str
    flags: tuple[str, ...]
    name: str

    @property
    def size(self) -> int:
        """Bytes the mapping spans."""
        return self.end - self.start


@dataclass(frozen=True)
class OpenFile:
    """One descriptor of the checkpointed process."""

    fd: int
    path: str
    flags: int
    offset: int
    size: int
    remote: bool = False


@dataclass(frozen=True)
class ImageHeader:
    """The parsed header and tables of an image."""

    path: Path
    source: str
    arch: str
    kernel: str
    xcr0: int
    xsave_size: int
    vdso_sizes: tuple[int, int, int]
    seq: int
    generation: int
    pid: int
    time_ns: int
    total_size: int
    data_bytes: int
    checksum: int
    exe: str
    files: tuple[OpenFile, ...] = field(default=())
    regions: tuple[Region, ...] = field(default=())


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def read_header(path: Path | str) -> ImageHeader:
    """Parse the header and tables of the image at ``path`` (without checking the checksum).

    Raises :class:`ImageError` when the file is not an image of a version this code reads.
    """
    path = Path(path)
    with open(path, "rb") as f:
        head = f.read(HEADER_SIZE)
        if len(head) < HEADER_SIZE or head[:8] != MAGIC:
            raise ImageError(f"{path} is not a checkpoint image (no {MAGIC.decode()} magic at its start)")
        v = _HEADER.unpack_from(head)
        (_, version, header_size, checksum, source, arch, kernel, xcr0, xsave_size, _nsig,
         vvar, vclock, vdso, seq, generation, pid, time_ns, total, nfiles, nrfiles, nregions, _pad,
         _state_off, _sig_off, files_off, rfiles_off, regions_off, _data_off, data_bytes,
         _cfg, _hook, _restorer, exe) = v
        if version != VERSION or header_size != HEADER_SIZE:
            raise ImageError(f"{path} is an image of format version {version}; this htc reads {VERSION}")
        size = path.stat().st_size
        if size != total:
            raise ImageError(f"{path} is {size} bytes but its header says {total}: truncated or appended to")
        files = []
        f.seek(files_off)
        for _ in range(nfiles):
            fd, flags, _fdf, _mode, offset, fsize, _dev, _ino, _ms, _mns, p = _FILE.unpack(f.read(_FILE.size))
            files.append(OpenFile(fd, _cstr(p), flags, offset, fsize))
        f.seek(rfiles_off)
        for _ in range(nrfiles):
            fd, flags, offset, p = _RFILE.unpack(f.read(_RFILE.size))
            files.append(OpenFile(fd, _cstr(p), flags, offset, -1, remote=True))
        regions = []
        f.seek(regions_off)
        for _ in range(nregions):
            start, end, prot, flags, _off, name = _REGION.unpack(f.read(_REGION.size))
            perms = "".join(c if prot & bit else "-" for c, bit in (("r", 1), ("w", 2), ("x", 4)))
            names = tuple(n for bit, n in _REGION_FLAGS.items() if flags & bit)
            regions.append(Region(start, end, perms, names, _cstr(name)))
    return ImageHeader(
        path=path, source=SOURCES.get(source, f"unknown ({source})"), arch=_cstr(arch),
        kernel=_cstr(kernel), xcr0=xcr0, xsave_size=xsave_size, vdso_sizes=(vvar, vclock, vdso),
        seq=seq, generation=generation, pid=pid, time_ns=time_ns, total_size=total,
        data_bytes=data_bytes, checksum=checksum, exe=_cstr(exe), files=tuple(files),
        regions=tuple(regions),
    )


class StreamChecksum:
    """The checksum :func:`verify` computes, taken from an image's bytes as they pass by (a
    received stream) instead of by reading the file again: feed :meth:`update` every byte of the
    image, in order, then hand :attr:`value` to ``verify(path, checksum=...)``."""

    _FIELD_END = _CHECKSUM_OFFSET + 4

    def __init__(self) -> None:
        self.value = 0
        self._seen = 0

    def update(self, data: bytes | bytearray | memoryview) -> None:
        """The next bytes of the image."""
        view = memoryview(data)
        if self._seen < self._FIELD_END and view:  # the checksum field counts as zeros
            n = min(len(view), self._FIELD_END - self._seen)
            head = bytearray(view[:n])
            lo, hi = max(_CHECKSUM_OFFSET - self._seen, 0), n
            if lo < hi:
                head[lo:hi] = bytes(hi - lo)
            self.value = zlib.crc32(head, self.value)
            self._seen += n
            view = view[n:]
        self.value = zlib.crc32(view, self.value)
        self._seen += len(view)


def verify(path: Path | str, *, checksum: int | None = None) -> ImageHeader:
    """Return the header of ``path`` after checking its size and CRC-32 checksum.

    Args:
        path: the image.
        checksum: the checksum of the file's bytes when the caller already took it as they
            were written (:class:`StreamChecksum`); then the file is not read again.

    Raises :class:`ImageError` naming the file when it is damaged or was modified.
    """
    header = read_header(path)
    crc = checksum
    if crc is None:
        with open(header.path, "rb") as f:
            head = bytearray(f.read(HEADER_SIZE))
            head[_CHECKSUM_OFFSET:_CHECKSUM_OFFSET + 4] = b"\0\0\0\0"
            crc = zlib.crc32(head)
            while chunk := f.read(1 << 20):
                crc = zlib.crc32(chunk, crc)
    if crc != header.checksum:
        raise ImageError(
            f"{header.path}: checksum mismatch (stored {header.checksum:08x}, computed {crc:08x}): "
            "the image is damaged or was modified; use an older image or restart the job from scratch"
        )
    return header


def describe(header: ImageHeader) -> str:
    """Return a human-readable summary of an image: host, sizes, files and mappings."""
    lines = [
        f"image       {header.path}",
        f"taken by    {header.source}, checkpoint {header.seq}, generation {header.generation}, pid {header.pid}",
        f"program     {header.exe}",
        f"host        {header.arch}, kernel {header.kernel}, xcr0 {header.xcr0:#x}, xsave {header.xsave_size} B",
        f"vdso        vvar {header.vdso_sizes[0]} B, vvar_vclock {header.vdso_sizes[1]} B, vdso {header.vdso_sizes[2]} B",
        f"size        {header.total_size} B ({header.data_bytes} B of memory in {len(header.regions)} mappings)",
    ]
    for f in header.files:
        where = "remote " if f.remote else ""
        lines.append(f"fd {f.fd:<4}     {where}{f.path} (offset {f.offset}, flags {f.flags:#o})")
    return "\n".join(lines)


def host_facts(text: str) -> dict[str, str]:
    """Parse the ``key value`` lines that ``jobrt-restart --host`` prints."""
    facts = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key:
            facts[key] = value
    return facts
