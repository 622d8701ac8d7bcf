"""The job queue's sqlite file: schema, opening, creating, and refusing foreign files.

Theory of operation
-------------------
Everything durable about the queue lives in one sqlite database in WAL mode. The schema below
is the only place tables are declared. Clusters store their ClassAd once (``clusters.ad``);
each job stores only the attributes that differ from its cluster (``jobs.ad``), plus the
hot attributes as plain indexed columns -- that is how HTCondor's own queue stores a cluster
(a ``ProcId -1`` ad that every proc chains to) and why a ``queue 100000`` is one small row per
job.

Durability: ``synchronous=FULL`` makes every commit fsync the WAL, so a transaction that
returned from COMMIT survives a crash; SIGKILL or power loss in the middle of a transaction
leaves no trace of it (sqlite's atomic commit). Nothing else is needed for crash safety
except committing whole units (a whole cluster, a whole status change) in one transaction.

Creating a queue is itself crash safe: the database is built under a temporary name with
``journal_mode=DELETE``, fsynced, and then hard-linked into place (``link(2)`` fails if the
name exists, so two creators cannot clobber each other), after which the directory is
fsynced. A file at the queue's path is therefore either absent, a complete empty queue, or
something we did not write.

Foreign and damaged files are refused, never rewritten. Before sqlite touches a file we
check its first 16 bytes for the sqlite magic; then ``PRAGMA application_id`` must be ours
(``0x48544351``, "HTCQ"), the schema version known, and ``PRAGMA quick_check`` clean.
Any sqlite error while opening becomes :class:`QueueFileError` naming the file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3

import sqlite_utils

from htc.errors import HTCError, UsageError
from htc.jobqueue import promises

APPLICATION_ID = 0x48544351  # "HTCQ"
SCHEMA_VERSION = 1
SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 10_000

# The whole schema. JSON columns hold {attribute: ClassAd expression text} objects.
SCHEMA = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value
) WITHOUT ROWID;

CREATE TABLE clusters (
    cluster_id  INTEGER PRIMARY KEY,
    owner       TEXT,
    qdate       INTEGER NOT NULL,
    num_procs   INTEGER NOT NULL,        -- procs the submit description asks for
    next_proc   INTEGER NOT NULL,        -- procs materialized so far (the next ProcId)
    ad          TEXT NOT NULL,           -- JSON: attributes common to every proc
    proc_attrs  TEXT NOT NULL,           -- JSON list: attribute names some proc overrides
    factory     TEXT                     -- JSON: late materialization recipe, NULL if none
);

CREATE TABLE jobs (
    cluster_id      INTEGER NOT NULL,
    proc_id         INTEGER NOT NULL,
    status          INTEGER NOT NULL,    -- JobStatus
    prio            INTEGER NOT NULL,    -- JobPrio
    owner           TEXT COLLATE NOCASE, -- Owner (ClassAd == ignores case)
    qdate           INTEGER NOT NULL,    -- QDate
    entered_status  INTEGER NOT NULL,    -- EnteredCurrentStatus
    autocluster_id  INTEGER,             -- AutoClusterId
    ad              TEXT,                -- JSON: this proc's own attributes, NULL if none
    PRIMARY KEY (cluster_id, proc_id)
) WITHOUT ROWID;
CREATE INDEX jobs_by_owner ON jobs (owner, status);
CREATE INDEX jobs_by_status ON jobs (status);
CREATE INDEX jobs_by_autocluster ON jobs (autocluster_id) WHERE autocluster_id IS NOT NULL;

CREATE TABLE history (
    cluster_id       INTEGER NOT NULL,
    proc_id          INTEGER NOT NULL,
    owner            TEXT,
    status           INTEGER NOT NULL,   -- JobStatus when it left: 3 Removed or 4 Completed
    completion_date  INTEGER NOT NULL,   -- when it left the queue
    ad               TEXT NOT NULL,      -- JSON: the whole job ad
    PRIMARY KEY (cluster_id, proc_id)
) WITHOUT ROWID;
CREATE INDEX history_by_owner ON history (owner, completion_date);
CREATE INDEX history_by_date ON history (completion_date);

CREATE TABLE autoclusters (
    autocluster_id  INTEGER PRIMARY KEY,
    signature       TEXT NOT NULL UNIQUE -- JSON: significant attribute values
);
"""

#: The columns of a ``jobs`` row in the order the queue reads and writes them: the hot
#: attributes in ``HOT_ATTRS`` order (so a row doubles as a job's hot tuple), then ``ad``.
JOB_COLUMNS = ("cluster_id, proc_id, status, prio, owner, qdate, entered_status, "
               "autocluster_id, ad")

# The tables of remembered submissions and results owed to disk (htc.jobqueue.promises) came
# later: a queue file without them gets them when it is opened (see _add_later_tables).
SCHEMA += promises.TABLES

EXPECTED_TABLES = {"meta", "clusters", "jobs", "history", "autoclusters"}


class QueueFileError(UsageError):
    """The file at the queue's path is not a usable htc job queue; it was left untouched."""

    def __init__(self, path: str, problem: str, advice: str):
        super().__init__(f"{path}: {problem}; {advice}")
        self.path = path


class QueueStorageError(HTCError):
    """sqlite failed while using an open queue (disk full, I/O error, file damaged meanwhile)."""


