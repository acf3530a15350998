"""The `thoughtmap` command line's grammar: every command, flag and choice, and its help.

Loaded on every call, `--help` included, so it imports nothing heavy: no method, no database layer,
no model client. The few choices that name things defined in heavier modules (judge protocols,
rubrics, retrievers, rerankers, the datasets search-eval measures, the knowledge layer's chunk size)
are written here, and `tests/engine/cli/test_cli_startup.py` checks them against their definitions."""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.cli.input import budget_type, positive_type
from engine.methods.registry import DEFAULT_BENCH_METHODS, DEFAULT_METHOD, METHODS
from storage.statuses import RunStatus

BINARY_FORMATS = ("pdf", "docx")  # engine/cli/runs.py writes them (engine/export/)
PAIRWISE_PROTOCOL_NAMES = ("deot", "mtqa")  # engine.evaluate.judges.PAIRWISE_PROTOCOLS
RUBRIC_NAMES = ("deepresearch", "omnithink")  # engine.evaluate.rubrics.RUBRICS
RETRIEVER_NAMES = ("bm25", "dense", "hybrid")  # engine.config.Retriever
RERANKER_NAMES = ("none", "builtin", "llm", "endpoint")  # engine.config.RerankerName
SEARCH_EVAL_DATASETS = ("hotpotqa-autoact", "hotpotqa", "2wiki", "nq")  # engine.evaluate.retrieval_setup.DATASETS
DEFAULT_CHUNK_TOKENS = 1200  # engine.knowledge.chunks.DEFAULT_CHUNK_TOKENS, the paper's


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="thoughtmap",
        description="Deep research with LLM reasoning trees, headless. Runs are stored and can be "
        "listed, shown, resumed and exported.",
        epilog="Exit codes: 0 done, 1 failed, 2 bad input, 3 stopped early (budget or user).",
    )
    parser.add_argument(
        "--user",
        default=None,
        metavar="EMAIL",
        help="with sign-in on (multi-user mode): whom the command acts for, who must have "
        "signed in to the web app once (default: THOUGHTMAP_USER). Off: every run is yours",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="research a question; prints the run id")
    run.add_argument("question", help="the question to research (quote it)")
    run.add_argument(
        "--method",
        default=DEFAULT_METHOD,
        help=f"reasoning method: {', '.join(sorted(METHODS))} (default {DEFAULT_METHOD})",
    )
    run.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="method parameter, repeatable (see: thoughtmap methods)",
    )
    run.add_argument(
        "--llm",
        choices=["auto", "local", "fake", "openai"],
        default=None,
        help="openai: any OpenAI-compatible endpoint (OPENAI_BASE_URL, OPENAI_API_KEY, "
        "THOUGHTMAP_MODEL); local: the built-in model (llama.cpp on this machine); fake: the "
        "offline scripted fake; auto: openai when an endpoint or key is configured, else local "
        "when installed, else fake (default: THOUGHTMAP_LLM or auto)",
    )
    run.add_argument(
        "--profile",
        choices=["auto", "quick", "paper"],
        default="auto",
        help="parameter defaults: quick (small, fast runs for the built-in model), paper (the "
        "paper's values); auto (default): quick on the built-in model, else paper. --param wins.",
    )
    run.add_argument(
        "--search",
        choices=["local", "web", "both", "none"],
        default=None,
        help="where sources come from (default THOUGHTMAP_SEARCH or local: the bundled corpus)",
    )
    run.add_argument("--out", type=Path, help="also write the Markdown report to this file")
    run.add_argument(
        "--max-tokens",
        type=budget_type("--max-tokens", int, "tokens"),
        help="token budget of the run; it stops cleanly when reached",
    )
    run.add_argument(
        "--max-cost", type=budget_type("--max-cost", float, "dollars"), help="cost budget of the run in dollars"
    )
    run.add_argument("--quiet", action="store_true", help="no progress on stderr")

    steer = sub.add_parser(
        "steer",
        help="send a run one of its method's commands (see: thoughtmap methods)",
        description="Queue a steering command: expand, deepen, ask, prune... as the method "
        "declares them (thoughtmap methods lists each method's). A run executing elsewhere "
        "(the app, serve, a worker) applies it there; a finished run is reopened and "
        "executed here until it ends.",
    )
    steer.add_argument("run_id")
    steer.add_argument(
        "steer_command", metavar="command", help="the command's name, e.g. ask, expand, prune, regenerate_report"
    )
    steer.add_argument("--node", type=int, default=None, metavar="N", help="the node it applies to (its #id)")
    steer.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help='a payload field, repeatable, e.g. --set question="How did trade change?"',
    )
    steer.add_argument("--quiet", action="store_true", help="no progress on stderr")
    for name, what in (
        ("pause", "pause a queued or running run at its next step"),
        ("stop", "stop an active run at its next step, keeping what it made"),
        ("delete", "delete a run and everything stored with it (stop it first)"),
    ):
        sub.add_parser(name, help=what).add_argument("run_id")

    resume = sub.add_parser("resume", help="continue an interrupted, stopped or failed run")
    resume.add_argument("run_id")
    resume.add_argument(
        "--llm", choices=["fake", "local", "openai"], help="LLM to continue with (default: the run's own)"
    )
    resume.add_argument("--max-tokens", type=budget_type("--max-tokens", int, "tokens"), help="raise the token budget")
    resume.add_argument("--max-cost", type=budget_type("--max-cost", float, "dollars"), help="raise the cost budget")
    resume.add_argument("--out", type=Path, help="also write the Markdown report to this file")
    resume.add_argument("--quiet", action="store_true")

    lst = sub.add_parser("list", help="list stored runs, newest first")
    lst.add_argument("--status", choices=RunStatus.ALL, help="only runs with this status")
    lst.add_argument("--method", help="only runs of this method")
    lst.add_argument("--search", dest="text", help="only runs whose question contains this text")
    lst.add_argument(
        "--limit",
        type=positive_type("--limit", int, "runs", "the newest 50"),
        default=50,
        help="how many runs, newest first (default 50)",
    )

    show = sub.add_parser("show", help="show a run: status, usage and its tree")
    show.add_argument("run_id")

    export = sub.add_parser("export", help="export a run as Markdown, JSON, PDF or DOCX")
    export.add_argument("run_id")
    export.add_argument(
        "--format",
        choices=["md", "json", *BINARY_FORMATS],
        default="md",
        help="pdf and docx are files: they need --out",
    )
    export.add_argument("--out", type=Path, help="write to this file instead of stdout")

    ingest = sub.add_parser("ingest", help="add files or folders (txt, md, html, pdf, jsonl) to the local corpus")
    ingest.add_argument("paths", nargs="+", type=Path)

    sub.add_parser("methods", help="list the methods and their parameters")

    bench = sub.add_parser(
        "bench",
        help="benchmark methods on a bundled dataset; every item is a stored run",
        description="Run methods on a bundled dataset's items, each item a stored run, and print the table "
        "(mean with 95%% bootstrap CI). A killed benchmark continues with --resume ID, without redoing "
        "finished items.",
    )
    bench.add_argument(
        "--dataset", help="one of: hotpotqa-autoact, hotpotqa-fullwiki, 2wiki, nq, strategyqa, freshwiki, researchy"
    )
    bench.add_argument(
        "--methods",
        default=",".join(DEFAULT_BENCH_METHODS),
        help=f"comma-separated methods (default {','.join(DEFAULT_BENCH_METHODS)})",
    )
    bench.add_argument("--limit", type=int, default=None, help="how many items (default: all)")
    bench.add_argument("--seed", type=int, default=None, help="the sample's seed (default 13): same seed, same items")
    bench.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="[METHOD.]KEY=VALUE",
        help="parameter for every method that has KEY, or for METHOD only; repeatable",
    )
    bench.add_argument("--llm", choices=["auto", "local", "fake", "openai"], default=None, help="as for run")
    bench.add_argument("--profile", choices=["auto", "quick", "paper"], default="auto", help="as for run")
    bench.add_argument("--search", choices=["local", "web", "both", "none"], default=None, help="as for run")
    bench.add_argument(
        "--max-cost",
        type=budget_type("--max-cost", float, "dollars"),
        help="budget of the whole benchmark in dollars (runs and scoring); with --resume or --rescore, its new budget",
    )
    bench.add_argument(
        "--max-tokens",
        type=budget_type("--max-tokens", int, "tokens"),
        help="token budget of the whole benchmark; with --resume or --rescore, its new budget",
    )
    bench.add_argument("--concurrency", type=int, default=2, help="runs at a time (default 2)")
    bench.add_argument(
        "--judges",
        default="",
        metavar="claims,density,rubric",
        help="LLM-judged scores per item: claims (citation error and support rates), density "
        "(OmniThink's knowledge density), rubric (OmniThink's on articles, the deep research paper's "
        "otherwise); the judge model per role: THOUGHTMAP_MODEL_JUDGE_CLAIMS, _JUDGE_DENSITY, "
        "_JUDGE_RUBRIC, else THOUGHTMAP_MODEL_JUDGE",
    )
    bench.add_argument(
        "--pairwise",
        choices=PAIRWISE_PROTOCOL_NAMES,
        default=None,
        help="also compare the first method with each other one, item by item, with the DEoT "
        "or MTQA pairwise judge (both orders; THOUGHTMAP_MODEL_JUDGE_PAIRWISE picks the model)",
    )
    bench.add_argument(
        "--by",
        metavar="KEY",
        default=None,
        help="an item field such as level (HotpotQA AutoAct: easy, medium, hard): a new benchmark's "
        "sample holds an equal share of each value, and the table has a row per method and value",
    )
    bench.add_argument("--resume", metavar="ID", help="continue a stored benchmark")
    bench.add_argument("--show", metavar="ID", help="print a stored benchmark's table")
    bench.add_argument(
        "--rescore",
        metavar="ID",
        help="score a stored benchmark's finished items again from their stored runs with this "
        "release's scoring (the reader is asked again only where it has not read an answer), "
        "then print the table",
    )
    bench.add_argument("--list", action="store_true", help="list stored benchmarks")
    bench.add_argument(
        "--export",
        nargs=2,
        metavar=("ID", "FILE"),
        help="write a stored benchmark (definition and every scored item, not the runs) to a JSON "
        "file, to continue it or merge it on another machine",
    )
    bench.add_argument(
        "--import",
        dest="import_file",
        type=Path,
        metavar="FILE",
        help="store a benchmark written by --export under its own id (merged into it when it is "
        "stored here already: finished items fill the unfinished ones); continue it with --resume ID",
    )
    bench.add_argument(
        "--paired",
        action="store_true",
        help="the table over the items every method has finished only (a benchmark part-way)",
    )
    bench.add_argument("--out", type=Path, help="also write the table as Markdown to this file")
    bench.add_argument("--json", type=Path, dest="json_out", help="also write the results as JSON to this file")
    bench.add_argument("--quiet", action="store_true", help="no progress on stderr")

    model = sub.add_parser(
        "model", help="the built-in models (the local LLM, the embedding model): status, or install them now"
    )
    model.add_argument(
        "action",
        choices=["status", "prepare"],
        help="status: what would run and whether it can; prepare: install and verify the "
        "built-in models' files now (scripts/setup does this)",
    )
    model.add_argument("--force", action="store_true", help="prepare: install again even if the files exist")
    model.add_argument(
        "--only",
        choices=["llm", "embedder"],
        help="prepare or show only the local LLM or only the embedding model (scripts/setup "
        "prepares only the embedder with THOUGHTMAP_NO_LOCAL_MODEL=1)",
    )

    _add_judge(sub)
    _add_kg(sub)
    _add_search_eval(sub)
    _add_worker(sub)
    _add_serve(sub)
    return parser


