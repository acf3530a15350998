"""Wall time of every method against its critical path, with a fixed per-call latency: the tree and
matrix methods (DEoT, OmniThink, MTQA) and the chain methods (FGDIP, the research agent, ReAct).

A script, not a test. It starts an OpenAI-compatible test server on 127.0.0.1, in a process of its
own, that answers every call after a fixed latency (the fake LLM's answers), runs default runs
through the real `openai` client, and compares each run's wall time with its critical path: the longest chain of LLM calls
that depend on each other, times the latency. A ratio near 1 means the scheduler adds little on
top of the calls it cannot overlap.

    .venv/bin/python benchmarks/bench_critical_path.py                # latency 0.3 s, default params
    .venv/bin/python benchmarks/bench_critical_path.py --latency 0.5 --write
    .venv/bin/python benchmarks/bench_critical_path.py --methods mtqa --write   # MTQA's section only
    .venv/bin/python benchmarks/bench_critical_path.py --methods fgdip research react --latency 0.5 --write
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import EndpointProcess, facts_block, machine_facts, publish  # noqa: E402
from engine.config import load_settings  # noqa: E402
from engine.services import build_services  # noqa: E402
from storage.models import NodeStatus  # noqa: E402

QUESTION = "How will rising sea levels affect coastal cities over the next fifty years?"
SEQUENTIAL_PURPOSES = ("prompter", "planner", "validator", "summarizer", "controller", "breadth", "depth")
# The tools that call the LLM: both search agents write a short answer from what they found
# (`engine/methods/deot/toolbox.py`), so News Search, DEoT's default tool, is one.
LLM_TOOLS = {"news_search", "info_search", "event_extractor", "history_analyzer", "direct_reasoning"}


def task_chain(tasks: list[dict]) -> int:
    """Longest chain of LLM-using tasks through the plan's dependencies."""
    by_id = {t["id"]: t for t in tasks}
    memo: dict[str, int] = {}

    def length(task_id: str) -> int:
        if task_id not in memo:
            task = by_id[task_id]
            own = 1 if task["tool"] in LLM_TOOLS and task.get("status") != "skipped" else 0
            memo[task_id] = own + max((length(d) for d in task.get("depends_on", []) if d in by_id), default=0)
        return memo[task_id]

    return max((length(t) for t in by_id), default=0)


def node_chains(repo, run_id: str) -> tuple[dict, dict[int, int], Counter]:
    """DEoT's question nodes, the longest chain of dependent calls of each, and each one's calls."""
    nodes = {n.id: n for n in repo.list_nodes(run_id, kind="question")}
    per_node, tool_calls = Counter(), Counter()
    for call in repo.list_llm_calls(run_id):
        if call.node_id in nodes and call.purpose in SEQUENTIAL_PURPOSES:
            per_node[call.node_id] += 1
        elif call.node_id in nodes and call.purpose == "tool":
            tool_calls[call.node_id] += 1
    # A search agent that found nothing makes no call: a chain is at most the node's tool calls.
    chain = {nid: per_node[nid] + min(task_chain(n.data.get("tasks", [])), tool_calls[nid]) for nid, n in nodes.items()}
    return nodes, chain, per_node + tool_calls


def critical_path_calls(repo, run_id: str) -> tuple[int, int]:
    """(critical path in calls, sum over layers of the longest chain in each layer)."""
    nodes, chain, _ = node_chains(repo, run_id)

    def path(nid: int) -> int:
        node = nodes[nid]
        return chain[nid] + (path(node.parent_id) if node.parent_id in nodes else 0)

    report_calls = sum(1 for c in repo.list_llm_calls(run_id) if c.purpose == "report")
    critical = max(path(nid) for nid in nodes) + report_calls
    return critical, sum(layer_chains(nodes, chain).values()) + report_calls


def layer_chains(nodes: dict, chain: dict[int, int]) -> dict[int, int]:
    """The longest chain of each layer (depth)."""
    by_layer: dict[int, int] = {}
    for nid, node in nodes.items():
        by_layer[node.depth] = max(by_layer.get(node.depth, 0), chain[nid])
    return by_layer


