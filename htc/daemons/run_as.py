"""Who a job runs as: its owner when the startd may trust the owner, else an account of its slot.

Theory of operation
-------------------
A startd that is not root runs every job as itself; nothing here applies. A root startd picks,
for each job, the account the job's processes (and its zygote, and its sandbox) belong to, as
HTCondor's starter does (``STARTER_ALLOW_RUNAS_OWNER``, ``UID_DOMAIN``, ``SLOT<N>_USER``,
``DEDICATED_EXECUTE_ACCOUNT_REGEXP``):

1. **The owner**, with the owner's primary group and supplementary groups (``initgroups``), when
   all of these hold: ``STARTER_ALLOW_RUNAS_OWNER`` is true (default); the job does not say
   ``RunAsOwner = false``; the job's submitter domain -- the part after ``@`` of its ``User``,
   which the schedd sets from its own ``UID_DOMAIN`` and the authenticated owner -- equals this
   startd's ``UID_DOMAIN`` (on one host, the schedd and the startd read the same configuration,
   so they agree); the ``Owner`` has an account here (the password database); that account is
   not root (uid 0, whatever its name); and it is not a dedicated execute account (a name
   matching ``DEDICATED_EXECUTE_ACCOUNT_REGEXP``: a job running as a slot account could submit
   jobs of its own, and those must not run as an account another slot uses).
2. **Else the slot's account**: ``SLOT<N>_USER`` when configured, else ``htc-slot<N>``, which
   the startd creates (``useradd --system --user-group``, no home, no login shell) the first time
   it needs it. ``N`` is the slot's number for a static slot (``slot3`` -> 3); a dynamic slot
   (``slot1_7``) takes the lowest number no other running job of this startd holds
   (:class:`SlotAccounts`), so at most as many accounts exist as jobs ever ran at once, and two
   jobs running at the same time never share one. A slot account is never root: a
   ``SLOT<N>_USER`` naming uid 0 is refused (the job fails to start, the message says why).

A slot account is *dedicated*: nothing but jobs runs as it. A job's own processes are ended
with it (its cgroup, or its session and ancestry marker: :mod:`htc.daemons.starter.procs`);
when one of its jobs ends, every process left running as that uid and adopted by init (a job
that daemonized out of its session, without cgroups) is killed too, as HTCondor does for the
accounts matching ``DEDICATED_EXECUTE_ACCOUNT_REGEXP``. When the account is handed to a job of
*another* owner than its previous one, the startd's zygotes running as it end first
(:meth:`SlotAccounts.serve` says so), so no process of one owner's job waits under the uid the
next owner's job gets, to be signalled, traced or to serve it.

Several startds on one host (a second pool) hand out the same ``htc-slot<N>`` accounts; give
them distinct ``SLOT<N>_USER`` accounts when their jobs are different people's.

The default ``DEDICATED_EXECUTE_ACCOUNT_REGEXP`` is ``htc-slot[0-9]+``, matching the accounts the
startd makes; the ``SLOT<N>_USER`` accounts count as dedicated whatever it says.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import re
import shutil
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from htc.daemons.clock import REAL, Clock
from htc.errors import HTCError

__all__ = ["DEFAULT_DEDICATED", "JobUser", "RunAsError", "RunAsPolicy", "SlotAccounts", "choose_user",
           "default_slot_account", "ensure_account", "kill_processes_of", "slot_number", "supplementary_groups",
           "trusted_owner"]

#: the default DEDICATED_EXECUTE_ACCOUNT_REGEXP: the accounts the startd makes for its slots
DEFAULT_DEDICATED = r"htc-slot[0-9]+"


class RunAsError(HTCError):
    """No account may run the job here (a slot account is missing, cannot be made, or is root)."""


@dataclass(frozen=True)
class JobUser:
    """The account a job runs as: name, uid, primary gid, every group it is in, and why."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    owner: bool  # True: the job's Owner; False: the slot's account
    why: str = ""

    def describe(self) -> str:
        """For the log: ``alice (uid 1001, the job's owner)``."""
        what = "the job's owner" if self.owner else f"the slot's account: {self.why}"
        return f"{self.name} (uid {self.uid}, gid {self.gid}, {what})"


@dataclass(frozen=True)
class RunAsPolicy:
    """The knobs that decide it (see the module docstring)."""

    allow_runas_owner: bool = True             # STARTER_ALLOW_RUNAS_OWNER
    uid_domain: str | None = None              # UID_DOMAIN (None: this host's fully qualified name)
    dedicated: str = DEFAULT_DEDICATED         # DEDICATED_EXECUTE_ACCOUNT_REGEXP
    slot_users: Mapping[int, str] = field(default_factory=dict)  # SLOT<N>_USER, by N

    def domain(self) -> str:
        """This startd's UID_DOMAIN."""
        return self.uid_domain or _fqdn()

    def is_dedicated(self, name: str) -> bool:
        """True when ``name`` is one of the dedicated execute accounts."""
        if name in self.slot_users.values():
            return True
        try:
            return bool(self.dedicated) and re.fullmatch(self.dedicated, name) is not None
        except re.error:
            return False

    def account_name(self, number: int) -> str:
        """The account of slot number ``number``: SLOT<N>_USER, else ``htc-slot<N>``."""
        return self.slot_users.get(number) or default_slot_account(number)


