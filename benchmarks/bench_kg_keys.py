"""MTQA's key matching (engine/knowledge/index.py): the keys BM25, cosine and their fusion match.

For the first N items of HotpotQA (AutoAct's) and 2WikiMultihopQA, each question's knowledge graph is
built as a question-scope MTQA run builds it, offline: the bundled corpus's BM25 top 10 documents
for the question, entities and relations extracted by the fake LLM (`engine/knowledge/fake.py`:
capitalised names, names sharing a sentence related). Its keywords are picked by the fake LLM (the
question's names detailed, its other content words general: does a matcher keep the exact names BM25
finds?) and, with `--local-keywords`, by the built-in local model too (a small model's own words,
one call per item). Each way of matching keys is then scored, with the built-in embedder
(all-MiniLM-L6-v2) and MTQA's defaults (top_k 8, 2 hops, 10 units):

- *gold entities@8*: of the gold titles that are an entity of the graph, the share among the 8
  entity keys matched to the detailed keywords;
- *units all-gold@10* / *units recall@10*: the knowledge units retrieved with those keys cover every
  gold title / the share of gold titles they cover (the ceiling: gold titles among the 10 documents).

    .venv/bin/python benchmarks/bench_kg_keys.py [--items 50] [--local-keywords]   # print the section
    .venv/bin/python benchmarks/bench_kg_keys.py ... --write   # also replace it in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402
from engine.config import LocalModelSettings, load_settings  # noqa: E402
from engine.evaluate import metrics  # noqa: E402
from engine.evaluate.datasets import load_items  # noqa: E402
from engine.knowledge.index import KeyIndex, KeyLevel, Matched  # noqa: E402
from engine.knowledge.merge import entity_key  # noqa: E402
from engine.knowledge.open import KnowledgeLayer  # noqa: E402
from engine.llm.counted import EvalLLM  # noqa: E402
from engine.llm.fake import FakeLLM  # noqa: E402
from engine.parallel import run_parallel  # noqa: E402
from engine.search.builtin_embedder import builtin_embedder  # noqa: E402
from engine.search.bundled import open_default_corpus  # noqa: E402
from engine.search.fusion import fuse  # noqa: E402
from engine.services import build_services  # noqa: E402
from storage import Repository, open_database  # noqa: E402
from storage.knowledge import KnowledgeStore  # noqa: E402

SECTION = "bench_kg_keys"
DATASETS = ("hotpotqa-autoact", "2wiki")
DOCUMENTS, TOP_K, HOPS, UNITS = 10, 8, 2, 10
BOOST = 0.3  # the shared-word variant: cosine plus this when the key shares a word with the keywords


class CachedEmbedder:
    """The embedder with a text -> vector memo: items share many names, and the cost measured is the
    index's, not this script's."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.memo: dict[str, list[float]] = {}
        self.embedded = 0
        self.seconds = 0.0

    @property
    def description(self) -> str:
        return self.inner.description

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if missing:
            started = time.perf_counter()
            self.memo.update(zip(missing, self.inner.embed(missing)))
            self.seconds += time.perf_counter() - started
            self.embedded += len(missing)
        return [self.memo[t] for t in texts]


Variant = Callable[[KeyLevel, Sequence[str], int, object], list[Matched]]


def _ids(level: KeyLevel, ranked, top_k: int) -> list[Matched]:
    return [Matched(level.ids[i], score) for i, score in ranked[:top_k]]


def bm25(level, keywords, top_k, embedder):
    return _ids(level, level.bm25(keywords), top_k)


def cosine(level, keywords, top_k, embedder):
    return _ids(level, level.cosine(keywords, embedder), top_k)


def cosine_joined(level, keywords, top_k, embedder):
    return _ids(level, level.cosine([", ".join(keywords)] if keywords else [], embedder), top_k)


