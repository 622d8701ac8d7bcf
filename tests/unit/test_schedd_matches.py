"""The schedd's answer to MatchNotify (htc.daemons.schedd.matches): MAX_JOBS_RUNNING counts the
running jobs and the claims being requested, and the claims are walked only near the limit."""

from __future__ import annotations

import pytest

from htc.classad import ClassAd
from htc.classad.errors import ClassAdParseError
from htc.daemons.calls import CallDone
from htc.daemons.schedd.matches import public_ad, public_ad_text
from htc.daemons.schedd.shadow import ad_text
from htc.daemons.schedd.states import ClaimState
from htc.wire import messages as m
from tests.unit.test_schedd_core import SLOT_AD, Harness, job


def notify(h: Harness, k: int) -> m.Message:
    reqs = h.request(m.GetResourceRequests(submitter="alice@localhost", significant_attributes=("RequestMemory",)))
    return h.request(m.MatchNotify(claim_id=f"slot{k}@exec#1#aa", submitter="alice@localhost",
                                   slot_name=f"slot{k}@exec", startd_address="startd", slot_ad=SLOT_AD,
                                   autocluster_id=reqs.requests[0].autocluster_id))


def test_max_jobs_running_counts_the_claims_being_requested():
    h = Harness(max_jobs_running=2)
    h.start()
    h.submit(job(queue="queue 4"))
    assert [notify(h, k).detail for k in range(3)] == ["", "", m.MATCH_LAPSED + "MAX_JOBS_RUNNING (2) reached"]
    assert h.core.claims.counts()[ClaimState.REQUESTED] == 2


def test_the_claims_are_counted_only_when_they_could_reach_the_limit(monkeypatch):
    h = Harness(max_jobs_running=3)
    h.start()
    h.submit(job(queue="queue 4"))
    counted = []
    counts = h.core.claims.counts
    monkeypatch.setattr(h.core.claims, "counts", lambda: counted.append(len(h.core.claims)) or counts())
    assert [notify(h, k).detail for k in range(4)] == ["", "", "", m.MATCH_LAPSED + "MAX_JOBS_RUNNING (3) reached"]
    assert counted == [3]  # (the first three matches found 0, 1 and 2 claims: below 3 without a walk)


def test_public_ad_is_the_jobs_items_in_order_without_its_claim_id():
    h = Harness()
    h.start()
    cluster = h.submit(job("request_memory = 512\n+Note = \"$(Process)\"", queue="queue 2"))
    h.queue.set_attributes((cluster, 1), {"ClaimId": '"secret"', "RequestMemory": "1024", "Extra": "7"})
    for proc in (0, 1):
        stored = h.queue.get_job((cluster, proc))
        expected = {k: v for k, v in stored.items() if k != "ClaimId"}
        assert list(public_ad(stored).items()) == list(expected.items())
    assert "ClaimId" not in public_ad(h.queue.get_job((cluster, 1))) and "ClaimId" in h.queue.get_job((cluster, 1))
    assert public_ad({"ClaimId": "x", "A": "1"}) == {"A": "1"}


