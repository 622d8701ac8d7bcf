"""``htc ssh_to_job``: condor_ssh_to_job on one host. Starts a shell (or runs a command) in a
running job's sandbox, as the account the job runs as, with the job's environment.

HTCondor's starter runs an sshd in the job's sandbox; htc's pool is on this machine, so the tool
finds the sandbox (:func:`htc.client.sandbox.find_running_job`) and starts the shell itself: as
root it takes the job's account (setgid/setgroups/setuid to the sandbox's owner) first; as that
account it needs nothing; anyone else is refused. The environment is the job's main process's
own (``/proc/PID/environ``), or, when that process cannot be read, the one the starter gives a
job (:func:`htc.daemons.starter.env.build_environment`).

With ``-pool HOST[:PORT]`` (a pool on other machines) it says where the job runs and that it
cannot enter a sandbox on another machine (there is no sshd in htc's starter), pointing to
``htc tail -pool`` for the job's output."""

from __future__ import annotations

import argparse
import os
import pwd
import subprocess
import sys
from pathlib import Path

from htc.cli.options import add_command, add_pool_options, transport_from
from htc.client import current_user
from htc.client.sandbox import JOB_AD_NAME, RunningJob, find_running_job
from htc.errors import UsageError

SHELLS = ("/bin/bash", "/bin/sh")


def job_environment(job: RunningJob) -> dict[str, str]:
    """The job's environment: its main process's, else the starter's rule applied to its ad."""
    for pid in job.pids:
        try:
            raw = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        env = {}
        for item in raw.split(b"\0"):
            name, sep, value = item.partition(b"=")
            if sep and name:
                env[os.fsdecode(name)] = os.fsdecode(value)
        if env:
            return env
    from htc.daemons.starter.env import build_environment

    ad = job.sandbox_ad or job.ad
    slot = str((job.ad or {}).get("RemoteHost", "slot1")) if job.ad else "slot1"
    return build_environment(ad, scratch_dir=job.sandbox, slot_name=slot, cpus=int(ad.get("RequestCpus", 1) or 1),
                             job_ad_file=job.sandbox / JOB_AD_NAME, machine_ad_file=job.sandbox / ".machine.ad")


def _shell(entry: pwd.struct_passwd | None, env: dict[str, str]) -> str:
    candidates = [env.get("SHELL", ""), entry.pw_shell if entry else "", *SHELLS]
    try:
        allowed = {line.strip() for line in Path("/etc/shells").read_text().splitlines() if line.startswith("/")}
    except OSError:
        allowed = set(SHELLS)
    for shell in candidates:
        if shell and shell in allowed and os.access(shell, os.X_OK):
            return shell
    return "/bin/sh"


def ssh_to_job(args: argparse.Namespace) -> int:
    """htc ssh_to_job: a shell (or a command) in a running job's sandbox, as the job's user."""
    transport = transport_from(args, "schedd")
    from htc.client.remote import RemotePool

    if isinstance(transport, RemotePool):
        from htc.client.peek import find_remote_job

        remote = find_remote_job(args.job, transport=transport)
        raise UsageError(f"htc ssh_to_job cannot enter a sandbox on another machine yet: job {remote.job_id} runs "
                         f"on the startd at {remote.startd} (HTCondor's starter runs an sshd for this; htc's "
                         f"has none). Run 'htc ssh_to_job {remote.job_id}' on that execute host, or read the job's "
                         f"output from here with 'htc tail -pool {args.pool} {remote.job_id}'")
    job = find_running_job(args.job, transport=transport, home=args.pool)
    me = os.geteuid()
    owner = (job.ad or {}).get("Owner") if job.ad else None
    if me != 0:
        if owner and owner != current_user():
            raise UsageError(f"job {job.job_id} belongs to {owner}; only its owner (or root) may enter its sandbox")
        if me != job.uid:
            raise UsageError(f"job {job.job_id} runs as {job.user}; htc can enter its sandbox only as {job.user} "
                             "or as root (HTCondor's starter would run an sshd for you; htc has none)")
    try:
        entry = pwd.getpwuid(job.uid)
    except KeyError:
        entry = None
    env = job_environment(job)
    env.setdefault("HOME", entry.pw_dir if entry else str(job.sandbox))
    env.setdefault("USER", job.user)
    env.setdefault("LOGNAME", job.user)
    if os.environ.get("TERM"):
        env.setdefault("TERM", os.environ["TERM"])
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    shell = _shell(entry, env)
    # as ssh does: the words of the command joined by spaces, run by the shell (globs, pipes work)
    # (an interactive shell only on a terminal: bash -i on a pipe complains about job control)
    argv = [shell, "-c", " ".join(args.remote_command)] if args.remote_command else \
        [shell, "-i"] if sys.stdin.isatty() else [shell]

    def become_job_user() -> None:
        if os.geteuid() == 0 and job.uid != 0:
            os.setgroups([])
            os.setgid(job.gid)
            os.setuid(job.uid)

    if not args.remote_command:
        slot = (job.ad or {}).get("RemoteHost") if job.ad else None
        print(f"Welcome to {slot or job.user}!\nYour htc job {job.job_id} is running with pid(s) "
              f"{' '.join(map(str, job.pids)) or 'unknown'} in {job.sandbox}, as {job.user}.", flush=True)
    result = subprocess.run(argv, cwd=job.sandbox, env=env, preexec_fn=become_job_user, check=False)
    return result.returncode if result.returncode >= 0 else 128 - result.returncode


def register(sub) -> None:
    """Add ``htc ssh_to_job``."""
    p = add_command(sub, "ssh_to_job", "a shell in a running job's sandbox, as the job's user (condor_ssh_to_job)", [
        "htc ssh_to_job 12.0              # an interactive shell where job 12.0 runs",
        "htc ssh_to_job 12.0 ls -l        # run one command there",
        "htc ssh_to_job 12.0 'tail -f *.log'",
    ])
    p.add_argument("job", metavar="CLUSTER.PROC", help="the running job")
    p.add_argument("remote_command", metavar="COMMAND", nargs=argparse.REMAINDER, help="a command to run instead of an interactive shell")
    add_pool_options(p, daemon="schedd", json=False)
    p.set_defaults(func=ssh_to_job)
