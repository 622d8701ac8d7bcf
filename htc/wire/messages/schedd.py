"""The schedd's conversation with tools: submitting, querying and acting on jobs, and the
requests a tool sends the negotiator (``Reschedule``, ``SetUserPriority``)."""

from __future__ import annotations

import enum
from typing import Annotated

from msgspec import Meta

from htc.wire.messages.collector import AdsReply
from htc.wire.messages.common import Ack
from htc.wire.messages.schema import (AdText, AttrName, Count, Int, JobId, Message, NonEmpty, Positive,
                                      ad_text_ok, invalid, one_of)


class JobAction(str, enum.Enum):
    """What ActOnJobs does to each selected job (``htcondor2.JobAction``)."""

    Hold = "Hold"
    Release = "Release"
    Remove = "Remove"
    RemoveX = "RemoveX"
    Vacate = "Vacate"
    VacateFast = "VacateFast"
    Suspend = "Suspend"
    Continue = "Continue"


class SubmitReply(Message, frozen=True):
    """Jobs ``cluster_id``.``first_proc`` .. ``first_proc + num_procs - 1`` are durable."""

    cluster_id: Positive
    num_procs: Positive
    first_proc: Count = 0


#: a client's name for one submission (letters, digits, ``.``, ``_``, ``:``, ``-``)
SubmissionId = Annotated[str, Meta(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")]


class Submit(Message, frozen=True):
    """A new cluster: its cluster ad and one ad per proc (the schedd assigns the ids).

    ``submission_id`` (optional, chosen by the client, unique per submission) makes the Submit
    idempotent: the schedd remembers it with the cluster, in the same transaction, and answers
    a Submit of the same owner with the same id -- a retry after a lost reply -- with the
    original SubmitReply, queueing nothing (the same id with other ads is a ``bad_request``).
    """

    reply_type = SubmitReply
    cluster_ad: AdText
    proc_ads: tuple[AdText, ...]
    submission_id: SubmissionId | None = None

    def _check(self) -> None:
        if not self.proc_ads:
            raise invalid(self, "proc_ads is empty; a cluster needs at least one job")
        ad_text_ok(self, "cluster_ad", self.cluster_ad)
        for ad in self.proc_ads:
            ad_text_ok(self, "proc_ads", ad)


class QueryJobs(Message, frozen=True):
    """Job ads for which ``constraint`` is true, cut to ``projection``."""

    reply_type = AdsReply
    constraint: str = ""
    projection: tuple[AttrName, ...] = ()
    limit: Positive | None = None


class ActOnJobsReply(Message, frozen=True):
    """How many selected jobs each outcome got (the result_total_* of HTCondor)."""

    success: Count = 0
    not_found: Count = 0
    bad_status: Count = 0
    already_done: Count = 0
    permission_denied: Count = 0
    error: Count = 0


class ActOnJobs(Message, frozen=True):
    """Hold, release, remove, vacate, suspend or continue jobs chosen by ids or constraint."""

    reply_type = ActOnJobsReply
    action: JobAction
    ids: tuple[JobId, ...] = ()
    constraint: str = ""
    reason: str = ""
    reason_code: Int | None = None
    reason_subcode: Int | None = None

    def _check(self) -> None:
        one_of(self, ids=self.ids, constraint=self.constraint)


class EditReply(Message, frozen=True):
    """How many jobs an edit changed."""

    matched: Count


class EditJobs(Message, frozen=True):
    """condor_qedit: set attributes (name -> ClassAd expression text) of jobs by ids or constraint."""

    reply_type = EditReply
    attributes: dict[AttrName, str]
    ids: tuple[JobId, ...] = ()
    constraint: str = ""

    def _check(self) -> None:
        one_of(self, ids=self.ids, constraint=self.constraint)
        if not self.attributes:
            raise invalid(self, "attributes is empty; name at least one attribute to set")


class Reschedule(Message, frozen=True):
    """Ask for a negotiation cycle soon (tool -> schedd; schedd, or a startd with a slot newly free -> negotiator)."""

    reply_type = Ack


class SetUserPriority(Message, frozen=True):
    """Tool -> negotiator (``htc userprio -setprio/-setfactor/-setaccum/-resetusage``): change one
    submitter's standing in the accountant. Set one or more of ``priority`` (the real user
    priority, >= 0.5), ``factor`` (the priority factor, >= 1), ``accumulated_usage`` and
    ``reset_usage``. Only the
    pool's administrator (root, or the user the negotiator runs as) may send it."""

    reply_type = Ack
    submitter: NonEmpty
    priority: Annotated[float, Meta(ge=0, le=1e15)] | None = None
    factor: Annotated[float, Meta(ge=0, le=1e15)] | None = None
    reset_usage: bool = False
    #: weighted slot-seconds (``-setaccum``)
    accumulated_usage: Annotated[float, Meta(ge=0, le=1e18)] | None = None

    def _check(self) -> None:
        if (self.priority is None and self.factor is None and not self.reset_usage
                and self.accumulated_usage is None):
            raise invalid(self, "say what to change: priority, factor, accumulated_usage or reset_usage")
