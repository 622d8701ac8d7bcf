"""``htc q``, ``rm``, ``hold``, ``release``, ``qedit``, ``prio``, ``vacate_job``: condor_q and
its friends (``htc history`` is in :mod:`htc.cli.history`).  Each parses, calls one
:mod:`htc.client` function and prints."""

from __future__ import annotations

import argparse
import sys
import time

from htc import client
from htc.config.hostname import full_hostname
from htc.client import jobs as client_jobs
from htc.classad import ExprTree, quote
from htc.cli import autoformat, print_format, q_modes, userlog_jobs
from htc.cli import formatting as fmt
from htc.cli import job_views as views
from htc.cli.options import add_command, add_option, add_pool_options, transport_from
from htc.errors import UsageError
from htc.wire.messages import JobAction


def _out(text: str) -> None:
    sys.stdout.write(text)


def _print_ads(args: argparse.Namespace, ads) -> bool:
    """The machine-readable forms every job tool shares; True if one was asked for."""
    attrs = [a.strip() for a in (getattr(args, "attributes", None) or "").split(",") if a.strip()]
    if args.long:
        _out(fmt.long_form(ads, attrs))
    elif args.json:
        _out(fmt.json_form(ads, attrs))
    elif args.af:
        _out(fmt.autoformat(ads, args.af))
    else:
        return False
    return True


def _add_formats(p: argparse.ArgumentParser) -> None:
    add_option(p, "long", "l", action="store_true", help="whole job ads, one attribute per line")
    add_option(p, "af", "autoformat", nargs="+", metavar="ATTR",
               help="print these attributes (or expressions), one job per line")
    add_option(p, "attributes", metavar="A,B", help="with -long/-json: only these attributes")


# --- htc q ------------------------------------------------------------------------------------


def _me(transport) -> str:
    """Whose jobs ``htc q`` shows by default: the user running it, or, talking to a pool on other
    hosts, the user its credentials speak for (``alice`` of ``alice@cm.test``)."""
    from htc.client.remote import RemotePool

    if isinstance(transport, RemotePool) and transport.credentials.pair:
        return transport.credentials.pair[0].split("@", 1)[0]
    return client.current_user()


def _q_constraint(args: argparse.Namespace, me: str) -> str:
    parts = []
    if args.ids:
        parts.append(client.parse_selection(args.ids).constraint_for_all())
    elif args.submitter:
        parts.append(f"(AccountingGroup ?: Owner) == {quote(args.submitter.split('@')[0])}")
    elif not args.allusers and not args.userlog and not args.jobads:
        parts.append(f"Owner == {quote(me)}")
    if args.constraint:
        parts.append(args.constraint)
    if args.run:
        parts.append("JobStatus == 2 || JobStatus == 6 || JobStatus == 7")
    for flag, status in (("hold", 5), ("idle", 1)):
        if getattr(args, flag):
            parts.append(f"JobStatus == {status}")
    if args.hold_codes is not None:
        parts.append("JobStatus==5")
        if args.hold_codes and q_modes.hold_code_constraint(args.hold_codes):
            parts.append(q_modes.hold_code_constraint(args.hold_codes))
    return " && ".join(f"({p})" for p in parts)


def _partial(args: argparse.Namespace) -> bool:
    """condor_q's ``querying_partial_clusters``: the query may leave out procs still queued, so
    the batch view cannot count the missing ones as done."""
    return bool(args.constraint or args.run or args.hold or args.idle or args.hold_codes is not None
                or any("." in word for word in args.ids if word[:1].isdigit()))


