"""`thoughtmap kg`: a collection's knowledge graph (MTQA's knowledge layer), built once and reused.

- `kg build --collection NAME [--limit N] [--chunk-tokens T] [--llm ...] [--max-cost] [--max-tokens]`:
  build (or continue building) the graph of a corpus collection; Ctrl-C stops after the chunks in
  flight, and the next `kg build` continues without extracting a finished chunk again;
- `kg status`: every collection graph, its progress and what building it cost; the corpus's
  collections not built yet;
- `kg stop --collection NAME`: ask a build running in another process to stop.

Output goes through `engine.safe_text` (collection names and errors are stored text).
"""

from __future__ import annotations

import signal
import threading

from engine.cli_input import positive_type
from engine.knowledge.chunks import DEFAULT_CHUNK_TOKENS
from engine.knowledge.units import BuildProgress

KG_HELP = (
    "The collection's graph is used by runs whose method asks for the collection scope. Building costs one "
    "LLM call per chunk (THOUGHTMAP_MODEL_KNOWLEDGE picks the model); the calls are counted with the graph, "
    "never in a run's cost. Exit codes: 0 built (or status shown), 1 failed (endpoint, or the model's answers "
    "were unusable for every chunk), 2 bad input, "
    "3 stopped before the end (Ctrl-C, kg stop, budget): run kg build again to continue."
)


CHUNK_TOKENS = positive_type("--chunk-tokens", int, "tokens", f"the paper's {DEFAULT_CHUNK_TOKENS}")


def add_kg_parser(sub, budget_type) -> None:
    kg = sub.add_parser("kg", help="knowledge graphs of corpus collections: build, status, stop",
                        description="Build a corpus collection's knowledge graph once (resumable), see its "
                        "progress, or stop a build.", epilog=KG_HELP)
    actions = kg.add_subparsers(dest="kg_action", required=True, metavar="ACTION")
    build = actions.add_parser("build", help="build or continue building a collection's graph")
    build.add_argument("--collection", required=True, help="a corpus collection: hotpotqa, 2wikimultihopqa, nq, "
                       "freshwiki, or files (your ingested and uploaded files); kg status lists them")
    build.add_argument("--limit", type=positive_type("--limit", int, "chunks", "the whole collection"),
                       default=None, metavar="N",
                       help="only the collection's first N chunks (a later build without it adds the rest)")
    build.add_argument("--chunk-tokens", type=CHUNK_TOKENS, default=DEFAULT_CHUNK_TOKENS, metavar="T",
                       help=f"chunk size in tokens (default {DEFAULT_CHUNK_TOKENS}, the paper's)")
    build.add_argument("--llm", choices=["auto", "local", "openai", "fake"], default=None,
                       help="the extracting LLM (default: THOUGHTMAP_LLM or auto); fake is deterministic")
    build.add_argument("--max-cost", type=budget_type("--max-cost", float, "dollars"), default=None,
                       help="stop once this build cost this (USD; checked between batches of chunks; a build "
                       "run again with it continues and may spend as much again)")
    build.add_argument("--max-tokens", type=budget_type("--max-tokens", int, "tokens"), default=None,
                       help="stop once this build used this many tokens (checked between batches of chunks; a "
                       "build run again with it continues and may spend as much again)")
    build.add_argument("--quiet", action="store_true", help="no progress on stderr")
    actions.add_parser("status", help="the collection graphs and their progress")
    stop = actions.add_parser("stop", help="ask a running build to stop after its chunks in flight")
    stop.add_argument("--collection", required=True)
    stop.add_argument("--chunk-tokens", type=CHUNK_TOKENS, default=DEFAULT_CHUNK_TOKENS, metavar="T")


def progress_line(collection: str, progress: BuildProgress) -> str:
    line = (f"{collection}: {progress.chunks_done}/{progress.chunks_total} chunks extracted, "
            f"{progress.entities} entities, {progress.relations} relations")
    return line + (f", {progress.failed_chunks} failed" if progress.failed_chunks else "")


def cmd_kg(args) -> int:
    from engine import cli  # the shared CLI helpers (imported here: cli imports this module)

    services = cli._services()
    if args.kg_action == "status":
        return _status(cli, services)
    if args.kg_action == "stop":
        return _stop(cli, services, args)
    return _build(cli, services, args)


