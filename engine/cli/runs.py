"""`thoughtmap run | resume | list | show | export | ingest`: a run from the terminal, and the stored runs."""

from __future__ import annotations

import argparse
import json
import sys

from engine.access import LimitReached
from engine.cli import common
from engine.cli.basics import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CLIError
from engine.cli.input import check_out_path
from engine.config import load_settings
from engine.export import build_document
from engine.llm.accounting import budget_short
from engine.methods.params import (
    ParamError,
    build_params,
    build_params_with_profile,
    parse_assignments,
    profile_for_llm,
)
from engine.methods.registry import UnknownMethod, get_method
from engine.questions import QuestionError, clean_question
from engine.report import export_json, render_markdown
from engine.runner import RunnerError
from engine.safe_text import json_for_terminal, one_line, terminal_text
from engine.search.protocol import SearchError

# Export formats written as bytes to a file, each from the report's structure (engine/export/):
# the writer's function, loaded only when a file of that format is written (fpdf and python-docx
# cost about 0.35 s of every command's start otherwise).
BINARY_FORMATS = {"pdf": "to_pdf", "docx": "to_docx"}


def cmd_run(args: argparse.Namespace) -> int:
    from engine.service.api import ApiError, Thoughtmap

    question = (args.question or "").strip()
    if not question:
        raise CLIError("the question is empty; pass the question as the first argument, in quotes")
    try:
        question = clean_question(question)  # refused before any set-up, as bad parameters are
    except QuestionError as exc:
        raise CLIError(str(exc)) from exc
    try:
        method_cls = get_method(args.method, common.load_method_classes())
        values = parse_assignments(args.param)
        build_params(method_cls.Params, values, method=args.method)  # bad input fails before any set-up
    except (UnknownMethod, ParamError) as exc:
        raise CLIError(str(exc)) from exc
    # Budgets were checked while parsing; the report's path is checked before the run, not after.
    check_out_path(args.out)
    services = common.services()
    kind = common.choose_llm(args.llm, services)
    profile = profile_for_llm(kind) if args.profile == "auto" else args.profile
    params = build_params_with_profile(method_cls.Params, values, method=args.method, profile=profile)
    if profile == "quick" and method_cls.Params.quick_profile and not args.quiet:
        changed = ", ".join(f"{k}={v}" for k, v in method_cls.Params.quick_profile.items() if k not in values)
        if changed:
            common.err(f"quick profile: {changed} (raise any with --param, or use --profile paper)")
    try:  # the Python API: the HTTP API and MCP server start runs so too
        tm = Thoughtmap(services=services, llm=kind, user=common.user_named(services, args))
    except ApiError as exc:
        raise CLIError(str(exc)) from exc
    if not (services.queue is not None and kind == "local"):  # a worker starts its own built-in model
        common.prepare_llm(services, kind, args.quiet)
        tm.prepared(kind)
    search_mode = args.search or services.settings.search
    try:
        searcher = services.searcher(search_mode, progress=None if args.quiet else common.corpus_progress())
    except SearchError as exc:
        raise CLIError(exc.user_message, EXIT_FAILED) from exc
    if not args.quiet:
        common.err(f"search: {searcher.description}")
        if services.embedder_notice:
            common.err(f"note: {services.embedder_notice}")
    try:
        run = tm.start(
            question,
            args.method,
            params.model_dump(mode="json"),
            llm=kind,
            search=search_mode,
            profile="paper",
            max_tokens=args.max_tokens,
            max_cost=args.max_cost,
        )
    except ApiError as exc:  # checked above already; a plugin's Params may still refuse its own dump
        raise CLIError(str(exc)) from exc
    print(run.id, flush=True)
    if services.queue is not None and not args.quiet:
        common.err("queued: a worker executes it (start one with: thoughtmap worker)")
    common.watch(services, run.id, args.quiet)
    return common.finish(services, run.id, args.out)


def cmd_resume(args: argparse.Namespace) -> int:
    check_out_path(args.out)
    services = common.services()
    services.runner.recover_interrupted()
    run = common.run_for(services, args, args.run_id, change=True)
    try:
        services.access.check_may_run(common.viewer(services, args), run)  # the person's own limits
    except LimitReached as exc:
        raise CLIError(str(exc)) from exc
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
    common.prepare_llm(services, run.llm_info.get("kind", "openai"), args.quiet)
    try:
        services.runner.resume(run.id, max_tokens=args.max_tokens, max_cost=args.max_cost)
    except RunnerError as exc:
        raise CLIError(str(exc)) from exc
    common.err(f"resuming run {run.id}" + (" on a worker" if services.queue is not None else ""))
    common.watch(services, run.id, args.quiet)
    return common.finish(services, run.id, args.out)