def test_public_ad_text_is_the_public_ads_text_whatever_the_jobs_own_attributes():
    h = Harness()
    h.start()
    cluster = h.submit(job("request_memory = 512\n+Note = \"$(Process)\"", queue="queue 6"))
    h.queue.set_attributes((cluster, 1), {"ClaimId": '"secret"'})           # ClaimId of its own
    h.queue.set_attributes((cluster, 2), {"RequestMemory": "1024"})         # over a cluster attribute
    h.queue.set_attributes((cluster, 3), {"Extra": "7", "extra2": '"y"'})   # new names
    h.queue.set_attributes((cluster, 4), {"requestmemory": "2048"})         # another case of a cluster's
    h.queue.set_attributes((cluster, 5), {"JobPrio": "3"})                  # a hot one
    for proc in range(6):
        for _ in range(2):  # (the second time from the cluster's kept text)
            stored = h.queue.get_job((cluster, proc))
            assert public_ad_text(stored) == ad_text(public_ad(stored))
    assert "secret" not in public_ad_text(h.queue.get_job((cluster, 1)))
    assert "Extra = 7" in public_ad_text(h.queue.get_job((cluster, 3)))
    h.queue.edit_cluster(cluster, "Note", '"edited"')  # a new cluster ad: its text is printed afresh
    assert 'Note = "edited"' in public_ad_text(h.queue.get_job((cluster, 0)))
    cluster = h.submit(job("+ClaimId = \"c\"", queue="queue 1"))  # a cluster's ClaimId is left out too
    stored = h.queue.get_job((cluster, 0))
    assert public_ad_text(stored) == ad_text(public_ad(stored)) and "ClaimId" not in public_ad_text(stored)
    assert public_ad_text({"ClaimId": "x", "A": "1", "B": 2}) == "[ A = 1; B = 2 ]"


def _offer(h: Harness, jobs: int) -> int:
    """Submit ``jobs`` jobs and ask for alice's work once; the autocluster id."""
    h.start()
    h.submit(job(queue=f"queue {jobs}"))
    reqs = h.request(m.GetResourceRequests(submitter="alice@localhost", significant_attributes=("RequestMemory",)))
    [request] = reqs.requests
    return request.autocluster_id


def _matched(h: Harness, ac: int, k: int) -> tuple[int, int]:
    """One MatchNotify for autocluster ``ac`` (no new request first); the job it reserved."""
    before = len(h.actions)
    assert h.request(m.MatchNotify(claim_id=f"slot{k}@exec#1#aa", submitter="alice@localhost",
                                   slot_name=f"slot{k}@exec", startd_address="startd", slot_ad=SLOT_AD,
                                   autocluster_id=ac)).detail == ""
    [call] = h.calls(m.RequestClaim, h.actions[before:])
    return h.core.claims[call.cookie[1]].job


def test_a_cycles_matches_look_at_each_offered_job_a_bounded_number_of_times():
    # Each match reserves the first offered job; the next match must not walk all the reserved
    # ones again (a cycle of N matches was N^2/2 steps).
    h = Harness()
    n = 60
    ac = _offer(h, n)
    assert [_matched(h, ac, k) for k in range(n)] == [(1, p) for p in range(n)]
    [offered] = h.core.matches.offers["alice@localhost"].values()
    assert offered.steps <= 2 * n  # each job: found once, set aside once (was 1 + 2 + ... + n)


def test_a_refused_claims_job_is_offered_again_in_its_place():
    h = Harness()
    ac = _offer(h, 5)
    assert [_matched(h, ac, k) for k in range(3)] == [(1, 0), (1, 1), (1, 2)]
    calls = h.calls(m.RequestClaim)
    for k in (1, 0):  # the claims for jobs 1.1 then 1.0 refused: both idle again, 1.0 first in order
        call = calls[k]
        h.feed(CallDone(call.to, call.msg, m.ClaimReply(claim_id=call.msg.claim_id, accepted=False,
                                                        reason="START is false"), call.cookie))
    assert h.core.reserved == {(1, 2)}
    assert [_matched(h, ac, k) for k in range(3, 6)] == [(1, 0), (1, 1), (1, 3)]
    # a refused job reserved again is set aside again; the rest follow in order
    call = h.calls(m.RequestClaim)[-2]  # the claim for job 1.1
    h.feed(CallDone(call.to, call.msg, m.ClaimReply(claim_id=call.msg.claim_id, accepted=False,
                                                    reason="START is false"), call.cookie))
    assert [_matched(h, ac, k) for k in range(6, 8)] == [(1, 1), (1, 4)]


