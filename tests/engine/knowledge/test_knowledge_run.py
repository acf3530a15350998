"""A method's way to the knowledge layer: `ctx.knowledge(...)` inside a real run (runner, services,
the bundled corpus, the scripted fake). Per question, the graph is the run's (its calls are the run's,
told to the step log, and it is deleted with the run); per collection, it is built once by
`thoughtmap kg build` (accounted with the graph, not with any run) and only read by runs."""

from __future__ import annotations

from pydantic import Field

from engine import cli
from engine.knowledge.prompts import EXTRACT, KEYWORDS, STEPS
from engine.methods.base import Method, MethodParams, RunContext
from engine.methods.common import ANSWER, ASKED_QUESTION, child_of_kind, ensure_root
from engine.names import proper_names
from storage.models import NodeStatus, RunStatus
from tests.support.fixtures_engine import run_to_end


class ProbeParams(MethodParams):
    scope: str = Field(default="question", description="Which graph to read.")
    collection: str = Field(default="", description="The collection, for the collection scope.")


class KnowledgeProbe(Method):
    """Retrieves knowledge units for the question and cites them: the smallest user of ctx.knowledge."""

    name = "kg_probe"
    title = "Knowledge probe (tests only)"
    summary = "Knowledge units for the question, cited."
    Params = ProbeParams
    node_kinds = (ASKED_QUESTION, ANSWER)

    def run(self, ctx: RunContext) -> None:
        params: ProbeParams = ctx.params  # type: ignore[assignment]
        root = ensure_root(ctx)
        answer = child_of_kind(ctx, root, "answer") or ctx.graph.add(kind="answer", label="Units", parent=root)
        ctx.graph.start(answer)
        kb = ctx.knowledge(params.scope, collection=params.collection or None, node=answer)
        if params.scope == "question":
            kb.add_documents(ctx.search(ctx.question, k=4, node=answer))
        units = kb.retrieve(ctx.question, kb.keywords(ctx.question), top_k=5, hops=2)
        ctx.graph.add_sources([unit.hit for unit in units], node=answer)
        lines = [f"{t.subject} -[{t.relation}]-> {t.object}" for unit in units for t in unit.triples]
        ctx.graph.finish(answer, content="\n".join(lines) or "no triples")
        self.write_report(ctx)

    def write_report(self, ctx: RunContext) -> None:
        ctx.graph.save_report("knowledge units", data={"method": self.name})


def install_probe(services) -> None:
    services.methods[KnowledgeProbe.name] = KnowledgeProbe
    services.runner.methods[KnowledgeProbe.name] = KnowledgeProbe


QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


def test_a_run_builds_its_own_graph_with_its_own_accounted_narrated_calls(services, fake_llm):
    install_probe(services)
    repo = services.repo
    run_id = run_to_end(services, QUESTION, "kg_probe")
    run = repo.get_run(run_id)
    assert run.status == RunStatus.DONE, run.error
    answer = next(n for n in repo.list_nodes(run_id) if n.kind == "answer")
    assert answer.status == NodeStatus.DONE and "->" in answer.content  # triples came back

    extractions = len(fake_llm.calls_for(EXTRACT.name))
    assert extractions >= 1 and len(fake_llm.calls_for(KEYWORDS.name)) == 1
    calls = repo.list_llm_calls(run_id)
    assert len(calls) == extractions + 1 == run.llm_calls  # every knowledge call is the run's
    assert {c.purpose for c in calls} == {"knowledge"} and {c.node_id for c in calls} == {answer.id}
    steps = {e.text for e in repo.list_events(run_id, kinds=["step"])}
    assert {STEPS[EXTRACT.name], STEPS[KEYWORDS.name]} <= steps

    # The units are cited as the corpus documents they came from: sources the run stores.
    searched = {hit.ref for hit in services.searcher("local").search(QUESTION, k=4)}
    sources = repo.sources_for_node(answer.id)
    assert sources and {s.ref for s in sources} <= searched
    assert all(s.text for s in sources)

    graph = services.knowledge.store.find_graph(f"run:{run_id}:1200")
    assert graph is not None and graph.run_id == run_id
    repo.delete_run(run_id)
    assert services.knowledge.store.find_graph(f"run:{run_id}:1200") is None


def first_named_chunk(services, collection: str, within: int):
    for chunk in services.corpus().store.iter_collection_chunks(collection, within):
        names = proper_names(chunk.title)
        if names and names[0] == chunk.title:
            return chunk
    raise AssertionError("no chunk titled by a name")