def _check_q_options(args: argparse.Namespace) -> None:
    if args.currentrun and args.cumulative_time:
        raise UsageError("-currentrun can't be used with -cumulative-time")
    if args.xml and args.json:
        raise UsageError("Cannot print as both XML and JSON")
    if args.submitter and args.name:
        raise UsageError("Cannot query both schedd's and submitters (-name queries one schedd, -submitter "
                         "every schedd holding that user's jobs)")
    if sum(bool(x) for x in (args.run, args.hold, args.idle)) > 1:
        raise UsageError("-run and -hold/held or -idle are incompatible")
    if args.batch and (args.custom or args.print_format):
        raise UsageError("-batch conflicts with -format and -af")
    if args.hold_codes is not None and (args.run or args.idle):
        raise UsageError("-hold-codes incompatible with -idle or -run")
    if args.stream_results and (args.dag or args.batch):
        raise UsageError("-stream-results and -dag or -batch are incompatible")
    if args.batch and (args.autocluster or args.group_by):
        raise UsageError(f"Error: -batch conflicts with {'-group-by' if args.group_by else '-autocluster'}")
    if args.autocluster and args.group_by:
        raise UsageError("-autocluster and -group-by are two groupings: choose one")
    if args.jobads and args.userlog:
        raise UsageError("give -jobads or -userlog, not both")


def _sources(args: argparse.Namespace, constraint: str, transport, now: float) -> list[tuple[str, list]]:
    """Where the jobs come from, each with condor_q's title (``Schedd: ...``) and its ads."""
    stamp = time.strftime("%m/%d/%y %H:%M:%S", time.localtime(now))
    if args.jobads:
        ads = q_modes.jobads_from_file(args.jobads)
        if constraint:
            test = ExprTree(constraint)
            ads = [ad for ad in ads if test.eval(ad) is True]
        return [(f"Jobads: {args.jobads} @ {stamp}", ads[:args.limit] if args.limit is not None else ads)]
    if args.userlog:
        ads = userlog_jobs.jobs_from_userlog(args.userlog, now)
        if constraint:
            test = ExprTree(constraint)
            ads = [ad for ad in ads if test.eval(ad) is True]
        return [(f"Userlog: {args.userlog} @ {stamp}", ads)]
    if args.submitter:
        found = client_jobs.submitter_schedds(args.submitter, transport=transport)
        if not found:
            raise UsageError(f"Error: Collector has no record of schedd/submitter {args.submitter}")
        return [(f"Submitter: {ad.get('ScheddName', '?')} : <{ad.get('MyAddress', '?')}> : "
                 f"{ad.get('ScheddName', '?')} @ {stamp}",
                 client.query(constraint, limit=args.limit, transport=transport,
                              address=str(ad.get("MyAddress", "schedd")))) for ad in found]
    if args.global_:
        found = client_jobs.schedds(transport=transport)
        return [(f"Schedd: {ad.get('Name', '?')} : <{ad.get('MyAddress', '?')}> @ {stamp}",
                 client.query(constraint, limit=args.limit, transport=transport,
                              address=str(ad.get("MyAddress", "schedd")))) for ad in found]
    ads = client.query(constraint, limit=args.limit, transport=transport)
    return [(f"Schedd: {full_hostname()} : <local> @ {stamp}", ads)]


