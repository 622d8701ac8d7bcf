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
  ``_check`` method, which also runs after decoding (the machinery: :mod:`.schema`).

Malformed input from a peer therefore surfaces in exactly one way: :func:`decode` raises
:class:`~htc.wire.errors.WireError` (a :class:`~htc.errors.PeerError`).

ClassAds travel as *new-syntax ClassAd text* (``[ Name = "slot1@a"; Cpus = 4 ]``): the wire
stays independent of the ClassAd engine, and the receiver parses what it needs.

Each request names the reply it expects in ``reply_type`` (an :class:`ErrorReply` is always
possible instead); :meth:`htc.wire.transport.Connection.request` uses it to check answers.

The messages are declared by conversation, one module each, and all of them are imported
here, the one import path for every message (``from htc.wire import messages as m``;
``m.QueryAds``):

* :mod:`.schema` -- the field types, ``Record`` and ``Message``, and how they are checked;
* :mod:`.common` -- what every daemon answers (``Ack``, ``ErrorReply``, ``Ping``, ``Reconfig``);
* :mod:`.collector` -- publishing and querying ads;
* :mod:`.master` -- the master's daemons off, on, restarted, and their status;
* :mod:`.schedd` -- submitting, querying and acting on jobs; ``Reschedule``, ``SetUserPriority``;
* :mod:`.negotiation` -- resource requests and match notifications;
* :mod:`.claims` -- claiming a slot, running its job, the job's progress, output and exit,
  vacating, suspending, draining;
* :mod:`.lanes` -- the calls of a call lane;
* :mod:`.transfer` -- a job's files over the connection (input, output, file streams);
* :mod:`.checkpoints` -- jobs' checkpoints to and from the schedd's spool, and a standard-universe
  job's forwarded file calls relayed to the schedd;
