"""Every message htc daemons and tools exchange: the one schema of the wire.

Theory of operation
-------------------
A message is a frozen :class:`msgspec.Struct` with a tag: on the wire it is a MessagePack map
whose ``"type"`` key names the class (``{"type": "QueryAds", "ad_type": "Machine", ...}``).
:func:`encode` and :func:`decode` are the only way in or out; no other module builds wire dicts.

A message is checked twice, by the same rules, wherever it comes from:

* field types and simple constraints (non-empty names, attribute-name patterns, non-negative
  numbers) are msgspec annotations, so a decoder enforces them for free; building a message in
  Python runs the same conversion once (``__post_init__``), so a caller who passes an ``int``
  where a ``str`` belongs hears about it where the mistake is made, as a
  :class:`~htc.wire.errors.MessageInvalid` (a :class:`~htc.errors.UsageError`);
* rules that span fields (``ids`` *or* ``constraint``, not both) live in each class's
  ``_check`` method, which also runs after decoding.

Malformed input from a peer therefore surfaces in exactly one way: :func:`decode` raises
:class:`~htc.wire.errors.WireError` (a :class:`~htc.errors.PeerError`).

ClassAds travel as *new-syntax ClassAd text* (``[ Name = "slot1@a"; Cpus = 4 ]``): the wire
stays independent of the ClassAd engine, and the receiver parses what it needs.

Each request names the reply it expects in ``reply_type`` (an :class:`ErrorReply` is always
possible instead); :meth:`htc.wire.transport.Connection.request` uses it to check answers.
"""

from __future__ import annotations

import contextvars
import enum
from typing import Annotated, ClassVar, Literal, Union

import msgspec
from msgspec import Meta

from htc.wire.errors import MessageInvalid, WireError

# --- field types ---------------------------------------------------------------------------