def cmd_list(args: argparse.Namespace) -> int:
    services = common.reading_services()
    if not services.db.read_only:  # what it would record could not be written
        services.runner.recover_interrupted()
    runs = services.repo.list_runs(
        text=args.text,
        method=args.method,
        status=args.status,
        limit=args.limit,
        visible_to=services.access.visible_to(common.viewer(services, args)),
    )
    if not runs and args.method and args.method not in services.methods:
        raise CLIError(
            f"--method {args.method}: no such method, and no stored run of it; "
            f"methods: {', '.join(sorted(services.methods))}"
        )
    if not runs and (args.text or args.method or args.status):
        common.err("no stored run matches these filters")
        return EXIT_OK
    if not runs:
        common.err('no runs stored yet. Start one with: thoughtmap run "your question"')
        return EXIT_OK
    common.say(f"{'ID':<12}  {'STATUS':<11}  {'METHOD':<10}  {'NODES':>5}  {'CREATED':<16}  QUESTION")
    for run in runs:
        created = run.created_at.strftime("%Y-%m-%d %H:%M")
        question = one_line(run.title)[:70]
        common.say(f"{run.id:<12}  {run.status:<11}  {run.method:<10}  {run.node_count:>5}  {created:<16}  {question}")
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    services = common.reading_services()
    repo = services.repo
    run = common.run_for(services, args, args.run_id)
    common.say(f"run       {run.id}")
    common.say(f"question  {one_line(run.question)}")
    common.say(f"method    {run.method}  params {json.dumps(run.params)}")
    common.say(f"llm       {one_line(run.llm_info.get('description', '?'))}    search {run.search_mode}")
    common.say(
        f"status    {run.status}"
        + (f" ({one_line(run.stop_reason)})" if run.stop_reason else "")
        + (f" error: {one_line(run.error)}" if run.error else "")
    )  # a server body can span lines
    common.say(
        f"usage     {run.llm_calls} LLM calls, {run.prompt_tokens}+{run.completion_tokens} tokens, ${run.cost:.4f}"
    )
    common.say("tree")
    for node in repo.list_nodes(run.id):
        label = one_line(node.label)[:100]
        common.say(f"  {'  ' * node.depth}#{node.id} [{node.kind}] {label} ({node.status})")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    check_out_path(args.out)
    if args.format in BINARY_FORMATS and args.out is None:
        raise CLIError(
            f"a {args.format.upper()} file is binary and is not written to the terminal; add --out FILE.{args.format}",
            EXIT_USAGE,
        )
    services = common.reading_services()
    run = common.run_for(services, args, args.run_id)
    if args.format in BINARY_FORMATS:
        import engine.export
        from engine.export.pdf import PdfFontMissing

        try:
            data = getattr(engine.export, BINARY_FORMATS[args.format])(build_document(services.repo, run.id))
        except PdfFontMissing as exc:
            raise CLIError(str(exc), EXIT_FAILED) from exc
        try:
            args.out.write_bytes(data)
        except OSError as exc:
            raise CLIError(f"could not write {args.out}: {exc.strerror or exc}", EXIT_FAILED) from exc
        common.err(f"wrote {args.out}")
        return EXIT_OK
    # The Markdown report is already terminal-safe (engine.safe_text); stripping again costs
    # nothing and keeps this true whatever the renderer becomes. JSON keeps its data: the
    # characters a terminal acts on are written as \u escapes.
    if args.format == "md":
        text = terminal_text(render_markdown(services.repo, run.id))
    else:
        text = json_for_terminal(json.dumps(export_json(services.repo, run.id), indent=2, ensure_ascii=False))
    if args.out:
        common.write_file(args.out, text)
        common.err(f"wrote {args.out}")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK


def cmd_ingest(args: argparse.Namespace) -> int:
    from engine.search.bundled import open_default_corpus
    from engine.search.loaders import SUPPORTED_SUFFIXES
    from engine.search.retrieval import corpus_embedding

    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        raise CLIError(f"no such file or folder: {', '.join(missing)}")
    settings = load_settings()
    if settings.team.sign_in:
        # The corpus is every person's runs' (docs/teams.md): admins add to it, as in the app.
        if not settings.team.is_admin(common.user_argument(args) or ""):
            raise CLIError(
                "sign-in is on: only an admin adds files to the corpus every person's runs search; "
                "run it as one with --user ADMIN-EMAIL (THOUGHTMAP_ADMINS)"
            )
    settings.home.mkdir(parents=True, exist_ok=True)
    progress = common.corpus_progress()  # the index's first build, then the new passages' embedding
    try:
        corpus = open_default_corpus(settings, progress, embedding=corpus_embedding(settings))
        report = corpus.ingest(args.paths, progress=progress)
    except SearchError as exc:  # the index is locked by another process's write (IngestLocked)
        raise CLIError(exc.user_message, EXIT_FAILED) from exc
    common.say(report.summary())
    if report.documents_added or report.duplicates_skipped:
        return EXIT_OK
    if not report.skipped:
        raise CLIError("nothing was ingested: no files found (hidden files and folders are ignored)")
    raise CLIError(
        f"nothing was ingested: all {len(report.skipped)} file(s) were skipped, for the reasons listed "
        f"above. Supported: {', '.join(sorted(SUPPORTED_SUFFIXES))} files holding text"
    )
