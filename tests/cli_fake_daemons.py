"""A stand-in schedd and collector for the CLI tests, speaking the real wire protocol.

:class:`FakeDaemons` listens on real Unix sockets under ``$HTC_HOME/sockets`` (as
``schedd`` and ``collector``) from a background thread, so the tools under test go through
the real client library, framing and messages.  The schedd side keeps jobs in a dict and
answers Submit, QueryJobs, ActOnJobs and EditJobs the way the schedd's contract in
``htc/wire/messages.py`` says; the collector side answers QueryAds from a list of ads (by
``MyType``; an ad without one is a slot).
It records every request in ``requests`` so tests can check what the tools sent.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from htc.classad import ClassAd, ExprTree
from htc.classad.operators import is_true_for_match
from htc.wire import messages as m
from htc.wire.errors import ConnectionClosed
from htc.wire.transport import UnixTransport


def _selected(ad: ClassAd, ids: tuple[str, ...], constraint: str) -> bool:
    if ids:
        job = f"{ad['ClusterId']}.{ad['ProcId']}"
        return job in ids or str(ad["ClusterId"]) in ids
    return is_true_for_match(ExprTree(constraint).evaluate_internal(ad)) if constraint else True


class FakeDaemons:
    """A schedd and a collector on ``home``'s sockets; use as a context manager."""

    def __init__(self, home: Path, slots: list[ClassAd] | None = None, first_cluster: int = 7,
                 schedd_name: str = "schedd"):
        self.home = Path(home)
        self.schedd_name = schedd_name
        self.jobs: dict[str, ClassAd] = {}
        self.slots = list(slots or [])
        self.next_cluster = first_cluster
        self.requests: list[m.Message] = []
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.error: BaseException | None = None

    # -- the schedd's answers ------------------------------------------------------------------
    def answer(self, address: str, msg: m.Message) -> m.Message:
        self.requests.append(msg)
        if address == "collector":
            if isinstance(msg, m.QueryAds):
                ads = [ad for ad in self.slots
                       if msg.ad_type is m.AdType.Any or ad.get("MyType", "Machine") == msg.ad_type.value]
                ads = [ad for ad in ads if not msg.constraint
                       or is_true_for_match(ExprTree(msg.constraint).evaluate_internal(ad))]
                return m.AdsReply(ads=tuple(ad.unparse() for ad in ads))
            return m.ErrorReply(code="unknown_request", message=type(msg).__name__)
        if isinstance(msg, m.Submit):
            cluster = self.next_cluster
            self.next_cluster += 1
            base = ClassAd(msg.cluster_ad)
            if "SubmitDescription" in base:  # the schedd expands the description itself
                from htc.submit import Submit

                sub = Submit(base["SubmitDescription"], cwd=base["SubmitIwd"], filename=base.get("SubmitFile"))
                built = sub.cluster(cluster)
                base = ClassAd({k: ExprTree(v) for k, v in built.cluster_ad.items()})
                proc_ads = [ClassAd({k: ExprTree(v) for k, v in p.items()}) for p in built.proc_ads()]
            else:
                proc_ads = [ClassAd(text) for text in msg.proc_ads]
            for proc in proc_ads:
                ad = base.copy()
                for name, value in proc.items():
                    ad[name] = value
                ad["ClusterId"] = cluster
                ad["Owner"] = "alice"
                self.jobs[f"{cluster}.{ad['ProcId']}"] = ad
            return m.SubmitReply(cluster_id=cluster, num_procs=len(proc_ads))
        if isinstance(msg, m.QueryJobs):
            ads = [ad for ad in self.jobs.values() if _selected(ad, (), msg.constraint)]
            if msg.projection:
                ads = [ClassAd({k: ad.lookup(k) for k in msg.projection if k in ad}) for ad in ads]
            return m.AdsReply(ads=tuple(ad.unparse() for ad in ads[: msg.limit or None]))
        if isinstance(msg, m.ActOnJobs):
            return self._act(msg)
        if isinstance(msg, m.EditJobs):
            hits = [ad for ad in self.jobs.values() if _selected(ad, msg.ids, msg.constraint)]
            for ad in hits:
                for name, text in msg.attributes.items():
                    ad[name] = ExprTree(text)
            return m.EditReply(matched=len(hits))
        if isinstance(msg, m.Reschedule):
            return m.Ack()
        return m.ErrorReply(code="unknown_request", message=type(msg).__name__)

    def _act(self, msg: m.ActOnJobs) -> m.ActOnJobsReply:
        counts = dict(success=0, not_found=0, bad_status=0, already_done=0)
        hits = [ad for ad in self.jobs.values() if _selected(ad, msg.ids, msg.constraint)]
        if msg.ids and not hits:
            counts["not_found"] = 1
        for ad in hits:
            status = ad["JobStatus"]
            key = f"{ad['ClusterId']}.{ad['ProcId']}"
            if msg.action is m.JobAction.Remove:
                del self.jobs[key]
                counts["success"] += 1
            elif msg.action is m.JobAction.Hold:
                if status == 5:
                    counts["already_done"] += 1
                else:
                    ad["JobStatus"], ad["HoldReason"] = 5, msg.reason or "via htc hold"
                    counts["success"] += 1
            elif msg.action is m.JobAction.Release:
                if status != 5:
                    counts["bad_status"] += 1
                else:
                    ad["JobStatus"] = 1
                    counts["success"] += 1
            else:
                counts["bad_status"] += 1
        return m.ActOnJobsReply(**counts)

    # -- the servers ----------------------------------------------------------------------------
    async def _serve(self) -> None:
        transport = UnixTransport(self.home / "sockets")
        self._stop = asyncio.Event()

        def handler_for(address: str):
            async def handle(conn):
                while True:
                    try:
                        msg = await conn.recv(timeout=10)
                    except ConnectionClosed:
                        return
                    await conn.send(self.answer(address, msg))
            return handle

        async with asyncio.TaskGroup() as tg:
            servers = [await transport.start_server(address, handler_for(role), task_group=tg)
                       for address, role in ((self.schedd_name, "schedd"), ("collector", "collector"))]
            self._ready.set()
            await self._stop.wait()
            for server in servers:
                await server.aclose()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced by __exit__
            self.error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._serve()

    def __enter__(self) -> FakeDaemons:
        self._thread = threading.Thread(target=self._run, name="fake-daemons", daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "the fake daemons did not start"
        if self.error:
            raise self.error
        return self

    def __exit__(self, *exc_info) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)
        if self.error:
            raise self.error