def fused_joined(level, keywords, top_k, embedder):
    orders = [
        [i for i, _ in level.bm25(keywords)],
        [i for i, _ in level.cosine([", ".join(keywords)] if keywords else [], embedder)],
    ]
    return _ids(level, fuse(orders, key=lambda i: i), top_k)


def boosted(level, keywords, top_k, embedder):
    sharing = {i for i, _ in level.bm25(keywords)}
    scored = [(i, s + (BOOST if i in sharing else 0.0)) for i, s in level.cosine(keywords, embedder)]
    scored += [(i, BOOST) for i in sharing - {i for i, _ in scored}]
    return _ids(level, sorted(scored, key=lambda p: (-p[1], p[0])), top_k)


SHIPPED_MATCH = KeyLevel.match  # the index's own, kept: retrieval below runs with `match` replaced


def shipped(level, keywords, top_k, embedder):
    return SHIPPED_MATCH(level, keywords, top_k, embedder, None)


VARIANTS: dict[str, Variant] = {
    "BM25 (before)": bm25,
    "cosine, per keyword": cosine,
    "cosine, joined keywords": cosine_joined,
    f"cosine per keyword + {BOOST} if a word is shared": boosted,
    "BM25 + cosine joined, RRF": fused_joined,
    "BM25 + cosine per keyword, RRF (shipped)": shipped,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=50, help="items per dataset")
    parser.add_argument(
        "--local-keywords",
        action="store_true",
        help="also score the keywords the built-in local model picks (one call per item)",
    )
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python benchmarks/bench_kg_keys.py", *(sys.argv[1:] if argv is None else argv)])

    corpus = open_default_corpus(load_settings())
    embedder = CachedEmbedder(builtin_embedder(LocalModelSettings().models_dir))
    db = open_database(f"sqlite:///{tempfile.mkdtemp(prefix='bench_kg_keys-')}/kg.sqlite3")
    store, repo = KnowledgeStore(db), Repository(db)
    layer = KnowledgeLayer(store)
    services = build_services(load_settings()) if args.local_keywords else None
    askers = {"fake LLM": EvalLLM(FakeLLM()).ask}
    if services is not None:
        askers["local model"] = EvalLLM(services.llm("local"), services.prices).ask
    serial = lambda calls: run_parallel(None, calls)  # noqa: E731
    scores: dict[tuple[str, str, str], list] = {}  # (keywords by, dataset, variant) -> per-item results
    ceiling: dict[str, list] = {}
    sizes, fallbacks = [], Counter()
    for dataset in DATASETS:
        items = [item for item in load_items(dataset, limit=args.items) if item.supporting_titles]
        for item in items:
            hits = corpus.search(item.question, DOCUMENTS)
            run_id = repo.create_run(question=item.question, method="mtqa", params={}).id
            kb = layer.open(
                run_id=run_id,
                scope="question",
                collection=None,
                ask=askers["fake LLM"],
                parallel=serial,
                embedder=embedder,
            )
            kb.add_documents(hits)
            index = KeyIndex(store.contents(kb.graph_id))
            sizes.append((len(index.entity_keys.texts), len(index.relation_keys.texts)))
            gold_keys = {entity_key(t) for t in item.supporting_titles} & set(index.entity_by_key)
            ceiling.setdefault(dataset, []).append(
                metrics.retrieval_recall([h.title for h in hits], item.supporting_titles, k=DOCUMENTS)
            )
            for source, ask in askers.items():
                # The same graph, its keywords asked of this model.
                keywords = layer.open(
                    run_id=run_id, scope="question", collection=None, ask=ask, parallel=serial
                ).keywords(item.question)
                fallbacks[source] += not keywords.from_model
                for name, variant in VARIANTS.items():
                    matched = variant(index.entity_keys, keywords.detailed, TOP_K, embedder)

                    def patched(level, words, top_k, _embedder, _on_error, variant=variant):
                        return variant(level, words, top_k, embedder)

                    with mock.patch.object(KeyLevel, "match", patched):
                        units = kb.retrieve(item.question, keywords, top_k=TOP_K, hops=HOPS, max_units=UNITS)
                    found = ({index.entities[m.id].key for m in matched} & gold_keys, gold_keys)
                    recall = metrics.retrieval_recall([u.hit.title for u in units], item.supporting_titles, k=UNITS)
                    scores.setdefault((source, dataset, name), []).append((found, recall))
    corpus.store.close()
    db.dispose()
    if services is not None:
        services.close()

    rows = []
    for dataset in DATASETS:
        top = [c for c in ceiling[dataset] if c is not None]
        rows.append(
            [
                dataset,
                len(ceiling[dataset]),
                "",
                "(gold among the 10 documents)",
                "",
                _mean(r.all_gold for r in top),
                _mean(r.fraction for r in top),
            ]
        )
        for source in askers:
            for name in VARIANTS:
                results = scores[(source, dataset, name)]
                shares = [len(hit) / len(gold) for (hit, gold), _ in results if gold]
                recalls = [r for _, r in results if r is not None]
                rows.append(
                    [
                        dataset,
                        len(results),
                        source,
                        name,
                        f"{_mean(shares)} ({len(shares)})",
                        _mean(r.all_gold for r in recalls),
                        _mean(r.fraction for r in recalls),
                    ]
                )
    entities = statistics.median(e for e, _ in sizes)
    relations = statistics.median(r for _, r in sizes)
    per_key_ms = embedder.seconds * 1000 / max(1, embedder.embedded)
    unusable = "; ".join(
        f"{source}: {count} of {sum(len(c) for c in ceiling.values())}" for source, count in fallbacks.items() if count
    )
    body = "\n".join(
        [
            "## MTQA key matching: BM25, cosine and their fusion",
            "",
            facts_block(command, machine_facts()),
            "",
            f"Question graphs as MTQA's question scope builds them, offline: the bundled corpus's BM25 top "
            f"{DOCUMENTS} documents, extracted by the fake LLM (capitalised names as entities, names sharing a "
            "sentence related). Keywords: the fake LLM's (the question's names detailed, its other words general: "
            "does a matcher keep the exact names BM25 finds?) and, where measured, the built-in local model's "
            "(a small model's own words). Keys matched by the built-in embedder (all-MiniLM-L6-v2) with MTQA's "
            f"defaults: top_k {TOP_K}, {HOPS} hops, {UNITS} units. *gold entities@{TOP_K}*: of the gold titles that "
            f"are an entity of the graph, the share among the {TOP_K} entity keys matched to the detailed keywords "
            f"(items counted in brackets). *units all-gold@{UNITS}* and *units recall@{UNITS}*: the retrieved "
            "knowledge units' titles against the gold titles; each dataset's first row is the ceiling, the gold "
            "among the documents the graph was built from."
            + (
                f" Keywords read from the question's words because the model's answer was unusable: {unusable}."
                if unusable
                else ""
            ),
            "",
            table(
                [
                    "dataset",
                    "items",
                    "keywords by",
                    "matching",
                    f"gold entities@{TOP_K}",
                    f"units all-gold@{UNITS}",
                    f"units recall@{UNITS}",
                ],
                rows,
            ),
            f"Graph sizes: {entities:.0f} entity keys and {relations:.0f} relation keys per question (median; max "
            f"{max(e for e, _ in sizes)} and {max(r for _, r in sizes)}). Embedding keys: {per_key_ms:.1f} ms a key "
            f"({embedder.embedded:,} distinct texts), so a median graph's keys take "
            f"{(entities + relations) * per_key_ms / 1000:.1f} s, once per graph; a match after that embeds only "
            "its keywords and takes one matrix product.",
            "",
        ]
    )
    publish(SECTION, body, args.write)
    return 0


def _mean(values) -> str:
    values = list(values)
    return f"{statistics.fmean(values):.3f}" if values else "–"


if __name__ == "__main__":
    raise SystemExit(main())
