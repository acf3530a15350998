"""DEoT's cost formula: the calls `method.py` makes, counted within the bounds the parameters set.

Per run: the Base Prompter once (`optimize_query`), the final report once. Per question node (the
Solver Agent): the planner and, with `validate_plans`, its validator per plan attempt; the tools of
the plan (each calls the model; the search agents only when their search found something); the
summary; with `validate_results`, the fact check (and, at the high end, a rewrite and another check
for each summary found INVALID, up to `max_summary_attempts`). Per
expansion: the Engine Controller (not at the root with `root_breadth`) and one engine call.

The tree is grown as the scheduler grows it: layer by layer up to `max_layers` (the user's question is
layer 1, as the paper counts), each expanding node
taking one unit of the remaining node budget, children cut at `max_nodes`. The expected shape
assumes the controller answers BREADTH (the paper reports it nearly always does at the first
layers); DEPTH or STOP grow fewer nodes, which the low end of the range covers.

What the scripted fake does differently (`--llm fake`): its plans hold one News Search task, so its
nodes make one tool call, where a real model's plans hold 1-3 tasks; and its
engines repeat questions, so about half its expansions make the "ask differently" retry. The
formula keeps a real model's rates; `tests/engine/methods/test_cost_estimate.py` checks it against the fake's run.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.methods.deot.params import DeotParams
from engine.methods.estimate import CostEstimate, Tally, capped_tokens, words_to_tokens

# Tools that send the model a prompt: all of them (the search agents write their answer from the
# results; only a search that finds nothing makes no call).
LLM_TOOLS = frozenset({"news_search", "info_search", "event_extractor", "history_analyzer", "direct_reasoning"})

# Assumed for a real model (no capable endpoint measured here): a plan holds 1-3 tasks, on average
# this many, and is approved at its first attempt.
TASKS_PER_PLAN = 1.5
PLAN_ATTEMPTS = 1

# Prompt tokens per call, measured on the scripted fake's default run over the bundled corpus
# (`benchmarks/bench_estimate.py`: characters / 4, the fake's own count). The prompts are ours and the
# sources are the corpus's, so these hold for a real model on the same corpus; web pages are longer.
PROMPT_TOKENS = {
    "prompter": 290,
    "planner": 690,
    "plan_validator": 450,
    "tool": 500,
    "summary": 1800,
    "fact_check": 2150,
    "controller": 570,
    "engine": 730,
    "report_base": 600,
}
# Completion tokens per call of the structured outputs (the same run; the fake fills each schema
# with sentences of about a real answer's length). Prose outputs are sized from their parameters.
COMPLETION_TOKENS = {
    "prompter": 45,
    "planner": 225,
    "plan_validator": 60,
    "fact_check": 150,
    "controller": 60,
    "engine": 155,
}
SUMMARY_FIELDS_TOKENS = 60  # the summary's JSON around its words


@dataclass(frozen=True)
class TreeShape:
    nodes: int
    expansions: int  # nodes the engines were asked about (within the budget and the layers)


def tree_shape(params: DeotParams, *, children_per_expansion: int) -> TreeShape:
    """The tree the scheduler grows when every expansion proposes `children_per_expansion`
    children: layer by layer, one unit of the remaining budget per expanding node
    (`_expand_next_layer`), children created within `max_nodes` (`_materialize`)."""
    nodes, width, expansions = 1, 1, 0
    for _ in range(params.max_layers - 1):  # the user's question is layer 1
        room = params.max_nodes - nodes
        expanding = min(width, room)
        if expanding <= 0:
            break
        expansions += expanding
        width = min(expanding * children_per_expansion, room)
        nodes += width
    return TreeShape(nodes, expansions)


def _tool_calls_per_node(params: DeotParams) -> tuple[float, float, float]:
    """(low, expected, high) tool calls that reach the model, per node."""
    tools = params.enabled_tools()
    if not params.llm_planner:
        # One search task of the node's own query (`planner.search_task`).
        chosen = next((t for t in ("info_search", "news_search") if t in tools), tools[0])
        calls = 1.0 if chosen in LLM_TOOLS else 0.0
        return calls, calls, calls
    llm_share = sum(t in LLM_TOOLS for t in tools) / len(tools)
    low = 0.0 if {"news_search", "info_search"} & set(tools) else 1.0  # a search that finds nothing
    return low, TASKS_PER_PLAN * llm_share, 3.0 if llm_share else 0.0


def estimate(params: DeotParams) -> CostEstimate:
    shape = tree_shape(params, children_per_expansion=params.max_aspects)
    tools_low, tools, tools_high = _tool_calls_per_node(params)
    plan_calls = (1 + params.validate_plans) if params.llm_planner else 0
    summary_completion = words_to_tokens(params.summary_words) + SUMMARY_FIELDS_TOKENS
    tool_completion = capped_tokens(params.tool_max_tokens)
    controller_calls = shape.expansions - (1 if params.root_breadth and shape.expansions else 0)

    tally = Tally()
    tally.add(
        "refine the question",
        int(params.optimize_query),
        prompt=PROMPT_TOKENS["prompter"],
        completion=COMPLETION_TOKENS["prompter"],
    )
    if params.llm_planner:
        tally.add(
            "plan each question",
            shape.nodes * PLAN_ATTEMPTS,
            prompt=PROMPT_TOKENS["planner"],
            completion=COMPLETION_TOKENS["planner"],
        )
        tally.add(
            "validate each plan",
            shape.nodes * PLAN_ATTEMPTS * params.validate_plans,
            prompt=PROMPT_TOKENS["plan_validator"],
            completion=COMPLETION_TOKENS["plan_validator"],
        )
    tally.add("run the tools", shape.nodes * tools, prompt=PROMPT_TOKENS["tool"], completion=tool_completion)
    tally.add("summarise each question", shape.nodes, prompt=PROMPT_TOKENS["summary"], completion=summary_completion)
    tally.add(
        "fact-check each summary",
        shape.nodes * params.validate_results,
        prompt=PROMPT_TOKENS["fact_check"],
        completion=COMPLETION_TOKENS["fact_check"],
    )
    tally.add(
        "choose breadth, depth or stop",
        controller_calls,
        prompt=PROMPT_TOKENS["controller"],
        completion=COMPLETION_TOKENS["controller"],
    )
    tally.add(
        "propose follow-up questions",
        shape.expansions,
        prompt=PROMPT_TOKENS["engine"],
        completion=COMPLETION_TOKENS["engine"],
    )
    tally.add(
        "write the report",
        1,
        prompt=PROMPT_TOKENS["report_base"] + shape.nodes * summary_completion,
        completion=capped_tokens(params.report_max_tokens),
    )

    fixed = int(params.optimize_query) + 1  # the prompter and the report
    # Low: the controller stops at the root (with root_breadth the root still opens one layer).
    low_shape = (
        TreeShape(min(2, params.max_nodes), 1)
        if params.root_breadth and shape.expansions
        else TreeShape(1, min(1, shape.expansions))
    )
    low = fixed + low_shape.expansions + low_shape.nodes * (plan_calls + tools_low + 1 + params.validate_results)
    # High: every plan rejected until the last attempt, three model tools per plan, and every
    # expansion asking again differently after repeats.
    rewrites = (params.max_summary_attempts - 1) * 2 * params.validate_results
    high = (
        fixed
        + 2 * shape.expansions
        + shape.nodes * (plan_calls * params.max_plan_attempts + tools_high + 1 + params.validate_results + rewrites)
        + controller_calls
    )
    how = (
        f"{shape.nodes} question nodes (max_nodes {params.max_nodes}, {params.max_layers} layers, "
        f"{params.max_aspects} aspects per breadth expansion), {shape.expansions} expansions; "
        f"about {plan_calls + tools + 1 + params.validate_results:g} calls per node"
    )
    return tally.estimate(low=low, high=high, how=how)
