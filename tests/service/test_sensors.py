"""Sensors: real measurements of this machine, idle times from device atimes, the override file."""

from __future__ import annotations

import math
import os
import platform
import shutil
import subprocess
import sys
import time

import psutil
import pytest

from htc.daemons.startd import sensors
from htc.daemons.startd.sensors import SensorSettings, Sensors, parse_override, write_sensor_override
from htc.errors import UsageError


@pytest.fixture
def sensor(tmp_path):
    return Sensors(SensorSettings(execute_dir=tmp_path / "execute", daemon_name="startd@test"))


def test_sample_measures_this_machine(sensor, tmp_path):
    ad = sensor.sample()
    assert ad["Arch"] == {"x86_64": "X86_64", "aarch64": "aarch64"}.get(platform.machine(), ad["Arch"])
    assert ad["OpSys"] == "LINUX"
    assert ad["TotalCpus"] == ad["Cpus"] == os.cpu_count()
    assert ad["TotalMemory"] == psutil.virtual_memory().total // 2**20
    # Disk: KiB free where the execute dir will be (its parent exists, it does not yet)
    free = shutil.disk_usage(tmp_path).free // 1024
    assert abs(ad["Disk"] - free) < 50 * 1024
    assert ad["LoadAvg"] == pytest.approx(os.getloadavg()[0], abs=1.0)
    assert ad["CondorLoadAvg"] == 0.0
    assert isinstance(ad["KeyboardIdle"], int) and ad["KeyboardIdle"] >= 0
    assert ad["ConsoleIdle"] >= ad["KeyboardIdle"]
    assert ad["HasFileTransfer"] is True and ad["StartdIpAddr"] == ad["MyAddress"] == "startd@test"
    assert ad["Machine"] and ad["FileSystemDomain"] == ad["UidDomain"] == ad["Machine"]
    assert ad["Mips"] >= 1 and ad["KFlops"] >= 1 and ad["LastBenchmark"] <= time.time()


def test_condor_version_satisfies_the_requirements_condor_submit_writes():
    version = sensors.condor_version()
    assert version.startswith("$CondorVersion: ") and version.endswith(" $")
    number = version.split()[1]  # split(TARGET.CondorVersion)[1] in the job's Requirements
    assert tuple(map(int, number.split("."))) >= (25, 12, 0)


def test_opsys_from_os_release(tmp_path):
    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="AlmaLinux 9.3 (Shamrock Pampas Cat)"\nID="almalinux"\nVERSION_ID="9.3"\n')
    attrs = sensors.opsys_attrs(release)
    assert attrs["OpSysAndVer"] == "AlmaLinux9" and attrs["OpSysMajorVer"] == 9 and attrs["OpSysVer"] == 903
    release.write_text('ID=debian\nVERSION_ID="12"\n')
    assert sensors.opsys_attrs(release)["OpSysAndVer"] == "Debian12"
    assert sensors.opsys_attrs(tmp_path / "missing")["OpSys"] == "LINUX"


def test_idle_times_come_from_device_access_times(tmp_path):
    dev = tmp_path / "dev"
    (dev / "input").mkdir(parents=True)
    (dev / "pts").mkdir()
    mouse, pty = dev / "input" / "event0", dev / "pts" / "3"
    mouse.touch()
    pty.touch()
    now = time.time()
    os.utime(mouse, (now - 500, now - 500))  # console touched 500 s ago
    os.utime(pty, (now - 20, now - 20))  # someone typed in an ssh session 20 s ago
    s = Sensors(SensorSettings(execute_dir=tmp_path, dev_dir=dev))
    assert s.idle_times(now) == (20, 500)
    (dev / "tty1").touch()
    os.utime(dev / "tty1", (now - 2, now - 2))  # a virtual console keystroke
    assert s.idle_times(now) == (2, 500)


def test_no_input_devices_means_idle_since_boot(tmp_path):
    s = Sensors(SensorSettings(execute_dir=tmp_path, dev_dir=tmp_path / "empty"))
    now = time.time()
    since_boot = int(now - psutil.boot_time())
    keyboard, console = s.idle_times(now)
    assert keyboard == console == pytest.approx(since_boot, abs=1)