def _configure(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    # Frequent small checkpoints keep the WAL short and reads fast.
    conn.execute("PRAGMA wal_autocheckpoint = 4000")
    conn.execute("PRAGMA cache_size = -65536")
    conn.execute("PRAGMA temp_store = MEMORY")


def _fsync_dir(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_stale_temp_files(path: str) -> None:
    """Delete leftovers of creators that died before linking their file into place."""
    directory = os.path.dirname(os.path.abspath(path))
    prefix = f".{os.path.basename(path)}.creating-"
    for name in os.listdir(directory):
        if not name.startswith(prefix):
            continue
        try:
            pid = int(name[len(prefix):].split("-")[0])
            os.kill(pid, 0)
        except ProcessLookupError:
            # Its creator is dead; another opener may be removing it at the same time.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
        except (ValueError, PermissionError):
            continue


def _create(path: str) -> None:
    """Build an empty queue under a temporary name and link it into place atomically."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)),
                       f".{os.path.basename(path)}.creating-{os.getpid()}-{id(path)}")
    if os.path.exists(tmp):
        os.unlink(tmp)
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("BEGIN")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT INTO meta (key, value) VALUES ('next_cluster_id', 1)")
        conn.execute("COMMIT")
    finally:
        conn.close()
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass  # another creator won; its file is as good as ours
    finally:
        os.unlink(tmp)
    _fsync_dir(path)


def _check_magic(path: str) -> None:
    with open(path, "rb") as f:
        head = f.read(len(SQLITE_MAGIC))
    if head != SQLITE_MAGIC:
        what = "an empty file" if not head else "not a sqlite database"
        raise QueueFileError(
            path, f"{what}, so not an htc job queue",
            "move it away or pick another path; htc will not overwrite it")


def _check_identity(path: str, db: sqlite_utils.Database, verify: bool) -> None:
    conn = db.conn
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    if app_id != APPLICATION_ID:
        raise QueueFileError(
            path, f"a sqlite database of another application (application_id {app_id:#x})",
            "it is not an htc job queue; move it away or pick another path")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise QueueFileError(
            path, f"a job queue in format version {version}, newer than this htc ({SCHEMA_VERSION})",
            "open it with a newer htc")
    missing = EXPECTED_TABLES - set(db.table_names())
    if missing:
        raise QueueFileError(
            path, f"an htc job queue without its {', '.join(sorted(missing))} table(s)",
            "the file is damaged; restore it from a backup")
    if verify:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise QueueFileError(
                path, "a damaged job queue (sqlite quick_check: " + "; ".join(problems[:3]) + ")",
                "restore it from a backup")


def _add_later_tables(conn: sqlite3.Connection) -> None:
    """Give a queue made before :mod:`htc.jobqueue.promises` its tables (older htc versions
    ignore them). A reader that may not write the file (``htc history`` of another user) does
    without: it never uses them."""
    have = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if have.issuperset(promises.TABLE_NAMES):
        return
    try:
        conn.executescript(promises.TABLES)
    except sqlite3.OperationalError:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def open_database(path: str, *, create: bool = True, verify: bool = True) -> sqlite_utils.Database:
    """Open (or create) the queue database at ``path``, refusing anything that is not ours.

    Args:
        path: the queue file, or ``":memory:"`` for a throw-away queue.
        create: create an empty queue when the file does not exist.
        verify: run sqlite's ``quick_check`` (reads the whole file once).

    Returns:
        A sqlite-utils ``Database`` in autocommit mode (callers issue BEGIN/COMMIT).

    Raises:
        QueueFileError: the file is missing (and ``create`` is false), foreign, newer or
            damaged. The file is left exactly as it was.
    """
    if path == ":memory:":
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("INSERT INTO meta (key, value) VALUES ('next_cluster_id', 1)")
        return sqlite_utils.Database(conn)
    if not os.path.exists(path):
        if not create:
            raise QueueFileError(path, "no job queue here", "create one, or check the path")
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise QueueFileError(path, f"the directory {directory} does not exist", "create it first")
        _remove_stale_temp_files(path)
        _create(path)
    if os.path.isdir(path):
        raise QueueFileError(path, "a directory, not a job queue file", "give the path of a file")
    _check_magic(path)
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise QueueFileError(path, f"sqlite cannot open it ({exc})", "check its permissions") from None
    try:
        db = sqlite_utils.Database(conn)
        _check_identity(path, db, verify)
        _configure(conn)
        _add_later_tables(conn)
    except QueueFileError:
        conn.close()
        raise
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise QueueFileError(path, f"a damaged or foreign sqlite file ({exc})",
                             "htc left it untouched; restore it from a backup or move it away") from None
    return db


class _Translate(contextlib.AbstractContextManager):
    """Turns a sqlite3 error inside the block into QueueStorageError naming the queue's file."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is not None and isinstance(exc, sqlite3.Error):
            raise QueueStorageError(
                f"the job queue {self.path} failed: {exc}; check free disk space and the "
                "file's health (htc refuses a damaged queue when it is next opened)") from exc
        return False


def translate_errors(path: str) -> _Translate:
    """A context in which any sqlite3 error becomes :class:`QueueStorageError` about ``path``:
    the queue translates sqlite's errors once, here at its edge."""
    return _Translate(path)
