"""Fuzzing every daemon of a real personal pool over its socket (issue #14, part 4).

Random bytes, and random messages that follow the schema's structure (every message type, every
field) with extreme values in their fields: empty and 100,000-character strings, NUL bytes,
ClassAd text with operator chains of hundreds of terms, 5,000-digit numbers in text, integers
at and beyond 64 bits, NaN and infinities, enum values that do not exist.  Each is sent to a
daemon (master, collector, negotiator, schedd, startd) on a connection of its own; the daemon
must answer with a message (a reply or an ErrorReply), and after each input it must still
answer Ping with the same pid.  At the end no daemon has been restarted by the master.

Bounded for CI (``max_examples``, no deadline); ``HTC_WIRE_FUZZ_EXAMPLES=N`` runs N inputs per
test instead, for a longer campaign.  Messages that would stop the pool on purpose
(DaemonsOff, DaemonsRestart) are not sent: stopping when asked is not a crash.
"""

from __future__ import annotations

import os
import socket
import struct

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htc.client import ping
from htc.wire import messages as m
from poolutil import Pool

pytestmark = pytest.mark.slow

DAEMONS = ("MASTER", "COLLECTOR", "NEGOTIATOR", "STARTD", "SCHEDD")
SKIPPED = {"DaemonsOff", "DaemonsRestart"}
MESSAGES = [cls for cls in m.MESSAGE_TYPES if cls.__name__ not in SKIPPED]
EXAMPLES = int(os.environ.get("HTC_WIRE_FUZZ_EXAMPLES", "0"))


def _settings(n: int):
    return settings(max_examples=EXAMPLES or n, deadline=None, derandomize=not EXAMPLES,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def pool():
    p = Pool(", ".join(d for d in DAEMONS if d != "MASTER"))
    try:
        p.start()
        p.submit(f"executable = /bin/sleep\narguments = 1\nhold = true\nqueue 3\n")
        p.pids = {d: ping(d.lower(), transport=p.transport, timeout=10).pid for d in DAEMONS}
        yield p
        for daemon in DAEMONS:
            if daemon != "MASTER":
                assert p.status(daemon).restarts == 0, daemon
    finally:
        p.stop()


# --- extreme values, by field type ---------------------------------------------------------------

CHAIN = " || ".join(f'Name == "n{i}"' for i in range(400))
STRINGS = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "\x00", "a\x00b", "9" * 5000, "1." + "9" * 5000, "x" * 100_000, CHAIN,
                     "[ A = " + CHAIN + " ]", "[ Requirements = " + " + ".join(["1"] * 500) + " ]",
                     "MY" + ".a" * 400, "(" * 200 + "1" + ")" * 200, "[", "[ A = ", "]", "é" * 50,
                     "../../etc/passwd", "/", "schedd", "collector", "1.0", "0.0", "-1",
                     "Owner == \"root\"", "true", "[ Cmd = \"/bin/true\"; Owner = \"x\" ]"]))
INTS = st.one_of(st.integers(-5, 5), st.sampled_from([2**31 - 1, 2**31, 2**63 - 1, -2**63, 2**64 - 1]),
                 st.integers(min_value=-2**63, max_value=2**64 - 1))
FLOATS = st.one_of(st.floats(), st.sampled_from([0.0, -0.0, 1e308, float("inf"), float("nan"), 1e12, 2.0]))
ANY = st.one_of(STRINGS, INTS, FLOATS, st.booleans(), st.none(), st.binary(max_size=20),
                st.lists(st.integers(), max_size=3))


def value_of(t, depth: int = 0) -> st.SearchStrategy:
    """Values for a msgspec type: mostly within the type's rules (so that most messages pass the
    decoder and reach the daemon's code), with extreme contents; sometimes outside them."""
    ti = msgspec.inspect
    if isinstance(t, ti.StrType):
        if t.pattern:
            return st.one_of(st.from_regex(t.pattern, fullmatch=True), st.from_regex(t.pattern, fullmatch=True),
                             st.from_regex(t.pattern, fullmatch=True), STRINGS)
        return STRINGS
    if isinstance(t, ti.IntType):
        lo = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else -2**63)
        hi = t.le if t.le is not None else 2**63 - 1
        edges = st.sampled_from(sorted({lo, hi, max(lo, min(hi, 0)), max(lo, min(hi, 1))}))
        return st.one_of(edges, st.integers(lo, hi), st.integers(max(lo, 0), min(hi, 100)), INTS)
    if isinstance(t, ti.FloatType):
        return st.one_of(st.floats(0, 1e6), st.sampled_from([0.0, 1.0, 2400.0, 1e12]), FLOATS)
    if isinstance(t, ti.BoolType):
        return st.booleans()
    if isinstance(t, ti.BytesType):
        return st.one_of(st.binary(max_size=50), st.just(b"\x00" * 70_000))
    if isinstance(t, ti.NoneType):
        return st.none()
    if isinstance(t, ti.EnumType):
        valid = st.sampled_from([e.value for e in t.cls])
        return st.one_of(valid, valid, valid, STRINGS)
    if isinstance(t, ti.LiteralType):
        valid = st.sampled_from(list(t.values))
        return st.one_of(valid, valid, valid, STRINGS)
    if isinstance(t, ti.UnionType):
        return st.one_of(*[value_of(x, depth) for x in t.types])
    if isinstance(t, (ti.VarTupleType, ti.ListType)):
        if depth > 2:
            return st.just([])
        return st.lists(value_of(t.item_type, depth + 1), max_size=3)
    if isinstance(t, ti.DictType):
        return st.dictionaries(value_of(t.key_type, depth + 1), value_of(t.value_type, depth + 1), max_size=3)
    if isinstance(t, ti.StructType):
        return struct_of(t, depth + 1)
    return ANY


