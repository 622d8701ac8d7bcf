"""Durations as HTCondor prints them in the messages the daemons write.

The schedd (a job over its ``allowed_job_duration``) and the startd (over its
``allowed_execute_duration``) hold jobs with reasons that quote the limit as HTCondor's
``format_time_short`` does; both use this one copy.
"""

from __future__ import annotations

__all__ = ["format_time_short"]


def format_time_short(seconds: float) -> str:
    """A duration as HTCondor's ``format_time_short`` prints it in hold reasons: ``H:MM:SS``,
    with ``D+`` in front once it reaches a day (``0:00:05``, ``20:00:00``, ``3+00:00:00``)."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}+{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours}:{minutes:02d}:{secs:02d}"
