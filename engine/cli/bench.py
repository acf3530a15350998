"""`thoughtmap bench`: methods on a bundled dataset's items, each item a stored run; resume, show,
rescore, list, export and import stored benchmarks."""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from engine.cli import common
from engine.cli.basics import EXIT_OK, EXIT_STOPPED, CLIError
from engine.cli.input import check_out_path
from engine.methods.params import ParamError, parse_assignments
from engine.safe_text import one_line

if TYPE_CHECKING:  # only for annotations: imported where first used
    from engine.access import Viewer
    from engine.evaluate.runner import BenchmarkRunner, Progress
    from engine.services import Services
    from storage.models import Benchmark, BenchmarkItem


def cmd_bench(args: argparse.Namespace) -> int:
    from engine.evaluate.datasets import DEFAULT_SEED, DatasetError
    from engine.evaluate.results import summarize, to_json, to_markdown
    from engine.evaluate.runner import BenchmarkError, BenchmarkRunner, BenchmarkSpec
    from storage.evaluation import BenchmarkNotFound

    for path in (args.out, args.json_out):
        check_out_path(path)
    modes = [
        flag
        for flag, on in (
            ("--resume", args.resume),
            ("--show", args.show),
            ("--list", args.list),
            ("--export", args.export),
            ("--import", args.import_file),
            ("--rescore", args.rescore),
        )
        if on
    ]
    if len(modes) > 1:
        raise CLIError(f"use one of {', '.join(modes)} at a time")
    if args.export or args.import_file:
        return _bench_archive(args)
    if not modes and not args.dataset:
        raise CLIError(
            "name a dataset, e.g. thoughtmap bench --dataset hotpotqa-autoact --methods direct,rag --limit 20"
        )
    services = common.services()
    bench_runner = BenchmarkRunner(services)
    person = common.viewer(services, args)
    try:
        if args.list:
            for bench in bench_runner.store.list_benchmarks(user_id=None if person.sees_everything else person.user_id):
                common.say(
                    f"{bench.id}  {bench.status:<8}  {bench.dataset:<18}  {bench.limit:>4} items  "
                    f"{','.join(bench.methods)}  {bench.created_at:%Y-%m-%d %H:%M}"
                )
            return EXIT_OK
        if args.show:
            bench = _owned(bench_runner.store.get_benchmark(args.show), person, change=False)
        elif args.rescore:
            bench = _owned(bench_runner.store.get_benchmark(args.rescore), person, change=True)
            if args.max_cost is not None or args.max_tokens is not None:  # raised: the rescore asks the LLM
                bench_runner.raise_budget(bench.id, max_cost=args.max_cost, max_tokens=args.max_tokens)
            common.prepare_llm(services, bench.llm_info.get("kind", "openai"), args.quiet)
            rescored = bench_runner.rescore(bench.id)
            if not args.quiet:
                common.err(f"benchmark {bench.id}: {rescored.scored} finished items scored again")
            if rescored.left:
                common.err(f"thoughtmap: {rescored.budget_note(bench.id)}")
        elif args.resume:
            bench = _owned(bench_runner.store.get_benchmark(args.resume), person, change=True)
            if args.max_cost is not None or args.max_tokens is not None:  # raised, for one the budget stopped
                bench_runner.raise_budget(bench.id, max_cost=args.max_cost, max_tokens=args.max_tokens)
                bench = bench_runner.store.get_benchmark(bench.id)
            common.prepare_llm(services, bench.llm_info.get("kind", "openai"), args.quiet)
        else:
            kind = common.choose_llm(args.llm, services)
            try:
                values = parse_assignments(args.param)
            except ParamError as exc:
                raise CLIError(str(exc)) from exc
            spec = BenchmarkSpec(
                dataset=args.dataset,
                methods=[m.strip() for m in args.methods.split(",") if m.strip()],
                limit=args.limit,
                seed=DEFAULT_SEED if args.seed is None else args.seed,
                values=values,
                llm=kind,
                profile=args.profile,
                search_mode=args.search or services.settings.search,
                max_cost=args.max_cost,
                max_tokens=args.max_tokens,
                concurrency=args.concurrency,
                judges=tuple(j.strip() for j in args.judges.split(",") if j.strip()),
                balance=args.by,
                user_id=person.user_id,
            )
            bench = bench_runner.create(spec)
            common.prepare_llm(services, kind, args.quiet)
        if not args.show and not args.rescore:
            if not args.quiet:
                common.err(f"benchmark {bench.id}: {bench.dataset}, {bench.limit} items x {', '.join(bench.methods)}")

            def progress(row: BenchmarkItem) -> None:
                if not args.quiet:
                    common.err(
                        f"  {row.method:<10} {one_line(row.item_id)[:40]:<40} {row.status}"
                        + (f": {one_line(row.error)[:120]}" if row.error else "")
                    )

            bench = _execute_benchmark(bench_runner, bench.id, progress)
        # A sample balanced on a field is shown by it unless another breakdown is asked for.
        table = summarize(bench_runner.store, bench.id, by=args.by or bench.balance or None, paired=args.paired)
    except (BenchmarkError, DatasetError, BenchmarkNotFound) as exc:
        raise CLIError(str(exc)) from exc
    markdown = to_markdown(table)
    if args.pairwise:
        markdown += "\n" + _pairwise(services, bench_runner, bench, args.pairwise)
    common.say(markdown)
    if args.out:
        common.write_file(args.out, markdown)
    if args.json_out:
        common.write_file(args.json_out, json.dumps(to_json(table), indent=2, ensure_ascii=False))
    return EXIT_OK if bench.status in ("done", "running") else EXIT_STOPPED


