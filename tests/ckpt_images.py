"""Real checkpoint images of a small CPython loop, for the tests of the schedd's checkpoint store
(tests/service/test_standard_checkpoint_files.py, test_checkpoint_store_order.py,
test_checkpoint_store_stream.py): the runtime is built (or the test skipped, naming what this host
lacks), a loop runs under it, and ``count`` checkpoints of it are taken one after the other."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from htc.runtime import RuntimeUnavailable, checkpoint


def loop_images(where: Path, count: int = 1) -> list[bytes]:
    """Take ``count`` successive images (sequence numbers 1, 2, ...) of one CPython loop; the
    last stays at ``where / "image"``. Returns each image's bytes."""
    try:
        tools = checkpoint.build_tools()
    except RuntimeUnavailable as err:
        pytest.skip(f"the runtime cannot be built on this host: {err}")
    job = checkpoint.start(["/usr/bin/python3", "-c", "import time\nwhile True: time.sleep(0.01)"],
                           where / "image", tools=tools)
    images = []
    try:
        time.sleep(0.5)
        for _ in range(count):
            job.checkpoint()
            images.append((where / "image").read_bytes())
    finally:
        job.kill()
    return images