def _pslot(cpus: int, memory: int, disk: int, partitionable: str = "true", slot_type: str = "Partitionable",
           name: str = "slot1@exec", load: str = "3.900000000000000E-01") -> str:
    """A slot's ad as the negotiator prints it into MatchNotify (one attribute a line)."""
    return (f'[\n    Name = "{name}"; \n    Cpus = {cpus}; \n    Memory = {memory}; \n    Disk = {disk}; \n'
            f'    Arch = "X86_64"; \n    LoadAvg = {load}; \n    PartitionableSlot = {partitionable}; \n'
            f'    SlotType = "{slot_type}"; \n    Start = true; \n    Requirements = START\n]')


def _notify_slot(h: Harness, ac: int, text: str) -> m.Message:
    return h.request(m.MatchNotify(claim_id="slot1@exec#1#aa", submitter="alice@localhost", slot_name="slot1@exec",
                                   startd_address="startd", slot_ad=text, autocluster_id=ac))


def test_a_partitionable_slots_carves_are_parsed_once_and_each_claim_reads_its_own_ad(monkeypatch):
    import htc.daemons.schedd.matches as matches

    parsed = []

    class Counted(ClassAd):
        def __init__(self, text):
            parsed.append(text)
            super().__init__(text)

    monkeypatch.setattr(matches, "ClassAd", Counted)
    h = Harness()
    ac = _offer(h, 6)
    sizes = [(8, 16384, 81000000), (7, 14976, 66761280), (6, 13568, 52522560)]
    assert [_notify_slot(h, ac, _pslot(*size)).detail for size in sizes] == ["", "", ""]
    assert parsed == [_pslot(*sizes[0])]  # the others are the same text but for their sizes
    claims = sorted(h.core.claims.values(), key=lambda claim: claim.job)
    assert [claim.id for claim in claims] == [f"slot1@exec#1#aa#carve{k}" for k in (1, 2, 3)]
    assert [tuple(claim.slot_values.values()) for claim in claims] == sizes  # each its own ad, when read
    assert [claim.slot_ad["Disk"] for claim in claims] == [disk for _, _, disk in sizes]
    assert [claim.weight for claim in claims] == [8.0, 7.0, 6.0]
    # another slot of the kind (other name, load) is not parsed either
    assert _notify_slot(h, ac, _pslot(4, 64, 5, name="slot1@other", load="0.5")).detail == ""
    assert len(parsed) == 1 and h.core.claims["slot1@exec#1#aa#carve4"].slot_values == {"Cpus": 4, "Memory": 64, "Disk": 5}
    # a text that differs in another way is read afresh: a static slot's claim is its claim id
    static = _pslot(5, 1024, 1000, partitionable="false", slot_type="Static")
    assert _notify_slot(h, ac, static).detail == "" and parsed[-1] == static
    assert "slot1@exec#1#aa" in h.core.claims


def test_the_kind_of_a_slot_ad_text_keeps_slottype_and_what_is_not_plainly_a_literal():
    from htc.daemons.schedd.matches import _kind_key

    same = _kind_key(_pslot(1, 2, 3))
    assert _kind_key(_pslot(8, 16384, 81000000, name="slot7@x", load="12.5")) == same
    assert _kind_key(_pslot(1, 2, 3, partitionable="false")) != same
    assert _kind_key(_pslot(1, 2, 3, partitionable="false", slot_type="Static")) != \
        _kind_key(_pslot(1, 2, 3, partitionable="false"))  # SlotType is never left out
    # an escape (or a comment, or a line with an odd number of quotes): only numbers are left out
    escaped = _pslot(1, 2, 3).replace("X86_64", "X86\\_64")
    assert _kind_key(escaped) == _kind_key(_pslot(5, 6, 7).replace("X86_64", "X86\\_64"))
    assert _kind_key(escaped) != _kind_key(escaped.replace("slot1@exec", "slot2@exec"))
    # a string over two lines: the second line's quotes end a string and start one, around code
    text, yes, no = '[\n    A = "x\n    B = "; PartitionableSlot = true; C = ";\n    D = "; Cpus = 1\n]', "true", "false"
    assert _kind_key(text) != _kind_key(text.replace(yes, no))
    assert ClassAd(text)["PartitionableSlot"] is True and ClassAd(text.replace(yes, no))["PartitionableSlot"] is False


