"""The schedd's conversation with tools: submitting, querying and acting on jobs, and the
requests a tool sends the negotiator (``Reschedule``, ``SetUserPriority``)."""

from __future__ import annotations

import enum
from typing import Annotated

from msgspec import Meta

from htc.wire.messages.collector import AdsReply
from htc.wire.messages.common import Ack
from htc.wire.messages.schema import (AdText, AttrName, Count, Int, JobId, Message, NonEmpty, Positive, Record,
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


#: the most clusters one SubmitClusters may carry (each is a few KB of ads; a batch is one turn of the schedd)
MAX_BATCH_CLUSTERS = 1000


class ClusterSubmission(Record, frozen=True):
    """One cluster of a SubmitClusters: the fields of a Submit, with the same meaning."""

    cluster_ad: AdText
    proc_ads: tuple[AdText, ...]
    submission_id: SubmissionId | None = None

    def _check(self) -> None:
        if not self.proc_ads:
            raise invalid(self, "proc_ads is empty; a cluster needs at least one job")
        ad_text_ok(self, "cluster_ad", self.cluster_ad)
        for ad in self.proc_ads:
            ad_text_ok(self, "proc_ads", ad)


class ClusterSubmitted(Record, frozen=True):
    """What became of one cluster of a SubmitClusters: its id and procs (durable), or the
    ``error`` that kept it out of the queue (nothing of it was queued)."""

    cluster_id: Count = 0
    num_procs: Count = 0
    error: str = ""

    def _check(self) -> None:
        if bool(self.error) == bool(self.cluster_id):
            raise invalid(self, "give either cluster_id (with num_procs) or error")
        if self.cluster_id and not self.num_procs:
            raise invalid(self, f"cluster {self.cluster_id} needs num_procs >= 1")


class SubmitClustersReply(Message, frozen=True):
    """One result per cluster of the SubmitClusters, in its order; the queued ones are durable."""

    results: tuple[ClusterSubmitted, ...]


class SubmitClusters(Message, frozen=True):
    """Several new clusters in one round trip (a DAG manager's ready nodes), queued in one
    transaction; each is answered as its own Submit would be (a ``submission_id`` seen before
    is answered with its first cluster and queues nothing), and one that is refused (a bad
    description, a limit) is answered with its error without keeping the others out."""

    reply_type = SubmitClustersReply
    clusters: tuple[ClusterSubmission, ...]

    def _check(self) -> None:
        if not self.clusters:
            raise invalid(self, "clusters is empty; send at least one cluster")
        if len(self.clusters) > MAX_BATCH_CLUSTERS:
            raise invalid(self, f"{len(self.clusters)} clusters is more than {MAX_BATCH_CLUSTERS}; "
                                "send them in several SubmitClusters")


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
