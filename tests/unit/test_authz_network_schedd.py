"""The schedd and the startd's run-as rule with identities from other hosts.

``alice@pool`` submitting over the network gets ``Owner = "alice"``, ``User = "alice@pool"``
whatever the ad claims; only ``alice@pool`` (not ``alice@other``, not ``bob@pool``) acts on the
job; an unauthenticated peer cannot submit; an execute host runs the job as ``alice`` only when
its UID_DOMAIN is the job's domain and it has the account.
"""

from __future__ import annotations

import pwd

import pytest

from local_users import ALICE, local_user, needs_users

from htc.daemons import core as c
from htc.daemons.run_as import RunAsPolicy, choose_user, trusted_owner
from htc.daemons.schedd.core import Schedd, ScheddSettings
from htc.jobqueue import JobQueue
from htc.wire import messages as m
from htc.wire.transport import PeerInfo

USERS = {0: "root"}


def net(identity: str | None, host: str = "10.200.0.5", *, admin: bool = False) -> PeerInfo:
    user = identity.partition("@")[0] if identity else None
    return PeerInfo(host=host, identity=identity, authenticated_by="token" if identity else "", user=user,
                    administrator=admin)


def schedd(uid_domain: str = "pool") -> Schedd:
    core = Schedd(ScheddSettings(min_interval=1.0, interval=300.0, uid_domain=uid_domain),
                  JobQueue.open(":memory:"), user_of_uid=USERS.get, own_uid=0)
    core.handle(c.Started(), 1000.0)
    return core


def reply(out):
    [r] = [a.msg for a in out if isinstance(a, c.Reply)]
    return r


def submit(core, peer, ad='[ Cmd = "/bin/true" ]', conn=1):
    return reply(core.handle(c.Received(m.Submit(cluster_ad=ad, proc_ads=("[ ]",)), conn, peer), 1000.0))


def test_owner_and_user_come_from_the_network_identity_not_the_ad():
    core = schedd()
    r = submit(core, net("alice@pool"), '[ Cmd = "/bin/true"; User = "root@pool"; Owner = "alice" ]')
    assert not isinstance(r, m.ErrorReply), r
    [job] = core.queue.query("true")
    assert (job["Owner"], job["User"]) == ('"alice"', '"alice@pool"')
    # a claimed other owner is refused
    r = submit(core, net("alice@pool"), '[ Cmd = "/bin/true"; Owner = "root" ]', conn=2)
    assert isinstance(r, m.ErrorReply) and "alice may not submit jobs owned by root" in r.message


def test_an_identity_of_another_domain_keeps_its_domain_in_user():
    core = schedd(uid_domain="pool")
    submit(core, net("alice@elsewhere"))
    [job] = core.queue.query("true")
    assert (job["Owner"], job["User"]) == ('"alice"', '"alice@elsewhere"')


def test_an_unauthenticated_network_peer_cannot_submit_and_is_logged_with_its_address():
    core = schedd()
    out = core.handle(c.Received(m.Submit(cluster_ad='[ Cmd = "/bin/true" ]', proc_ads=("[ ]",)), 1, net(None)),
                      1000.0)
    r = reply(out)
    assert isinstance(r, m.ErrorReply) and r.code == "denied" and "10.200.0.5 proved no identity" in r.message
    assert any(isinstance(a, c.Log) and "PERMISSION DENIED" in a.text and "from 10.200.0.5" in a.text
               for a in out)
    assert core.queue.query("true") == []


@pytest.mark.parametrize("action", [m.JobAction.Hold, m.JobAction.Remove])
def test_only_the_same_identity_or_an_administrator_acts_on_a_job(action):
    core = schedd()
    submit(core, net("alice@pool"))
    act = m.ActOnJobs(action=action, ids=("1.0",))
    for other in (net("bob@pool"), net("alice@other"), net(None)):
        r = reply(core.handle(c.Received(act, 2, other), 1000.0))
        assert r.permission_denied == 1, other
    out = core.handle(c.Received(m.EditJobs(ids=("1.0",), attributes={"Foo": "1"}), 3, net("bob@pool")), 1000.0)
    assert "Foo" not in core.queue.query("true")[0]
    assert any(isinstance(a, c.Log) and "PERMISSION DENIED" in a.text and "bob@pool from 10.200.0.5" in a.text
               for a in out)
    r = reply(core.handle(c.Received(act, 4, net("alice@pool", host="10.200.0.9")), 1000.0))
    assert r.success == 1


def test_an_administrator_from_the_network_acts_on_anyones_job():
    core = schedd()
    submit(core, net("alice@pool"))
    r = reply(core.handle(c.Received(m.ActOnJobs(action=m.JobAction.Hold, ids=("1.0",)), 2,
                                     net("condor_pool@cm", admin=True)), 1000.0))
    assert r.success == 1


@needs_users
def test_the_execute_host_runs_a_network_job_as_its_owner_only_in_its_uid_domain():
    local_user(ALICE)
    core = schedd(uid_domain="pool")
    submit(core, net(f"{ALICE}@pool"))
    [stored] = core.queue.query("true")
    job = {"Owner": ALICE, "User": f"{ALICE}@pool", "ClusterId": 1, "ProcId": 0}
    assert stored["User"] == f'"{ALICE}@pool"'
    entry, why = trusted_owner(job, RunAsPolicy(uid_domain="pool"))
    assert entry is not None and entry.pw_uid == pwd.getpwnam(ALICE).pw_uid, why
    user = choose_user(job, RunAsPolicy(uid_domain="other.example"), "htc-slot1", create=True)
    assert (user.name, user.owner) == ("htc-slot1", False) and "'pool' is not" in user.describe()
    missing = {**job, "Owner": "htctest-nosuch", "User": "htctest-nosuch@pool"}
    user = choose_user(missing, RunAsPolicy(uid_domain="pool"), "htc-slot1", create=True)
    assert user.name == "htc-slot1" and user.uid != 0 and "no account here" in user.describe()


@pytest.mark.parametrize("probe", ['regexp("s3cr3t", ClaimId)', "ClaimId =!= undefined", "size(CLAIMID) > 3",
                                   'regexp("s3cr3t", eval(strcat("Claim", "Id")))', 'MY["ClaimId"] =!= undefined'])
def test_a_job_query_never_shows_nor_tests_a_claim_id(probe):
    from htc.wire.private import may_read_private

    core = schedd()
    submit(core, net("alice@pool"))
    core.queue.set_attributes((1, 0), {"ClaimId": '"slot1@x#1#s3cr3t"'})
    assert may_read_private(probe) and not may_read_private('Owner == "alice" && RequestCpus > 0')

    def query(constraint):
        msg = m.QueryJobs(constraint=constraint)
        return reply(core.handle(c.Received(msg, 5, net("bob@pool")), 1000.0)).ads

    [ad] = query('Owner == "alice"')
    assert "s3cr3t" not in ad and "ClaimId" not in ad
    assert query(probe) == ()
    assert len(query('Owner == "alice" || regexp("s3cr3t", ClaimId)')) == 1  # still a working constraint