def test_a_slot_ad_that_does_not_parse_fails_as_before_even_after_one_like_it():
    h = Harness()
    ac = _offer(h, 2)
    assert _notify_slot(h, ac, _pslot(8, 16384, 1000)).detail == ""
    broken = _pslot(8, 16384, 1000).replace("Disk = 1000", "Disk = 1000 +")
    with pytest.raises(ClassAdParseError):
        ClassAd(broken)
    reply = _notify_slot(h, ac, broken)  # parsed, not taken for the first one's like
    assert isinstance(reply, m.ErrorReply) and reply.code == "bad_request" and len(h.core.claims) == 1


def test_ad_text_prints_texts_and_other_values_alike():
    assert ad_text({"A": "1", "B": '"x"'}) == '[ A = 1; B = "x" ]'
    assert ad_text({"A": "1", "B": 2, "C": True}) == "[ A = 1; B = 2; C = True ]"  # (not all texts)
    assert ad_text({}) == "[  ]"


def test_the_literal_lines_possessive_regexes_split_as_backtracking_ones_at_line_starts():
    import random
    import re

    from htc.daemons.schedd.matches import _LITERAL_LINE, _NUMBER_LINE, _plain

    number = r"(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,20}(?:[eE][+-]?[0-9]{1,3})?)?"
    number_line = re.compile(r"^([ \t]*[A-Za-z_][A-Za-z0-9_]* = )(" + number + r")(?=;)", re.M)
    literal_line = re.compile(r"^([ \t]*(?!(?i:slottype) =)[A-Za-z_][A-Za-z0-9_]* = )("
                              + number + r'|"[ !#-\[\]-~]*")(?=;)', re.M)
    rng = random.Random(19)
    indents, names, equals, ends = ["", "    ", "\t", " x"], ["Cpus", "_a9", "SlotType", "slottype", "Memory", "9a", "A b"], \
        [" = ", " = ", " = ", "=", " =  "], [";", "; ", ";", "", " ;", ";\n"]
    values = ["0", "1", "9", "0" * 17, "5" * 18, "7" * 19, ".", ".5", "." + "3" * 20, "." + "3" * 21, "e", "E+",
              "e-", "e7", "e123", "e1234", '"', '"a b"', '"\\"', "x", " ", "-", "true"]
    split = 0
    for _ in range(20000):
        text = "\n".join(rng.choice(indents) + rng.choice(names) + rng.choice(equals)
                         + "".join(rng.choice(values) for _ in range(rng.randint(1, 2))) + rng.choice(ends)
                         for _ in range(rng.randint(1, 6)))
        for new, old in ((_NUMBER_LINE, number_line), (_LITERAL_LINE, literal_line)):
            assert _same_lines(new.split("\n" + text), old.split(text)), text
        split += len(_LITERAL_LINE.split("\n" + text)) > 1
        unpaired = '"' in re.sub(r'"[^"\n]*"', "", text)  # (what is left of a line's quotes once paired)
        assert _plain(text) == ("\\" not in text and not unpaired), text
    assert split > 1000  # (texts that have literal lines: the regexes are compared where they match)
    text = _pslot(8, 16384, 81000000)
    assert _same_lines(_LITERAL_LINE.split("\n" + text), literal_line.split(text))
    assert len(_LITERAL_LINE.split("\n" + text)) > 10


def _same_lines(new: list[str], old: list[str]) -> bool:
    """Whether ``new`` (a split of the text after a line end, by a regex that matches that of
    each literal line) and ``old`` (of the text, the regex at ``^``) split the same lines."""
    return (new[1::3] == old[1::3] and new[2::3] == old[2::3]
            and [text + "\n" for text in new[:-1:3]] == ["\n" + old[0], *old[3:-1:3]] and new[-1] == old[-1]
            if len(new) > 1 else new == ["\n" + old[0]] and len(old) == 1)
