"""``Submit``: a submit description, with the dictionary API of HTCondor's bindings.

::

    >>> from htc.submit import Submit
    >>> sub = Submit("executable = /bin/echo\\narguments = $(Process)\\nqueue 3")
    >>> [str(ad["Args"]) for ad in sub.jobs(clusterid=7)]            # doctest: +SKIP
    >>> cluster = sub.cluster(7)          # fast path for the job queue
    >>> cluster.cluster_ad["Cmd"], next(cluster.proc_ads())["Args"]
    ('"/bin/echo"', '"0"')
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterator, Mapping

from htc.submit.cluster import Materializer, SubmittedCluster, statement_rows
from htc.submit.errors import SubmitError
from htc.submit.macros import Expander, MacroTable, default_macros, environ_snapshot
from htc.submit.parser import Description, QueueStatement, parse_description
from htc.submit.queue import parse_queue_args
from htc.submit.settings import SubmitSettings


def _dict_to_text(d: Mapping[str, object]) -> str:
    lines = []
    for key, value in d.items():
        if not isinstance(key, str):
            raise TypeError("submit description keys must be strings")
        if key.lower() == "queue":
            raise SubmitError("the queue statement can not be specified in a dictionary; "
                              "use Submit(..., queue='...')")
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (int, float, os.PathLike)):
            value = str(value)
        elif not isinstance(value, str):
            raise TypeError(f"the value of {key!r} must be a string, not {type(value).__name__}")
        lines.append(f"{key} = {value}")
    return "\n".join(lines) + ("\n" if lines else "")


def _serialize(name: str, raw: str) -> str:
    if "\n" in raw:
        tag = "end"
        while f"@{tag}" in raw:
            tag += "x"
        return f"{name} @={tag}\n{raw}\n@{tag}\n"
    return f"{name} = {raw}\n"


class Submit(Mapping):
    """A submit description (condor_submit's language), ready to build job ads.

    Args:
        description: submit-description text, or a dict of ``command: value`` (no queue).
        filename: the file the text came from, for error messages and ``$(SUBMIT_FILE)``.
        cwd: the submit directory; relative paths resolve against it (default: the current
            directory).
        env: the environment ``$ENV()`` and ``getenv`` read (default: ``os.environ``).
        settings: the configuration values submit uses (:class:`SubmitSettings`).
        queue: queue arguments replacing the description's queue statements.
        host_access: whether ``include``, ``queue ... from FILE``, ``from CMD |`` and
            ``matching`` may read files, run commands and list directories with this process's
            rights. The schedd passes False: it expands users' descriptions as root.
    Raises:
        SubmitError: the description cannot be parsed; nothing is queued.
    """

    def __init__(self, description: str | Mapping[str, object] | None = None, *,
                 filename: str | None = None, cwd: str | os.PathLike | None = None,
                 env: Mapping[str, str] | None = None, settings: SubmitSettings | None = None,
                 queue: str | None = None, host_access: bool = True):
        if isinstance(description, Mapping):
            text = _dict_to_text(description)
        elif description is None:
            text = ""
        elif isinstance(description, str):
            text = description
        else:
            raise TypeError("description must be submit-description text or a dict")
        for what, value in (("the submit file name", filename), ("the submit directory", cwd)):
            if value is not None and "\0" in os.fsdecode(value):
                raise SubmitError(f"{what} {os.fsdecode(value)!r} holds a NUL byte, which no path may contain")
        self._text = text
        self.filename = filename
        self.host_access = host_access
        #: condor_submit's file checks: called as ``check_file(role, path, transfer)`` with each
        #: job's executable (role ``"executable"``; ``transfer``: it will be transferred) and
        #: raising :class:`SubmitError` to refuse it. None (the bindings' default): no checks.
        self.check_file = None
        self.cwd = os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd())
        self.env: dict[str, str] = environ_snapshot(env)
        self.settings = settings or SubmitSettings()
        self._overrides: dict[str, str] = {}
        self._qargs: str | None = None
        self._desc: Description | None = None
        self._defaults = self.defaults_at(time.time())
        self._parsed = parse_description(text, filename=filename, cwd=self.cwd,
                                         defaults=self._defaults, env=self.env, host_access=host_access)
        if queue is not None:
            self.setQArgs(queue)

    def fork(self) -> Submit:
        """A copy of this description as parsed, without its dictionary edits and queue override
        (the parse is shared, not redone: a DAG manager sets each node's commands on a fork)."""
        new = copy.copy(self)
        new._overrides = {}
        new._qargs = None
        new._desc = None
        return new

    def defaults_at(self, submit_time: float) -> dict[str, str]:
        """The built-in macros (ARCH, OPSYS, SUBMIT_TIME, ...) for a submit at ``submit_time``."""
        s = self.settings
        return default_macros(arch=s.arch, opsys=s.opsys, opsys_and_ver=s.opsys_and_ver,
                              opsys_major_ver=s.opsys_major_ver, opsys_ver=s.opsys_ver,
                              submit_file=self.filename or "", submit_time=submit_time,
                              spool=s.spool)

    # -- the parsed description, with dictionary edits and a replaced queue statement -----
    def _description(self) -> Description:
        if self._desc is not None:
            return self._desc
        parsed = self._parsed
        macros = parsed.macros.copy()
        queues = [QueueStatement(q.text, q.args, q.line, q.file, q.macros.copy())
                  for q in parsed.queues]
        for key, value in self._overrides.items():
            name = "MY." + key[1:] if key[:1] in "+-" else key
            macros.set(name, value)
            for q in queues:
                q.macros.set(name, value)
        if self._qargs is not None or not queues:
            text = self._qargs or ""
            try:
                args = parse_queue_args(self._expander(macros).expand(text))
            except SubmitError as e:
                raise e.located(file=self.filename, line=None, command="queue") from None
            if args.source == "<":
                raise SubmitError("a queue statement given separately cannot continue onto "
                                  "following lines; close its '(' list on the same line")
            queues = [QueueStatement(text, args, None, self.filename, macros.copy())]
        self._desc = Description(macros, queues, list(parsed.warnings))
        return self._desc

    def _expander(self, macros: MacroTable | None = None) -> Expander:
        # an empty table is falsy: test for None, or a description of only comments recurses
        return Expander(self._description().macros if macros is None else macros, self._defaults, {},
                        self.env, self.cwd)

    @property
    def has_queue_statement(self) -> bool:
        """Whether the text has a queue statement (condor_submit refuses one without)."""
        return bool(self._parsed.queues) or self._qargs is not None

    @property
    def warnings(self) -> list[str]:
        """Warnings the description produced (``warning :`` lines)."""
        return list(self._description().warnings)

    @property
    def submit_text(self) -> str:
        """Submit text that reproduces this description exactly (for re-materialisation)."""
        if self._qargs is None and not self._overrides:
            return self._text
        if self._qargs is not None or not self._parsed.queues:
            return str(self)
        lines = self._text.splitlines()
        extra = [_serialize(k, v).rstrip("\n") for k, v in self._overrides.items()]
        for q in sorted(self._parsed.queues, key=lambda q: q.line, reverse=True):
            lines[q.line - 1:q.line - 1] = extra
        return "\n".join(lines + extra) + "\n"

    # -- dictionary API (as htcondor2.Submit) ---------------------------------------------
    def __getitem__(self, key: str) -> str:
        if not isinstance(key, str):
            raise TypeError("key must be a string")
        name = "MY." + key[1:] if key[:1] == "+" else key
        m = self._description().macros.macro(name)
        if m is None:
            raise KeyError(key)
        return m.raw

    def __setitem__(self, key: str, value: str) -> None:
        """Set a command; it applies to every queue statement, as if written before each."""
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("keys and values must be strings")
        if key.lower() == "queue":
            raise SubmitError("set the queue statement with setQArgs(), not as a key")
        if "\0" in key or "\0" in value:
            raise SubmitError(f"the command {key!r} = {value!r} holds a NUL byte, which no command or value "
                              "may contain")
        self._overrides[key] = value
        self._desc = None

    def update(self, other: Mapping[str, str] = (), **kw: str) -> None:
        """Set several commands (see :meth:`__setitem__`)."""
        for k, v in dict(other, **kw).items():
            self[k] = v

    def __iter__(self) -> Iterator[str]:
        return (m.name for m in self._description().macros)

    def __len__(self) -> int:
        return len(self._description().macros)

    def __str__(self) -> str:
        desc = self._description()
        if len(desc.queues) > 1 or (self._qargs is None and len(self._parsed.queues) > 1):
            return self.submit_text
        out = "".join(_serialize(m.name, m.raw) for m in desc.macros)
        if self.has_queue_statement:
            q = desc.queues[0].text
            out += "queue\n" if not q else f"queue {q}\n"
        return out

    def __repr__(self) -> str:
        return f"Submit({str(self)!r})"

    def expand(self, key: str) -> str:
        """The value of ``key`` with macros expanded ("" when undefined).

        Raises:
            SubmitError: a macro function in the value is misused.
        """
        return self._expander().param(key) or ""

    def getQArgs(self) -> str:  # noqa: N802 (the bindings' name)
        """The arguments of the (first) queue statement, unexpanded."""
        q = self._description().queues
        return q[0].text if q else ""

    def setQArgs(self, args: str) -> None:  # noqa: N802
        """Replace the queue statements by one with these arguments ("queue " optional)."""
        if not isinstance(args, str):
            raise TypeError("queue arguments must be a string")
        a = args.strip()
        if "\0" in a:
            raise SubmitError(f"the queue arguments {a!r} hold a NUL byte, which no item or path may contain")
        if a.lower() == "queue" or a.lower().startswith("queue "):
            a = a[5:].strip()
        self._qargs = a
        self._desc = None
        self._description()

    def itemdata(self) -> Iterator[str | dict[str, str]]:
        """The items of the (first) queue statement: dicts when it names variables."""
        q = self._description().queues[0]
        names, rows = statement_rows(q, self.cwd, self.env, self.host_access)
        for _row, values in rows:
            if q.args.vars:
                yield dict(zip(names, values))
            elif q.args.mode:
                yield values[0]

    # -- building job ads ---------------------------------------------------------------
    def cluster(self, clusterid: int, *, qdate: int | None = None, owner: str | None = None,
                first_proc: int = 0, fast: bool = True, check=None,
                varying: frozenset[str] = frozenset()) -> SubmittedCluster:
        """Plan the cluster: the common cluster ad now, per-proc ads on demand.

        Args:
            clusterid: the ClusterId.
            qdate: submit time (QDate, EnteredCurrentStatus, $(SUBMIT_TIME)); default now.
            owner: the submitting user; None leaves ``Owner = undefined`` for the schedd.
            first_proc: ProcId of the first proc.
            fast: build per-proc ads from templates where that is proven exact; False
                re-runs the per-proc commands for every proc (same result, slower).
            check: called with the number of procs as soon as the queue statements' items are
                counted, before any proc is built: a limit (MAX_JOBS_PER_SUBMISSION) raises
                there, so ``queue 100000000`` is refused in milliseconds.
            varying: command names (lower case, ``my.x`` for ``+x``) whose values will change
                in later submissions of this description: their use is traced for
                :class:`htc.submit.reuse.Reusable` (the result is the same).
        Returns:
            A :class:`SubmittedCluster`.
        Raises:
            SubmitError: the description is invalid; nothing may be queued.
        """
        qdate = int(time.time()) if qdate is None else int(qdate)
        return SubmittedCluster(Materializer(self, int(clusterid), qdate, owner, first_proc, fast, check,
                                             varying))

    def jobs(self, clusterid: int = 1, procid: int = 0, qdate: int | None = None,
             owner: str | None = None) -> Iterator:
        """Yield each proc's complete job ad as an ``htc.classad.ClassAd``.

        Raises:
            SubmitError: the description is invalid.  Errors in cluster-wide commands are
                raised before the first ad; a value invalid for only some procs (say an item
                that is not a number) when the first such proc is reached.
        """
        from htc.classad import ParserType, parseOne

        cluster = self.cluster(clusterid, qdate=qdate, owner=owner, first_proc=procid)
        for ad in cluster.job_ads(procid, procid + cluster.num_procs):
            yield parseOne("\n".join(f"{k} = {v}" for k, v in ad.items()), ParserType.Old)

    def procs(self, clusterid: int = 1, procid: int = 0, qdate: int | None = None,
              owner: str | None = None) -> Iterator[dict[str, str]]:
        """Like :meth:`jobs`, as attribute -> expression-text dicts."""
        cluster = self.cluster(clusterid, qdate=qdate, owner=owner, first_proc=procid)
        return cluster.job_ads(procid, procid + cluster.num_procs)
