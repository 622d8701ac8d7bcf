"""The checkpointing runtime for the tests: built once or the test skipped (:func:`runtime_tools`,
and the module-scoped ``tools`` fixture the standard-universe system tests import), and real
checkpoint images of a small CPython loop (:func:`loop_images`), for the tests of the schedd's
checkpoint store (tests/service/test_standard_checkpoint_files.py, test_checkpoint_store_order.py,
test_checkpoint_store_stream.py): a loop runs under the runtime and ``count`` checkpoints of it are
taken one after the other."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from htc.runtime import RuntimeUnavailable, checkpoint


def runtime_tools(**options) -> checkpoint.Tools:
    """The runtime's parts (``checkpoint.build_tools(**options)``), or the test skipped with what
    this host lacks and what to do about it."""
    try:
        return checkpoint.build_tools(**options)
    except RuntimeUnavailable as err:
        pytest.skip(f"the runtime cannot be built on this host: {err}; run `htc runtime check` to see what "
                    "this host lacks (CI installs gcc and libc6-dev: apt-get install gcc libc6-dev)")


@pytest.fixture(scope="module")
def tools() -> checkpoint.Tools:
    """The runtime, built once per module (or the module's tests skipped)."""
    return runtime_tools()


def loop_images(where: Path, count: int = 1) -> list[bytes]:
    """Take ``count`` successive images (sequence numbers 1, 2, ...) of one CPython loop; the
    last stays at ``where / "image"``. Returns each image's bytes."""
    tools = runtime_tools()
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