def _chain(op: str, n: int, term: str) -> str:
    return f" {op} ".join([term.format(i=i) for i in range(n)])


#: what a ``constraint`` field carries: mostly expressions that killed daemons on 7af1fba
HOSTILE_CONSTRAINTS = [_chain("||", 400, 'Args == "a{i}"'), _chain("||", 400, 'Name == "n{i}"') + " || true",
                     "(" + _chain("+", 400, "{i}") + ") > 0", "MY" + ".a" * 400 + " =?= undefined",
                     _chain("&&", 700, "ProcId >= 0"), _chain("||", 3000, "ClusterId == {i}"),
                     "ClusterId == " + "9" * 5000, "(" * 130 + "true" + ")" * 130, "Owner == == 1",
                     "unresolved(Requirements)", "eval(" + '"' + _chain("+", 300, "1") + '"' + ") > 0"]
CONSTRAINTS = st.one_of(st.sampled_from(HOSTILE_CONSTRAINTS), STRINGS)
#: what a field of ClassAd text carries
HOSTILE_ADS = ["[ Requirements = " + _chain("||", 700, 'TARGET.Name == "s{i}"') + " ]",
                     "[ A = MY" + ".b" * 500 + " ]",
                     "[ ClusterId = " + "9" * 5000 + "; ProcId = 0 ]",
                     "[ Rank = " + _chain("*", 500, "2") + "; Requirements = true ]"]
AD_TEXTS = st.one_of(st.sampled_from(HOSTILE_ADS), STRINGS)
HOSTILE_JOB_IDS = ["9" * 5000, "1." + "9" * 5000, "99999999999", "1.0"]


def struct_of(t, depth: int = 0) -> st.SearchStrategy:
    def field_values(f):
        if f.encode_name == "constraint":
            return CONSTRAINTS
        if f.encode_name.endswith(("ad", "ad_text", "ads")) and isinstance(f.type, msgspec.inspect.StrType):
            return AD_TEXTS
        return value_of(f.type, depth)
    fields = {f.encode_name: field_values(f) for f in t.fields}
    required = [f.encode_name for f in t.fields if f.required]
    optional = [f.encode_name for f in t.fields if not f.required]
    base = st.fixed_dictionaries({k: fields[k] for k in required},
                                 optional={k: fields[k] for k in optional})
    if t.tag_field is None:
        return base
    return base.map(lambda d, tag=t.tag, field=t.tag_field: {field: tag, **d})


#: which daemons handle each request (a message sent elsewhere is only "unknown_request")
HANDLERS = {
    "COLLECTOR": ("UpdateAd", "InvalidateAd", "QueryAds"),
    "MASTER": ("QueryMaster", "DaemonsOn"),
    "NEGOTIATOR": ("Reschedule", "SetUserPriority"),
    "SCHEDD": ("Submit", "QueryJobs", "ActOnJobs", "EditJobs", "Reschedule", "GetResourceRequests",
               "MatchNotify", "StarterUpdate", "JobOutput", "JobExited", "CallsDone", "ReleaseClaim"),
    "STARTD": ("RequestClaim", "ActivateClaim", "ClaimKeepAlive", "ReleaseClaim", "RunCalls", "Vacate",
               "Suspend", "Continue", "DrainJobs", "CancelDrainJobs"),
}


def _addressed(cls) -> st.SearchStrategy:
    daemons = [d for d, names in HANDLERS.items() if cls.__name__ in names] or list(DAEMONS)
    return st.tuples(st.sampled_from(daemons), struct_of(msgspec.inspect.type_info(cls)))


