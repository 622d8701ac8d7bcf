"""The pool backend's log watch: told of a write at once, quiet otherwise, closed cleanly."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from htc.executors.filewatch import FileWatch

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's; elsewhere the executor polls its log and there is no watch to test")


@linux_only
def test_a_write_to_the_file_is_reported_and_other_files_are_not(tmp_path):
    seen = threading.Event()
    target = tmp_path / "jobs.log"
    with FileWatch(target, seen.set) as watch:
        assert watch.active
        (tmp_path / "other.txt").write_text("not ours")
        assert not seen.wait(0.3)
        target.write_text("000 (001.000.000) event\n")  # created, then written
        assert seen.wait(5)
        seen.clear()
        with open(target, "a") as log:
            log.write("...\n")
        assert seen.wait(5)
    threads = [t.name for t in threading.enumerate()]
    assert not any(name.startswith("htc-filewatch") for name in threads)


@linux_only
def test_close_releases_its_descriptors_and_is_idempotent(tmp_path):
    before = len(os.listdir("/proc/self/fd"))
    watch = FileWatch(tmp_path / "jobs.log", lambda: None)
    assert len(os.listdir("/proc/self/fd")) == before + 3  # inotify fd and the self-pipe
    watch.close()
    watch.close()
    assert len(os.listdir("/proc/self/fd")) == before and not watch.active


def test_a_directory_that_does_not_exist_means_no_watch_and_no_error(tmp_path):
    watch = FileWatch(tmp_path / "missing" / "jobs.log", lambda: None)
    assert not watch.active
    watch.close()


@linux_only
def test_a_failing_listener_does_not_stop_the_watch(tmp_path):
    calls = []
    seen = threading.Event()

    def listener():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("listener bug")
        seen.set()

    target = tmp_path / "jobs.log"
    with FileWatch(target, listener):
        target.write_text("a")
        with open(target, "a") as log:
            log.write("b")
        for _ in range(3):
            if seen.wait(1):
                break
            with open(target, "a") as log:
                log.write("c")
        assert seen.is_set() and len(calls) >= 2


@linux_only
def test_wait_blocks_the_caller_until_a_write_or_a_wake(tmp_path):
    target = tmp_path / "jobs.log"

    def settle(watch):  # one write is several inotify events, which may end more than one wait
        for _ in range(50):
            if not watch.wait(0.1):
                return
        raise AssertionError("the watch kept waking with nothing written")

    with FileWatch(target) as watch:
        assert watch.active and not any(t.name.startswith("htc-filewatch") for t in threading.enumerate())
        assert watch.wait(0.05) is False  # nothing happened
        (tmp_path / "journal.jsonl").write_text("{}\n")  # another file of the directory
        assert watch.wait(0.2) is False
        threading.Timer(0.1, lambda: target.write_text("000 (001.000.000) event\n")).start()
        assert watch.wait(5) is True
        settle(watch)
        threading.Timer(0.1, watch.wake).start()
        assert watch.wait(5) is True
        assert watch.wait(0.1) is False
        watch.wake()  # a wake with nobody waiting ends the next wait at once
        assert watch.wait(5) is True and watch.wait(0.1) is False


def test_without_inotify_wait_still_times_out_and_wakes(tmp_path):
    watch = FileWatch(tmp_path / "missing" / "jobs.log")
    assert not watch.active and watch.wait(0.05) is False
    watch.wake()
    assert watch.wait(5) is True
    watch.close()
