"""What search-eval measures (engine/evaluate/retrieval_setup.py): dataset names, a first stage's
top K reranked as one searcher, and the configurations refused rather than measured as another."""

from __future__ import annotations

import pytest

from engine.evaluate.retrieval_setup import (
    RerankedSearcher,
    RetrievalSetupError,
    check_names,
    dataset_name,
    require_vectors,
)
from engine.search.protocol import Hit


def test_dataset_names_and_the_hotpotqa_alias():
    assert dataset_name("hotpotqa") == "hotpotqa-autoact"
    assert dataset_name("hotpotqa-autoact") == "hotpotqa-autoact"
    assert dataset_name("2wiki") == "2wiki" and dataset_name("nq") == "nq"
    # StrategyQA has no gold paragraphs: nothing to measure retrieval against.
    with pytest.raises(RetrievalSetupError, match="choose one of hotpotqa-autoact, hotpotqa, 2wiki, nq"):
        dataset_name("strategyqa")


def test_unknown_retriever_or_reranker_names_the_choices():
    assert check_names("hybrid", "builtin").retriever == "hybrid"
    with pytest.raises(RetrievalSetupError, match="bm25, dense, hybrid"):
        check_names("splade", "none")
    with pytest.raises(RetrievalSetupError, match="none, builtin, llm, endpoint"):
        check_names("bm25", "colbert")


def _hit(title: str) -> Hit:
    return Hit(title=title, ref=f"c/{title}#0", snippet="", text="", kind="corpus")


class ListSearcher:
    description = "ten titles"

    def __init__(self) -> None:
        self.asked: list[int] = []

    def search(self, query: str, k: int = 5) -> list[Hit]:
        self.asked.append(k)
        return [_hit(f"t{i}") for i in range(min(k, 10))]


class Reverse:
    description = "reverse order"

    def rerank(self, query, hits, k):
        return list(reversed(hits))[:k]


def test_a_reranked_searcher_reranks_the_first_stages_top_k_and_returns_at_most_k():
    first = ListSearcher()
    searcher = RerankedSearcher(first, Reverse(), candidates=4)
    assert [h.title for h in searcher.search("q", 50)] == ["t3", "t2", "t1", "t0"]
    assert [h.title for h in searcher.search("q", 2)] == ["t3", "t2"]
    assert first.asked == [4, 4]  # K candidates asked whatever k is
    assert searcher.description == "ten titles; top 4 reranked by reverse order"
    with pytest.raises(ValueError):
        RerankedSearcher(first, Reverse(), candidates=0)


def test_dense_over_passages_without_vectors_is_refused(tmp_path):
    import numpy as np

    from engine.search.vectors import SHIPPED_MODEL, VectorIndex
    from storage.corpus_store import CorpusStore, NewDocument

    def document(title: str) -> NewDocument:
        return NewDocument(
            collection="files",
            ref=f"files/{title}",
            title=title,
            url=None,
            chunks=[f"{title} is a page."],
            content_hash=title,
        )

    def encode(texts):
        return np.ones((len(texts), 4), dtype=np.float32)

    with CorpusStore(tmp_path / "corpus.sqlite3") as store:
        store.add_documents([document("Alpha"), document("Beta")])
        VectorIndex(store, SHIPPED_MODEL).update(encode)
        require_vectors(store)  # every passage has its vector
        store.add_documents([document("Gamma")])
        with pytest.raises(RetrievalSetupError, match=f"1 passages of the corpus have no {SHIPPED_MODEL} vector"):
            require_vectors(store)
        # Another model's vectors are not the corpus model's: every passage lacks one again.
        VectorIndex(store, "another-model").update(encode)
        with pytest.raises(RetrievalSetupError, match="3 passages"):
            require_vectors(store)
