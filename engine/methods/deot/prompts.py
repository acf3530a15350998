"""DEoT prompts, in our own words, following the fields, constraints and flow of the paper's
appendices B (Base Prompter), C (Planner, Toolbox, Executor, Validation), D (Engine Controller,
Breadth and Depth Engines) and E (Final Response)."""

from engine.prompting import Prompt

# ------------------------------------------------------------------ B. Base Prompter

OPTIMIZE_QUERY = Prompt(
    name="deot.optimize_query",
    system=(
        "You refine research questions before analysis. Today is $today.\n"
        "Rewrite the user's question so that it is specific and complete:\n"
        "- make vague wording precise;\n"
        "- add the time frame it implies (relative to today) when it matters;\n"
        "- spell out ambiguous terms and abbreviations;\n"
        "- use the full, standard names of people, organisations and places.\n"
        "Keep the user's intent and scope; do not answer the question. "
        "List each change you made under modifications."
    ),
    user="Question: $question",
)

REPAIR_QUERY = Prompt(
    name="deot.repair_query",
    system=(
        "You refine research questions before analysis, and your previous attempt failed. Today is $today.\n"
        "Work out what went wrong, then produce a corrected refinement that keeps the question's core "
        "intent. Explain the error, the correction and what the failed attempt did wrong."
    ),
    user=("Original question: $question\nError encountered: $error\nFailed attempt: $failed_output"),
)

# ------------------------------------------------------------------ C. Planner

PLAN_TASKS = Prompt(
    name="deot.plan_tasks",
    system=(
        "You break a research query into tasks for specialised agents. Today is $today.\n"
        "Available agents:\n$tool_descriptions\n"
        "Rules:\n"
        "1. Plan between one and three tasks: only the essential ones.\n"
        "2. Give each task a unique id (task1, task2, ...), a description, the agent, its exact input, "
        "the reason for choosing that agent, and the ids of earlier tasks it depends on.\n"
        "3. Search inputs are short search-engine queries; ask for at most $max_results results.\n"
        "4. A task that needs another task's results lists that task in depends_on and says in its "
        "input how it uses them. Do not add dependencies that are not needed; never depend on a later "
        "or unknown task.\n"
        "5. Keep every name, number and date the query contains."
    ),
    user="Question: $query\n\nContext of the wider investigation: $context",
)

REVISE_PLAN = Prompt(
    name="deot.revise_plan",
    system=PLAN_TASKS.system,
    user=(
        "Question: $query\n\nContext of the wider investigation: $context\n\n"
        "A previous plan was rejected:\n$previous_plan\n\nFeedback on it:\n$feedback\n\n"
        "Write a revised plan that fixes every point of the feedback, keeps the tasks linked and "
        "executable, and stays complete and non-redundant."
    ),
)

VALIDATE_PLAN = Prompt(
    name="deot.validate_plan",
    system=(
        "You review task plans before they run. Check:\n"
        "1. Completeness: the tasks together cover every key part of the query; the names and numbers "
        "it contains are carried into the inputs; every task has a suitable agent and a clear input.\n"
        "2. Non-redundancy: no two tasks overlap or could be merged without loss; every dependency is "
        "needed.\n"
        "Approve a plan that meets both. Otherwise say which tasks are affected and what to change."
    ),
    user="Question: $query\n\nPlan:\n$plan",
)

# ------------------------------------------------------------------ C. Toolbox

TOOL_DESCRIPTIONS = {
    "news_search": "news_search: finds recent news and current developments for a search query; answers with dated, sourced items.",
    "info_search": "info_search: gathers supplementary factual information for a search query; answers with its sources.",
    "event_extractor": "event_extractor: pulls the key events (what, who, when, where, consequences, figures) out of text or earlier results.",
    "history_analyzer": "history_analyzer: compares an event with historical parallels and their outcomes.",
    "direct_reasoning": "direct_reasoning: reasons step by step about a question, drawing implications.",
}

INFO_SEARCH = Prompt(
    name="deot.info_search",
    system=(
        "You are an information search agent. Today is $today. From the numbered search results, write "
        "a short, well-organised answer to the request: what each relevant source says, its key facts, "
        "data and figures, attributing every fact with its number, like [2], and giving the date a fact "
        "or source carries when it has one. Use only the sources below. A search returns its nearest "
        "matches even when they are about something else: ignore a source that does not bear on the "
        "request, and if none does, say that no relevant source was found. At most 200 words."
    ),
    user="Sources:\n\n$sources\n\nQuestion: $input",
)

