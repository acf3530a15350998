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

import argparse
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING

from engine.cli import common
from engine.cli.basics import EXIT_FAILED, EXIT_OK, EXIT_STOPPED, CLIError
from engine.knowledge.units import BuildProgress
from storage.models import stored_id

if TYPE_CHECKING:  # only for annotations: imported where first used
    from engine.services import Services


def progress_line(collection: str, progress: BuildProgress) -> str:
    line = (
        f"{collection}: {progress.chunks_done}/{progress.chunks_total} chunks extracted, "
        f"{progress.entities} entities, {progress.relations} relations"
    )
    return line + (f", {progress.failed_chunks} failed" if progress.failed_chunks else "")


def cmd_kg(args: argparse.Namespace) -> int:

    services = common.services()
    if args.kg_action == "status":
        return _status(services)
    if args.kg_action == "stop":
        return _stop(services, args)
    return _build(services, args)


def _build(services: Services, args: argparse.Namespace) -> int:
    from engine.knowledge.build import CollectionBuilder
    from engine.knowledge.stored import KnowledgeError
    from engine.llm.counted import EvalLLM, EvalUsage
    from engine.parallel import run_parallel

    kind = common.choose_llm(args.llm, services)
    common.prepare_llm(services, kind, args.quiet)
    llm = EvalLLM(services.llm(kind), services.prices, EvalUsage())
    executor = services.runner.executor  # the process-wide pool: no pool of our own
    builder = CollectionBuilder(
        services.knowledge.store, services.corpus().store, llm, lambda calls: run_parallel(executor, calls)
    )
    stop = threading.Event()

    def on_interrupt(_signum: int, _frame: FrameType | None) -> None:
        common.err(
            f"stopping after the chunks in flight (continue later with: thoughtmap kg build --collection "
            f"{args.collection})..."
        )
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def on_progress(progress: BuildProgress) -> None:
        if not args.quiet:
            common.err(progress_line(args.collection, progress))

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        outcome = builder.build(
            args.collection,
            chunk_tokens=args.chunk_tokens,
            limit=args.limit,
            stop=stop,
            on_progress=on_progress,
            llm_info=services.llm_info(kind),
            max_cost=args.max_cost,
            max_tokens=args.max_tokens,
        )
    except KnowledgeError as exc:
        raise CLIError(str(exc)) from exc
    finally:
        signal.signal(signal.SIGINT, previous)
    graph = outcome.graph
    common.say(progress_line(args.collection, outcome.progress))
    common.say(
        f"building cost: {graph.calls} calls, {graph.prompt_tokens + graph.completion_tokens} tokens, ${graph.cost:.4f}"
    )
    if outcome.status == "done":
        return EXIT_OK
    if outcome.status == "failed":
        common.err(f"failed: {outcome.reason}")
        return EXIT_FAILED
    common.err(f"{outcome.status}: {outcome.reason}; run kg build --collection {args.collection} again to continue")
    return EXIT_STOPPED


def _status(services: Services) -> int:
    from engine.knowledge.build import shown_status

    store = services.knowledge.store
    graphs = store.list_graphs(scope="collection")
    built = set()
    for graph in graphs:
        built.add(graph.collection)
        counts = store.counts(stored_id(graph))
        progress = BuildProgress(
            counts.chunks_done, counts.chunks_total, counts.entities, counts.relations, counts.chunks_failed
        )
        status = shown_status(graph)
        note = f" ({graph.error})" if graph.error and status != "done" else ""
        corpus = services.corpus().store.count_collection_chunks(graph.collection or "")
        common.say(
            f"{progress_line(graph.collection or '?', progress)} (the corpus has {corpus} passages) · "
            f"chunks of {graph.chunk_tokens} tokens · "
            f"{status}{note} · {graph.calls} calls, {graph.prompt_tokens + graph.completion_tokens} tokens, "
            f"${graph.cost:.4f}"
        )
    for collection in services.corpus().store.collections():
        if collection not in built:
            common.say(f"{collection}: not built (thoughtmap kg build --collection {collection})")
    return EXIT_OK


def _stop(services: Services, args: argparse.Namespace) -> int:
    from engine.knowledge.build import owner_alive
    from engine.knowledge.open import collection_graph_key
    from storage.models import KnowledgeGraphStatus

    store = services.knowledge.store
    graph = store.find_graph(collection_graph_key(args.collection, args.chunk_tokens))
    if graph is None:
        raise CLIError(f"no knowledge graph of collection '{args.collection}' (see: thoughtmap kg status)")
    graph_id = stored_id(graph)
    if graph.status != KnowledgeGraphStatus.BUILDING:
        common.say(f"{args.collection}: not building ({graph.status})")
        return EXIT_OK
    if not owner_alive(graph):  # its process died: nothing will acknowledge the request
        store.set_status(graph_id, KnowledgeGraphStatus.STOPPED, error="stopped: the building process had died")
        common.say(f"{args.collection}: stopped (its build process had died)")
        return EXIT_OK
    store.set_status(graph_id, KnowledgeGraphStatus.STOPPING, error="", only_if=[KnowledgeGraphStatus.BUILDING])
    common.say(f"{args.collection}: asked to stop; it stops after the chunks in flight")
    return EXIT_OK
