"""Submitters: the name a job is charged to, its accounting group, and the Submitter ads.

Theory of operation
-------------------
HTCondor shares a pool among *submitters*, not among users or jobs. A submitter is named
``user@uid_domain`` (``alice@example.net``), or ``group.user@uid_domain`` when the job names an
accounting group (``group_physics.einstein@example.net``), or ``nice-user.user@uid_domain`` for
a nice-user job: :func:`submitter_name` forms the name and :func:`submitter_of_job` reads it
off a job ad. :func:`accounting_group_of` says which configured group (``GROUP_NAMES``) a name
belongs to; the accountant's factors and the policy attributes ``SubmitterGroup`` /
``RemoteGroup`` follow from it.

Every schedd advertises one Submitter ad per submitter with idle or running jobs;
:func:`submitter_from_ad` reads one into a :class:`SubmitterAd`, which is all a cycle needs of
it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from htc.errors import UsageError

__all__ = ["submitter_name", "submitter_of_job", "accounting_group_of", "SubmitterAd",
           "submitter_from_ad"]


def submitter_name(
    owner: str,
    uid_domain: str,
    *,
    accounting_group: str | None = None,
    accounting_group_user: str | None = None,
    nice_user: bool = False,
    nice_user_group: str = "nice-user",
) -> str:
    """Form the submitter name HTCondor charges a job to.

    Args:
        owner: the job's owner (``alice``).
        uid_domain: the schedd's ``UID_DOMAIN`` (``example.net``).
        accounting_group: submit command ``accounting_group`` (``group_physics``), if any.
        accounting_group_user: submit command ``accounting_group_user``; defaults to ``owner``.
        nice_user: submit command ``nice_user``; puts the job in the ``nice-user`` group.
        nice_user_group: ``NICE_USER_ACCOUNTING_GROUP_NAME``.

    Returns:
        ``alice@example.net``, ``group_physics.einstein@example.net`` or
        ``nice-user.alice@example.net``.

    Raises:
        UsageError: the owner or domain is empty or contains ``@``.
    """
    for what, value in (("owner", owner), ("uid_domain", uid_domain)):
        if not value or "@" in value:
            raise UsageError(
                f"cannot form a submitter name: {what} {value!r} must be a non-empty name "
                "without '@' (the name is formed as user@uid_domain)"
            )
    user = accounting_group_user or owner
    if accounting_group:
        return f"{accounting_group}.{user}@{uid_domain}"
    if nice_user:
        return f"{nice_user_group}.{user}@{uid_domain}"
    return f"{user}@{uid_domain}"


def submitter_of_job(job: Mapping, uid_domain: str) -> str:
    """Return the submitter a job ad is charged to (its ``AccountingGroup`` or ``User``).

    Args:
        job: a job ad (any mapping; attribute names are matched case-insensitively).
        uid_domain: the schedd's ``UID_DOMAIN``, used when the ad has no ``User``.

    Returns:
        The submitter name, e.g. ``group_physics.einstein@example.net``.

    Raises:
        UsageError: the ad has neither ``AccountingGroup``, ``User`` nor ``Owner``.
    """
    attrs = {str(k).lower(): v for k, v in job.items()}
    group = attrs.get("accountinggroup")
    if isinstance(group, str) and group:
        return f"{group}@{uid_domain}"
    owner = attrs.get("owner")
    if attrs.get("niceuser") is True and isinstance(owner, str):
        return submitter_name(owner, uid_domain, nice_user=True)
    user = attrs.get("user")
    if isinstance(user, str) and "@" in user:
        return user
    if isinstance(owner, str) and owner:
        return submitter_name(owner, uid_domain)
    raise UsageError(
        "cannot tell whom to charge for this job: its ad has no AccountingGroup, User or "
        "Owner attribute; the schedd sets Owner and User when it accepts a job"
    )


def accounting_group_of(submitter: str, group_names: Iterable[str]) -> str | None:
    """Return the configured accounting group a submitter belongs to, or ``None``.

    HTCondor assigns ``group_a.sub.alice@dom`` to the longest configured group that prefixes
    its local part (``group_a.sub`` if configured, else ``group_a``); names compare
    case-insensitively.

    Args:
        submitter: a submitter name.
        group_names: the configured ``GROUP_NAMES``.

    Returns:
        The configured group name as spelled in the configuration, or ``None`` for ``<none>``.
    """
    local = submitter.rsplit("@", 1)[0].lower()
    best: str | None = None
    for group in group_names:
        g = group.lower()
        if local.startswith(g + ".") and (best is None or len(g) > len(best)):
            best = group
    return best



@dataclass(frozen=True)
class SubmitterAd:
    """One submitter at one schedd, as its Submitter ad describes it."""

    name: str
    schedd: str
    schedd_address: str = ""
    idle_jobs: int = 0
    running_jobs: int = 0



def submitter_from_ad(ad) -> SubmitterAd:
    """Read a Submitter ad (``Name``, ``ScheddName``, ``MyAddress``, ``IdleJobs``, ``RunningJobs``).

    Raises:
        UsageError: the ad lacks ``Name`` or ``ScheddName``.
    """
    if isinstance(ad, SubmitterAd):
        return ad
    name, schedd = ad.get("Name"), ad.get("ScheddName")
    if not isinstance(name, str) or not isinstance(schedd, str):
        raise UsageError(
            f"submitter ad needs string Name and ScheddName attributes, got Name={name!r}, "
            f"ScheddName={schedd!r}; the schedd advertises one such ad per submitter"
        )

    def count(attr: str) -> int:
        v = ad.get(attr, 0)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0

    address = ad.get("MyAddress", ad.get("ScheddIpAddr", ""))
    return SubmitterAd(name=name, schedd=schedd,
                       schedd_address=address if isinstance(address, str) else "",
                       idle_jobs=count("IdleJobs"), running_jobs=count("RunningJobs"))

