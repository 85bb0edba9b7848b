"""``posbias list | run | build | check-data | campaign``: the commands a reader types."""
from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import signal
import sys

from posbias.book import cost
from posbias.book.build import build
from posbias.book.chapters import PROFILES, ParamError, chapter_ids, get_chapter
from posbias.book.checkdata import check_data
from posbias.book.cost import network_step
from posbias.book.runner import prepare, run_chapter

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with a message naming the fix (argparse's own convention too)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"error: {message}. See `posbias {self.prog.split()[-1]} --help`.", file=sys.stderr)
        sys.exit(2)


def _cmd_list(args: argparse.Namespace) -> int:
    if args.chapter:
        ch = get_chapter(args.chapter)
        print(f"{ch.id}: {ch.title}\n")
        print(f"  {'parameter':<18} {'type':<10} {'default':<22} allowed / meaning")
        for p in ch.params.values():
            print(f"  {p.name:<18} {p.type:<10} {json.dumps(p.default):<22} {p.describe_range()}; {p.help}")
        for prof, over in ch.profiles.items():
            print(f"\n  profile {prof}: "
                  + (", ".join(f"{k}={json.dumps(v)}" for k, v in over.items()) or "(defaults)"))
        for c in ch.constraints:
            print(f"  constraint: {c['rule']}  ({c.get('message', '')})")
        _print_cost(ch)
        return 0
    for cid in chapter_ids():
        ch = get_chapter(cid)
        print(f"{cid:<24} {ch.title}")
        for p in ch.params.values():
            print(f"    {p.name:<18} = {json.dumps(p.default):<20} ({p.type}) {p.help}")
    return 0


def _print_cost(ch) -> None:
    """The chapter's cost model and what it gives for the defaults (:mod:`posbias.book.cost`)."""
    model = ch.meta.get("cost") or {}
    print(f"\n  cost with the defaults: {cost.estimate(ch, ch.resolve()).describe()}")
    for key in ("seconds", "memory_mb", "network_step"):
        if key in model:
            print(f"    {key} = {model[key]}")
    if model.get("calibration"):
        print(f"    calibrated on: {model['calibration']}")


def _overrides(pairs: list[list[str]] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in pairs or []:
        if name in out:
            raise ParamError(f"parameter {name!r} given twice with -p; give it once")
        out[name] = value
    return out


def _cmd_run(args: argparse.Namespace) -> int:
    try:
        overrides = _overrides(args.p)
    except ParamError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    res = run_chapter(args.chapter, overrides, profile=args.profile, out=args.out, timeout=args.timeout,
                      device=args.device, write_data=args.write_data, quiet=args.quiet, yes=args.yes)
    print(res.message, file=sys.stderr if res.code else sys.stdout)
    return res.code


def _cmd_build(args: argparse.Namespace) -> int:
    return build(profile=args.profile, jobs=args.jobs, builder=args.builder)


def _cmd_check_data(args: argparse.Namespace) -> int:
    return check_data(sample=args.sample, budget_seconds=args.budget_seconds, recompute_all=args.all,
                      experiments=args.experiment, brief=args.brief)


def _stderr_log(quiet: bool):
    """A log that prints a line to stderr, or nothing when ``quiet``."""
    def log(s: str) -> None:
        if not quiet:
            print(s, file=sys.stderr, flush=True)
    return log


def _cmd_campaign(args: argparse.Namespace) -> int:
    """Train the units a chapter reads with the given parameters and profile, resumably."""
    try:
        overrides = _overrides(args.p)
        chapter, params = prepare(args.chapter, overrides, args.profile)
        from posbias import training  # lazy: posbias.training (torch) costs ~1.5s at import
        experiment, profile, settings = training.chapter_campaign(chapter.id, params)
        spec = training.EngineSpec(
            workers=args.workers, threads=args.threads, scheduler=args.scheduler,
            scheduler_file=args.scheduler_file, cluster=args.cluster, cluster_config=args.cluster_config,
            max_jobs=args.max_jobs, gpus_per_worker=args.gpus_per_worker, dashboard=args.dashboard,
            max_members=args.max_members)
        training.checkpoint_interval()
    except ParamError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyError as e:
        print(f"error: {e.args[0]}. `posbias run {args.chapter}` computes what it needs by itself.", file=sys.stderr)
        return 2
    except ValueError as e:             # a bad engine flag, or $POSBIAS_CHECKPOINT_SECONDS
        print(f"error: {e}", file=sys.stderr)
        return 2
    log = _stderr_log(args.quiet)
    if args.write_data:
        os.environ["POSBIAS_WRITE_DATA"] = "1"
    head = f"{chapter.id} ({args.profile} profile)"
    if args.status:
        print(f"{head}: " + training.format_status(
            training.campaign_status(experiment, profile, max_members=spec.max_members,
                                     workers=spec.local_workers(), **settings), model=network_step(chapter, params)))
        if spec.remote:
            try:
                print("\n".join(spec.workers_status()))
            except training.SchedulerLost as e:
                print(f"error: {e}. Start the scheduler (and its workers) again, or leave out --scheduler.",
                      file=sys.stderr)
                return 1
        return 0
    if args.no_train:
        found, missing = training.store_finished(experiment, profile, **settings)
        where = "committed to data/ (or already there)" if args.write_data else "stored"
        parked = ""
        if args.write_data:
            n = training.park_campaign(experiment, profile, log=log, max_members=spec.max_members, **settings)
            parked = (f"; checkpoints of unfinished ensembles: {n['parked']} committed to data/checkpoints, "
                      f"{n['kept']} already there, {n['removed']} removed (their units finished, or in parts "
                      f"split from them)")
        print(f"{head}: {found} finished units {where}, {missing} not trained yet{parked}; nothing was trained")
        return 0

    def on_sigterm(signum: int, frame: object) -> None:   # outside training: stop like SIGINT does
        raise training.Interrupted(signum, 0, 0, None)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    engine = None
    try:
        engine = spec.start()
        where = "in this process" if engine is None else f"on {engine.workers} Dask worker(s), " \
            f"{engine.threads} torch thread(s) each"
        print(f"{head}: training the units of {experiment} it reads, {where}", file=sys.stderr)
        res = training.run_campaign(experiment, profile, progress=not args.quiet and sys.stderr.isatty(), log=log,
                                    max_members=spec.max_members, engine=engine, **settings)
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        print(f"{chapter.id}: campaign stopped by {signal.Signals(signum).name}; finished units are stored and "
              f"unfinished training keeps its checkpoint: run the same command again to resume", file=sys.stderr)
        return 128 + signum
    except training.SchedulerLost as e:
        for name in ["distributed", *[n for n in logging.root.manager.loggerDict if n.startswith("distributed.")]]:
            logging.getLogger(name).disabled = True         # no reconnect tracebacks on the way out
        print(f"error: {e}: start a scheduler and its workers, then run `{shlex.join(['posbias', *sys.argv[1:]])}` "
              "again to resume", file=sys.stderr)
        return 1
    except (training.VersionMismatch, training.PartBusy, OSError, TimeoutError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        if engine is not None:
            engine.close()
    n = sum(len(us) for us in res.values())
    print(f"{chapter.id}: {n} units ready in the cache; `posbias run {chapter.id}"
          + (f" --profile {args.profile}" if args.profile != "default" else "")
          + "".join(f" -p {k} {shlex.quote(v)}" for k, v in (args.p or [])) + "` reads them")
    return 0


def _cmd_keep_weights(args: argparse.Namespace) -> int:
    """Train stored networks again, from their seeds, to keep their weights (or park those unfinished)."""
    try:
        overrides = _overrides(args.p)
        chapter, params = prepare(args.chapter, overrides, args.profile)
        from posbias import training  # lazy: torch
        from posbias.training import weights
        experiment, profile, settings = training.chapter_campaign(chapter.id, params)
        groups = training.units_of(experiment, profile, settings)
        unknown = sorted(set(args.config or []) - set(groups))
        if unknown:
            raise ValueError(f"no configuration {', '.join(map(repr, unknown))} in {chapter.id}; it has "
                             + ", ".join(map(repr, groups)))
        units = [u for label, us in groups.items() if not args.config or label in args.config
                 for u in us if args.seed is None or u.seed in args.seed]
        if not units:
            raise ValueError(f"no unit of {chapter.id} has seed {args.seed}")
    except (ParamError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    if args.write_data:
        os.environ["POSBIAS_WRITE_DATA"] = "1"
    parts: dict[tuple, list] = {}
    for u in units:
        parts.setdefault(u.shape_key(), []).append(u)
    log = _stderr_log(args.quiet)
    if args.park:
        n = weights.park(list(parts.values()), log=log)
        print(f"{chapter.id}: {n} unfinished retraining(s) parked in data/checkpoints/{weights.WEIGHTS}")
        return 0
    try:
        for part in parts.values():
            weights.retrain(part, threads=args.threads, log=log, progress=not args.quiet and sys.stderr.isatty())
    except KeyboardInterrupt:
        print(f"{chapter.id}: stopped; the retraining keeps its checkpoint: run the same command again to resume, "
              "or add --park --write-data to commit it", file=sys.stderr)
        return 130
    print(f"{chapter.id}: weights kept for {sum(weights.kept(u) is not None for u in units)} of {len(units)} units")
    return 0


def _cmd_jump(args: argparse.Namespace) -> int:
    """Train the jump study's networks (posbias.analysis.jump) with their weights kept along training, or park them."""
    from posbias.analysis import jump  # lazy: torch
    from posbias.training import snapshots

    known = [*jump.SEEDS, *jump.ALSO]
    roles = args.role or list(jump.SEEDS)
    unknown = sorted(set(roles) - set(known))
    if unknown:
        print(f"error: no role {', '.join(map(repr, unknown))}; the study has {', '.join(map(repr, known))}",
              file=sys.stderr)
        return 2
    if args.threads is not None and args.threads < 1:
        print(f"error: --threads must be at least 1, not {args.threads}", file=sys.stderr)
        return 2
    if args.write_data:
        os.environ["POSBIAS_WRITE_DATA"] = "1"
    units, log = jump.units(), _stderr_log(args.quiet)
    if args.park:
        n = sum(snapshots.park(units[r], jump.EVERY, log=log) for r in roles)
        print(f"jump: {n} unfinished run(s) parked in data/checkpoints/{snapshots.EXPERIMENT}")
        return 0
    try:
        for r in roles:
            snapshots.train(units[r], jump.EVERY, stored=jump.stored_result(r), threads=args.threads or 1, log=log)
    except KeyboardInterrupt:
        print("jump: stopped; the run keeps its checkpoint and its snapshots: run the same command again to resume, "
              "or add --park --write-data to commit it", file=sys.stderr)
        return 130
    print(f"jump: {len(roles)} network(s) trained with weights every {jump.EVERY:,}")
    return 0


def _retrain_options(p: argparse.ArgumentParser, threads_help: str) -> None:
    """The options of a command that trains networks to keep their weights (keep-weights, jump)."""
    p.add_argument("--threads", type=int, default=None, metavar="N", help=threads_help)
    p.add_argument("--park", action="store_true", help="train nothing: commit unfinished checkpoints")
    p.add_argument("--write-data", action="store_true", help="keep the weights in data/ and its manifest (maintainers)")
    p.add_argument("--quiet", action="store_true")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="posbias", description="Run, re-run and build the posbias book.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("list", help="chapters, or one chapter's parameters")
    p.add_argument("chapter", nargs="?")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("run", help="execute a chapter with parameters")
    p.add_argument("chapter")
    p.add_argument("-p", nargs=2, action="append", metavar=("NAME", "VALUE"), help="set a parameter (repeatable)")
    p.add_argument("--profile", default="default", choices=PROFILES)
    p.add_argument("--out", default=None, help="output folder (default runs/<chapter>-<hash of parameters>)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--timeout", type=int, default=3600, help="seconds allowed per cell")
    p.add_argument("--write-data", action="store_true", help="store expensive results in data/ (maintainers)")
    p.add_argument("--yes", action="store_true",
                   help="run even when the estimate is above an hour (asked for on a terminal)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("build", help="run every chapter of _toc.yml and build the book")
    p.add_argument("--profile", default="default", choices=PROFILES)
    p.add_argument("--jobs", type=int, default=1, help="chapters run at once")
    p.add_argument("--builder", default="html", choices=("html", "pdflatex", "latex"))
    p.set_defaults(func=_cmd_build)

    p = sub.add_parser("check-data", help="verify data/ against its manifest and recompute a sample")
    p.add_argument("--sample", type=int, default=2,
                   help="cheapest committed results to recompute per experiment (0 = none)")
    p.add_argument("--budget-seconds", type=float, default=120.0,
                   help="estimated seconds (from the stored wall times) allowed for recomputation")
    p.add_argument("--all", action="store_true",
                   help="recompute every registered record, ignoring --sample and the budget")
    p.add_argument("--experiment", action="append", default=None, metavar="NAME",
                   help="recompute only this experiment (repeatable); every file is still hash-checked")
    p.add_argument("--brief", action="store_true", help="list only recomputed, skipped or failing files")
    p.set_defaults(func=_cmd_check_data)

    p = sub.add_parser(
        "campaign", help="train the networks a chapter reads, unit by unit, resumably",
        description="Train (or find in data/ or the cache) every unit a trained-network chapter reads with these "
                    "parameters and profile, so that `posbias run CHAPTER` with the same -p and --profile reads "
                    "them from the cache. Interrupt it (Ctrl-C, SIGTERM, or kill it) and the same command "
                    "resumes from the last checkpoint, saved every $POSBIAS_CHECKPOINT_SECONDS seconds "
                    "(default 60) and on SIGINT/SIGTERM (on Dask workers too: the driver asks each running part "
                    "to save before it closes the cluster); exit 130/143 when stopped by SIGINT/SIGTERM.")
    p.add_argument("chapter")
    p.add_argument("-p", nargs=2, action="append", metavar=("NAME", "VALUE"), help="set a parameter (repeatable)")
    p.add_argument("--profile", default="paper", choices=PROFILES,
                   help="the chapter's profile (default paper: campaigns are for long runs)")
    p.add_argument("--status", action="store_true",
                   help="train nothing: say how many units are stored and how far each unfinished ensemble has got "
                        "(from its checkpoint), with its pace and the time to go; with --workers N the ensembles not "
                        "started yet are split as N workers would train them")
    p.add_argument("--no-train", action="store_true",
                   help="train nothing: store the finished units and count the missing ones")
    p.add_argument("--write-data", action="store_true",
                   help="store results in data/ and its manifest; with --no-train, commit finished units from the "
                        "cache unchanged and the checkpoints of unfinished ensembles to data/checkpoints, so a "
                        "fresh clone continues the campaign where it stopped (maintainers)")
    p.add_argument("--max-members", default="auto", metavar="N|auto",
                   help="train at most N units in one ensemble (default auto: 64 in one process, else the size "
                        "that finishes soonest with every worker busy, e.g. six parts of 5 for three groups of 10 "
                        "on 2 workers). An ensemble already started keeps its units, except "
                        "that a smaller N splits it, each part resuming exactly from the larger checkpoint")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", default=None, metavar="N|auto",
                       help="train on a Dask LocalCluster of N worker processes (auto: one per core), one ensemble "
                            "per worker at a time (default: one process, no cluster)")
    where.add_argument("--scheduler", default=None, metavar="ADDR",
                       help="train on an existing Dask cluster (tcp://host:8786): `dask scheduler` and `dask worker "
                            "ADDR` started by hand, cloud machines, Kubernetes")
    where.add_argument("--scheduler-file", default=None, metavar="FILE",
                       help="the same, from the file `dask scheduler --scheduler-file FILE` wrote")
    where.add_argument("--cluster", choices=["slurm"], default=None,
                       help="train on Slurm through dask-jobqueue, scaling adaptively (see --cluster-config)")
    p.add_argument("--cluster-config", default=None, metavar="FILE",
                   help="a jobqueue.yaml with a `jobqueue: slurm:` section (queue, account, walltime, memory, ...)")
    p.add_argument("--max-jobs", type=int, default=4, metavar="N", help="--cluster: at most N Slurm jobs (default 4)")
    p.add_argument("--gpus-per-worker", type=int, default=0, metavar="N",
                   help="--cluster: ask Slurm for N GPUs per job and give each task the Dask resource GPU=1")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch threads per task (default: the cores divided among the local workers; 1 on a cluster)")
    p.add_argument("--dashboard", action="store_true",
                   help="serve the Dask dashboard on :8787 (needs the bokeh package)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_cmd_campaign)

    p = sub.add_parser(
        "keep-weights", help="train stored networks again from their seeds and keep their weights",
        description="Networks stored before weights were kept have none. This trains the chosen units of a "
                    "chapter's campaign again, from the same seeds, keeps each one's final weights (data/wu-weights "
                    "with --write-data, else the user cache) and records whether it reproduced its stored result "
                    "bit for bit. Resumable like a campaign; --park commits an unfinished one's checkpoint.")
    p.add_argument("chapter")
    p.add_argument("-p", nargs=2, action="append", metavar=("NAME", "VALUE"), help="set a parameter (repeatable)")
    p.add_argument("--profile", default="paper", choices=PROFILES, help="the chapter's profile (default paper)")
    p.add_argument("--seed", type=int, action="append", help="only these seeds (repeatable; default all)")
    p.add_argument("--config", action="append", metavar="LABEL", help="only these configurations, e.g. 'No PE|2'")
    _retrain_options(p, "torch threads (default: half the cores)")
    p.set_defaults(func=_cmd_keep_weights)

    p = sub.add_parser(
        "jump", help="train the jump study's networks with weights kept along training (issue 92)",
        description="Trains decay|2 seed 5 (a network that left its plateau in the fixed-budget study) and seed 0 "
                    "(one that never did) again, alone, keeping their weights every 25,000 iterations "
                    "(posbias.analysis.jump holds the design). Resumable; --park commits an unfinished run's "
                    "checkpoint.")
    p.add_argument("--role", action="append", metavar="ROLE",
                   help="'jumper', 'non-jumper' or 'No PE|2' (issue 92's No PE|2 seed 5; default the first two)")
    _retrain_options(p, "torch threads (default 1)")
    p.set_defaults(func=_cmd_jump)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ParamError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