#: (daemon, message): each request to a daemon that handles it, and half of the time one of
#: the requests that read an expression or a job id, with the contents that killed daemons
MESSAGE = st.one_of(
    st.one_of(*[_addressed(cls) for cls in MESSAGES]),
    st.one_of(
        st.tuples(st.just("SCHEDD"), st.fixed_dictionaries({"type": st.just("QueryJobs"), "constraint": CONSTRAINTS})),
        st.tuples(st.just("COLLECTOR"), st.fixed_dictionaries({"type": st.just("QueryAds"), "ad_type": st.sampled_from(
            [t.value for t in m.AdType]), "constraint": CONSTRAINTS})),
        st.tuples(st.just("SCHEDD"), st.fixed_dictionaries({"type": st.just("ActOnJobs"), "action": st.just("Hold"),
                                                            "constraint": CONSTRAINTS})),
        st.tuples(st.just("SCHEDD"), st.fixed_dictionaries({"type": st.just("Submit"), "cluster_ad": AD_TEXTS,
                                                            "proc_ads": st.lists(AD_TEXTS, min_size=1, max_size=2)})),
        st.tuples(st.sampled_from(["SCHEDD", "STARTD"]), st.fixed_dictionaries({
            "type": st.sampled_from(["StarterUpdate", "JobExited", "ActOnJobs"]), "claim_id": st.just("c"),
            "job_id": st.sampled_from(HOSTILE_JOB_IDS),
            "update_ad": AD_TEXTS}))))


# --- talking to a daemon ---------------------------------------------------------------------------

def exchange(pool: Pool, daemon: str, payload: bytes) -> bytes | None:
    """Send bytes as they are, then close our side; return the first reply frame (None: none)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(60)
        sock.connect(str(pool.home / "sockets" / f"{daemon.lower()}.sock"))
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon refused early (a frame too large): its answer may be there
        header = sock.recv(4, socket.MSG_WAITALL)
        if len(header) < 4:
            return None
        (size,) = struct.unpack(">I", header)
        return sock.recv(size, socket.MSG_WAITALL)


def still_serving(pool: Pool, daemon: str, what) -> None:
    pong = ping(daemon.lower(), transport=pool.transport, timeout=30)
    assert pong.pid == pool.pids[daemon], f"{daemon} was restarted after {what!r:.300}"


@_settings(120)
@given(addressed=MESSAGE)
def test_random_messages_with_extreme_fields_are_answered_or_refused(pool, addressed):
    daemon, message = addressed
    payload = msgspec.msgpack.encode(message)
    body = exchange(pool, daemon, struct.pack(">I", len(payload)) + payload)
    assert body is not None, f"{daemon} closed without answering {message!r:.300}"
    reply = m.decode(body)  # a message of the schema, whatever it says
    if isinstance(reply, m.ErrorReply):
        assert reply.code in m.ERROR_CODES and reply.code != "internal", (daemon, reply, message)
    still_serving(pool, daemon, message)


@_settings(80)
@given(daemon=st.sampled_from(DAEMONS), data=st.binary(max_size=300), framed=st.booleans())
def test_random_bytes_are_refused(pool, daemon, data, framed):
    payload = struct.pack(">I", len(data)) + data if framed else data
    body = exchange(pool, daemon, payload)
    if body is not None:
        reply = m.decode(body)
        assert isinstance(reply, m.ErrorReply) or framed, reply
    still_serving(pool, daemon, data)


def test_every_hostile_value_to_every_daemon_that_reads_it(pool):
    """The random tests' hostile values, each at least once where it is read (no luck needed)."""
    sent = []
    for constraint in HOSTILE_CONSTRAINTS:
        sent += [("SCHEDD", {"type": "QueryJobs", "constraint": constraint}),
                 ("SCHEDD", {"type": "ActOnJobs", "action": "Hold", "constraint": constraint}),
                 ("SCHEDD", {"type": "EditJobs", "attributes": {"JobPrio": "1"}, "constraint": constraint}),
                 ("COLLECTOR", {"type": "QueryAds", "ad_type": "Any", "constraint": constraint}),
                 ("COLLECTOR", {"type": "InvalidateAd", "ad_type": "Generic", "constraint": constraint})]
    for text in HOSTILE_ADS:
        sent += [("SCHEDD", {"type": "Submit", "cluster_ad": text, "proc_ads": ["[ ProcId = 0 ]"]}),
                 ("COLLECTOR", {"type": "UpdateAd", "ad_type": "Generic", "name": "g", "ad_text": text}),
                 ("SCHEDD", {"type": "EditJobs", "attributes": {"JobPrio": text[1:-1].split("=", 1)[1]},
                             "constraint": "ClusterId > 0"})]
    for job_id in HOSTILE_JOB_IDS:
        for daemon in ("SCHEDD", "STARTD"):
            sent += [(daemon, {"type": "StarterUpdate", "claim_id": "c", "job_id": job_id, "update_ad": "[ A = 1 ]"}),
                     (daemon, {"type": "JobExited", "claim_id": "c", "job_id": job_id, "exit_code": 0}),
                     (daemon, {"type": "JobOutput", "claim_id": "c", "job_id": job_id, "stream": "stdout",
                               "offset": 0, "data": b"x"})]
        sent.append(("SCHEDD", {"type": "ActOnJobs", "action": "Remove", "ids": [job_id]}))
    for daemon, message in sent:
        payload = msgspec.msgpack.encode(message)
        body = exchange(pool, daemon, struct.pack(">I", len(payload)) + payload)
        assert body is not None, f"{daemon} closed without answering {message!r:.300}"
        reply = m.decode(body)
        if isinstance(reply, m.ErrorReply):
            assert reply.code != "internal", (daemon, reply, message)
        still_serving(pool, daemon, message)
