"""The startd's claimed-slot activity updates are rendered only when they go out
(htc.daemons.startd.ads.SlotAds): a superseded one costs no ClassAd printing."""

from __future__ import annotations

from pathlib import Path

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.startd import ads as ads_module
from htc.daemons.startd import events as ev
from htc.daemons.startd.ads import SlotAds
from htc.daemons.startd.policy import ClassAdPolicy
from htc.daemons.startd.sensors import SensorSettings
from htc.daemons.startd.settings import StartdServiceSettings, StartdSettings
from htc.wire import messages as m


def _settings(tmp_path: Path) -> StartdServiceSettings:
    startd = StartdSettings(name="m", machine="m", policy=ClassAdPolicy(), cpus=2, memory=2048, disk=1_000_000,
                            static_slots=0, update_interval=60, polling_interval=0.1)
    return StartdServiceSettings(startd=startd, execute_dir=tmp_path / "execute", claimed_update_delay=1.0,
                                 sensors=SensorSettings(execute_dir=tmp_path / "execute", daemon_name="startd",
                                                        override_file=tmp_path / "override"))


def _ad(activity: str) -> dict:
    return {"Name": "slot1_1@m", "State": "Claimed", "Activity": activity, "Cpus": 1}


def test_superseded_activity_updates_are_never_rendered(tmp_path, monkeypatch):
    ads = SlotAds(_settings(tmp_path), now=0.0)
    out: list = []
    ads.advertise(ev.AdvertiseSlot("slot1_1@m", _ad("Idle"), "claim#1"), 0.0, out)
    sent = [a for a in out if isinstance(a, c.Send)]
    assert len(sent) == 1  # the state change goes out at once, rendered
    ads.delivered(c.SendDone(sent[0].to, sent[0].msg, None, sent[0].cookie), "slot1_1@m", True, 0.0, out, stopping=False)
    rendered: list[dict] = []
    real = ads_module.ad_text
    monkeypatch.setattr(ads_module, "ad_text", lambda ad: rendered.append(ad) or real(ad))
    out.clear()
    for i in range(5):  # jobs come and go on the claim: only the activity changes
        ads.advertise(ev.AdvertiseSlot("slot1_1@m", _ad("Busy" if i % 2 == 0 else "Idle"), "claim#1"), 0.1 * i, out)
    assert not [a for a in out if isinstance(a, c.Send)] and rendered == []
    ads.flush(1.0, {"slot1_1@m"}, out)
    sent = [a for a in out if isinstance(a, c.Send)]
    assert len(sent) == 1 and len(rendered) == 1  # only the newest, rendered as it goes out
    msg = sent[0].msg
    assert isinstance(msg, m.UpdateAd)
    ad = ClassAd(msg.ad_text)
    assert ad["Activity"] == "Busy" and ad["ClaimId"] == "claim#1" and ad["UpdateSequenceNumber"] == 6