@functools.cache
def _fqdn() -> str:
    from htc.config.hostname import full_hostname

    return full_hostname()


def default_slot_account(number: int) -> str:
    """``htc-slot<N>``: the account the startd makes for slot N when SLOT<N>_USER is unset."""
    return f"htc-slot{number}"


def slot_number(slot_name: str) -> int | None:
    """The number of a static slot (``slot3`` or ``slot3@host`` -> 3); None for a dynamic one."""
    match = re.fullmatch(r"slot(\d+)", slot_name.split("@", 1)[0])
    return int(match.group(1)) if match else None


def supplementary_groups(entry: pwd.struct_passwd) -> tuple[int, ...]:
    """Every group ``entry``'s user is in, the primary first (what ``initgroups`` would set)."""
    try:
        groups = os.getgrouplist(entry.pw_name, entry.pw_gid)
    except OSError:
        groups = [entry.pw_gid]
    ordered = [entry.pw_gid, *(g for g in groups if g != entry.pw_gid)]
    return tuple(dict.fromkeys(ordered))


def trusted_owner(job_ad: Mapping[str, Any], policy: RunAsPolicy) -> tuple[pwd.struct_passwd | None, str]:
    """The owner's password entry when the job may run as its owner, else ``(None, why not)``."""
    if not policy.allow_runas_owner:
        return None, "STARTER_ALLOW_RUNAS_OWNER is false"
    if job_ad.get("RunAsOwner") is False:
        return None, "the job says RunAsOwner = false"
    owner = job_ad.get("Owner")
    if not isinstance(owner, str) or not owner:
        return None, "the job has no Owner"
    user = job_ad.get("User")
    domain = user.rpartition("@")[2] if isinstance(user, str) and "@" in user else None
    if domain is None:
        return None, f"the job of {owner} names no submitter domain (User)"
    if domain.lower() != policy.domain().lower():
        return None, f"its UID_DOMAIN {domain!r} is not this startd's {policy.domain()!r}"
    try:
        entry = pwd.getpwnam(owner)
    except (KeyError, ValueError):
        return None, f"its owner {owner!r} has no account here"
    if entry.pw_uid == 0:
        return None, f"its owner {owner!r} is root, and jobs never run as root"
    if policy.is_dedicated(owner):
        return None, f"its owner {owner!r} is a dedicated execute account"
    return entry, ""


def ensure_account(name: str, create: bool, clock: Clock = REAL) -> pwd.struct_passwd:
    """The password entry of slot account ``name``, made with ``useradd --system`` when missing
    and ``create`` (retried for 30 s by ``clock`` while another ``useradd`` holds
    ``/etc/passwd``: :mod:`htc.daemons.clock`).

    Raises:
        RunAsError: it is missing (and may not or cannot be made), or it is root.
    """
    deadline = clock.monotonic() + 30
    while True:
        try:
            entry = pwd.getpwnam(name)
            break
        except KeyError:
            pass
        if not create:
            raise RunAsError(f"slot user {name!r} does not exist; create it (useradd --system {name}) or leave "
                             "SLOT<N>_USER unset so that the startd makes its own htc-slot<N> accounts")
        useradd = shutil.which("useradd")
        if useradd is None:
            raise RunAsError(f"slot user {name!r} does not exist and this system has no useradd to make it; "
                             "create it, or name existing accounts with SLOT<N>_USER")
        done = subprocess.run([useradd, "--system", "--no-create-home", "--user-group", "--shell",
                               "/usr/sbin/nologin", name], capture_output=True, text=True)
        if done.returncode not in (0, 9):  # 9: the name is taken (another startd made it meanwhile)
            if clock.monotonic() > deadline:
                raise RunAsError(f"cannot create slot user {name!r}: {done.stderr.strip()}")
            clock.sleep_blocking(0.2)  # /etc/passwd is locked by a concurrent useradd
    if entry.pw_uid == 0:
        raise RunAsError(f"slot user {name!r} is root; jobs never run as root -- pick an unprivileged account")
    return entry