def test_override_file_replaces_measurements_and_is_reread_every_sample(sensor, tmp_path):
    path = sensor.override_file
    assert path == sensors.default_override_path() and str(path).startswith(os.environ["HTC_HOME"])
    write_sensor_override({"KeyboardIdle": 0, "LoadAvg": 2.0})
    ad = sensor.sample()
    assert ad["KeyboardIdle"] == 0 and ad["LoadAvg"] == 2.0
    path.write_text("# the owner went to lunch\nkeyboardidle = 3600\nCustomFlag = true\nNote = \"away\"\n")
    ad = sensor.sample()
    assert ad["KeyboardIdle"] == 3600 and ad["CustomFlag"] is True and ad["Note"] == "away"
    assert "keyboardidle" not in ad  # matched to the measured attribute's spelling
    path.unlink()
    assert sensor.sample()["LoadAvg"] == pytest.approx(os.getloadavg()[0], abs=1.0)


def test_override_file_in_settings_and_a_malformed_line(tmp_path):
    custom = tmp_path / "owner.txt"
    s = Sensors(SensorSettings(execute_dir=tmp_path, override_file=custom))
    write_sensor_override({"ConsoleIdle": 7}, custom)
    assert s.sample()["ConsoleIdle"] == 7
    custom.write_text("KeyboardIdle 0\n")
    with pytest.raises(UsageError, match=r"owner.txt:1: expected 'Name = value'"):
        s.sample()
    assert parse_override(tmp_path / "nothing") == {}


def test_condor_load_avg_is_job_cpu_per_second_smoothed_over_a_minute(sensor):
    sensor.sample(now=1000.0, job_cpu_seconds={"1.0": 5.0})
    ad = sensor.sample(now=1060.0, job_cpu_seconds={"1.0": 65.0})  # one cpu busy for a minute
    assert ad["CondorLoadAvg"] == pytest.approx(1 - math.exp(-1), abs=1e-3)
    ad = sensor.sample(now=1120.0, job_cpu_seconds={"2.0": 100.0})  # 1.0 ended; 2.0 is new: baseline only
    assert ad["CondorLoadAvg"] == pytest.approx((1 - math.exp(-1)) * math.exp(-1), abs=1e-3)


def test_condor_load_avg_from_a_real_busy_process(sensor):
    # The child burns 0.5 s of *CPU* after the first sample, counted by its own rusage (the
    # counters psutil reads from /proc), so the figure does not depend on an idle machine:
    # when other processes hold the cores only the wall time stretches, and the expected
    # reading is computed from the CPU seconds the kernel charged and the wall time it took.
    burn = ("import resource, sys\n"
            "def cpu():\n"
            "    r = resource.getrusage(resource.RUSAGE_SELF)\n"
            "    return r.ru_utime + r.ru_stime\n"
            "print('ready', flush=True)\nsys.stdin.readline()\n"
            "t = cpu()\nwhile cpu() - t < 0.5: pass\n"
            "print('done', flush=True)\nsys.stdin.readline()")
    proc = subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        ps = psutil.Process(proc.pid)
        assert proc.stdout.readline().strip() == "ready"
        t0, cpu0 = time.time(), sum(ps.cpu_times()[:2])
        sensor.sample(now=t0, job_cpu_seconds={"job": cpu0})
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "done"  # the burn is over; the process still exists
        t1, cpu1 = time.time(), sum(ps.cpu_times()[:2])
        ad = sensor.sample(now=t1, job_cpu_seconds={"job": cpu1})
    finally:
        proc.kill()
        proc.wait()
    assert cpu1 - cpu0 >= 0.45  # the burn's CPU, as the kernel counts it (ticks of 10 ms)
    expected = (cpu1 - cpu0) / (t1 - t0) * (1 - math.exp(-(t1 - t0) / sensors.LOAD_TIME_CONSTANT))
    assert ad["CondorLoadAvg"] == pytest.approx(expected, abs=2e-3) and ad["CondorLoadAvg"] > 0


def test_benchmarks_run_once_and_are_cached():
    first = sensors.run_benchmarks(0.01)
    start = time.perf_counter()
    again = sensors.run_benchmarks(5.0)  # would take 10 s if it ran again
    assert time.perf_counter() - start < 0.5
    assert first == again and first["Mips"] >= 1 and first["KFlops"] >= 1
