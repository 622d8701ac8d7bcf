"""htc.runtime.image on synthetic images (no compiler needed), and checkpoint's pure helpers."""

from __future__ import annotations

import os
import struct
import zlib

import pytest

from htc.runtime import checkpoint, image


def _image(path, *, regions=(("[heap]", 0x1000, 0x3000, 3, 1),), files=((3, "/data/in", 0, 42, 100),)):
    """Write a well-formed image with the given tables; return the header's fields."""
    state_off = 4096
    sig_off = state_off + 24576  # the state block is not read by image.py: any size will do
    files_off = sig_off + 64 * 32
    rfiles_off = files_off + len(files) * image._FILE.size
    regions_off = rfiles_off
    end = regions_off + len(regions) * image._REGION.size
    data_off = (end + 4095) // 4096 * 4096
    body = bytearray(data_off - 4096)
    for i, (fd, p, flags, offset, size) in enumerate(files):
        image._FILE.pack_into(body, files_off - 4096 + i * image._FILE.size, fd, flags, 0, 0o100644,
                              offset, size, 1, 2, 3, 4, p.encode())
    data = b""
    for i, (name, start, end_, prot, flags) in enumerate(regions):
        image._REGION.pack_into(body, regions_off - 4096 + i * image._REGION.size, start, end_, prot, flags,
                                data_off + len(data), name.encode())
        data += os.urandom(end_ - start)
    total = data_off + len(data)
    head = bytearray(4096)
    image._HEADER.pack_into(
        head, 0, image.MAGIC, 1, 4096, 0, 1, b"x86_64", b"6.1.0-test", 0x207, 2696, 64,
        16384, 8192, 8192, 3, 1, 4242, 0, total, len(files), 0, len(regions), 0,
        state_off, sig_off, files_off, rfiles_off, regions_off, data_off, len(data), 0, 0, 0, b"/bin/job",
    )
    crc = zlib.crc32(bytes(body) + data, zlib.crc32(bytes(head)))
    head[16:20] = struct.pack("<I", crc)
    path.write_bytes(bytes(head) + bytes(body) + data)
    return total


def test_verify_and_describe_a_well_formed_image(tmp_path):
    total = _image(tmp_path / "a.img")
    header = image.verify(tmp_path / "a.img")
    assert (header.kernel, header.seq, header.generation, header.pid, header.total_size) == ("6.1.0-test", 3, 1, 4242, total)
    assert header.regions[0].name == "[heap]" and header.regions[0].prot == "rw-" and header.regions[0].size == 0x2000
    assert header.files[0].path == "/data/in" and header.files[0].offset == 42
    text = image.describe(header)
    assert "kernel 6.1.0-test" in text and "checkpoint 3, generation 1, pid 4242" in text and "/data/in" in text


def test_a_flipped_byte_fails_the_checksum(tmp_path):
    _image(tmp_path / "a.img")
    raw = bytearray((tmp_path / "a.img").read_bytes())
    raw[-100] ^= 0x40
    (tmp_path / "a.img").write_bytes(bytes(raw))
    with pytest.raises(image.ImageError, match="checksum mismatch"):
        image.verify(tmp_path / "a.img")


def test_truncated_and_foreign_files_are_not_images(tmp_path):
    _image(tmp_path / "a.img")
    raw = (tmp_path / "a.img").read_bytes()
    (tmp_path / "short.img").write_bytes(raw[:-10])
    with pytest.raises(image.ImageError, match="truncated"):
        image.read_header(tmp_path / "short.img")
    (tmp_path / "elf").write_bytes(b"\x7fELF" + b"\0" * 5000)
    with pytest.raises(image.ImageError, match="not a checkpoint image"):
        image.read_header(tmp_path / "elf")


def test_host_facts_parse_the_restarters_lines():
    facts = image.host_facts("arch x86_64\nkernel 6.18.44\nxcr0 0x207\n")
    assert facts == {"arch": "x86_64", "kernel": "6.18.44", "xcr0": "0x207"}


def test_refusal_lines_carry_pid_and_attempt(tmp_path):
    img = tmp_path / "job.img"
    (tmp_path / "job.img.refused").write_text("checkpoint 7 of pid 1234 refused: the program runs 2 threads\n")
    assert checkpoint._refusal(img) == (1234, 7, "the program runs 2 threads")


def test_setuid_programs_are_refused_at_start(tmp_path):
    prog = tmp_path / "suid"
    prog.write_text("#!/bin/sh\n")
    prog.chmod(0o4755)
    with pytest.raises(checkpoint.CheckpointRefused, match="setuid"):
        checkpoint.start([str(prog)], tmp_path / "x.img")