JUDGE_HELP = (
    "Judge models: THOUGHTMAP_MODEL_JUDGE_PAIRWISE, THOUGHTMAP_MODEL_JUDGE_RUBRIC and THOUGHTMAP_MODEL_JUDGE_CLAIMS "
    "pick the model of each judge role; a role without one uses THOUGHTMAP_MODEL_JUDGE, else THOUGHTMAP_MODEL. "
    "Judge calls are counted with the verdict, never in the judged runs' own cost. Exit codes: 0 judged, "
    "1 the judge's answers stayed invalid or the endpoint failed, 2 bad input (unknown run, no report, "
    "runs of different questions)."
)


def _add_judge(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    judge = sub.add_parser(
        "judge",
        help="judge stored runs: compare two, or check one's claims and scores",
        description="Compare two runs of the same question (pairwise, both orders), or "
        "judge one run: claim support of its citations (default) and/or a rubric.",
        epilog=JUDGE_HELP,
    )
    judge.add_argument("runs", nargs="+", metavar="RUN", help="one run id (or prefix), or two to compare")
    judge.add_argument(
        "--protocol",
        choices=PAIRWISE_PROTOCOL_NAMES,
        default=None,
        help="two runs: deot (DEoT's five criteria + overall, default) or mtqa "
        "(comprehensiveness, accuracy, empowerment, overall)",
    )
    judge.add_argument(
        "--claims",
        action="store_true",
        help="one run: check every cited sentence against its source (the default without --rubric)",
    )
    judge.add_argument(
        "--rubric",
        choices=RUBRIC_NAMES,
        default=None,
        help="one run: omnithink (relevance, breadth, depth, novelty 1-5) or deepresearch "
        "(clarity, insightfulness 0-10, key-point factuality)",
    )
    judge.add_argument(
        "--llm",
        choices=["auto", "local", "openai", "fake"],
        default=None,
        help="the judge's LLM (default: THOUGHTMAP_LLM or auto); fake is deterministic",
    )
    judge.add_argument("--quiet", action="store_true", help="no LLM notes on stderr")


KG_HELP = (
    "The collection's graph is used by runs whose method asks for the collection scope. Building costs one "
    "LLM call per chunk (THOUGHTMAP_MODEL_KNOWLEDGE picks the model); the calls are counted with the graph, "
    "never in a run's cost. Exit codes: 0 built (or status shown), 1 failed (endpoint, or the model's answers "
    "were unusable for every chunk), 2 bad input, "
    "3 stopped before the end (Ctrl-C, kg stop, budget): run kg build again to continue."
)


CHUNK_TOKENS = positive_type("--chunk-tokens", int, "tokens", f"the paper's {DEFAULT_CHUNK_TOKENS}")


def _add_kg(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    kg = sub.add_parser(
        "kg",
        help="knowledge graphs of corpus collections: build, status, stop",
        description="Build a corpus collection's knowledge graph once (resumable), see its progress, or stop a build.",
        epilog=KG_HELP,
    )
    actions = kg.add_subparsers(dest="kg_action", required=True, metavar="ACTION")
    build = actions.add_parser("build", help="build or continue building a collection's graph")
    build.add_argument(
        "--collection",
        required=True,
        help="a corpus collection: hotpotqa, 2wikimultihopqa, nq, "
        "freshwiki, or files (your ingested and uploaded files); kg status lists them",
    )
    build.add_argument(
        "--limit",
        type=positive_type("--limit", int, "chunks", "the whole collection"),
        default=None,
        metavar="N",
        help="only the collection's first N chunks (a later build without it adds the rest)",
    )
    build.add_argument(
        "--chunk-tokens",
        type=CHUNK_TOKENS,
        default=DEFAULT_CHUNK_TOKENS,
        metavar="T",
        help=f"chunk size in tokens (default {DEFAULT_CHUNK_TOKENS}, the paper's)",
    )
    build.add_argument(
        "--llm",
        choices=["auto", "local", "openai", "fake"],
        default=None,
        help="the extracting LLM (default: THOUGHTMAP_LLM or auto); fake is deterministic",
    )
    build.add_argument(
        "--max-cost",
        type=budget_type("--max-cost", float, "dollars"),
        default=None,
        help="stop once this build cost this (USD; checked between batches of chunks; a build "
        "run again with it continues and may spend as much again)",
    )
    build.add_argument(
        "--max-tokens",
        type=budget_type("--max-tokens", int, "tokens"),
        default=None,
        help="stop once this build used this many tokens (checked between batches of chunks; a "
        "build run again with it continues and may spend as much again)",
    )
    build.add_argument("--quiet", action="store_true", help="no progress on stderr")
    actions.add_parser("status", help="the collection graphs and their progress")
    stop = actions.add_parser("stop", help="ask a running build to stop after its chunks in flight")
    stop.add_argument("--collection", required=True)
    stop.add_argument("--chunk-tokens", type=CHUNK_TOKENS, default=DEFAULT_CHUNK_TOKENS, metavar="T")


def _add_search_eval(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "search-eval",
        help="measure the corpus search on a dataset's gold paragraphs (no LLM)",
        description="Ask the local corpus's search each item's question and score the documents it ranks "
        "against the item's gold supporting titles: all-gold@10, recall@k, nDCG@10, MRR, and the query "
        "time p50/p95. The corpus holds the datasets' own pooled paragraphs (easier than open Wikipedia).",
        epilog="Exit codes: 0 measured, 1 a search failed, 2 bad input or a configuration that cannot be measured.",
    )
    parser.add_argument(
        "--dataset",
        required=True,
        metavar="D",
        help=f"one of: {', '.join(SEARCH_EVAL_DATASETS)} (hotpotqa: HotpotQA AutoAct's 300 items)",
    )
    parser.add_argument(
        "--retriever",
        choices=RETRIEVER_NAMES,
        default=None,
        help="the first stage (default: THOUGHTMAP_RETRIEVER, what the methods use)",
    )
    parser.add_argument(
        "--reranker",
        choices=RERANKER_NAMES,
        default=None,
        help="reorders the first stage's top hits (default: THOUGHTMAP_RERANKER, what "
        "the methods use); endpoint needs THOUGHTMAP_RERANK_URL, llm a configured LLM",
    )
    parser.add_argument(
        "--limit",
        type=positive_type("--limit", int, "items", "every item"),
        default=None,
        metavar="N",
        help="only the first N items of the dataset's fixed sample (seed 13)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _add_worker(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = sub.add_parser(
        "worker",
        help="execute queued runs (distributed mode: THOUGHTMAP_EXECUTION=queue on PostgreSQL)",
        description="Take runs from the queue in the database and execute them. The app and `thoughtmap run` "
        "only enqueue runs when THOUGHTMAP_EXECUTION=queue; start as many workers as you like, on any machine "
        "that reaches THOUGHTMAP_DATABASE_URL (PostgreSQL). LLM calls in flight stay within "
        "THOUGHTMAP_LLM_CONCURRENCY across all workers (set the same value everywhere). SIGTERM or Ctrl-C "
        "hands this worker's runs on to the other workers (each stops at its next step, finished work kept, "
        "and is queued again) and exits; a second one exits at once.",
    )
    worker.add_argument(
        "--concurrency",
        type=positive_type("--concurrency", int, "runs", "the default, 2"),
        default=2,
        metavar="N",
        help="runs this worker executes at a time (default 2)",
    )
    worker.add_argument(
        "--stalled-after",
        default=30.0,
        metavar="SECONDS",
        type=positive_type("--stalled-after", float, "seconds", "the default, 30"),
        help="a worker silent this long is taken for dead and its runs go to another worker, "
        "which resumes them from their stored graph (default 30)",
    )
    worker.add_argument(
        "--heartbeat",
        default=5.0,
        metavar="SECONDS",
        type=positive_type("--heartbeat", float, "seconds", "the default, 5"),
        help="how often this worker says it is alive (default 5; keep it well under --stalled-after)",
    )


def _add_listening(parser: argparse.ArgumentParser, *, port: int, note: str) -> None:
    """The flags `serve` and `mcp` share: where to listen, the model, whether a token is needed."""
    parser.add_argument("--host", default="127.0.0.1", help=f"{note}the address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=port, help=f"{note}the port (default {port}; 0: any free port)")
    parser.add_argument(
        "--llm",
        choices=["auto", "local", "fake", "openai"],
        default=None,
        help="what runs use unless a request says otherwise (default: THOUGHTMAP_LLM or auto)",
    )
    parser.add_argument(
        "--require-token",
        action="store_true",
        help=f"{note}need a bearer token on a loopback address too (always needed on any other)",
    )


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve the HTTP API (runs, live events, steering, reports) on 127.0.0.1",
        description="Serve Thoughtmap's HTTP API: create, list, steer, pause, resume, stop and delete runs, "
        "stream a run's events (server-sent events), get its report as md, json, pdf or docx, list the "
        "methods and search the corpus. The OpenAPI document is at /openapi.json. On anything but a "
        "loopback address every request needs a bearer token (thoughtmap token create NAME), and the "
        "server refuses to start without one.",
        epilog="Exit codes: 0 stopped, 2 bad input (an address that needs a token, and no token exists).",
    )
    _add_listening(serve, port=8765, note="")

    mcp = sub.add_parser(
        "mcp",
        help="serve Thoughtmap to MCP clients (Claude Desktop, IDEs, agents) on stdio or HTTP",
        description="An MCP server with the tools research, run_status, get_report, list_runs, steer, "
        "list_methods and search_corpus, and each run's report as a resource. stdio (default) is for a client "
        "that starts it; http serves streamable HTTP at /mcp, with the same token rules as serve.",
    )
    mcp.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default stdio")
    _add_listening(mcp, port=8766, note="http only: ")

    token = sub.add_parser(
        "token",
        help="the HTTP API's bearer tokens: create, list, revoke",
        description="Tokens for `thoughtmap serve`. A token is shown once, when it is "
        "created; only its hash is stored.",
    )
    actions = token.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="make a token and print it (once)")
    create.add_argument("name", help="who or what will use it")
    actions.add_parser("list", help="the tokens: id, name, first characters, created, last used, revoked")
    revoke = actions.add_parser("revoke", help="revoke a token by id, or every token of a name")
    revoke.add_argument("which", metavar="ID_OR_NAME")
