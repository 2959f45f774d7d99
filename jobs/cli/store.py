"""``pairank store ...``: the upkeep of a storage root's tables (verify, migrate, compact, vacuum, history)."""

from __future__ import annotations

import argparse
import json


def _progress(msg: str) -> None:
    from pairank.jobs.cli.console import console

    console.progress(msg)


def cmd_store_verify(args: argparse.Namespace) -> int:
    from pairank.storage.store.repair import SHOWN_KEYS
    from pairank.storage.store.verify import verify_store

    result = verify_store(args.root, quarantine=args.quarantine)
    for c in result.commits:
        done = f" -> {c.restored}" if c.restored else ""
        stopped = " (a repair of it was stopped part-way" + ("; finished now)" if c.restored else ")")
        print(
            f"bad: {c.error.uri}: commit {c.error.version} (of {c.error.newest}) does not read: {c.error.reason}"
            f"{stopped if c.interrupted else ''}{done}"
        )
        keys = c.restored.lost_keys if c.restored else []
        for key in keys[:SHOWN_KEYS]:
            print(f"  lost key: {key}")
        if len(keys) > SHOWN_KEYS:
            print(f"  ... and {len(keys) - SHOWN_KEYS} more lost keys")
    for bad in result.bad:
        done = ""
        if bad.moved_to:
            done = f" -> moved to {bad.moved_to}"
        elif bad.dropped:
            done = f" -> dropped from the table: {bad.listed or 'its rows'} lost"
        print(f"bad: {bad.uri}: {bad.reason}{done}")
    unread = [c.store for c in result.commits if not c.repaired]
    not_read = f" ({', '.join(unread)}: not read, its log is bad)" if unread else ""
    left = f", {len(result.left)} left in place" if result.left else ""
    _progress(f"{result.parts} data files read{not_read}, {len(result.bad) + len(result.commits)} bad{left}")
    if result.left:
        _progress(f"`pairank store verify --root {args.root} --quarantine` repairs them (asked again next run)")
        return 2
    return 0


def cmd_store_migrate(args: argparse.Namespace) -> int:
    from pairank.storage.store.maintenance import migrate

    done = migrate(args.root, progress=_progress)
    for m in done:
        what = f"{m.rows} commits" if m.store.startswith("nightly/") else f"{m.rows} rows ({m.keys} keys)"
        print(f"{m.store}: {what} from {m.source} -> {m.target} (version {m.version}); checked")
    if not done:
        _progress(
            f"{args.root}: no store in the former format (judgments/ or passes/ parts, nightly commits/); nothing to do"
        )
    return 0


def cmd_store_compact(args: argparse.Namespace) -> int:
    from pairank.storage.store.maintenance import compact

    for name, m in compact(args.root, target_mb=args.target_mb).items():
        print(f"{name}: {m['files_removed']} files merged into {m['files_added']} (version {m['version']})")
    return 0


def cmd_store_vacuum(args: argparse.Namespace) -> int:
    from pairank.storage.store.maintenance import vacuum

    for name, files in vacuum(args.root, retention_hours=args.retention_hours, dry_run=args.dry_run).items():
        print(f"{name}: {len(files)} files {'would be ' if args.dry_run else ''}deleted")
        for f in files if args.verbose or args.dry_run else []:
            print(f"  {f}")
    return 0


def cmd_store_history(args: argparse.Namespace) -> int:
    from pairank.storage.store.maintenance import history

    rows = history(args.root, args.store, limit=args.limit)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for h in rows:
        rows_added = "" if h["rows_added"] is None else f" +{h['rows_added']} rows"
        who = " ".join(x for x in (h["job"], h["writer"]) if x)
        print(f"{h['version']:>6}  {h['time']}  {h['operation']}{rows_added}  {who}")
    return 0


def add_store_commands(sub) -> None:
    """The ``store`` command group on the CLI's subparsers."""
    store = sub.add_parser("store", help="the stores under a storage root")
    ssub = store.add_subparsers(dest="store_command", required=True)
    ver = ssub.add_parser(
        "verify",
        help="check the logs and read every data file of the judgment and first-pass tables; list what is bad",
        description="Exit 0 when everything reads (or everything bad was repaired), 2 when something bad is left. "
        "--quarantine repairs: a data file that does not read moves to <root>/quarantine/<store>/, one that is "
        "gone is dropped, and a version without them is committed; a commit of _delta_log that does not read "
        "moves to <root>/quarantine/<store>/_delta_log/ with the log's files after it, and the table is restored "
        "as of the version before it, the readable commits after it committed again. Nothing is deleted; what "
        "the tables no longer hold is counted (rows, keys), and the next run asks those comparisons again. "
        "Run it while nothing writes to the store.",
    )
    ver.add_argument("--root", required=True, help="storage root (a runs' `output`), local or s3://")
    ver.add_argument("--quarantine", action="store_true", help="repair: move what is bad aside (see above)")
    ver.set_defaults(fn=cmd_store_verify)
    mig = ssub.add_parser(
        "migrate",
        help="copy a store of the former format (judgments/, passes/ part folders) into the root's Delta tables",
        description="The copy is checked (row count, keys, merged rows) before the command says done; the part "
        "folders are left as they are (remove them yourself once runs read the tables).",
    )
    mig.add_argument("--root", required=True, help="storage root (a runs' `output`), local or s3://")
    mig.set_defaults(fn=cmd_store_migrate)
    com = ssub.add_parser("compact", help="merge the tables' small files (one commit a table; same rows)")
    com.add_argument("--root", required=True, help="storage root, local or s3://")
    com.add_argument("--target-mb", type=int, default=128, help="size of the files written")
    com.set_defaults(fn=cmd_store_compact)
    vac = ssub.add_parser(
        "vacuum",
        help="delete files no version within the retention period needs",
        description="Files of the newest version are never deleted; versions older than the retention period can "
        "no longer be read (time travel) once their files are gone.",
    )
    vac.add_argument("--root", required=True, help="storage root, local or s3://")
    vac.add_argument("--retention-hours", type=int, default=168, help="keep what versions of this many hours need")
    vac.add_argument("--dry-run", action="store_true", help="list the files, delete nothing")
    vac.set_defaults(fn=cmd_store_vacuum)
    his = ssub.add_parser("history", help="a table's versions: when, what, who wrote them")
    his.add_argument("--root", required=True, help="storage root, local or s3://")
    his.add_argument("--store", choices=["judgments", "passes"], default="judgments", help="which table")
    his.add_argument("--limit", type=int, default=None, help="the newest N versions only")
    his.add_argument("--json", action="store_true", help="print JSON")
    his.set_defaults(fn=cmd_store_history)