def q(args: argparse.Namespace) -> int:
    """htc q: show jobs in the queue."""
    transport = transport_from(args, "schedd")
    if args.better_analyze:
        selection = client.parse_selection(args.ids, args.constraint) if (args.ids or args.constraint) else None
        own, collector, flocked = _analysis_pools(args)
        analyses = client.analyze(selection, slot_constraint=args.machine or "", transport=transport,
                                  collector_transport=collector, own_pool=own, flock_pools=flocked)
        if args.json:
            _out(fmt.records_json(_analysis_record(a) for a in analyses))
            return 0
        if not analyses:
            print("No jobs to analyze (htc q -better-analyze looks at your idle jobs unless you name some).")
        for analysis in analyses:
            _out("\n" + analysis.render(width=fmt.console().width if sys.stdout.isatty() else 80))
        return 0
    _check_q_options(args)
    mask = _custom_mask(args.custom) if args.custom else None
    if args.print_format == "!":  # condor_q's -print-format !: no Q_DEFAULT_*_PRINT_FORMAT_FILE
        layout = None
    elif args.print_format:
        layout = print_format.load(args.print_format)
    else:
        layout = q_modes.default_layout(q_modes.view_tag(args)) if not (mask or args.long or args.json or args.xml) \
            else None
    now = time.time()
    constraint = _q_constraint(args, _me(transport))
    if layout is not None and layout.where:
        constraint = " && ".join(f"({p})" for p in (constraint, layout.where) if p)
    sources = _sources(args, constraint, transport, now)
    attrs = [a.strip() for a in (args.attributes or "").split(",") if a.strip()]
    if args.autocluster or args.group_by:
        names = attrs or [v for kind, values in (args.custom or []) if kind == "af"
                          for v in values if not v.startswith(":") and v != "-"]
        sources = [(title, q_modes.autocluster_ads(found) if args.autocluster else q_modes.group_by_ads(found, names))
                   for title, found in sources]
        if args.autocluster and layout is None and not (mask or args.long or args.json or args.xml):
            layout = print_format.parse(q_modes.AUTOCLUSTER_FORMAT, "autocluster")
    if args.factory:
        sources = [(title, [ad for ad in found if ad.get("JobMaterializeLimit") is not None
                            or ad.get("JobMaterializeMaxIdle") is not None]) for title, found in sources]
    ads = [ad for _, source_ads in sources for ad in source_ads]
    if args.long:
        _out(fmt.long_form(ads, attrs))
        return 0
    if args.xml:
        _out(fmt.xml_form(ads, attrs))
        return 0
    if args.json:
        _out(fmt.json_form(ads, attrs))
        return 0
    if mask is not None:
        _out(mask.render(ads))
        return 0
    current_run = not args.cumulative_time
    if layout is not None:
        for title, source_ads in sources:
            _out(layout.render(source_ads, now, title=None if layout.noheader else title))
        if layout.summary and not (args.autocluster or args.group_by):
            print()
            print(views.totals_line("query", views.status_counts(ads)))
        return 0
    if not args.totals:
        out = fmt.console()
        table = dict(out=out, wide=args.wide or args.wide_columns is not None, width=args.wide_columns)
        for title, source_ads in sources:
            out.file.write(f"\n-- {title}\n")
            if args.group_by:
                headers, rows = q_modes.group_rows(source_ads, names)
                fmt.print_table(headers, rows, right=[0, 1], **table)
            elif args.hold_codes is not None:
                fmt.print_table(q_modes.HOLD_CODE_HEADERS, q_modes.hold_code_rows(source_ads), right=[2], **table)
            elif args.factory:
                fmt.print_table(q_modes.FACTORY_HEADERS, q_modes.factory_rows(source_ads), right=range(3, 9),
                                **table)
            elif args.io:
                fmt.print_table(views.IO_HEADERS, views.io_rows(source_ads), right=[2, 4, 5, 6], **table)
            elif args.goodput:
                fmt.print_table(views.GOODPUT_HEADERS, views.goodput_rows(source_ads, now, current_run), right=[3, 4, 5, 6],
                                **table)
            elif args.hold:
                fmt.print_table(views.HOLD_HEADERS, views.hold_rows(source_ads), **table)
            elif args.run:
                fmt.print_table(views.RUN_HEADERS, views.run_rows(source_ads, now, current_run), **table)
            elif args.nobatch or args.idle or args.stream_results:
                if args.dag:
                    rows = views.dag_rows(source_ads, now, current_run)
                    fmt.print_table(views.DAG_HEADERS, rows, right=[3, 5, 6], **table)
                else:
                    rows = views.job_rows(source_ads, now, current_run)
                    headers = views.JOB_HEADERS
                    if args.cputime:  # CPU_TIME: the remote user CPU time of the job so far
                        headers = headers[:3] + ("CPU_TIME",) + headers[4:]
                        cpu = [ad.get("RemoteUserCpu", 0) for ad in source_ads]
                        rows = [row[:3] + (fmt.duration(c if isinstance(c, (int, float)) else 0),) + row[4:]
                                for row, c in zip(rows, cpu)]
                    fmt.print_table(headers, rows, right=[0, 3, 5, 6], **table)
            else:
                headers, rows = views.batch_rows(source_ads, partial=_partial(args), show_hold=args.global_)
                fmt.print_table(headers, rows, right=range(3, len(headers) - 1), **table)
        print()
    if args.factory or args.hold_codes is not None or args.group_by:
        return 0  # condor_q's -factory and -hold-codes formats have SUMMARY NONE
    print(views.totals_line("query", views.status_counts(ads)))
    default_source = not (args.userlog or args.jobads or args.submitter or args.global_)
    if default_source and not args.ids and not args.constraint and not (args.run or args.hold or args.idle):
        everyone = client.query("", ("Owner", "JobStatus"), transport=transport)
        if not args.allusers:
            me = _me(transport)
            mine = [ad for ad in everyone if ad.get("Owner") == me]
            print(views.totals_line(me, views.status_counts(mine)))
        print(views.totals_line("all users", views.status_counts(everyone)))
    return 0