NonEmpty = Annotated[str, Meta(min_length=1)]
#: a ClassAd attribute name as HTCondor spells them (data keeps its CamelCase)
AttrName = Annotated[str, Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
#: ``cluster`` or ``cluster.proc``, each at most 10 digits: a number any receiver converts
#: with ``int()`` and stores in a 64-bit column (a 5,000-digit id is refused at decode)
JobId = Annotated[str, Meta(pattern=r"^[0-9]{1,10}(\.[0-9]{1,10})?$")]
#: a daemon as DAEMON_LIST names it (COLLECTOR, SCHEDD, ...), case-insensitive
DaemonName = Annotated[str, Meta(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")]
#: the largest integer a field takes: a ClassAd's and sqlite's 64-bit integers (MessagePack
#: would carry unsigned 64-bit numbers up to 2**64 - 1, which neither can hold)
INT64_MAX = 2**63 - 1
Int = Annotated[int, Meta(ge=-INT64_MAX - 1, le=INT64_MAX)]
Count = Annotated[int, Meta(ge=0, le=INT64_MAX)]
Positive = Annotated[int, Meta(gt=0, le=INT64_MAX)]
#: a duration or a time stamp: finite (no NaN, no infinity: deadlines are computed from it)
Seconds = Annotated[float, Meta(ge=0, le=1e12)]
#: new-syntax ClassAd text, ``[ A = 1; B = "x" ]``
AdText = Annotated[str, Meta(min_length=2)]

ShutdownHow = Literal["graceful", "fast"]


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


#: codes an ErrorReply carries, with what the receiver should make of them
ERROR_CODES = {
    "malformed": "the request was not a valid frame or message; the connection is closed",
    "too_large": "the frame exceeded the receiver's size limit; the connection is closed",
    "unknown_request": "this daemon does not handle that kind of message",
    "bad_request": "the message was well formed but makes no sense here (see the text)",
    "not_found": "the thing named in the request does not exist",
    "denied": "the requester may not do this",
    "unavailable": "the daemon is shutting down or not ready; try again later",
    "internal": "the daemon failed while handling the request; see its log",
}

#: how the running __post_init__ was reached: None (built in Python), "decode", or "nested"
#: (inside _validate's own conversion, whose result is only used for its field values)
_MODE: contextvars.ContextVar[str | None] = contextvars.ContextVar("htc_wire_mode", default=None)


def _validate(obj: msgspec.Struct) -> None:
    """Run msgspec's decode-time checks on an object built in Python, then adopt the
    converted values (``"Machine"`` becomes ``AdType.Startd``, lists become tuples)."""
    token = _MODE.set("nested")
    try:
        checked = msgspec.convert(msgspec.to_builtins(obj), type(obj))
    except msgspec.ValidationError as exc:
        raise MessageInvalid(f"{type(obj).__name__}: {exc}") from None
    finally:
        _MODE.reset(token)
    for field in obj.__struct_fields__:
        msgspec.structs.force_setattr(obj, field, getattr(checked, field))


class Record(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A checked, immutable record nested inside messages (not a message by itself)."""

    def __post_init__(self) -> None:
        mode = _MODE.get()
        if mode == "nested":
            return
        if mode is None:
            _validate(self)
        self._check()

    def _check(self) -> None:
        """Cross-field rules; raise :class:`MessageInvalid` naming the field and the fix."""


class Message(Record, frozen=True, tag=True):
    """Base of every wire message; the tag (``"type"`` on the wire) is the class name."""

    #: the reply a request expects (None: a reply, or a message sent without expecting one)
    reply_type: ClassVar[type[Message] | None] = None


def _invalid(msg: Message | Record, text: str) -> MessageInvalid:
    return MessageInvalid(f"{type(msg).__name__}: {text}")


def _one_of(msg: Message, **fields: object) -> None:
    given = [name for name, value in fields.items() if value]
    if len(given) != 1:
        names = " or ".join(fields)
        raise _invalid(msg, f"give exactly one of {names} (got {', '.join(given) or 'none'})")


def _ad_text_ok(msg: Message | Record, field: str, text: str) -> None:
    if not text.lstrip().startswith("["):
        raise _invalid(msg, f"{field} must be new-syntax ClassAd text starting with '[', got {text[:40]!r}")


# --- generic ----------------------------------------------------------------------------


class Ack(Message, frozen=True):
    """A request was done; ``detail`` may say what happened. ``sequence`` orders answers against
    reports sent on other connections (a Suspend/Continue answer carries the job state's
    sequence number, which the StarterUpdates' ``JobStateSequence`` also carry)."""

    detail: str = ""
    sequence: Count | None = None


class ErrorReply(Message, frozen=True):
    """A request failed; ``code`` is one of ERROR_CODES, ``message`` says why and what to do."""

    code: NonEmpty
    message: str


class Pong(Message, frozen=True):
    """Answer to Ping: who answered, and since when it runs."""

    daemon: NonEmpty
    pid: Count
    started_at: Seconds
    version: str = ""


class Ping(Message, frozen=True):
    """Is the daemon alive and answering?"""

    reply_type = Pong


class Reconfig(Message, frozen=True):
    """Re-read the configuration (condor_reconfig); a master also passes it to its daemons."""

    reply_type = Ack


# --- collector ----------------------------------------------------------------------------


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
            raise _invalid(self, "ad_type Any is only for queries; say which kind of ad this is")
        _ad_text_ok(self, "ad_text", self.ad_text)


class InvalidateAd(Message, frozen=True):
    """Forget ads of one type: the one called ``name``, or all that match ``constraint``."""

    reply_type = Ack
    ad_type: AdType
    name: str = ""
    constraint: str = ""

    def _check(self) -> None:
        _one_of(self, name=self.name, constraint=self.constraint)


class AdsReply(Message, frozen=True):
    """Ads answering a query, as new-syntax ClassAd text."""

    ads: tuple[str, ...] = ()


class QueryAds(Message, frozen=True):
    """Ads of ``ad_type`` (Any: all) for which ``constraint`` is true, cut to ``projection``."""

    reply_type = AdsReply
    ad_type: AdType
    constraint: str = ""
    projection: tuple[AttrName, ...] = ()
    limit: Positive | None = None


# --- master --------------------------------------------------------------------------------


class DaemonsOff(Message, frozen=True):
    """Stop ``daemons`` (empty: all but the master); ``include_master`` stops the master too."""

    reply_type = Ack
    daemons: tuple[DaemonName, ...] = ()
    how: ShutdownHow = "graceful"
    include_master: bool = False


class DaemonsOn(Message, frozen=True):
    """Start ``daemons`` (empty: every daemon of DAEMON_LIST), also ones the master gave up on."""

    reply_type = Ack
    daemons: tuple[DaemonName, ...] = ()


class DaemonsRestart(Message, frozen=True):
    """Stop then start ``daemons`` (empty: every daemon the master runs)."""

    reply_type = Ack
    daemons: tuple[DaemonName, ...] = ()
    how: ShutdownHow = "graceful"


class DaemonStatus(Record, frozen=True):
    """One daemon as its master sees it."""

    name: DaemonName
    state: NonEmpty
    pid: Count | None = None
    restarts: Count = 0
    since: Seconds = 0.0
    next_start: Seconds | None = None


class MasterStatus(Message, frozen=True):
    """The master's view of its daemons."""

    master_pid: Count
    shutting_down: bool = False
    daemons: tuple[DaemonStatus, ...] = ()


class QueryMaster(Message, frozen=True):
    """Ask a master for the state of its daemons."""

    reply_type = MasterStatus


# --- schedd ---------------------------------------------------------------------------------


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
            raise _invalid(self, "proc_ads is empty; a cluster needs at least one job")
        _ad_text_ok(self, "cluster_ad", self.cluster_ad)
        for ad in self.proc_ads:
            _ad_text_ok(self, "proc_ads", ad)


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
        _one_of(self, ids=self.ids, constraint=self.constraint)


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
        _one_of(self, ids=self.ids, constraint=self.constraint)
        if not self.attributes:
            raise _invalid(self, "attributes is empty; name at least one attribute to set")


class Reschedule(Message, frozen=True):
    """Ask for a negotiation cycle soon (tool -> schedd; schedd, or a startd with a slot newly free -> negotiator)."""

    reply_type = Ack


class SetUserPriority(Message, frozen=True):
    """Tool -> negotiator (``htc userprio -setprio/-setfactor/-resetusage``): change one
    submitter's standing in the accountant. Set one or more of ``priority`` (the real user
    priority, >= 0.5), ``factor`` (the priority factor, >= 1) and ``reset_usage``. Only the
    pool's administrator (root, or the user the negotiator runs as) may send it."""

    reply_type = Ack
    submitter: NonEmpty
    priority: Annotated[float, Meta(ge=0, le=1e15)] | None = None
    factor: Annotated[float, Meta(ge=0, le=1e15)] | None = None
    reset_usage: bool = False

    def _check(self) -> None:
        if self.priority is None and self.factor is None and not self.reset_usage:
            raise _invalid(self, "say what to change: priority, factor or reset_usage")


# --- negotiation ----------------------------------------------------------------------------


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


#: how a schedd's Ack to a MatchNotify it does not take begins (the reason follows)
MATCH_LAPSED = "lapsed: "


# --- claims and running jobs ----------------------------------------------------------------


class ClaimReply(Message, frozen=True):
    """Startd's answer to RequestClaim; when refused, ``reason`` says why."""

    claim_id: NonEmpty
    accepted: bool
    slot_ad: str = ""
    reason: str = ""

    def _check(self) -> None:
        if not self.accepted and not self.reason:
            raise _invalid(self, "a refused claim needs a reason the schedd can log")


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
            raise _invalid(self, "give exactly one of exit_code or exit_signal for a job that ended")
        if self.hold_code is not None and not self.hold_reason:
            raise _invalid(self, "a hold request (hold_code) needs its hold_reason")


#: the most input (or output) bytes one lane call may carry; bigger calls take the classic path
MAX_LANE_CALL_BYTES = 1024 * 1024


class LaneCall(Record, frozen=True):
    """One function call for a call lane: the job and its input files (sandbox name -> bytes)."""

    job_id: JobId
    files: dict[NonEmpty, bytes]


class RunCalls(Message, frozen=True):
    """Schedd -> startd: queue these calls, in order, on the call lane running on ``claim_id``."""

    reply_type = Ack
    claim_id: NonEmpty
    calls: tuple[LaneCall, ...]


class LaneResult(Record, frozen=True, omit_defaults=True):
    """How one lane call ended: the worker's exit status for it (``EXIT_VALUE`` 0,
    ``EXIT_EXCEPTION`` 1, ``EXIT_ERROR`` 3), the files it created or changed in its directory
    (``htc_result.pkl``, ...), what it printed, and its times (execute side's clock, seconds)."""

    job_id: JobId
    exit_code: Int
    files: dict[NonEmpty, bytes] = {}
    stdout: bytes = b""
    stderr: bytes = b""
    started: Seconds = 0.0
    finished: Seconds = 0.0
    user_cpu: Seconds = 0.0
    sys_cpu: Seconds = 0.0


class MoreCalls(Message, frozen=True):
    """Shadow -> startd, the answer to CallsDone: the lane's next calls, queued as RunCalls'
    are (one message fewer per call). A call the lane already has is not queued again: the
    answer to a CallsDone sent again repeats the calls of an answer that may have been lost."""

    calls: tuple[LaneCall, ...] = ()


class CallsDone(Message, frozen=True):
    """Startd -> shadow: calls of the lane on ``claim_id`` ended, in the order they ran."""

    reply_type = MoreCalls
    claim_id: NonEmpty
    results: tuple[LaneResult, ...]


class Vacate(Message, frozen=True):
    """Evict the job of a claim or of named slots (condor_vacate); ``fast`` skips the soft kill."""

    reply_type = Ack
    claim_id: str = ""
    slot_names: tuple[NonEmpty, ...] = ()
    fast: bool = False
    reason: str = ""

    def _check(self) -> None:
        _one_of(self, claim_id=self.claim_id, slot_names=self.slot_names)


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


# --- the one encode/decode pair ----------------------------------------------------------------

#: every concrete message class; decode accepts exactly these
MESSAGE_TYPES: tuple[type[Message], ...] = (
    Ack, ErrorReply, Ping, Pong, Reconfig,
    UpdateAd, InvalidateAd, QueryAds, AdsReply,
    DaemonsOff, DaemonsOn, DaemonsRestart, QueryMaster, MasterStatus,
    Submit, SubmitReply, QueryJobs, ActOnJobs, ActOnJobsReply, EditJobs, EditReply, Reschedule, SetUserPriority,
    GetResourceRequests, ResourceRequests, MatchNotify,
    RequestClaim, ClaimReply, ActivateClaim, ClaimKeepAlive, ReleaseClaim,
    StarterUpdate, JobOutput, JobExited, RunCalls, CallsDone, MoreCalls, Vacate, Suspend, Continue, DrainJobs, CancelDrainJobs,
)

AnyMessage = Union[MESSAGE_TYPES]  # type: ignore[valid-type]



def message_table() -> str:
    """Every message as a Markdown table (docs/daemons.md embeds it; a test keeps it current)."""
    lines = ["| message | fields | reply | meaning |", "|---|---|---|---|"]
    for cls in MESSAGE_TYPES:
        fields = ", ".join(cls.__struct_fields__) or "-"
        reply = cls.reply_type.__name__ if cls.reply_type else "-"
        doc = " ".join((cls.__doc__ or "").split())
        lines.append(f"| {cls.__name__} | {fields} | {reply} | {doc} |")
    return "\n".join(lines)


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AnyMessage)


def encode(msg: Message) -> bytes:
    """Serialise one message for the wire.

    Args:
        msg: a message built from this module's classes (already checked when built).

    Returns:
        The MessagePack body of one frame.

    Raises:
        UsageError: ``msg`` is not one of the wire messages.
    """
    if not isinstance(msg, MESSAGE_TYPES):
        raise MessageInvalid(f"{type(msg).__name__} is not a wire message; build one from htc.wire.messages")
    return _encoder.encode(msg)


def decode(data: bytes) -> Message:
    """Parse and check one frame body received from a peer.

    Args:
        data: the MessagePack body of one frame.

    Returns:
        The message, checked exactly as if it had been built in Python.

    Raises:
        WireError: the bytes are not MessagePack, name no known message type, or break a
            field's rules; the text says which field and why.
    """
    token = _MODE.set("decode")
    try:
        return _decoder.decode(data)
    except (msgspec.ValidationError, MessageInvalid) as exc:  # ValidationError first: it is a DecodeError
        raise WireError(f"invalid message: {exc}") from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise WireError(f"undecodable message ({len(data)} bytes): {exc}") from None
    finally:
        _MODE.reset(token)
