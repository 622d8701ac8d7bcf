"""The exception hierarchy of htc.

Every error htc raises on purpose derives from :class:`HTCError`. The CLI turns an
``HTCError`` into a one-line message and an exit status in one place; anything else is a bug
and keeps its traceback.

Two families matter to a caller:

* :class:`UsageError` -- the caller asked for something wrong (bad option, malformed file, an
  undefined knob). Fix the input and try again.
* :class:`PeerError` -- another daemon or process misbehaved (malformed message, broken
  protocol). Nothing the caller typed is wrong.
"""

from __future__ import annotations


class HTCError(Exception):
    """Base class of every error htc raises on purpose."""

    #: exit status the ``htc`` command uses for this error
    exit_status = 1


class UsageError(HTCError):
    """The caller asked for something that cannot be done as asked; fix the input."""

    exit_status = 2


class PeerError(HTCError):
    """A peer daemon or process sent something wrong; the caller's input is fine."""


class NotBuiltYet(HTCError):
    """A capability a later piece of htc will provide is not in this build yet."""

    exit_status = 3

    def __init__(self, what: str, needs: str):
        super().__init__(
            f"{what} is not available in this build of htc yet: it needs {needs}. "
            "See the project's open issues for its progress."
        )
        self.what = what
        self.needs = needs