def _build(cli, services, args) -> int:
    from engine.evaluate.accounting import EvalLLM, EvalUsage
    from engine.knowledge.build import CollectionBuilder
    from engine.knowledge.stored import KnowledgeError
    from engine.parallel import run_parallel

    kind = cli._choose_llm(args.llm, services)
    cli._prepare_llm(services, kind, args.quiet)
    llm = EvalLLM(services.llm(kind), services.prices, EvalUsage())
    executor = services.runner.executor  # the process-wide pool: no pool of our own
    builder = CollectionBuilder(services.knowledge.store, services.corpus().store, llm,
                                lambda calls: run_parallel(executor, calls))
    stop = threading.Event()

    def on_interrupt(_signum, _frame):
        cli._err(f"stopping after the chunks in flight (continue later with: thoughtmap kg build --collection "
                 f"{args.collection})...")
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def on_progress(progress: BuildProgress) -> None:
        if not args.quiet:
            cli._err(progress_line(args.collection, progress))

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        outcome = builder.build(args.collection, chunk_tokens=args.chunk_tokens, limit=args.limit, stop=stop,
                                on_progress=on_progress, llm_info=services.llm_info(kind),
                                max_cost=args.max_cost, max_tokens=args.max_tokens)
    except KnowledgeError as exc:
        raise cli.CLIError(str(exc)) from exc
    finally:
        signal.signal(signal.SIGINT, previous)
    graph = outcome.graph
    cli._say(progress_line(args.collection, outcome.progress))
    cli._say(f"building cost: {graph.calls} calls, {graph.prompt_tokens + graph.completion_tokens} tokens, "
             f"${graph.cost:.4f}")
    if outcome.status == "done":
        return cli.EXIT_OK
    if outcome.status == "failed":
        cli._err(f"failed: {outcome.reason}")
        return cli.EXIT_FAILED
    cli._err(f"{outcome.status}: {outcome.reason}; run kg build --collection {args.collection} again to continue")
    return cli.EXIT_STOPPED


def _status(cli, services) -> int:
    from engine.knowledge.build import shown_status

    store = services.knowledge.store
    graphs = store.list_graphs(scope="collection")
    built = set()
    for graph in graphs:
        built.add(graph.collection)
        counts = store.counts(graph.id)
        progress = BuildProgress(counts.chunks_done, counts.chunks_total, counts.entities, counts.relations,
                                 counts.chunks_failed)
        status = shown_status(graph)
        note = f" ({graph.error})" if graph.error and status != "done" else ""
        corpus = services.corpus().store.count_collection_chunks(graph.collection or "")
        cli._say(f"{progress_line(graph.collection or '?', progress)} (the corpus has {corpus} passages) · "
                 f"chunks of {graph.chunk_tokens} tokens · "
                 f"{status}{note} · {graph.calls} calls, {graph.prompt_tokens + graph.completion_tokens} tokens, "
                 f"${graph.cost:.4f}")
    for collection in services.corpus().store.collections():
        if collection not in built:
            cli._say(f"{collection}: not built (thoughtmap kg build --collection {collection})")
    return cli.EXIT_OK


def _stop(cli, services, args) -> int:
    from engine.knowledge.build import owner_alive
    from engine.knowledge.open import collection_graph_key
    from storage.models import KnowledgeGraphStatus

    store = services.knowledge.store
    graph = store.find_graph(collection_graph_key(args.collection, args.chunk_tokens))
    if graph is None:
        raise cli.CLIError(f"no knowledge graph of collection '{args.collection}' (see: thoughtmap kg status)")
    if graph.status != KnowledgeGraphStatus.BUILDING:
        cli._say(f"{args.collection}: not building ({graph.status})")
        return cli.EXIT_OK
    if not owner_alive(graph):  # its process died: nothing will acknowledge the request
        store.set_status(graph.id, KnowledgeGraphStatus.STOPPED, error="stopped: the building process had died")
        cli._say(f"{args.collection}: stopped (its build process had died)")
        return cli.EXIT_OK
    store.set_status(graph.id, KnowledgeGraphStatus.STOPPING, error="", only_if=[KnowledgeGraphStatus.BUILDING])
    cli._say(f"{args.collection}: asked to stop; it stops after the chunks in flight")
    return cli.EXIT_OK
