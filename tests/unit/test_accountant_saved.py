"""What the core hands its service to persist (``Accountant.saved``, ``SaveAccountant``):
the accountant as it was, cheap to take, its runs of carves named only when written; the
file's text stays what ``Accountant.snapshot`` wrote before."""

from __future__ import annotations

import json
import math

from htc.classad import ClassAd
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.core import Negotiator
from htc.daemons.negotiator.events import PoolAds, RequestsReceived, SaveAccountant, Wakeup
from htc.daemons.negotiator.service import save_accountant
from htc.daemons.negotiator.updown import UpDownSettings
from tests.negotiator_cycles import make_job, make_slot

#: the file's text for :func:`_a_cycle_with_runs`, as written before the core handed over
#: ``Accountant.saved`` (the snapshot built in the core, every carve named)
_TEXT = (
    '{"customers": {"a@x": {"begin_usage_time": 1.0, "factor": 1000.0, "factor_is_set": false, '
    '"last_usage_time": 1.0, "priority": 0.5000120337569474, "resources_used": 4, '
    '"weighted_accumulated_usage": 2.0, "weighted_resources_used": 7.0, '
    '"weighted_uncharged_time": 0.0}, "b@x": {"begin_usage_time": 1.0, "factor": 1000.0, '
    '"factor_is_set": false, "last_usage_time": 1.0, "priority": 0.5, "resources_used": 1, '
    '"weighted_accumulated_usage": 0.5, "weighted_resources_used": 2.0, '
    '"weighted_uncharged_time": 0.0}, "c@x": {"begin_usage_time": null, "factor": 5.0, '
    '"factor_is_set": true, "last_usage_time": null, "priority": 0.5, "resources_used": 2, '
    '"weighted_accumulated_usage": 0.0, "weighted_resources_used": 1.0, '
    '"weighted_uncharged_time": 0.0}}, "last_update_time": 1.0, "matches": {"slot1@n#carve0": '
    '{"customer": "a@x", "start_time": 1.0, "weight": 1.0}, "slot1@n#carve1": {"customer": '
    '"a@x", "start_time": 1.0, "weight": 1.0}, "slot1@n#carve2": {"customer": "a@x", '
    '"start_time": 1.0, "weight": 1.0}, "slot2@n#carve0": {"customer": "c@x", "start_time": '
    '1.0, "weight": 0.5}, "slot2@n#carve1": {"customer": "c@x", "start_time": 1.0, "weight": '
    '0.5}, "slot9@n_1": {"customer": "a@x", "start_time": 0.5, "weight": 4.0}, "static2@n": '
    '{"customer": "b@x", "start_time": 1.0, "weight": 2.0}}, "updown": {"index": {"a@x": 4.0, '
    '"c@x": -1.0}, "last_update_time": 60.0}, "version": 1}'
)


def _a_cycle_with_runs() -> Accountant:
    """Named records (one removed), two runs of carves and a static slot between them, a
    factor set, an Up-Down index."""
    acct = Accountant(now=0.0)
    acct.check_matches({"static1@n": ("b@x", 1.0), "slot9@n_1": ("a@x", 4.0)}, 0.5)
    acct.update_priorities(1.0)
    acct.updown.update(0.0, {}, {}, UpDownSettings())
    acct.updown.update(60.0, {"a@x": 4.0}, {"c@x": 1}, UpDownSettings())
    acct.add_carves("a@x", "slot1@n", 0, 3, 1.0, 1.0)
    acct.add_match("b@x", "static2@n", 2.0, 1.0)
    acct.add_carves("c@x", "slot2@n", 0, 2, 0.5, 1.0)
    acct.remove_match("static1@n", 1.0)
    acct.set_priority_factor("c@x", 5.0)
    return acct