def test_a_collection_graph_is_built_once_by_the_cli_and_read_by_runs(services, fake_llm, capsys):
    install_probe(services)
    repo = services.repo
    params = {"scope": "collection", "collection": "hotpotqa"}
    not_built = repo.get_run(run_to_end(services, QUESTION, "kg_probe", params))
    assert not_built.status == RunStatus.FAILED
    assert "thoughtmap kg build --collection hotpotqa" in not_built.error

    assert (
        cli.main(["kg", "build", "--collection", "hotpotqa", "--limit", "20", "--llm", "fake", "--quiet"])
        == cli.EXIT_OK
    )
    out = capsys.readouterr().out
    assert "hotpotqa: 20/20 chunks extracted" in out
    graph = services.knowledge.store.find_graph("collection:hotpotqa:1200")
    assert (graph.status, graph.calls, graph.failed_calls) == ("done", 20, 0)
    assert graph.prompt_tokens > 0 and graph.llm_info["kind"] == "fake"
    assert cli.main(["kg", "status"]) == cli.EXIT_OK
    status = capsys.readouterr().out
    assert "hotpotqa: 20/20 chunks extracted" in status and "· done ·" in status
    passages = services.corpus().store.count_collection_chunks("hotpotqa")
    assert passages > 20 and f"(the corpus has {passages} passages)" in status
    assert "nq: not built" in status

    chunk = first_named_chunk(services, "hotpotqa", 20)
    run_id = run_to_end(services, f"What do the sources say about {chunk.title}?", "kg_probe", params)
    run = repo.get_run(run_id)
    assert run.status == RunStatus.DONE, run.error
    assert fake_llm.calls_for(EXTRACT.name) == []  # the run extracted nothing: it read the built graph
    assert len(fake_llm.calls_for(KEYWORDS.name)) == 1 and run.llm_calls == 1
    refs = [s.ref for s in repo.list_sources(run_id)]
    assert f"{chunk.ref}#{chunk.ordinal}" in refs  # the chunk named by the question, cited as the corpus cites it
    # Building again extracts nothing that is done.
    assert (
        cli.main(["kg", "build", "--collection", "hotpotqa", "--limit", "20", "--llm", "fake", "--quiet"])
        == cli.EXIT_OK
    )
    assert services.knowledge.store.find_graph("collection:hotpotqa:1200").calls == 20


def test_kg_build_refuses_bad_input_before_any_work(services, capsys, fake_llm):
    assert cli.main(["kg", "build", "--collection", "no-such-collection", "--llm", "fake", "--quiet"]) == cli.EXIT_USAGE
    assert "the corpus has no collection 'no-such-collection'" in capsys.readouterr().err
    assert cli.main(["kg", "build", "--collection", "hotpotqa", "--limit", "0", "--llm", "fake"]) == cli.EXIT_USAGE
    assert cli.main(["kg", "stop", "--collection", "hotpotqa"]) == cli.EXIT_USAGE  # never built
    assert services.knowledge.store.list_graphs(scope="collection") == []
    assert fake_llm.calls == []


def test_a_build_that_could_extract_nothing_fails_early_and_runs_say_why(services, fake_llm, capsys, monkeypatch):
    """A model whose every answer is unusable: the build gives up after two whole batches instead of
    paying for every chunk, exits 1 saying so, and a run reading the graph is told it is empty, not
    "not built yet" (review 14)."""
    from engine.knowledge.build import BATCH_SIZE, FAILED_BATCHES_TO_GIVE_UP
    from engine.llm import fake
    from engine.llm.structured import DEFAULT_MAX_REASKS

    install_probe(services)
    # The CLI builds its own fake LLM: its default answer for the extraction prompt is what changes.
    monkeypatch.setitem(fake.PROMPT_DEFAULTS, EXTRACT.name, lambda request: "no JSON here")
    code = cli.main(["kg", "build", "--collection", "hotpotqa", "--limit", "60", "--llm", "fake", "--quiet"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_FAILED and "failed: the model's answers could not be used for any of the" in err
    graph = services.knowledge.store.find_graph("collection:hotpotqa:1200")
    tried = FAILED_BATCHES_TO_GIVE_UP * BATCH_SIZE
    assert graph.status == "failed" and graph.calls == tried * (1 + DEFAULT_MAX_REASKS) < 60 * (1 + DEFAULT_MAX_REASKS)
    run = services.repo.get_run(
        run_to_end(services, QUESTION, "kg_probe", {"scope": "collection", "collection": "hotpotqa"})
    )
    assert run.status == RunStatus.FAILED and "has nothing in it: extraction failed on all" in run.error


def test_a_build_stopped_by_its_budget_continues_when_run_again_with_the_same_budget(services, fake_llm, capsys):
    build = [
        "kg",
        "build",
        "--collection",
        "hotpotqa",
        "--limit",
        "40",
        "--llm",
        "fake",
        "--quiet",
        "--max-tokens",
        "3000",
    ]
    assert cli.main(build) == cli.EXIT_STOPPED
    assert "this build's token budget reached" in capsys.readouterr().err
    store = services.knowledge.store
    first = store.counts(store.find_graph("collection:hotpotqa:1200").id).chunks_done
    assert cli.main(build) in (cli.EXIT_STOPPED, cli.EXIT_OK)
    assert store.counts(store.find_graph("collection:hotpotqa:1200").id).chunks_done > first  # not a loop
