"""Two startds on one host of a personal pool: STARTD_NAME sets the second apart, as in HTCondor
(``slot1@host`` and ``slot1@second@host``), both are advertised, and jobs run on both."""

from __future__ import annotations

from htcondor2 import JobEventType as T

from htc.config.hostname import full_hostname
from poolutil import Pool, wait_for

CONFIG = ("STARTD2.STARTD_NAME = second\n"
          "STARTD2.EXECUTE = $(LOCAL_DIR)/execute2\n"
          "STARTD2.SENSOR_OVERRIDE_FILE = $(LOCAL_DIR)/sensor_override2\n")


def test_two_named_startds_on_one_host_both_run_jobs():
    host = full_hostname()
    pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD", config=CONFIG, NUM_CPUS="1")
    try:
        pool.start()
        pool.spawn("startd", "startd2", local_name="STARTD2")
        names = {f"slot1@{host}", f"slot1@second@{host}"}
        wait_for(lambda: {str(s["Name"]) for s in pool.slots()} == names, 60, what=f"both startds' slots {names}")
        assert {str(s["Machine"]) for s in pool.slots()} == {host}
        assert {str(s["MyAddress"]) for s in pool.slots()} == {"startd", "startd2"}

        log = pool.work / "both.log"
        # Each job holds its one-cpu slot long enough that the other has to go to the other startd.
        pool.submit(f"executable = /bin/sleep\narguments = 3\nlog = {log}\nqueue 4\n")
        events = pool.log_events(log, until=lambda evs: sum(e.type == T.JOB_TERMINATED for e in evs) == 4,
                                 timeout=120)
        used = {str(e["SlotName"]) for e in events if e.type == T.EXECUTE}  # dynamic slots: slot1_N@...
        assert {name.split("@", 1)[1] for name in used} == {host, f"second@{host}"}, used
        assert all(e["ReturnValue"] == 0 for e in events if e.type == T.JOB_TERMINATED)
    finally:
        pool.stop()
