"""The collector's conversation: daemons publish their ads, tools and daemons query them."""

from __future__ import annotations

import enum

from htc.wire.messages.common import Ack
from htc.wire.messages.schema import (AdText, AttrName, Message, NonEmpty, Positive, ad_text_ok, invalid,
                                      one_of)


class AdType(str, enum.Enum):
    """Kinds of ads the collector keeps; member names follow ``htcondor2.AdType``, values are MyType."""

    Any = "Any"
    Startd = "Machine"
    Schedd = "Scheduler"
    Submitter = "Submitter"
    Negotiator = "Negotiator"
    Master = "DaemonMaster"
    Collector = "Collector"
    Accounting = "Accounting"
    Generic = "Generic"


class UpdateAd(Message, frozen=True):
    """Store (or replace) one ad; it expires ``lifetime`` seconds later unless refreshed.

    Without ``lifetime`` the collector uses the ad's ``ClassAdLifetime`` attribute, else
    its CLASSAD_LIFETIME.
    """

    reply_type = Ack
    ad_type: AdType
    name: NonEmpty
    ad_text: AdText
    lifetime: Positive | None = None

    def _check(self) -> None:
        if self.ad_type is AdType.Any:
            raise invalid(self, "ad_type Any is only for queries; say which kind of ad this is")
        ad_text_ok(self, "ad_text", self.ad_text)


class InvalidateAd(Message, frozen=True):
    """Forget ads of one type: the one called ``name``, or all that match ``constraint``."""

    reply_type = Ack
    ad_type: AdType
    name: str = ""
    constraint: str = ""

    def _check(self) -> None:
        one_of(self, name=self.name, constraint=self.constraint)


class AdsReply(Message, frozen=True):
    """Ads answering a query, as new-syntax ClassAd text."""

    ads: tuple[str, ...] = ()


class QueryAds(Message, frozen=True):
    """Ads of ``ad_type`` (Any: all) for which ``constraint`` is true, cut to ``projection``.

    ``private``: with their private attributes (``ClaimId``), as HTCondor's QUERY_STARTD_PVT_ADS;
    it needs NEGOTIATOR (:mod:`htc.wire.private`). Without it they are stripped.
    """

    reply_type = AdsReply
    ad_type: AdType
    constraint: str = ""
    projection: tuple[AttrName, ...] = ()
    limit: Positive | None = None
    private: bool = False