def omnithink_critical_path(repo, run_id: str) -> tuple[int, int]:
    """Reflections and expansion rounds alternate; each round's leaves expand in parallel (one call
    deep); outline draft then polish; sections in parallel (one call deep); the polish pass."""
    nodes = repo.list_nodes(run_id)
    calls = Counter(c.purpose for c in repo.list_llm_calls(run_id))
    rounds = len({n.depth for n in nodes if "expansion" in n.data and not n.data["expansion"].get("error")})
    critical = (
        calls["reflect"] + rounds + calls["outline"] + (1 if calls["writer"] else 0) + (1 if calls["writer"] > 1 else 0)
    )
    return critical, critical


def mtqa_critical_path(repo, run_id: str) -> tuple[int, int]:
    """The knowledge graph: its chunks are extracted concurrently, the question's keywords asked
    beside them (one call deep). Then the columns one after the other (a column starts from the summary of
    the one before): in a column, a thought waits for the one above it only when α > 0 passes it
    paragraphs, so the column's chain is its longest run of such links; then the column's summary.
    The second number is the matrix as if every thought waited for the one above (α > 0 everywhere)."""
    calls = repo.list_llm_calls(run_id)
    knowledge = sum(1 for c in calls if c.purpose == "knowledge")
    graph = 1 if knowledge else 0  # the extraction wave, the keywords in it
    cells = repo.list_nodes(run_id, kind="cell")
    columns = sorted({c.data["column"] for c in cells})
    critical = serial = graph
    for column in columns:
        rows = sorted((c for c in cells if c.data["column"] == column), key=lambda c: c.data["row"])
        longest = run = 0
        for cell in rows:
            run = run + 1 if (cell.data.get("alpha") or 0) > 0 and run else 1
            longest = max(longest, run)
        summary = 1 if any(c.purpose == "summary" for c in calls) else 0
        critical += longest + summary
        serial += len(rows) + summary
    return critical, serial


def fgdip_critical_path(repo, run_id: str) -> tuple[int, int]:
    """FGDIP: the extractor; a parent's children generated one after the other (each sees those
    before it, the paper's real-time feedback); the Step Evaluator judges a layer's steps
    concurrently (one call deep per layer); an answer is written, then judged. So every call is on
    the path but a layer's step judgments beyond its first. The second number is every call."""
    calls = repo.list_llm_calls(run_id)
    depth = {n.id: n.depth for n in repo.list_nodes(run_id)}
    judged = Counter(depth[c.node_id] for c in calls if c.purpose == "evaluate_step" and c.node_id in depth)
    return len(calls) - sum(count - 1 for count in judged.values()), len(calls)


def chain_critical_path(repo, run_id: str) -> tuple[int, int]:
    """ReAct: each call reads what the one before it produced (the last observation), so every call
    is on the critical path."""
    calls = len(repo.list_llm_calls(run_id))
    return calls, calls


def research_critical_path(repo, run_id: str) -> tuple[int, int]:
    """The research agent: a chain (each turn reads the last search's summary, the answer reads them
    all), but the citation check judges each cited source apart, concurrently (one call deep). The
    second number is every call."""
    calls = repo.list_llm_calls(run_id)
    judged = sum(c.purpose == "judge_claims" for c in calls)
    return len(calls) - max(judged - 1, 0), len(calls)


BOUND_NOTE = (
    "The critical path counts a wave of concurrent calls as one call. Under the LLM concurrency limit "
    "a wave wider than the limit takes more rounds (MTQA's 11 knowledge calls on 8 slots take two), which no "
    "scheduler can shorten: the critical path under the limit counts them, and the last column divides "
    "by it. The endpoint runs in a process of its own, as a real one does; process start-up, the "
    "corpus's indexing and the embedding model's loading are not timed."
)