def test_the_file_has_the_same_bytes(tmp_path):
    acct = _a_cycle_with_runs()
    assert len(acct._records._tail) == 3  # (the runs are still runs: nothing named them)
    saved = acct.saved()
    assert len(acct._records._tail) == 3  # (taking it named nothing either)
    assert json.dumps(saved.data(), sort_keys=True) == _TEXT
    assert json.dumps(acct.snapshot(), sort_keys=True) == _TEXT
    assert saved.text() == _TEXT
    path = tmp_path / "Accountantnew.log"
    save_accountant(path, SaveAccountant(saved).state)  # (as the service writes it)
    assert path.read_text(encoding="utf-8") == _TEXT
    save_accountant(path, saved.data())
    assert path.read_text(encoding="utf-8") == _TEXT
    assert json.dumps(Accountant.restore(json.loads(_TEXT)).snapshot(), sort_keys=True) == _TEXT


def test_what_was_saved_does_not_follow_the_accountant():
    acct = _a_cycle_with_runs()
    saved = acct.saved()
    acct.add_carves("a@x", "slot1@n", 3, 2, 1.0, 2.0)          # a run more
    acct.add_match("b@x", "slot2@n#carve1", 1.0, 2.0)           # the runs named, one moved
    acct.set_priority_factor("a@x", 7.0)
    acct.updown.update(120.0, {}, {"a@x": 1}, UpDownSettings())
    acct.update_priorities(3.0)
    assert json.dumps(acct.snapshot(), sort_keys=True) != _TEXT
    acct.check_matches({"slot9@n_1": ("a@x", 4.0)}, 4.0)       # the next cycle's reconciliation
    acct.remove_match("slot9@n_1", 5.0)
    assert json.dumps(saved.data(), sort_keys=True) == _TEXT


def _cycle(neg: Negotiator, cycle: int, now: float, slots, cpus: int) -> SaveAccountant:
    subs = (ClassAd({"Name": "alice@x", "ScheddName": "s1", "MyAddress": "<s1>",
                     "IdleJobs": 4, "RunningJobs": 0}),)
    neg.handle(Wakeup(), now)
    (ask,) = neg.handle(PoolAds(cycle, slots, subs), now)
    req = ResourceRequest(7, make_job(RequestCpus=cpus), 4, ("3.0", "3.1", "3.2", "3.3"))
    actions = neg.handle(RequestsReceived(cycle, "s1", "alice@x", (req,)), now)
    (save,) = [a for a in actions if isinstance(a, SaveAccountant)]
    return save


def test_a_cycle_saves_its_carves_and_the_next_cycle_leaves_that_alone():
    neg = Negotiator(now=0.0)
    pslot = make_slot("slot1@big", Cpus=8, Memory=32768, PartitionableSlot=True)
    save = _cycle(neg, 1, 0.0, (pslot,), 2)
    first = json.dumps(save.snapshot, sort_keys=True)
    assert first == json.dumps(neg.accountant.snapshot(), sort_keys=True)
    assert list(save.snapshot["matches"]) == [f"slot1@big#carve{k}" for k in range(4)]
    later = _cycle(neg, 2, neg.next_deadline(), (make_slot("slot2@n"),), 1)
    assert "slot1@big#carve0" not in later.snapshot["matches"]  # (released: not reported)
    assert json.dumps(save.snapshot, sort_keys=True) == first


def test_the_text_writes_any_name_and_number_as_json_does():
    acct = Accountant(now=0.0)
    acct.add_carves('dé"j\\à\n@x', 'slot\t"1"@ü', 0, 3, 1, 1.0)
    acct.add_match("b@x", "static\u2028@n", math.nan, 2.0)
    acct.add_carves("c@x", "s@n", 0, 2, -0.0, 0)
    acct.add_match("c@x", "\x7f@n", math.inf, -1.5)
    acct.add_match("a@x", "zz@n", 1e300, 2.5)
    acct.updown.update(0.0, {}, {}, UpDownSettings())
    acct.updown.update(60.0, {"dé@x": 2.0}, {}, UpDownSettings())
    saved = acct.saved()
    assert saved.text() == json.dumps(acct.snapshot(), sort_keys=True)
    assert saved.text() == json.dumps(saved.data(), sort_keys=True)
    assert Accountant().saved().text() == json.dumps(Accountant().snapshot(), sort_keys=True)
