"""The ``$CondorVersion: ... $`` string, built in this one place.

HTCondor's daemons, tools and condor_submit all carry the same string, ``$CondorVersion: 25.14.1
2026-09-24 BuildID: 123456 $``: the release, the date the release was built, and a build id. Job
ads (``CondorVersion``, ``SubmitVersion``), the startd's slot ads, the master's and collector's
ads and ``htc version`` all take it from :func:`condor_version`, so they agree to the byte (the date
is a fixed release date, never the day a daemon started). Job ``Requirements`` written by
condor_submit compare ``split(TARGET.CondorVersion)[1]`` with versions such as ``"25.12.0"``, so the
second word is the HTCondor release whose behaviour htc reproduces; the build id names htc's own
version.
"""

from __future__ import annotations

#: the HTCondor release whose behaviour htc reproduces
CONDOR_RELEASE = "25.14.1"

#: the date in the version string (YYYY-MM-DD): htc's release date, as HTCondor's build date
RELEASE_DATE = "2026-09-24"


def condor_version() -> str:
    """``$CondorVersion: 25.14.1 2026-09-24 BuildID: htc-0.1.0 $``."""
    from htc import __version__

    return f"$CondorVersion: {CONDOR_RELEASE} {RELEASE_DATE} BuildID: htc-{__version__} $"