def waves(width: int, concurrency: int) -> int:
    """Rounds of calls that `width` concurrent calls take under the LLM concurrency limit."""
    return -(-width // concurrency) if width else 0


def concurrency_bound(repo, run_id: str, method: str, critical: int, concurrency: int) -> int:
    """The critical path (in calls) under the LLM concurrency limit: where the path counts a wave of
    concurrent calls as one, a wave wider than the limit takes ceil(width / limit) rounds, which no
    scheduler can shorten. DEoT's is its layer-synchronous bound, each layer at least its calls over
    the limit. (A lower bound: a layer of 9 chains on 8 slots whose calls fit in its longest chain's
    rounds adds nothing here, though a first-come scheduler starts the 9th chain a call late.)"""
    calls = repo.list_llm_calls(run_id)
    purposes = Counter(c.purpose for c in calls)
    if method == "deot":
        nodes, chain, node_calls = node_chains(repo, run_id)
        layer_calls: Counter[int] = Counter()
        for nid, node in nodes.items():
            layer_calls[node.depth] += node_calls[nid]
        longest = layer_chains(nodes, chain)
        return purposes["report"] + sum(max(longest[d], waves(layer_calls[d], concurrency)) for d in longest)
    if method == "mtqa":
        # The chunk extractions and the question's keywords, asked in one wave.
        return critical + max(0, waves(purposes["knowledge"], concurrency) - 1)
    if method == "research":
        return critical + max(0, waves(purposes["judge_claims"], concurrency) - 1)
    if method == "omnithink":
        depth = {n.id: n.depth for n in repo.list_nodes(run_id)}
        rounds = Counter(depth.get(c.node_id) for c in calls if c.purpose == "expand")
        sections = purposes["writer"] - 1  # the last writer call is the polish pass
        return (
            critical
            + sum(waves(n, concurrency) - 1 for n in rounds.values())
            + max(0, waves(sections, concurrency) - 1)
        )
    if method == "fgdip":
        depth = {n.id: n.depth for n in repo.list_nodes(run_id)}
        judged = Counter(depth[c.node_id] for c in calls if c.purpose == "evaluate_step" and c.node_id in depth)
        return critical + sum(waves(n, concurrency) - 1 for n in judged.values())
    return critical  # ReAct: one call at a time


MULTI_HOP = "Which magazine was started first, Arthur's Magazine or First for Women?"
QUESTIONS = {
    "deot": QUESTION,
    "omnithink": "2022 AFL Grand Final",
    "mtqa": MULTI_HOP,
    "fgdip": MULTI_HOP,
    "react": MULTI_HOP,
    "research": QUESTION,
}
CHAIN_PATHS = {"fgdip": fgdip_critical_path, "research": research_critical_path, "react": chain_critical_path}


def run_once(latency: float, params: dict, concurrency: int, method: str = "deot", *, again: bool = False) -> dict:
    """One measured run on new services. With `again`, the measured run is the question's second on
    them, as a resident app asked the same thing again runs it: its statements compiled and its
    texts embedded by the first (about 0.2 s of an MTQA run's 0.5 s beyond the model)."""
    # The endpoint runs in its own process, as a real one does: the fake writing its answers must not
    # take the CPU (and the GIL) from the run being measured.
    with tempfile.TemporaryDirectory() as home, EndpointProcess(latency, [f"engine.methods.{method}"]) as server:
        env = {
            "THOUGHTMAP_HOME": home,
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "bench",
            "THOUGHTMAP_MODEL": "fake",
            "THOUGHTMAP_LLM_CONCURRENCY": str(concurrency),
        }
        services = build_services(load_settings({**os.environ, **env}))
        # Index the bundled corpus and load the embedding model before timing: the first search of a
        # process costs about 2 s once, not per run. So does the LLM client's first build (importing
        # the openai SDK, about 0.35 s): a resident process (the app, a worker) pays it once.
        services.searcher("local").search("warming the index up", k=5)
        services.llm("openai")
        for _ in range(2 if again else 1):
            run = services.runner.create_run(
                question=QUESTIONS[method],
                method=method,
                params=params,
                llm_info=services.llm_info("openai"),
                search_mode="local",
            )
            started = time.perf_counter()
            services.runner.start(run.id)
            final = services.runner.wait(run.id, timeout=1800)
            wall = time.perf_counter() - started
        if method == "deot":
            critical, layered = critical_path_calls(services.repo, run.id)
            nodes = services.repo.list_nodes(run.id, kind="question")
        elif method == "mtqa":
            critical, layered = mtqa_critical_path(services.repo, run.id)
            nodes = services.repo.list_nodes(run.id)
        elif method in CHAIN_PATHS:
            critical, layered = CHAIN_PATHS[method](services.repo, run.id)
            nodes = services.repo.list_nodes(run.id)
        else:
            critical, layered = omnithink_critical_path(services.repo, run.id)
            nodes = services.repo.list_nodes(run.id)
        result = {
            "status": final.status,
            "wall": wall,
            "calls": final.llm_calls,
            "critical": critical,
            "bound": concurrency_bound(services.repo, run.id, method, critical, concurrency),
            "layered": layered,
            "nodes": len(nodes),
            "depth": max(n.depth for n in nodes),
            "done": sum(n.status == NodeStatus.DONE for n in nodes),
            "requests": server.stats()["chat_requests"],
            "max_in_flight": server.stats()["max_in_flight"],
        }
        services.close()
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per LLM call (default 0.3)")
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=[8, 16],
        help="LLM concurrency limits to measure (default: 8, the default setting, and 16)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the row shows the median wall time")
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["deot", "omnithink", "mtqa", *CHAIN_PATHS],
        choices=["deot", "omnithink", "mtqa", *CHAIN_PATHS],
        help="methods to measure (default: all)",
    )
    parser.add_argument("--write", action="store_true", help="replace their sections of docs/benchmarks.md")
    parser.add_argument(
        "--again",
        action="store_true",
        help="measure each run as its question's second on the same services (statements compiled, texts "
        "embedded), as a resident app asked the same thing again; printed only, not with --write",
    )
    args = parser.parse_args()
    if args.again and args.write:
        parser.error("--again measures warm runs, which the published tables are not: drop --write")
    tree = [m for m in args.methods if m in ("deot", "omnithink")]
    if tree:
        publish_tree(args, tree)
    if "mtqa" in args.methods:
        publish_mtqa(args)
    chains = [m for m in args.methods if m in CHAIN_PATHS]
    if chains:
        publish_chains(args, chains)


