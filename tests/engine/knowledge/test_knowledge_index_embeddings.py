"""MTQA's keys matched by embeddings (engine/knowledge/index.py), as its paper's Step 2 matches them
in a vector database: a keyword that shares no word with an entity's name still finds it by meaning,
an exact name is not lost to the vectors (BM25's and cosine's orders fused), keys are embedded once
per graph and only new ones when it grows, and an embedder that fails (or a graph too big to embed)
leaves BM25 matching, said on the run's step log. The embedder is a real function of text (hashed
character trigrams), so what is similar is decided by the text, not by the test."""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine.knowledge import index as index_module
from engine.knowledge.index import KeyIndex
from engine.knowledge.open import KnowledgeLayer
from engine.knowledge.prompts import KEYWORDS
from engine.knowledge.schemas import Extraction
from engine.knowledge.units import Keywords
from engine.llm.counted import EvalLLM
from engine.llm.fake import FakeLLM
from engine.parallel import run_parallel
from engine.search.embeddings import Embedder, EmbeddingError
from engine.search.rerank import tokens
from storage import Repository, open_database
from storage.knowledge import GraphContents, KnowledgeStore
from storage.models import KnowledgeEntity, KnowledgeRelation, NodeStatus, RunStatus
from tests.engine.knowledge.test_knowledge import ARTHUR, FIRST, GODEY, QUESTION
from tests.support.fixtures_engine import run_to_end

MISSPELT = "Artur's Magasine"  # no word of it is a word of "Arthur's Magazine", after stemming


class TrigramEmbedder:
    """Counts of hashed character trigrams: texts spelt alike are near, whatever their words."""

    description = "trigram test embedder"
    dims = 512

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        vectors = []
        for text in texts:
            vector = [0.0] * self.dims
            padded = f"  {text.casefold()} "
            for i in range(len(padded) - 2):
                vector[zlib.crc32(padded[i : i + 3].encode()) % self.dims] += 1.0
            vectors.append(vector)
        return vectors


class TableEmbedder:
    """Given vectors per text (unknown texts: orthogonal to all), to put a wrong key nearest."""

    description = "table test embedder"

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.table.get(text, [0.0, 0.0, 0.0, 1.0]) for text in texts]


class FailingEmbedder:
    description = "failing test embedder"

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        raise EmbeddingError("the embeddings endpoint refused the connection")


def contents(names: Sequence[str], relations: Sequence[tuple[str, str, Sequence[str]]] = ()) -> GraphContents:
    entities = [KnowledgeEntity(id=i + 1, graph_id=1, key=name.casefold(), name=name) for i, name in enumerate(names)]
    rels = [
        KnowledgeRelation(
            id=i + 1,
            graph_id=1,
            pair=f"{a}|{b}",
            source_key=a.casefold(),
            target_key=b.casefold(),
            keywords=list(words),
        )
        for i, (a, b, words) in enumerate(relations)
    ]
    return GraphContents(entities=entities, relations=rels)


NAMES = ["Arthur's Magazine", "First for Women", "Godey's Lady's Book", "Bauer Media Group", "Philadelphia"]


def names(index: KeyIndex, matched) -> list[str]:
    return [index.entities[m.id].name for m in matched]


# ---------------------------------------------------------------------- the index


def test_a_keyword_sharing_no_word_with_an_entitys_name_is_matched_by_its_vector():
    assert not set(tokens(MISSPELT)) & set(tokens("Arthur's Magazine"))
    index = KeyIndex(contents(NAMES))
    assert index.match_entities([MISSPELT], top_k=3) == []  # BM25: no shared word, nothing matched
    matched = index.match_entities([MISSPELT], top_k=3, embedder=TrigramEmbedder())
    assert names(index, matched)[0] == "Arthur's Magazine"
    assert matched == sorted(matched, key=lambda m: -m.score)


def test_general_keywords_are_matched_to_relation_keys_by_their_vectors():
    index = KeyIndex(
        contents(
            NAMES,
            [
                ("Arthur's Magazine", "Godey's Lady's Book", ["merger", "periodical"]),
                ("First for Women", "Bauer Media Group", ["publisher"]),
            ],
        )
    )
    assert index.match_relations(["mergr"], top_k=2) == []  # BM25: no shared word
    matched = index.match_relations(["mergr"], top_k=1, embedder=TrigramEmbedder())
    assert [index.relations[m.id].keywords for m in matched] == [["merger", "periodical"]]