def choose_user(job_ad: Mapping[str, Any], policy: RunAsPolicy, slot_account: str, *,
                create: bool) -> JobUser | None:
    """Who runs ``job_ad`` (None: this process is not root, the job runs as it).

    Args:
        slot_account: the slot's account for this job (see :class:`SlotAccounts`).
        create: the slot account may be made when missing (the startd's own ``htc-slot<N>``).

    Raises:
        RunAsError: the job would run as the slot account, and it cannot be used.
    """
    if os.geteuid() != 0:
        return None
    entry, why = trusted_owner(job_ad, policy)
    if entry is not None:
        return JobUser(entry.pw_name, entry.pw_uid, entry.pw_gid, supplementary_groups(entry), True)
    entry = ensure_account(slot_account, create)
    # A slot account is in no group but its own: whatever groups an administrator gave it do not
    # reach a job that is not its owner's.
    return JobUser(entry.pw_name, entry.pw_uid, entry.pw_gid, (entry.pw_gid,), False, why)


def _read_proc(pid: int, name: str) -> bytes:
    """The bytes of ``/proc/PID/NAME`` (b"" when the process is gone or cannot be read): one
    open, one read, one close -- a sweep reads a file of every process on the host."""
    try:
        fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.read(fd, 16384)
    except OSError:
        return b""
    finally:
        os.close(fd)


def ppid_from_stat(data: bytes) -> int:
    """The parent pid in the text of ``/proc/PID/stat`` (-1 if it cannot be read): the field
    after the state, counted from the *last* ``)``, since the command name in parentheses may
    itself hold spaces and parentheses."""
    end = data.rfind(b")")
    fields = data[end + 1:].split(None, 2) if end >= 0 else []
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return -1


def _status_of(pid: int) -> tuple[set[int], int]:
    """A process's uids (real, effective, saved, file system) and its parent's pid."""
    uids, ppid = set(), -1
    for line in _read_proc(pid, "status").split(b"\n"):
        try:
            if line.startswith(b"Uid:"):
                uids = {int(x) for x in line.split()[1:]}
            elif line.startswith(b"PPid:"):
                ppid = int(line.split()[1])
        except ValueError:
            continue  # a line the kernel never writes: nothing to learn from it
    return uids, ppid


def kill_processes_of(uid: int, keep: set[int] | frozenset[int] = frozenset(), *,
                      orphans_only: bool = True) -> list[int]:
    """SIGKILL the processes running as ``uid`` (any of its real, effective, saved or file-system
    uids), but those in ``keep``: only orphans (adopted by init: what a job left behind when it
    daemonized), or all of them. Only for a dedicated account, never a person's.

    Only orphans by default: another startd on this host (a second pool, say) may be running a
    job of its own under the same account, whose processes have parents.

    Returns:
        The pids signalled.
    """
    if uid == 0:
        raise ValueError("refusing to kill the processes of root")
    killed = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in keep or pid == os.getpid():
            continue
        # Only orphans: the parent in /proc/PID/stat (short, cheap for the kernel to write)
        # first, the uids of /proc/PID/status (which costs the kernel a walk of the process's
        # memory) only for the few that init adopted. A sweep follows every job's end.
        if orphans_only and ppid_from_stat(_read_proc(pid, "stat")) != 1:
            continue
        uids, ppid = _status_of(pid)
        if uid not in uids or (orphans_only and ppid != 1):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


class SlotAccounts:
    """Which slot account each running job of a startd holds (see the module docstring).

    A static slot ``slotN`` holds number N; a dynamic slot the lowest number no other running
    job holds. :meth:`serve` says whether the account last served another owner (its processes
    and zygotes must then go before the job starts).
    """

    def __init__(self) -> None:
        #: claim id -> the numbers its jobs hold: two for a moment when a kept claim's next job
        #: starts while the last one's account is still being swept
        self._held: dict[str, list[int]] = {}
        self._last_owner: dict[int, str] = {}  # number -> the owner of the last job run as it

    def acquire(self, claim_id: str, slot_name: str) -> int:
        """The number of the slot account for ``claim_id``'s job (held until :meth:`release`)."""
        number = slot_number(slot_name)
        if number is None:
            taken = {n for numbers in self._held.values() for n in numbers}
            number = 1
            while number in taken:
                number += 1
        self._held.setdefault(claim_id, []).append(number)
        return number

    def serve(self, number: int, owner: str) -> bool:
        """A job of ``owner`` runs as account ``number``; True when its last job was another owner's."""
        previous = self._last_owner.get(number)
        self._last_owner[number] = owner
        return previous is not None and previous != owner

    def release(self, claim_id: str, number: int | None = None) -> int | None:
        """``claim_id``'s job that holds ``number`` (default: the claim's oldest) is over; the
        number it held (None: it held none). The claim's next job, started meanwhile, keeps its own."""
        numbers = self._held.get(claim_id)
        if not numbers or (number is not None and number not in numbers):
            return None
        gone = numbers[0] if number is None else number
        numbers.remove(gone)
        if not numbers:
            del self._held[claim_id]
        return gone
