"""An executor session served by the schedd over one connection, for a client on another machine.

``HTCExecutor(pool="cm")`` on a machine that shares no file system with the submit host keeps
its calls' files in a session directory *on the submit host* (the schedd makes it in its
spool, owned by the session's owner) and mirrors it on the client. One connection carries it
all (:mod:`htc.daemons.schedd.sessions` serves it, :mod:`htc.executors.remote` is the client):

1. client -> schedd :class:`OpenSession`; the schedd answers :class:`SessionOpened` (the
   directory, which the client's job ads name as ``Iwd`` and user log) and from then on owns
   the connection;
2. client -> schedd :class:`SubmitCalls`: a batch's pickles and its cluster in one request,
   answered as a ``Submit`` is (the schedd writes the pickles, then queues the jobs, and
   follows each job's call itself); a batch whose pickles exceed one message sends the first
   of them ahead in :class:`PutCallFiles` (answered ``Ack`` once they are written).
   :class:`FollowCalls` (the call of each job, no answer) names jobs submitted otherwise (a
   reattached session's, after a reconnect);
3. schedd -> client :class:`SessionNews`, pushed whenever the session's event log grows: the
   new complete events and, before the event that ends a call, that call's result, stdout and
   stderr;
4. client -> schedd :class:`NewsTaken` (no answer), now and then: its mirror holds the log up to
   an offset and every file sent with it, so the schedd removes the files of the calls that
   ended before it -- a session that runs for days keeps only its recent calls' files;
5. client -> schedd :class:`CloseSession` (answered ``Ack``) ends the conversation, removing
   the directory unless the session is named.

A file travels as :class:`FileChunk` s of at most :data:`MAX_SESSION_CHUNK` bytes, so a large
result or argument is never one message, nor whole in memory on either side.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from htc.wire.messages.common import Ack
from htc.wire.messages.schedd import SubmissionId, SubmitReply
from htc.wire.messages.schema import AdText, Count, JobId, Message, NonEmpty, Record, ad_text_ok, invalid

#: the largest ``FileChunk.data`` (senders cut bigger files into chunks this big)
MAX_SESSION_CHUNK = 1024 * 1024
#: a session's name, as the executor's spool allows it (also a directory name on the submit host)
SessionName = Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")]
#: a file of the session's calls/ directory: a plain name, never a path
CallFileName = Annotated[str, Meta(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$")]


class FileChunk(Record, frozen=True, omit_defaults=True):
    """Part of one file of the session's ``calls/``: ``first`` starts it afresh, ``last`` ends it
    (a file of one chunk is both)."""

    name: CallFileName
    data: Annotated[bytes, Meta(max_length=MAX_SESSION_CHUNK)] = b""
    first: bool = True
    last: bool = True


class SessionOpened(Message, frozen=True):
    """Schedd -> client: the session's directory on the submit host (``calls`` is the calls'
    Iwd, ``log`` their event log); the connection is the session's from now on."""

    directory: NonEmpty
    calls: NonEmpty
    log: NonEmpty


class OpenSession(Message, frozen=True):
    """Client -> schedd: serve executor session ``session`` on this connection, pushing its event
    log from byte ``offset`` (what the client's mirror already holds)."""

    reply_type = SessionOpened
    session: SessionName
    offset: Count = 0


class PutCallFiles(Message, frozen=True):
    """Client -> schedd, on a session's connection: write these files into its ``calls/``."""

    reply_type = Ack
    chunks: tuple[FileChunk, ...]


class SubmitCalls(Message, frozen=True):
    """Client -> schedd, on a session's connection: write ``chunks`` into its ``calls/``, then
    queue a cluster as ``Submit`` does (``cluster_ad``, ``proc_ads``, ``submission_id``: a retry
    gets the first try's cluster) and follow job *i* as call ``calls[i]``; answered
    ``SubmitReply``. One round trip for a batch of calls."""

    reply_type = SubmitReply
    chunks: tuple[FileChunk, ...]
    cluster_ad: AdText
    proc_ads: tuple[AdText, ...]
    calls: tuple[CallFileName, ...]
    submission_id: SubmissionId | None = None

    def _check(self) -> None:
        if not self.proc_ads:
            raise invalid(self, "proc_ads is empty; a cluster needs at least one job")
        if len(self.calls) != len(self.proc_ads):
            raise invalid(self, f"calls names {len(self.calls)} calls for {len(self.proc_ads)} proc ads")
        ad_text_ok(self, "cluster_ad", self.cluster_ad)
        for ad in self.proc_ads:
            ad_text_ok(self, "proc_ads", ad)


class FollowCalls(Message, frozen=True):
    """Client -> schedd, on a session's connection: job id -> call id of jobs just submitted
    (their result files are pushed with the event that ends them). No answer."""

    jobs: dict[JobId, CallFileName]


class SessionNews(Message, frozen=True, omit_defaults=True):
    """Schedd -> client: files of ended calls (``chunks``, written before ``log`` is appended)
    and the session's event log from byte ``offset`` on."""

    offset: Count
    log: bytes = b""
    chunks: tuple[FileChunk, ...] = ()


class NewsTaken(Message, frozen=True):
    """Client -> schedd, on a session's connection: the client's mirror holds the session's event
    log up to byte ``offset`` and every file that came with it; the schedd may remove the files
    of the calls whose end lies before it. No answer."""

    offset: Count


class CloseSession(Message, frozen=True):
    """Client -> schedd: the session ends; ``remove`` deletes its directory (an unnamed session)."""

    reply_type = Ack
    remove: bool = False


__all__ = ["MAX_SESSION_CHUNK", "CallFileName", "CloseSession", "FileChunk", "FollowCalls", "NewsTaken", "OpenSession",
           "PutCallFiles", "SessionName", "SessionNews", "SessionOpened", "SubmitCalls"]
