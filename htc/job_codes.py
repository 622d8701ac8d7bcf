"""The numbers HTCondor gives a job's status and the reasons it is held.

``JobStatus`` and ``HoldReasonCode`` are attribute values of every job ad: the submit language
writes them (``hold = true`` submits Held with code 15), the job queue moves them, the daemons
hold jobs with them and the executor reads them back. They sit at the bottom of the layers, with
:mod:`htc.errors` and :mod:`htc.transitions`, so that every package uses the same names instead
of bare numbers; :mod:`htc.jobqueue.states` re-exports them with the table of legal changes.
"""

from __future__ import annotations

import enum

__all__ = ["HoldReasonCode", "JobStatus"]


class JobStatus(enum.IntEnum):
    """A job's ``JobStatus``, numbered as HTCondor numbers it."""

    IDLE = 1
    RUNNING = 2
    REMOVED = 3
    COMPLETED = 4
    HELD = 5
    TRANSFERRING_OUTPUT = 6
    SUSPENDED = 7

    @property
    def letter(self) -> str:
        """The one-letter code ``condor_q`` prints in its ST column."""
        return _LETTERS[self]


_LETTERS = {
    JobStatus.IDLE: "I",
    JobStatus.RUNNING: "R",
    JobStatus.REMOVED: "X",
    JobStatus.COMPLETED: "C",
    JobStatus.HELD: "H",
    JobStatus.TRANSFERRING_OUTPUT: ">",
    JobStatus.SUSPENDED: "S",
}


class HoldReasonCode(enum.IntEnum):
    """``HoldReasonCode`` values, as HTCondor's ``condor_holdcodes.h`` numbers them."""

    Unspecified = 0
    UserRequest = 1
    GlobusGramError = 2
    JobPolicy = 3
    CorruptedCredential = 4
    JobPolicyUndefined = 5
    FailedToCreateProcess = 6
    UnableToOpenOutput = 7
    UnableToOpenInput = 8
    UnableToOpenOutputStream = 9
    UnableToOpenInputStream = 10
    InvalidTransferAck = 11
    TransferOutputError = 12
    TransferInputError = 13
    IwdError = 14
    SubmittedOnHold = 15
    SpoolingInput = 16
    JobShadowMismatch = 17
    InvalidTransferGoAhead = 18
    HookPrepareJobFailure = 19
    MissedDeferredExecutionTime = 20
    StartdHeldJob = 21
    UnableToInitUserLog = 22
    FailedToAccessUserAccount = 23
    NoCompatibleShadow = 24
    InvalidCronSettings = 25
    SystemPolicy = 26
    SystemPolicyUndefined = 27
    MaxTransferInputSizeExceeded = 32
    MaxTransferOutputSizeExceeded = 33
    JobOutOfResources = 34
    InvalidDockerImage = 35
    FailedToCheckpoint = 36
    PreScriptFailed = 43
    PostScriptFailed = 44
    SingularityTestFailed = 45
    JobDurationExceeded = 46
    JobExecuteExceeded = 47
    HookShadowPrepareJobFailure = 48