def test_an_exact_name_is_kept_first_when_the_vectors_put_another_key_nearer():
    # A small model's blur: the keyword's vector is nearest to a different name, and far from its own.
    table = {
        "Jaguar": [1.0, 0.0, 0.0, 0.0],
        "Leopard": [0.95, 0.3, 0.0, 0.0],
        "Jaguar Cars": [0.1, 0.0, 1.0, 0.0],
        "Panther": [0.8, 0.6, 0.0, 0.0],
    }
    index = KeyIndex(contents(["Leopard", "Jaguar Cars", "Panther"]))
    cosine_order = [index.entity_keys.ids[i] for i, _ in index.entity_keys.cosine(["Jaguar"], TableEmbedder(table))]
    assert cosine_order == [1, 3]  # Jaguar Cars, below the similarity floor, is not even a cosine match
    matched = index.match_entities(["Jaguar"], top_k=2, embedder=TableEmbedder(table))
    assert names(index, matched) == ["Jaguar Cars", "Leopard"]  # BM25's exact word fused in first


def test_each_keyword_is_matched_on_its_own_so_a_second_name_is_not_lost():
    """Per keyword, the best cosine: the question's two names each find their entity."""
    index = KeyIndex(contents(NAMES))
    matched = index.match_entities(["Artur's Magasine", "Furst for Wimen"], top_k=2, embedder=TrigramEmbedder())
    assert set(names(index, matched)) == {"Arthur's Magazine", "First for Women"}


def test_keys_are_embedded_once_in_one_batch_and_a_grown_graph_embeds_only_its_new_keys():
    embedder = TrigramEmbedder()
    first = KeyIndex(contents(NAMES[:3]))
    first.match_entities(["Philadelphia"], top_k=3, embedder=embedder)
    first.match_entities([MISSPELT], top_k=3, embedder=embedder)
    assert embedder.calls == [NAMES[:3], ["Philadelphia"], [MISSPELT]]  # the keys once, then keywords only
    embedder.calls.clear()
    unmatched = KeyIndex(contents(NAMES[:4]), previous=first)  # grown, never matched by meaning
    grown = KeyIndex(contents(NAMES), previous=unmatched)
    assert names(grown, grown.match_entities(["Filadelfia"], top_k=1, embedder=embedder)) == ["Philadelphia"]
    assert embedder.calls == [NAMES[3:], ["Filadelfia"]]


def test_an_embedder_that_fails_leaves_bm25_matching_and_says_why():
    index = KeyIndex(contents(NAMES))
    told: list[EmbeddingError] = []
    matched = index.match_entities(["First for Women"], top_k=3, embedder=FailingEmbedder(), on_error=told.append)
    assert matched == index.match_entities(["First for Women"], top_k=3)  # BM25's own answer
    assert names(index, matched)[0] == "First for Women"
    assert [str(e) for e in told] == ["the embeddings endpoint refused the connection"]


def test_vectors_of_the_wrong_count_are_a_failure_not_a_crash():
    class Short(TrigramEmbedder):
        def embed(self, texts):
            return super().embed(texts)[:-1]

    told: list[EmbeddingError] = []
    index = KeyIndex(contents(NAMES))
    assert names(index, index.match_entities(["Philadelphia"], top_k=1, embedder=Short(), on_error=told.append)) == [
        "Philadelphia"
    ]
    assert len(told) == 1 and "4 vectors for 5 texts" in str(told[0])


def test_a_level_with_more_keys_than_are_embedded_is_matched_by_bm25_saying_so(monkeypatch):
    monkeypatch.setattr(index_module, "MAX_EMBEDDED_KEYS", 4)
    embedder, told = TrigramEmbedder(), []
    index = KeyIndex(contents(NAMES))
    matched = index.match_entities(["Philadelphia"], top_k=1, embedder=embedder, on_error=told.append)
    assert names(index, matched) == ["Philadelphia"] and embedder.calls == []
    assert "5 entity keys, more than the 4 embedded" in str(told[0])


def test_the_built_in_embedder_matches_an_abbreviation_to_its_name(embedding_model_dir):
    """The real model (skipped where it is not prepared): "NYC" shares no word with "New York City"."""
    from engine.search.builtin_embedder import BuiltinEmbedder

    index = KeyIndex(contents(["Los Angeles", "New York City", "Bavaria", "Chicago Bulls"]))
    matched = index.match_entities(["NYC"], top_k=1, embedder=BuiltinEmbedder(embedding_model_dir))
    assert names(index, matched) == ["New York City"]


# ---------------------------------------------------------------------- the knowledge layer


