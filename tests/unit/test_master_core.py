"""The master's core with a fake clock: no event loop, no processes."""

from __future__ import annotations

import itertools
import logging
import signal

import pytest

from htc.daemons import core as c
from htc.daemons.master.core import Master
from htc.daemons.master.events import ChildExited, ChildStarted, Notify, SignalChild, Spawn, SpawnFailed
from htc.daemons.master.settings import MasterSettings
from htc.daemons.master.states import DAEMON_MACHINE, DState, Ev
from htc.wire import messages as m

SIGKILLED = -signal.SIGKILL


class Harness:
    """Feeds a Master core and answers Spawn the way the service does (at once, with a pid)."""

    def __init__(self, **settings):
        settings.setdefault("collector", None)
        settings.setdefault("pid", 1)
        self.core = Master(MasterSettings(**settings))
        self.now = 1000.0
        self.pids = itertools.count(100)
        self.spawn_fails = 0
        self.actions: list[c.Action] = []

    def feed(self, event: c.Event) -> list[c.Action]:
        out = []
        queue = [event]
        while queue:
            actions = self.core.handle(queue.pop(0), self.now)
            out.extend(actions)
            for a in actions:
                if isinstance(a, Spawn):
                    if self.spawn_fails:
                        self.spawn_fails -= 1
                        queue.append(SpawnFailed(a.daemon, "no such file"))
                    else:
                        queue.append(ChildStarted(a.daemon, next(self.pids)))
        self.actions.extend(out)
        return out

    def at(self, when: float) -> list[c.Action]:
        """Advance the clock to ``when`` and deliver the Tick the service would."""
        self.now = when
        return self.feed(c.Tick())

    def child(self, name="COLLECTOR"):
        return self.core.children[name]

    def crash(self, name="COLLECTOR", returncode=SIGKILLED) -> list[c.Action]:
        return self.feed(ChildExited(name, self.child(name).pid, returncode))

    def request(self, msg) -> list[c.Action]:
        return self.feed(c.Received(msg=msg, conn_id=7))


def logs(actions, level=None):
    return [a.text for a in actions if isinstance(a, c.Log) and (level is None or a.level == level)]