def _custom_mask(items) -> autoformat.PrintMask:
    """The -format and -af options, in the order given, as one print mask."""
    mask = autoformat.PrintMask()
    for kind, values in items:
        if kind == "format":
            autoformat.add_format(mask, values[0], values[1])
        else:
            values = list(values)
            qualifiers = values.pop(0)[1:] if values and values[0].startswith(":") else ""
            autoformat.add_autoformat(mask, qualifiers, [v for v in values if v != "-"])
    return mask


class _InOrder(argparse.Action):
    """Collects -format and -af in the order given (both print into one mask)."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, self.dest, None) or [])
        items.append((self.const, values))
        setattr(namespace, self.dest, items)
        if self.const == "af":  # the attributes of the last -af, for scripts that read args.af
            setattr(namespace, "af", [v for v in values if not v.startswith(":") and v != "-"])


def _rewrite_q_argv(argv: list[str]) -> list[str]:
    """condor_q's colon forms, which argparse cannot declare: ``-af:jh A`` becomes ``-af :jh A``
    (attribute names never start with ``:``) and ``-wide:N`` becomes ``-wide-columns N``."""
    out = []
    for word in argv:
        af = autoformat.split_af_option(word) if word.startswith("-") else None
        if af is not None and af[1]:
            out += ["-af", ":" + af[1]]
        elif word.startswith(("-wide:", "--wide:")):
            out += ["-wide-columns", word.split(":", 1)[1]]
        elif word.split(":", 1)[0] in ("-hold-codes", "--hold-codes", "-holdcodes", "--holdcodes"):
            out += ["-hold-codes", "-hold-code-list", word.partition(":")[2]]
        else:
            out.append(word)
    return out


def _q_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give the q parser condor_q's colon options (by rewriting the words before parsing)."""
    base = type(parser)

    class QParser(base):  # type: ignore[misc,valid-type]
        def parse_known_args(self, args=None, namespace=None):
            return super().parse_known_args(_rewrite_q_argv(list(args if args is not None else sys.argv[1:])),
                                            namespace)

    parser.__class__ = QParser
    return parser


def _analysis_pools(args: argparse.Namespace) -> tuple[str, object, list]:
    """For -better-analyze on a host of a multi-host pool: the pool's name, a transport to its
    collector when this host runs none (COLLECTOR_HOST's, over SSH; None: the local one), and the schedd's FLOCK_TO pools, each
    with a transport to its collector. Nothing with ``-pool`` or ``-name`` (another schedd's
    FLOCK_TO is not known here) or on a personal pool."""
    if getattr(args, "pool", None) or getattr(args, "name", None):
        return "", None, []
    from htc.config import load_config
    from htc.daemons.network import network_mode

    config = load_config()
    if not network_mode(config):
        return "", None, []
    from htc.client.remote import remote_pool
    from htc.wire.address import parse_host_port
    from htc.wire.flock_access import flock_names

    own = str(config.param("COLLECTOR_HOST") or "")
    names = flock_names(config.param("FLOCK_TO"))
    collectors = flock_names(config.param("FLOCK_COLLECTOR_HOSTS")) or names
    pools = [(name, remote_pool(parse_host_port(collector), trust_domain=name))
             for name, collector in zip(names, collectors)]
    runs_collector = "COLLECTOR" in {d.upper() for d in flock_names(config.param("DAEMON_LIST"))}
    return own, None if runs_collector else remote_pool(parse_host_port(own)), pools