# The paper's News Search is an agent over an online search model: a short list of recent articles,
# each with its source and a summary. Ours writes it from the run's search results (web first).
NEWS_SEARCH = Prompt(
    name="deot.news_search",
    system=(
        "You are a news search agent. Today is $today. From the numbered search results, report the "
        "most recent developments that bear on the request, newest first: for each, a heading with what "
        "happened, the date it happened or was published (write 'date not given' when the source has "
        "none), and a two-sentence factual summary citing its number, like [3]. Use only the sources "
        "below; leave out any that do not bear on the request, and if none does, say that no relevant "
        "news was found. At most $count items and 250 words."
    ),
    user="Sources:\n\n$sources\n\nFind recent news about: $input",
)

EVENT_EXTRACTOR = Prompt(
    name="deot.event_extractor",
    system=(
        "You extract the key events from text. For each important event give: what happened; who "
        "the main actors are; when and where; the immediate consequences or reactions; any figures. "
        "Keep to facts, not opinion, and keep the source numbers [n] of facts taken from sources. "
        "At most 300 words."
    ),
    user="$sources_block$dependencies\nExtract the key events for: $input",
)

HISTORY_ANALYZER = Prompt(
    name="deot.history_analyzer",
    system=(
        "You are a historian of economic, political and business events. For the event given, name "
        "two or three comparable historical cases; compare their causes and their market, political "
        "and business effects with the present case; describe how they ended; and draw lessons. "
        "Be specific. Keep source numbers [n] for facts from sources. At most 300 words."
    ),
    user="$sources_block$dependencies\nEvent to analyse: $input",
)

DIRECT_REASONING = Prompt(
    name="deot.direct_reasoning",
    system=(
        "You reason carefully and clearly. Answer directly, explain the logic step by step, note the "
        "implications and give examples where useful. Keep source numbers [n] for facts from sources. "
        "Be concise."
    ),
    user="$sources_block$dependencies\nAnalyse: $input",
)

# ------------------------------------------------------------------ C. Executor and validation

SUMMARIZE_RESULTS = Prompt(
    name="deot.summarize_results",
    system=(
        "You condense the results of executed tasks into a structured summary for one research query: "
        "key findings (two or three sentences), evidence and data points, analysis (two or three "
        "paragraphs), conflicting information between results (empty if none), and a conclusion that "
        "answers the query in one or two sentences. Cite the numbered sources as [n] wherever a fact "
        "comes from them; cite only numbers that are listed, and only for what they actually say: a source "
        "about something else is not evidence, leave it out. Stay within $words words. Failed tasks "
        "are marked as such: do not invent their results."
    ),
    user="Sources:\n\n$sources\n\nTask results:\n\n$results\n\nQuestion: $query",
)

# The summary as plain prose, asked once its structured form failed every attempt (a small model on a
# slow machine, cut off by the output cap even in the compact form): the node is answered, not failed.
SUMMARIZE_PLAIN = Prompt(
    name="deot.summarize_plain",
    system=(
        "You answer one research query from the numbered sources and the results of executed tasks, in "
        "plain prose of at most $words words, without headings or lists. Cite the numbered sources as [n] "
        "wherever a fact comes from them; cite only numbers that are listed, and only for what they actually "
        "say. Failed tasks are marked as such: do not invent their results."
    ),
    user=SUMMARIZE_RESULTS.user,
)

# Result Validation's regeneration: the summary is written again with the fact check's issues.
REVISE_SUMMARY = Prompt(
    name="deot.revise_summary",
    system=SUMMARIZE_RESULTS.system
    + (
        " A fact check found factual errors in your previous summary: correct every one of them using "
        "the sources and task results, and state nothing the evidence does not support."
    ),
    user=(
        "Sources:\n\n$sources\n\nTask results:\n\n$results\n\nQuestion: $query\n\n"
        "Previous summary:\n$previous\n\nFactual errors the fact check found:\n$issues"
    ),
)

FACT_CHECK = Prompt(
    name="deot.fact_check",
    system=(
        "You verify factual accuracy only. Today is $today.\n"
        "- Mark INVALID only where there is a verifiable factual error; do not judge style, relevance "
        "or completeness.\n"
        "- For predictions or opinions, check only the facts they rest on.\n"
        "- For every error, give the correction and the evidence (a source number or known fact).\n"
        "Check each task result, then the summary, and give your confidence for each."
    ),
    user="Sources:\n\n$sources\n\nTask results:\n\n$results\n\nSummary:\n$summary\n\nQuestion: $query",
)

