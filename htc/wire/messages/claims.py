"""Claims and the jobs that run on them: the schedd claims a matched slot, activates it with a
job, keeps it alive and releases it; the starter reports progress, output and the exit; the
slot's job is vacated, suspended, continued or drained."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from htc.wire.messages.common import Ack
from htc.wire.messages.schema import (AdText, Count, Int, JobId, Message, NonEmpty, Positive, Seconds,
                                      invalid, one_of)


class ClaimReply(Message, frozen=True):
    """Startd's answer to RequestClaim; when refused, ``reason`` says why."""

    claim_id: NonEmpty
    accepted: bool
    slot_ad: str = ""
    reason: str = ""

    def _check(self) -> None:
        if not self.accepted and not self.reason:
            raise invalid(self, "a refused claim needs a reason the schedd can log")


class RequestClaim(Message, frozen=True):
    """Schedd -> startd: claim the matched slot for ``job_ad`` (the startd re-checks START)."""

    reply_type = ClaimReply
    claim_id: NonEmpty
    schedd_name: NonEmpty
    schedd_address: NonEmpty
    submitter: NonEmpty
    job_ad: AdText
    lease_duration: Annotated[float, Meta(gt=0, le=1e9)] = 2400.0


class ActivateClaim(Message, frozen=True):
    """Schedd -> startd: run ``job_ad`` on the claimed slot; the starter reports to ``shadow_address``.
    With ``lane`` the job is a *call lane*: a function-call worker that stays up and runs the
    calls RunCalls brings it, one after another, until the schedd vacates it."""

    reply_type = Ack
    claim_id: NonEmpty
    job_ad: AdText
    shadow_address: NonEmpty
    lane: bool = False


class ClaimKeepAlive(Message, frozen=True):
    """Schedd -> startd: the claim is still wanted (renews its lease). With ``watch`` > 0 the
    startd holds the answer up to that many seconds (a *claim watch*): its connection stays open,
    and either side learns at once that the other died when it closes."""

    reply_type = Ack
    claim_id: NonEmpty
    watch: Seconds = 0.0


class ReleaseClaim(Message, frozen=True):
    """Schedd -> startd: the claim is no longer wanted; startd -> schedd: the startd ended it
    (owner back, lease expired, drain, vacate), ``reason`` says why."""

    reply_type = Ack
    claim_id: NonEmpty
    reason: str = ""


class StarterUpdate(Message, frozen=True):
    """Starter -> shadow/startd: job progress (usage attributes as ClassAd text)."""

    reply_type = Ack
    claim_id: NonEmpty
    job_id: JobId
    update_ad: AdText


#: the largest ``JobOutput.data`` a receiver accepts (senders cut their chunks smaller)
MAX_OUTPUT_CHUNK = 4 * 1024 * 1024


class JobOutput(Message, frozen=True):
    """Startd -> shadow: new bytes of a running job's ``stream`` (stream_output / stream_error),
    which belong at byte ``offset`` of its output file; writing at the offset makes a resend
    harmless. Sent in order, the last before JobExited."""

    reply_type = Ack
    claim_id: NonEmpty
    job_id: JobId
    stream: Literal["stdout", "stderr"]
    offset: Count
    data: Annotated[bytes, Meta(max_length=MAX_OUTPUT_CHUNK)]


class JobExited(Message, frozen=True, omit_defaults=True):
    """Starter -> shadow/startd: the job ended; exactly one of exit_code / exit_signal is set
    unless it was vacated (``checkpointed`` says whether a checkpoint was saved). ``hold_code``
    (with ``hold_subcode`` and ``hold_reason``) asks the shadow to hold the job: the execute side
    killed it for breaking a limit of its own (47 JobExecuteExceeded). Fields left at their
    defaults are not sent, so peers that predate the hold fields read it as before."""

    reply_type = Ack
    claim_id: NonEmpty
    job_id: JobId
    exit_code: Int | None = None
    exit_signal: Positive | None = None
    core_dumped: bool = False
    vacated: bool = False
    checkpointed: bool = False
    usage_ad: str = ""
    hold_code: Positive | None = None
    hold_subcode: Int = 0
    hold_reason: str = ""

    def _check(self) -> None:
        if not self.vacated and (self.exit_code is None) == (self.exit_signal is None):
            raise invalid(self, "give exactly one of exit_code or exit_signal for a job that ended")
        if self.hold_code is not None and not self.hold_reason:
            raise invalid(self, "a hold request (hold_code) needs its hold_reason")


class Vacate(Message, frozen=True):
    """Evict the job of a claim or of named slots (condor_vacate); ``fast`` skips the soft kill."""

    reply_type = Ack
    claim_id: str = ""
    slot_names: tuple[NonEmpty, ...] = ()
    fast: bool = False
    reason: str = ""

    def _check(self) -> None:
        one_of(self, claim_id=self.claim_id, slot_names=self.slot_names)


class Suspend(Message, frozen=True):
    """Stop the job of a claim from running, keeping it in memory."""

    reply_type = Ack
    claim_id: NonEmpty
    reason: str = ""


class Continue(Message, frozen=True):
    """Let a suspended job of a claim run again."""

    reply_type = Ack
    claim_id: NonEmpty


DrainHow = Literal["graceful", "quick", "fast"]


class DrainJobs(Message, frozen=True):
    """condor_drain: a startd stops taking jobs and empties; ``how`` graceful (retirement time
    honoured), quick (vacate now) or fast (kill now); ``resume_on_completion`` reopens it after."""

    reply_type = Ack
    how: DrainHow = "graceful"
    resume_on_completion: bool = False
    reason: str = ""


class CancelDrainJobs(Message, frozen=True):
    """condor_drain -cancel: a draining startd takes jobs again."""

    reply_type = Ack