def _analysis_record(a) -> dict:
    c = a.counts
    return {"job": a.job_id, "status": a.status, "requirements": a.requirements,
            "pools": [{"name": p.name, "slots": p.slots, "matching": p.matching, "willing": p.willing,
                       "flocked": p.flocked, "error": p.error} for p in a.pools],
            "clauses": [{"step": cl.step, "condition": cl.logic or cl.text, "matched": cl.matched}
                        for cl in a.clauses if cl.shown],
            "slots": c.slots, "machines": c.machines, "rejected_by_job": c.rejected_by_job,
            "reject_job": c.reject_job, "running_your_jobs": c.running_your_jobs,
            "serving_other_users": c.serving_other_users, "willing": c.willing,
            "willing_if_drained": c.willing_if_drained, "reason": a.reason}


# --- rm / hold / release / vacate_job -----------------------------------------------------------------


def _act(action: JobAction, args: argparse.Namespace) -> int:
    selection = client.parse_selection(args.ids, args.constraint, args.all)
    if getattr(args, "forcex", False):
        action = JobAction.RemoveX
    if action is JobAction.Vacate and getattr(args, "fast", False):
        action = JobAction.VacateFast
    result = client.act(action, selection, reason=getattr(args, "reason", None) or "",
                        subcode=getattr(args, "subcode", None), transport=transport_from(args, "schedd"))
    if args.json:
        _out(fmt.records_json([{"ok": ok, "message": line} for ok, line in result.lines]
                              + [{"totals": {f: getattr(result.totals, f) for f in result.totals.__struct_fields__}}]))
        return 0 if result.ok else 1
    for ok, line in result.lines:
        print(line, file=sys.stdout if ok else sys.stderr)
    if getattr(args, "totals", False):
        print(result.totals_line())
    return 0 if result.ok else 1


def rm(args: argparse.Namespace) -> int:
    """htc rm: remove jobs."""
    return _act(JobAction.Remove, args)


def hold(args: argparse.Namespace) -> int:
    """htc hold: put jobs on hold."""
    return _act(JobAction.Hold, args)


def release(args: argparse.Namespace) -> int:
    """htc release: release held jobs."""
    return _act(JobAction.Release, args)


def vacate_job(args: argparse.Namespace) -> int:
    """htc vacate_job: evict running jobs back to idle."""
    return _act(JobAction.Vacate, args)


# --- qedit / prio -------------------------------------------------------------------------------------


def qedit(args: argparse.Namespace) -> int:
    """htc qedit: set job attributes."""
    words = list(args.args)
    if args.constraint:
        selection = client.parse_selection((), args.constraint)
    else:
        if not words:
            raise UsageError("name the jobs (CLUSTER, CLUSTER.PROC or an owner) or give -constraint")
        selection = client.parse_selection([words.pop(0)])
    if not words or len(words) % 2:
        raise UsageError("give attribute and value pairs: htc qedit 12 RequestMemory 2048 JobBatchName '\"night\"'")
    attributes = dict(zip(words[0::2], words[1::2]))
    matched = client.edit(selection, attributes, transport=transport_from(args, "schedd"))
    if args.json:
        _out(fmt.records_json([{"attribute": name, "value": value, "matched": matched}
                               for name, value in attributes.items()]))
        return 0 if matched else 1
    if not matched:
        print("No matching jobs; nothing was changed", file=sys.stderr)
        return 1
    for name in attributes:
        print(f'Set attribute "{name}" for {matched} matching jobs.')
    return 0


def prio(args: argparse.Namespace) -> int:
    """htc prio: set or change JobPrio."""
    words = list(args.args)
    relative = None
    for word in list(words):
        if word[:1] in "+-" and word[1:].isdigit():
            if relative is not None or args.p is not None:
                raise UsageError("give one priority: -p N, +N or -N")
            relative = int(word)
            words.remove(word)
    if args.p is None and relative is None:
        raise UsageError("give the new priority with -p N, or a change with +N or -N")
    selection = client.parse_selection(words, None, args.a)
    changed = client.set_priority(selection, args.p if args.p is not None else relative,
                                  relative=args.p is None, transport=transport_from(args, "schedd"))
    if args.json:
        _out(fmt.records_json([{"changed": changed}]))
    if not changed:
        print("No matching jobs; no priority was changed", file=sys.stderr)
        return 1
    return 0