def measured(args, method: str, concurrency: int) -> tuple[dict, float]:
    runs = sorted(
        (run_once(args.latency, {}, concurrency, method, again=args.again) for _ in range(args.repeat)),
        key=lambda r: r["wall"],
    )
    r = runs[len(runs) // 2]
    return r, r["critical"] * args.latency


def publish_mtqa(args) -> None:
    rows = []
    for concurrency in args.concurrency:
        r, ideal = measured(args, "mtqa", concurrency)
        rows.append(
            f"| mtqa, default params (3 × 4, Vert&Hor-0.1), LLM concurrency {concurrency} | {r['status']} | "
            f"{r['nodes']} ({r['done']} done) | {r['calls']} | {r['max_in_flight']} | {r['critical']} | "
            f"{r['layered']} | {r['bound']} | {r['wall']:.1f} s | {ideal:.1f} s | **{r['wall'] / ideal:.2f}** | "
            f"{r['wall'] / (r['bound'] * args.latency):.2f} |"
        )
    body = "\n".join(
        [
            facts_block(
                f".venv/bin/python benchmarks/bench_critical_path.py --methods mtqa --latency {args.latency} "
                f"--repeat {args.repeat} --concurrency {' '.join(map(str, args.concurrency))}{' --again' * args.again}",
                machine_facts(),
            ),
            f"The same test server ({args.latency} s per call, the fake LLM's answers through the real `openai` "
            "client) runs MTQA with its default parameters on a HotpotQA question of the bundled corpus: 10 "
            "documents into the question's knowledge graph, a 3 × 4 matrix with the Vert&Hor-0.1 weights. "
            "Critical path = one wave of chunk extractions with the question's keywords (they run concurrently) + "
            "per column the longest chain of thoughts linked by α > 0 + the column's summary; columns run one "
            "after the other. The serial matrix bound counts every thought of a column in sequence. Each row is "
            f"the median of {args.repeat} runs.",
            "",
            BOUND_NOTE,
            "",
            "| run | status | nodes | LLM calls | most calls in flight | critical path (calls) | serial matrix "
            "bound (calls) | critical path under the concurrency limit (calls) | wall time | critical path × latency | "
            "wall / critical path | wall / critical path under the limit |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            *rows,
        ]
    )
    publish("MTQA: wall time over critical path", body, args.write)


def publish_tree(args, methods: list[str]) -> None:
    rows = []
    for method, concurrency in [(m, c) for m in methods for c in args.concurrency]:
        label = f"{method}, default params, LLM concurrency {concurrency}"
        r, ideal = measured(args, method, concurrency)
        rows.append(
            f"| {label} | {r['status']} | {r['nodes']} ({r['done']} done), depth {r['depth']} | {r['calls']} | "
            f"{r['max_in_flight']} | {r['critical']} | {r['layered']} | {r['bound']} | {r['wall']:.1f} s | {ideal:.1f} s | "
            f"**{r['wall'] / ideal:.2f}** | {r['wall'] / (r['layered'] * args.latency):.2f} | "
            f"{r['wall'] / (r['bound'] * args.latency):.2f} |"
        )
    facts = machine_facts()
    body = "\n".join(
        [
            facts_block(
                f".venv/bin/python benchmarks/bench_critical_path.py --latency {args.latency} --repeat {args.repeat} --concurrency "
                f"{' '.join(map(str, args.concurrency))}{' --again' * args.again}",
                facts,
            ),
            f"An OpenAI-compatible test server on 127.0.0.1 answers every call after {args.latency} s; the run goes "
            "through the real `openai` client with the default node workers (16) and the LLM concurrency "
            "limit given per row (`THOUGHTMAP_LLM_CONCURRENCY`). "
            "Critical path = the longest root-to-leaf chain of dependent LLM calls (prompter, planner and plan "
            "review, the longest chain of LLM tools through the plan's dependencies, summary, fact check, "
            "controller, engine) plus the final report. The layer-synchronous bound adds up the longest chain "
            "of each layer, since DEoT expands a layer after it is solved. Each row is the median of "
            f"{args.repeat} runs.",
            "",
            "OmniThink's critical path: reflection steps and expansion rounds alternate (the leaves of one round "
            "expand in parallel), then the outline draft and polish, the sections (written in parallel) and the "
            "polish pass; its tree has no layer barrier beyond the paper's own steps, so both bounds are equal.",
            "",
            BOUND_NOTE,
            "",
            "| run | status | tree nodes | LLM calls | most calls in flight | critical path (calls) | "
            "layer-synchronous bound (calls) | critical path under the concurrency limit (calls) | wall time | "
            "critical path × latency | wall / critical path | wall / layer bound | wall / critical path under the limit |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            *rows,
        ]
    )
    publish("Tree methods: wall time over critical path", body, args.write)


def publish_chains(args, methods: list[str]) -> None:
    rows = []
    for method, concurrency in [(m, c) for m in methods for c in args.concurrency]:
        r, ideal = measured(args, method, concurrency)
        rows.append(
            f"| {method}, default params, LLM concurrency {concurrency} | {r['status']} | {r['nodes']} ({r['done']} "
            f"done) | {r['calls']} | {r['max_in_flight']} | {r['critical']} | {r['bound']} | {r['wall']:.1f} s | "
            f"{ideal:.1f} s | **{r['wall'] / ideal:.2f}** | {r['wall'] / (r['bound'] * args.latency):.2f} |"
        )
    body = "\n".join(
        [
            facts_block(
                f".venv/bin/python benchmarks/bench_critical_path.py --methods {' '.join(methods)} --latency "
                f"{args.latency} --repeat {args.repeat} --concurrency {' '.join(map(str, args.concurrency))}{' --again' * args.again}",
                machine_facts(),
            ),
            f"The same test server ({args.latency} s per call, the fake LLM's answers through the real `openai` "
            "client) runs each method with its default parameters. ReAct is a chain: each call reads what the one "
            "before produced, so the critical path is every call. The research agent is one too, but for its "
            "citation check, which judges each cited source apart (concurrently, one call deep). FGDIP generates a "
            "parent's children one after the other and judges a layer's steps concurrently, so its critical path "
            "is every call but a layer's step judgments beyond the first. Process start-up and the corpus's "
            f"indexing are not timed. Each row is the median of {args.repeat} runs.",
            "",
            BOUND_NOTE,
            "",
            "| run | status | nodes | LLM calls | most calls in flight | critical path (calls) | critical path under the "
            "concurrency limit (calls) | wall time | critical path × latency | wall / critical path | wall / critical path "
            "under the limit |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            *rows,
        ]
    )
    publish("Chain methods: wall time over critical path", body, args.write)


if __name__ == "__main__":
    main()