# ------------------------------------------------------------------ D. Dual-engine system

CONTROLLER = Prompt(
    name="deot.controller",
    system=(
        "You steer an analysis tree and choose the next step for one of its nodes:\n"
        "- BREADTH: the topic has several distinct aspects still unexplored; widen the analysis.\n"
        "- DEPTH: one specific point needs a closer look; follow it up.\n"
        "- STOP: this branch already answers its question well enough, or more would add little.\n"
        "Early layers should usually go BREADTH, later layers DEPTH. Weigh the complexity of the "
        "content, the current layer against the maximum, the points still unresolved and the "
        "resources already used."
    ),
    user=(
        "Overall research question: $question\n"
        "Question: $query\n"
        "Current layer: $layer of at most $max_layers\n"
        "Resources used: $nodes_used of $max_nodes question nodes\n\n"
        "Content of this node:\n$content"
    ),
)

# The paper's controller (`paper_engines`): BREADTH or DEPTH only; a branch ends at the limits.
CONTROLLER_PAPER = Prompt(
    name="deot.controller_paper",
    system=(
        "You steer an analysis tree and choose the next step for one of its nodes:\n"
        "- BREADTH: the topic has several distinct aspects still unexplored; widen the analysis.\n"
        "- DEPTH: one specific point needs a closer look; follow it up.\n"
        "Early layers should usually go BREADTH, later layers DEPTH. Weigh the complexity and "
        "completeness of the content, the current layer against the maximum, the points that need a "
        "closer look and the balance between breadth and depth."
    ),
    user=CONTROLLER.user,
)

BREADTH = Prompt(
    name="deot.breadth",
    system=(
        "You map the different aspects a topic touches: economic, social, political, technical, "
        "environmental, historical, legal and so on. For each aspect give its name, category, why it "
        "matters, one specific and investigable follow-up query, and a priority (HIGH, MEDIUM, LOW) by "
        "significance and urgency. Aspects must be realistic, distinct and not overlap with each other "
        "or with the questions already explored."
    ),
    user=(
        "Overall research question: $question\n"
        "Question: $query\n"
        "Already explored: $explored\n\n"
        "Content to analyse:\n$content\n\n"
        "$how_many"
    ),
)

# Asked when every question an engine proposed repeated one already in the tree (small models often
# hand the question back). A different, easier task rather than the same one again: name the specific
# things the findings mention; each becomes a follow-up about that thing (engines.follow_ups_retry).
# No worked example: the built-in 0.5B model copied an example's questions word for word.
FOLLOW_UPS_RETRY = Prompt(
    name="deot.follow_ups_retry",
    system=(
        "You copy proper names out of a text: the names of the people, films, books, companies, places "
        "and events it mentions, each exactly as the text spells it, capital letters included. Copy "
        "only names that are in the text; never a general word, a sentence or a question."
    ),
    user=(
        "Question: $query\n\n"
        "Text:\n$content\n\n"
        "Copy up to $n proper names from the text that would help answer the question."
    ),
)

DEPTH = Prompt(
    name="deot.depth",
    system=(
        "You write exactly one follow-up question that digs deeper into the content: a specific, "
        "investigable question about an unresolved point or a critical mechanism, neither redundant "
        "with what was already explored nor too broad. Explain why it matters and give a priority "
        "(HIGH, MEDIUM, LOW)."
    ),
    user=(
        "Overall research question: $question\n"
        "Question: $query\n"
        "Already explored: $explored\n"
        "Unresolved points noted: $unresolved\n\n"
        "Content to analyse:\n$content"
    ),
)

# ------------------------------------------------------------------ E. Final response

FINAL_REPORT = Prompt(
    name="deot.final_report",
    system=(
        "You write the final analytical report of a multi-layer investigation. Today is $today.\n"
        "Answer the original question directly, then build a well-reasoned narrative that examines the "
        "underlying mechanisms and how the factors interact, integrates the broad aspects and the deep "
        "dives, supports every point with evidence from the node summaries, considers real-world "
        "context and feasibility, and notes open questions. Use Markdown with headings and paragraphs, "
        "a professional tone. Cite the numbered sources as [n] exactly as the node summaries do; cite "
        "only listed numbers."
    ),
    user=(
        "Question: $question\n\n"
        "Analysis metrics: $total_nodes nodes, maximum depth $max_depth, $breadth_analyses breadth "
        "analyses, $depth_analyses depth analyses.\n\n"
        "Sources:\n\n$sources\n\n"
        "Node summaries:\n\n$node_summaries"
    ),
)