# --- registration -----------------------------------------------------------------------------------------


def register(sub) -> None:
    """Add q, rm, hold, release, qedit, prio and vacate_job."""
    p = _q_parser(add_command(sub, "q", "show jobs in the queue (condor_q)", [
        "htc q                          # your jobs, one line per batch",
        "htc q -nobatch                 # one line per job",
        "htc q -allusers -run           # running jobs of everybody, and where",
        "htc q -hold                    # held jobs and why",
        "htc q -af ClusterId ProcId JobStatus",
        "htc q -af:jh RequestMemory Owner   # job id first, with headings",
        "htc q -format '%d.' ClusterId -format '%d\\n' ProcId",
        "htc q -constraint 'RequestMemory > 4096' -long",
        "htc q -userlog job.log         # the jobs of an event log, no schedd needed",
        "htc q -better-analyze 12.0     # why is job 12.0 not running?",
        "htc q -json | jq '.[].ClusterId'",
        "htc q -hold-codes              # held jobs, one line per hold code",
        "htc q -autocluster             # kinds of job, as the negotiator sees them",
        "htc q -group-by -af Owner JobStatus",
        "htc q -jobads saved.ads -nobatch",
    ]))
    if "-help" not in p._option_string_actions:
        p.add_argument("-help", action="help", help="show this help message and exit")
    p.add_argument("ids", nargs="*", metavar="CLUSTER[.PROC]|OWNER", help="jobs, clusters or owners to show")
    for flag, text in [("nobatch", "one line per job"), ("batch", "one line per batch (the default)"),
                       ("run", "running jobs and where they run"), ("hold", "held jobs and their reasons"),
                       ("idle", "idle jobs only"), ("totals", "only the totals lines"),
                       ("better-analyze", "explain, clause by clause, why jobs do not run"),
                       ("allusers", "jobs of every user (default: yours)"),
                       ("wide", "do not cut lines to the terminal's width (-wide:N: cut at N columns)"),
                       ("dag", "with -nobatch: DAG node jobs under their DAGMan job"),
                       ("currentrun", "RUN_TIME of the current run (the default; idle/held: the last run)"),
                       ("cumulative-time", "RUN_TIME of every run so far"),
                       ("cputime", "with -nobatch: CPU_TIME (RemoteUserCpu) instead of RUN_TIME"),
                       ("io", "file transfer figures of jobs transferring files"),
                       ("goodput", "checkpoint goodput, CPU use and network Mb/s per job"),
                       ("xml", "whole job ads in ClassAd XML")]:
        add_option(p, flag, action="store_true", help=text)
    add_option(p, "global", dest="global_", action="store_true", help="the jobs of every schedd of the pool")
    add_option(p, "wide-columns", type=int, metavar="N", help=argparse.SUPPRESS)
    add_option(p, "analyze", dest="better_analyze", action="store_true", help="same as -better-analyze")
    add_option(p, "constraint", metavar="EXPR", help="jobs whose ad satisfies this ClassAd expression")
    add_option(p, "limit", type=int, metavar="N", help="at most N jobs")
    add_option(p, "machine", metavar="EXPR", help="with -better-analyze: only slots satisfying this expression")
    add_option(p, "submitter", metavar="NAME", help="NAME's jobs, in every schedd of the pool that has some")
    add_option(p, "userlog", metavar="FILE", help="jobs as the job event log FILE tells them (no schedd)")
    add_option(p, "jobads", metavar="FILE", help="job ads from FILE (as -long, -json prints them) instead of the schedd")
    add_option(p, "autocluster", action="store_true", help="one line per autocluster: jobs alike to every machine")
    add_option(p, "group-by", action="store_true", help="group jobs by the values of the -af or -attributes attributes")
    add_option(p, "hold-codes", dest="hold_codes", action="store_const", const="",
               help="held jobs, one line per hold code and subcode (-hold-codes:13,21/2: only those)")
    add_option(p, "hold-code-list", dest="hold_codes", help=argparse.SUPPRESS)
    add_option(p, "factory", action="store_true", help="late-materialization clusters: limit, jobs present, next id")
    add_option(p, "stream-results", action="store_true", help="print each job as it comes (one line per job)")
    add_option(p, "print-format", metavar="FILE", help="a custom layout (condor's SELECT ... print-format file)")
    add_option(p, "long", "l", action="store_true", help="whole job ads, one attribute per line")
    add_option(p, "af", "autoformat", nargs="+", metavar="ATTR", dest="custom", action=_InOrder, const="af",
               help="print these attributes (or expressions), one job per line; -af:jlhVrTY,tng for "
                    "the job id, labels, headings, formats and separators")
    add_option(p, "format", nargs=2, metavar=("FMT", "ATTR"), dest="custom", action=_InOrder, const="format",
               help="print ATTR with the printf-style FMT (%%d %%s %%f %%v %%V %%r %%T %%Y); repeatable")
    add_option(p, "attributes", metavar="A,B", help="with -long/-json/-xml: only these attributes")
    add_pool_options(p, daemon="schedd")
    p.set_defaults(func=q, af=None)

    for name, func, text, extra in [
        ("rm", rm, "remove jobs (condor_rm)", ["htc rm -constraint 'JobStatus == 5'", "htc rm -forcex 12.0"]),
        ("hold", hold, "put jobs on hold (condor_hold)", ["htc hold -reason 'input not ready' 12"]),
        ("release", release, "release held jobs (condor_release)", []),
        ("vacate_job", vacate_job, "evict running jobs back to idle (condor_vacate_job)", ["htc vacate_job -fast 12.0"]),
    ]:
        p = add_command(sub, name, text, [f"htc {name} 12          # every job of cluster 12",
                                         f"htc {name} 12.3        # one job", f"htc {name} alice       # alice's jobs",
                                         *extra, f"htc {name} -all"])
        p.add_argument("ids", nargs="*", metavar="CLUSTER[.PROC]|OWNER", help="jobs, clusters or owners")
        add_option(p, "constraint", metavar="EXPR", help="jobs whose ad satisfies this ClassAd expression")
        add_option(p, "all", action="store_true", help="every job you may act on")
        add_option(p, "totals", action="store_true", help="also print the counts of each outcome")
        if name in ("rm", "hold", "release"):
            add_option(p, "reason", metavar="TEXT", help="why (recorded in the job ad and its event log)")
        if name == "hold":
            add_option(p, "subcode", type=int, metavar="N", help="HoldReasonSubCode to record")
        if name == "rm":
            add_option(p, "forcex", action="store_true", help="forget a job stuck in X (removed) state")
        if name == "vacate_job":
            add_option(p, "fast", action="store_true", help="kill at once instead of a soft kill first")
        add_pool_options(p, daemon="schedd")
        p.set_defaults(func=func)

    p = add_command(sub, "qedit", "change attributes of queued jobs (condor_qedit)", [
        "htc qedit 12.0 RequestMemory 4096",
        "htc qedit 12 JobBatchName '\"night run\"'     # strings keep their quotes",
        "htc qedit -constraint 'JobStatus == 1' JobPrio 5",
    ])
    p.add_argument("args", nargs="*", metavar="JOB ATTR VALUE", help="the jobs (unless -constraint), then pairs")
    add_option(p, "constraint", metavar="EXPR", help="jobs whose ad satisfies this ClassAd expression")
    add_pool_options(p, daemon="schedd")
    p.set_defaults(func=qedit)

    p = add_command(sub, "prio", "set or change job priorities, JobPrio (condor_prio)", [
        "htc prio -p 10 12        # JobPrio = 10 for cluster 12",
        "htc prio +5 12.3         # raise one job by 5",
        "htc prio -3 -a           # lower all your jobs by 3",
    ])
    p.add_argument("args", nargs="*", metavar="+N|-N|JOB", help="a change (+N/-N), then jobs")
    p.add_argument("-p", "--p", type=int, metavar="N", dest="p", help="set JobPrio to N")
    p.add_argument("-a", "--a", action="store_true", dest="a", help="all your jobs")
    add_pool_options(p, daemon="schedd")
    p.set_defaults(func=prio)
