"""A negotiation cycle: the negotiator asks each schedd for its idle work and tells the schedd
and the startd of each match."""

from __future__ import annotations

from htc.wire.messages.common import Ack
from htc.wire.messages.schema import AdText, AttrName, Count, Message, NonEmpty, Positive, Record


class ResourceRequest(Record, frozen=True):
    """One autocluster of idle jobs: a representative job ad and how many jobs it stands for."""

    autocluster_id: Count
    job_ad: AdText
    count: Positive


class ResourceRequests(Message, frozen=True):
    """A schedd's idle work for one submitter, best first."""

    submitter: NonEmpty
    requests: tuple[ResourceRequest, ...] = ()


class GetResourceRequests(Message, frozen=True):
    """Negotiator -> schedd: the resource requests of ``submitter`` for this cycle."""

    reply_type = ResourceRequests
    submitter: NonEmpty
    significant_attributes: tuple[AttrName, ...] = ()
    #: the asking negotiator's pool: its collector's address (a schedd that flocks tells its
    #: own pool from the FLOCK_TO pools by it); "" from a negotiator that does not say
    pool: str = ""


class MatchNotify(Message, frozen=True):
    """Negotiator -> schedd and startd: ``slot_name`` is matched to a request under ``claim_id``.

    The schedd's Ack says ``MATCH_LAPSED`` and why when it does not take the match (no idle
    job left for it, MAX_JOBS_RUNNING): the negotiator stops holding the slot back for it.
    """

    reply_type = Ack
    claim_id: NonEmpty
    submitter: NonEmpty
    slot_name: NonEmpty
    startd_address: NonEmpty
    slot_ad: AdText
    autocluster_id: Count | None = None
    #: the matching negotiator's pool (its collector's address), as in GetResourceRequests
    pool: str = ""


#: how a schedd's Ack to a MatchNotify it does not take begins (the reason follows)
MATCH_LAPSED = "lapsed: "