@pytest.fixture
def store(tmp_path):
    db = open_database(f"sqlite:///{tmp_path}/kg.sqlite3")
    yield KnowledgeStore(db)
    db.dispose()


def question_kb(store, embedder, *, ask=None, pool=None, on_embedding_error=None):
    """A new run's question graph, its chunks extracted by the fake LLM (or `ask`), on `pool`."""
    run_id = Repository(store.db).create_run(question=QUESTION, method="mtqa", params={}).id
    return KnowledgeLayer(store).open(
        run_id=run_id,
        scope="question",
        collection=None,
        ask=ask or EvalLLM(FakeLLM()).ask,
        parallel=lambda calls: run_parallel(pool, calls),
        embedder=embedder,
        on_embedding_error=on_embedding_error,
    )


def test_a_growing_question_graph_embeds_only_the_keys_each_retrieval_has_not_seen(store):
    embedder = TrigramEmbedder()
    kb = question_kb(store, embedder)
    kb.add_documents([ARTHUR])
    keywords = Keywords(detailed=(MISSPELT,), general=())
    assert [u.hit.title for u in kb.retrieve(QUESTION, keywords, top_k=1, hops=1)] == ["Arthur's Magazine"]
    before = {text for call in embedder.calls for text in call}
    kb.retrieve(QUESTION, keywords, top_k=1, hops=1)
    kb.add_documents([FIRST])
    kb.retrieve(QUESTION, keywords, top_k=1, hops=1)
    embedded = [text for call in embedder.calls for text in call if text != MISSPELT]
    assert len(embedded) == len(set(embedded))  # no key embedded twice, across retrievals and growth
    assert "First for Women" in set(embedded) - before