def _owned(bench: Benchmark, person: Viewer, *, change: bool) -> Benchmark:
    """The benchmark, when the command's person may see it (theirs, or an admin reading) or, with
    `change`, run it (theirs only)."""
    mine = not person.signed_in or bench.user_id == person.user_id
    if not mine and (change or not person.is_admin):
        raise CLIError(f"benchmark {bench.id} is not yours; start your own with thoughtmap bench --dataset ...")
    return bench


def _bench_archive(args: argparse.Namespace) -> int:
    """thoughtmap bench --export ID FILE / --import FILE (engine/evaluate/archive.py)."""
    from engine.evaluate.archive import ArchiveError, export_benchmark, import_benchmark, read_archive, write_archive
    from storage.evaluation import BenchmarkNotFound, EvaluationStore, ItemStatus

    services = common.services()
    person = common.viewer(services, args)
    try:
        store = EvaluationStore(services.db)
        if args.export:
            benchmark_id, out = args.export[0], Path(args.export[1])
            check_out_path(out, "--export")
            _owned(store.get_benchmark(benchmark_id), person, change=False)
            archive = export_benchmark(store, benchmark_id)
            write_archive(archive, out)
            done = sum(1 for i in archive.items if i.status in ItemStatus.FINISHED)
            common.say(
                f"benchmark {archive.benchmark.id}: {done} of {len(archive.items)} item runs finished, written to {out}"
            )
            return EXIT_OK
        archive = read_archive(args.import_file)
        try:  # merged into a stored benchmark of the same id only when it is this person's
            _owned(store.get_benchmark(archive.benchmark.id), person, change=True)
        except BenchmarkNotFound:
            pass  # a new one: it becomes theirs
        bench, filled = import_benchmark(store, archive, user_id=person.user_id)
        left = sum(1 for r in store.list_items(bench.id) if r.status not in ItemStatus.FINISHED)
        common.say(
            f"benchmark {bench.id}: {filled} finished item runs imported, {left} left"
            + (f"; continue it with: thoughtmap bench --resume {bench.id}" if left else "")
        )
        return EXIT_OK
    except (ArchiveError, BenchmarkNotFound) as exc:
        raise CLIError(str(exc)) from exc
    finally:
        services.close()


def _pairwise(services: Services, bench_runner: BenchmarkRunner, bench: Benchmark, protocol: str) -> str:
    from engine.evaluate.pairwise_bench import compare_methods, comparisons_markdown

    if len(bench.methods) < 2:
        raise CLIError(f"--pairwise needs two methods; benchmark {bench.id} has {bench.methods[0]} only")
    kind = bench.llm_info.get("kind", "openai")
    common.prepare_llm(services, kind, True)
    return comparisons_markdown(
        compare_methods(bench_runner.store, services.repo, bench_runner.reader_for(bench), bench.id, protocol)
    )


def _execute_benchmark(bench_runner: BenchmarkRunner, benchmark_id: str, progress: Progress) -> Benchmark:
    """Execute with Ctrl-C stopping cleanly: the runs under way stop and stay resumable."""
    import threading

    stop = threading.Event()

    def on_interrupt(_signum: int, _frame: FrameType | None) -> None:
        common.err(f"stopping the benchmark (continue later with: thoughtmap bench --resume {benchmark_id})...")
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        return bench_runner.execute(benchmark_id, progress=progress, stop=stop)
    finally:
        signal.signal(signal.SIGINT, previous)