def of(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def test_start_spawns_every_listed_daemon_and_ignores_unknown_ones():
    h = Harness(daemon_list=("MASTER", "COLLECTOR", "schedd", "KBDD"))
    out = h.feed(c.Started())
    assert [s.daemon for s in of(out, Spawn)] == ["COLLECTOR", "SCHEDD"]
    assert h.child("COLLECTOR").state is DState.RUNNING
    assert h.child("SCHEDD").pid == 101
    assert any("KBDD, which htc does not have" in t for t in logs(out, logging.WARNING))


def test_backoff_follows_htcondor_next_start_up_to_the_ceiling():
    h = Harness(max_restarts=0)
    h.feed(c.Started())
    delays = []
    for _ in range(14):
        h.now += 1  # crashes right after starting: never recovers
        h.crash()
        child = h.child()
        assert child.state is DState.BACKOFF
        delays.append(child.restart_at - h.now)
        assert h.core.next_deadline() == child.restart_at
        h.at(child.restart_at - 0.001)
        assert h.child().state is DState.BACKOFF, "must not restart before the backoff ends"
        out = h.at(child.restart_at)
        assert of(out, Spawn) and h.child().state is DState.RUNNING
    assert delays == [10, 11, 13, 17, 25, 41, 73, 137, 265, 521, 1033, 2057, 3600, 3600]


def test_backoff_knobs_are_used():
    h = Harness(backoff_constant=1, backoff_factor=3, backoff_ceiling=20, max_restarts=0)
    h.feed(c.Started())
    delays = []
    for _ in range(5):
        h.crash()
        delays.append(h.child().restart_at - h.now)
        h.at(h.child().restart_at)
    assert delays == [2, 4, 10, 20, 20]


def test_recovery_resets_the_backoff_after_recover_factor_seconds():
    h = Harness()
    h.feed(c.Started())
    for _ in range(3):
        h.crash()
        h.at(h.child().restart_at)
    h.now += 299
    h.crash()
    assert h.child().restart_at - h.now == 17, "299 s is not long enough to count as recovered"
    h.at(h.child().restart_at)
    h.now += 300
    out = h.crash()
    assert h.child().restart_at - h.now == 10
    assert "restart 1 of 10" in logs(out)[0]


def test_gives_up_after_max_restarts_and_tells_the_admin():
    h = Harness(max_restarts=3, admin="root@localhost", mail="/usr/bin/mail", name="master@node1")
    h.feed(c.Started())
    for _ in range(3):
        out = h.crash()
        assert "died due to signal 9 (SIGKILL); restarting it in" in logs(out)[0]
        h.at(h.child().restart_at)
    out = h.crash(returncode=3)
    assert h.child().state is DState.GAVE_UP
    assert h.core.next_deadline() is None
    [error] = logs(out, logging.ERROR)
    assert "giving up on COLLECTOR" in error and "exited with status 3 after 3 restarts" in error
    assert "htc on -daemon collector" in error
    [note] = of(out, Notify)
    assert note.argv == ("/usr/bin/mail", "-s", "htc master on master@node1: giving up on COLLECTOR",
                         "root@localhost")
    assert "MASTER_MAX_RESTARTS = 3" in note.body
    # An administrator's 'on' starts it again with a clean count.
    out = h.request(m.DaemonsOn(daemons=("collector",)))
    assert of(out, Spawn) and h.child().state is DState.RUNNING and h.child().restarts == 0
    assert of(out, c.Reply)[0].msg == m.Ack(detail="COLLECTOR: on")


def test_no_mail_without_condor_admin():
    h = Harness(max_restarts=1)
    h.feed(c.Started())
    h.crash()
    h.at(h.child().restart_at)
    out = h.crash()
    assert h.child().state is DState.GAVE_UP and logs(out, logging.ERROR) and not of(out, Notify)


def test_spawn_failures_back_off_and_give_up_too():
    h = Harness(max_restarts=2)
    h.spawn_fails = 10
    h.feed(c.Started())
    assert h.child().state is DState.BACKOFF
    h.at(h.child().restart_at)
    h.at(h.child().restart_at)
    assert h.child().state is DState.GAVE_UP
    assert "could not be started: no such file" in logs(h.actions, logging.ERROR)[0]


def test_exit_status_4_means_do_not_restart():
    h = Harness()
    h.feed(c.Started())
    out = h.crash(returncode=4)
    assert h.child().state is DState.OFF and h.core.next_deadline() is None
    assert "asked not to be restarted" in logs(out)[0]


@pytest.mark.parametrize("how, signum, grace", [("graceful", signal.SIGTERM, 1800), ("fast", signal.SIGQUIT, 300)])
def test_off_signals_then_kills_after_the_grace(how, signum, grace):
    h = Harness()
    h.feed(c.Started())
    pid = h.child().pid
    out = h.request(m.DaemonsOff(daemons=("COLLECTOR",), how=how))
    assert of(out, SignalChild) == [SignalChild("COLLECTOR", pid, signum)]
    assert h.child().state is DState.STOPPING
    assert h.core.next_deadline() == h.now + grace
    out = h.at(h.now + grace)
    assert of(out, SignalChild) == [SignalChild("COLLECTOR", pid, signal.SIGKILL)]
    assert h.core.next_deadline() is None
    h.feed(ChildExited("COLLECTOR", pid, SIGKILLED))
    assert h.child().state is DState.OFF and h.child().pid is None


def test_fast_off_hurries_a_graceful_one():
    h = Harness()
    h.feed(c.Started())
    h.request(m.DaemonsOff())
    out = h.request(m.DaemonsOff(how="fast"))
    assert of(out, SignalChild)[0].signum == signal.SIGQUIT
    assert h.core.next_deadline() == h.now + 300


def test_restart_by_command_starts_at_once_with_a_clean_count():
    h = Harness()
    h.feed(c.Started())
    h.crash()
    h.at(h.child().restart_at)
    assert h.child().restarts == 1
    pid = h.child().pid
    out = h.request(m.DaemonsRestart())
    assert of(out, SignalChild) == [SignalChild("COLLECTOR", pid, signal.SIGTERM)]
    out = h.feed(ChildExited("COLLECTOR", pid, 0))
    assert of(out, Spawn) and h.child().state is DState.RUNNING and h.child().restarts == 0


def test_on_during_backoff_starts_now_and_off_cancels_the_restart():
    h = Harness()
    h.feed(c.Started())
    h.crash()
    h.request(m.DaemonsOff(daemons=("COLLECTOR",)))
    assert h.child().state is DState.OFF and h.core.next_deadline() is None
    h.request(m.DaemonsOn())
    assert h.child().state is DState.RUNNING


def test_shutdown_stops_everything_then_exits():
    h = Harness(daemon_list=("COLLECTOR", "SCHEDD"), collector="collector", name="master@n1")
    h.feed(c.Started())
    h.crash("SCHEDD")  # one in backoff: simply turned off
    out = h.feed(c.StopRequested())
    assert [a.daemon for a in of(out, SignalChild)] == ["COLLECTOR"]
    assert not of(out, c.Exit)
    refused = h.request(m.DaemonsOn())
    assert of(refused, c.Reply)[0].msg.code == "unavailable"
    out = h.feed(ChildExited("COLLECTOR", h.child().pid, 0))
    assert not of(out, c.Send), "its own collector is gone: nothing to withdraw the Master ad from"
    assert of(out, c.Exit) == [c.Exit(0)]
    assert h.core.next_deadline() is None


def test_shutdown_withdraws_the_master_ad_from_a_remote_collector():
    h = Harness(daemon_list=("SCHEDD",), collector="collector", name="master@n1")
    h.feed(c.Started())
    h.feed(c.StopRequested(fast=True))
    out = h.feed(ChildExited("SCHEDD", h.child("SCHEDD").pid, 0))
    assert of(out, c.Send)[0].msg == m.InvalidateAd(ad_type=m.AdType.Master, name="master@n1")
    assert of(out, c.Exit) == [c.Exit(0)]


def test_off_including_master_is_a_shutdown():
    h = Harness()
    h.feed(c.Started())
    out = h.request(m.DaemonsOff(include_master=True, how="fast"))
    assert of(out, SignalChild)[0].signum == signal.SIGQUIT
    assert h.core.shutting_down


def test_requests_naming_unknown_daemons_are_refused():
    h = Harness()
    h.feed(c.Started())
    [reply] = of(h.request(m.DaemonsOff(daemons=("SCHEDD",))), c.Reply)
    assert reply.msg.code == "bad_request"
    assert "runs COLLECTOR; it has no SCHEDD" in reply.msg.message
    [reply] = of(h.request(m.QueryAds(ad_type=m.AdType.Any)), c.Reply)
    assert reply.msg.code == "unknown_request"


def test_query_master_reports_states():
    h = Harness(daemon_list=("COLLECTOR", "SCHEDD"))
    h.feed(c.Started())
    h.crash("SCHEDD")
    [reply] = of(h.request(m.QueryMaster()), c.Reply)
    states = {d.name: (d.state, d.pid, d.restarts) for d in reply.msg.daemons}
    assert states == {"COLLECTOR": ("Running", 100, 0), "SCHEDD": ("Backoff", None, 1)}
    assert reply.msg.daemons[1].next_start == h.now + 10


def test_reconfig_adopts_the_new_daemon_list_and_hups_the_rest():
    h = Harness(daemon_list=("COLLECTOR", "SCHEDD"))
    h.feed(c.Started())
    schedd_pid = h.child("SCHEDD").pid
    out = h.feed(c.Reconfigured(MasterSettings(daemon_list=("COLLECTOR", "NEGOTIATOR"), collector=None)))
    assert SignalChild("COLLECTOR", 100, signal.SIGHUP) in out
    assert SignalChild("SCHEDD", schedd_pid, signal.SIGTERM) in out
    assert [s.daemon for s in of(out, Spawn)] == ["NEGOTIATOR"]
    h.feed(ChildExited("SCHEDD", schedd_pid, 0))
    assert set(h.core.children) == {"COLLECTOR", "NEGOTIATOR"}
    assert h.core.settings.pid == 1, "the master's pid survives a reconfig"


def test_an_impossible_step_names_daemon_state_and_event():
    h = Harness()
    h.feed(c.Started())
    with pytest.raises(c.IllegalTransition, match="master: COLLECTOR: no transition from state RUNNING on event SPAWNED"):
        h.feed(ChildStarted("COLLECTOR", 555))


def test_unknown_pids_are_logged_not_obeyed():
    h = Harness()
    h.feed(c.Started())
    out = h.feed(ChildExited("COLLECTOR", 4242, 0))
    assert h.child().state is DState.RUNNING and "unknown process 4242" in logs(out)[0]


def test_every_state_can_be_left_and_off_is_always_accepted():
    states = {s for s, _ in DAEMON_MACHINE} | {t for t, _ in DAEMON_MACHINE.values()}
    assert states == set(DState)
    for state in set(DState) - {DState.STARTING}:
        assert (state, Ev.OFF) in DAEMON_MACHINE, f"{state} must accept OFF"


def test_master_ad_is_sent_and_retried_soon_when_the_collector_is_not_up():
    h = Harness(collector="collector", name="master@n1", update_interval=300)
    h.feed(c.Started())
    assert h.core.next_deadline() == h.now
    [send] = of(h.at(h.now), c.Send)
    assert send.to == "collector" and send.msg.ad_type is m.AdType.Master and send.msg.name == "master@n1"
    from htc.classad import ClassAd

    ad = ClassAd(send.msg.ad_text)
    assert (ad["MyType"], ad["Machine"], ad["Collector_State"]) == ("DaemonMaster", "n1", "Running")
    assert ad["DaemonStartTime"] == int(h.now)  # condor_status -master's Uptime
    assert h.core.next_deadline() == h.now + 300
    h.feed(c.SendFailed("collector", send.msg, "no collector daemon is listening"))
    assert h.core.next_deadline() == h.now + 5