def test_a_question_graphs_keys_are_embedded_as_its_chunks_are_merged(store):
    """Retrieval follows the extraction: each merge's keys are embedded while the other chunks are
    still being extracted, so neither the keywords nor retrieval embed a key after it. Here the
    second chunk is answered only once the first one's keys are embedded (an event; the clock only
    caps the wait)."""
    keys_embedded = threading.Event()

    class Signalling(TrigramEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            vectors = super().embed(texts)
            if "Arthur's Magazine" in texts:
                keys_embedded.set()
            return vectors

    embedder, llm = Signalling(), EvalLLM(FakeLLM())

    def ask(messages, schema, **kwargs):
        if schema is Extraction and "First for Women" in str(messages):
            assert keys_embedded.wait(timeout=120), "the first chunk's keys were not embedded as it was merged"
        return llm.ask(messages, schema, **kwargs)

    with ThreadPoolExecutor(max_workers=2) as pool:
        kb = question_kb(store, embedder, ask=ask, pool=pool)
        progress = kb.add_documents([ARTHUR, FIRST])
        embedded = len(embedder.calls)
        keywords = kb.keywords(QUESTION)
        assert len(embedder.calls) == embedded  # every key was embedded as it was merged
        assert [
            u.hit.title for u in kb.retrieve(QUESTION, Keywords(detailed=(MISSPELT,), general=()), top_k=1, hops=1)
        ] == ["Arthur's Magazine"]
    assert progress.chunks_done == 2 and not progress.failed_chunks
    assert keywords.detailed or keywords.general
    assert embedder.calls[embedded:] == [[MISSPELT]]  # the keys were embedded before: only the keyword now
    key_texts = [text for call in embedder.calls[:embedded] for text in call]
    assert len(key_texts) == len(set(key_texts))  # each key embedded once, though the graph grew twice


def test_answers_that_come_while_keys_are_embedded_have_theirs_embedded_together(store):
    """Keys are embedded one call at a time, of all that is queued when it starts: here the other
    two chunks are answered once the first one's keys are being embedded, and that call waits until
    both are merged, so their keys go in one call, not one each in a crowd of calls on the same
    cores. (Events and a poll of the store; the clock only caps the waits.)"""
    embedding = threading.Event()
    llm = EvalLLM(FakeLLM())

    class Waiting(TrigramEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            if not self.calls:
                embedding.set()
                for _ in range(600):  # until the two other chunks are merged
                    if store.counts(kb.graph_id).chunks_done == 3:
                        break
                    threading.Event().wait(0.1)
            return super().embed(texts)

    def ask(messages, schema, **kwargs):
        if schema is Extraction and "Arthur's Magazine (1844" not in str(messages):
            assert embedding.wait(timeout=120), "the first chunk's keys were not embedded as it was merged"
        return llm.ask(messages, schema, **kwargs)

    embedder = Waiting()
    with ThreadPoolExecutor(max_workers=3) as pool:
        kb = question_kb(store, embedder, ask=ask, pool=pool)
        progress = kb.add_documents([ARTHUR, FIRST, GODEY])
    assert progress.chunks_done == 3 and not progress.failed_chunks
    assert len(embedder.calls) == 2
    first, together = (set(call) for call in embedder.calls)
    assert "Arthur's Magazine" in first and {"First for Women", "Louis A"} <= together  # both later chunks
    assert not first & together  # no key embedded twice


def test_a_level_of_more_keys_than_are_embedded_is_not_embedded_ahead(store, monkeypatch):
    """Such a level is matched by BM25 alone (`index.embeds_level`): embedding its keys as the
    chunks' answers come would be work for nothing."""
    monkeypatch.setattr(index_module, "MAX_EMBEDDED_KEYS", 1)
    embedder = TrigramEmbedder()
    kb = question_kb(store, embedder)
    assert kb.add_documents([ARTHUR, FIRST]).chunks_done == 2
    assert embedder.calls == []


def test_keys_whose_embedding_breaks_after_a_merge_fail_no_chunk(store):
    """Embedding a merge's keys is a head start: whatever it meets (here not even an
    `EmbeddingError`) leaves the chunk merged and the extraction whole."""

    class Broken(FailingEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            self.calls += 1
            raise RuntimeError("the encoder broke")

    embedder = Broken()
    kb = question_kb(store, embedder)
    progress = kb.add_documents([ARTHUR, FIRST])
    assert progress.chunks_done == 2 and not progress.failed_chunks and embedder.calls


def test_keys_that_cannot_be_embedded_ahead_leave_the_failure_to_retrieval_which_says_it(store):
    embedder, told = FailingEmbedder(), []
    kb = question_kb(store, embedder, on_embedding_error=told.append)
    kb.add_documents([ARTHUR])
    keywords = kb.keywords(QUESTION)  # the failed embedding ahead is not the keywords' failure
    assert keywords.detailed or keywords.general
    assert not told
    units = kb.retrieve(QUESTION, Keywords(detailed=("Arthur's Magazine",), general=()), top_k=1, hops=1)
    assert [u.hit.title for u in units] == ["Arthur's Magazine"]  # by BM25
    assert len(told) == 1 and "refused the connection" in str(told[0])


# ---------------------------------------------------------------------- MTQA runs


FIRST_MISSPELT = "Frist for Wommen"  # the corpus's "First for Women", no word in common


def misspelt_keywords(fake_llm) -> None:
    assert not set(tokens(FIRST_MISSPELT)) & set(tokens("First for Women"))
    fake_llm.when(prompt=KEYWORDS.name, respond=json.dumps({"detailed": [FIRST_MISSPELT], "general": []}))


def first_units(services, run_id):
    base = next(n for n in services.repo.list_nodes(run_id) if n.kind == "knowledge")
    assert base.status == NodeStatus.DONE, base.error
    return [(u["title"], u["via"], u["score"]) for u in base.data["units"]]


def test_an_mtqa_run_finds_the_entity_its_keyword_misspells_through_the_runs_embedder(services, fake_llm):
    misspelt_keywords(fake_llm)
    services.runner.services.provide(Embedder, TrigramEmbedder())
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 1, "columns": 1, "documents": 4})
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    units = first_units(services, run_id)
    assert units and units[0][0] == "First for Women" and "entity" in units[0][1]


def test_an_mtqa_run_whose_embedder_fails_matches_by_bm25_and_the_step_log_says_so_once(services, fake_llm):
    embedder = FailingEmbedder()
    services.runner.services.provide(Embedder, embedder)
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 1, "columns": 2, "documents": 4})
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    assert any(title == "First for Women" for title, _, _ in first_units(services, run_id))
    failed = [e.text for e in services.repo.list_events(run_id, kinds=["failed"]) if "BM25" in e.text]
    assert embedder.calls >= 3  # KU_1 and each column's KU' tried it
    assert len(failed) == 1 and "refused the connection" in failed[0]


def test_mtqa_runs_with_an_embedder_retrieve_the_same_units_every_time(services, fake_llm):
    services.runner.services.provide(Embedder, TrigramEmbedder())
    runs = [run_to_end(services, QUESTION, "mtqa", {"rows": 1, "columns": 1, "documents": 4}) for _ in range(2)]
    first, second = (first_units(services, run_id) for run_id in runs)
    assert first and first == second