* :mod:`.network` -- the shared port's preamble for a peer from another host (``Forwarded``);
* :mod:`.peek` -- the end of a running job's files, from the startd running it (``htc tail``);
* :mod:`.sessions` -- an executor session served over one connection (a client on another machine).
"""

from __future__ import annotations

from typing import Union

import msgspec

from htc.wire.errors import MessageInvalid, WireError
from htc.wire.messages.checkpoints import (MAX_JOB_IO_CHUNK, CheckpointClaim, CheckpointJobs, CheckpointJobsReply,
                                           FetchCheckpoint, JobIOBytes, RelayJobIO, SendCheckpoint)
from htc.wire.messages.claims import (MAX_OUTPUT_CHUNK, ActivateClaim, CancelDrainJobs, ClaimKeepAlive,
                                      ClaimReply, Continue, DrainHow, DrainJobs, JobExited, JobOutput,
                                      ReleaseClaim, RequestClaim, StarterUpdate, Suspend, Vacate)
from htc.wire.messages.collector import AdsReply, AdType, InvalidateAd, QueryAds, UpdateAd
from htc.wire.messages.common import ERROR_CODES, Ack, ErrorReply, Ping, Pong, Reconfig
from htc.wire.messages.lanes import (MAX_LANE_CALL_BYTES, CallsDone, LaneCall, LaneResult, MoreCalls,
                                     RunCalls)
from htc.wire.messages.master import (DaemonsOff, DaemonsOn, DaemonsRestart, DaemonStatus, MasterStatus,
                                      QueryMaster, ShutdownHow)
from htc.wire.messages.network import Forwarded
from htc.wire.messages.peek import MAX_PEEK_BYTES, PeekChunk, PeekJob, PeekReply
from htc.wire.messages.sessions import (MAX_SESSION_CHUNK, CloseSession, FileChunk, FollowCalls, NewsTaken,
                                        OpenSession, PutCallFiles, SessionNews, SessionOpened, SubmitCalls)
from htc.wire.messages.negotiation import (MATCH_LAPSED, GetResourceRequests, MatchNotify, ResourceRequest,
                                           ResourceRequests)
from htc.wire.messages.schedd import (MAX_BATCH_CLUSTERS, ActOnJobs, ActOnJobsReply, ClusterSubmission,
                                      ClusterSubmitted, EditJobs, EditReply, JobAction, QueryJobs, Reschedule,
                                      SetUserPriority, Submit, SubmissionId, SubmitClusters, SubmitClustersReply,
                                      SubmitReply)
from htc.wire.messages.transfer import (MAX_TRANSFER_CHUNK, FetchInput, FetchOutput, FileData, FileDone,
                                        FileEntry, SendOutput, SpoolInput, TransferEnd)
from htc.wire.messages.schema import (INT64_MAX, MODE, AdText, AttrName, Count, DaemonName, Int, JobId,
                                      Message, NonEmpty, Positive, Record, Seconds)

# --- the one encode/decode pair ----------------------------------------------------------------

#: every concrete message class; decode accepts exactly these
MESSAGE_TYPES: tuple[type[Message], ...] = (
    Ack, ErrorReply, Ping, Pong, Reconfig,
    UpdateAd, InvalidateAd, QueryAds, AdsReply,
    DaemonsOff, DaemonsOn, DaemonsRestart, QueryMaster, MasterStatus,
    Submit, SubmitReply, SubmitClusters, SubmitClustersReply, QueryJobs, ActOnJobs, ActOnJobsReply, EditJobs, EditReply, Reschedule, SetUserPriority,
    GetResourceRequests, ResourceRequests, MatchNotify,
    RequestClaim, ClaimReply, ActivateClaim, ClaimKeepAlive, ReleaseClaim,
    StarterUpdate, JobOutput, JobExited, RunCalls, CallsDone, MoreCalls, Vacate, Suspend, Continue, DrainJobs, CancelDrainJobs,
    FetchInput, SendOutput, SpoolInput, FetchOutput, FileEntry, FileData, FileDone, TransferEnd,
    SendCheckpoint, FetchCheckpoint, CheckpointJobs, CheckpointJobsReply, CheckpointClaim, RelayJobIO, JobIOBytes,
    Forwarded, PeekJob, PeekReply,
    OpenSession, SessionOpened, PutCallFiles, FollowCalls, SessionNews, CloseSession, SubmitCalls, NewsTaken,
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


#: MESSAGE_TYPES as a set: encode's test of the class is one lookup (isinstance against the
#: tuple tries the classes in turn, 3.6 us for a MatchNotify, 28th, against 0.5 us to encode it)
_MESSAGE_CLASSES = frozenset(MESSAGE_TYPES)
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
    if msg.__class__ not in _MESSAGE_CLASSES and not isinstance(msg, MESSAGE_TYPES):
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
    token = MODE.set("decode")
    try:
        return _decoder.decode(data)
    except (msgspec.ValidationError, MessageInvalid) as exc:  # ValidationError first: it is a DecodeError
        raise WireError(f"invalid message: {exc}") from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise WireError(f"undecodable message ({len(data)} bytes): {exc}") from None
    finally:
        MODE.reset(token)


__all__ = ["Ack", "ActOnJobs", "ActOnJobsReply", "ActivateClaim", "AdText", "AdType", "AdsReply",
           "AttrName", "CallsDone", "CancelDrainJobs", "ClaimKeepAlive", "ClaimReply", "Continue",
           "Count", "DaemonName", "DaemonStatus", "DaemonsOff", "DaemonsOn", "DaemonsRestart",
           "DrainHow", "DrainJobs", "ERROR_CODES", "EditJobs", "EditReply", "ErrorReply", "Forwarded",
           "GetResourceRequests", "INT64_MAX", "Int", "InvalidateAd", "JobAction", "JobExited",
           "JobId", "JobOutput", "LaneCall", "LaneResult", "MATCH_LAPSED", "MAX_LANE_CALL_BYTES",
           "MAX_OUTPUT_CHUNK", "MasterStatus", "MatchNotify", "Message", "MoreCalls", "NonEmpty",
           "Ping", "Pong", "Positive", "QueryAds", "QueryJobs", "QueryMaster", "Reconfig",
           "Record", "ReleaseClaim", "RequestClaim", "Reschedule", "ResourceRequest",
           "ResourceRequests", "RunCalls", "Seconds", "SetUserPriority", "ShutdownHow",
           "StarterUpdate", "SubmissionId", "Submit", "SubmitReply", "SubmitClusters", "SubmitClustersReply",
           "ClusterSubmission", "ClusterSubmitted", "MAX_BATCH_CLUSTERS", "Suspend", "UpdateAd",
           "Vacate", "FetchInput", "SendOutput", "SpoolInput", "FetchOutput", "FileEntry", "FileData", "FileDone", "TransferEnd",
           "SendCheckpoint", "FetchCheckpoint", "CheckpointJobs", "CheckpointJobsReply", "CheckpointClaim", "RelayJobIO", "JobIOBytes", "MAX_JOB_IO_CHUNK", "MAX_TRANSFER_CHUNK", "MAX_PEEK_BYTES", "PeekChunk", "PeekJob", "PeekReply",
           "MAX_SESSION_CHUNK", "OpenSession", "SessionOpened", "PutCallFiles",
           "FollowCalls", "SessionNews", "CloseSession", "SubmitCalls", "NewsTaken", "FileChunk", "MESSAGE_TYPES", "AnyMessage", "message_table", "encode", "decode"]
