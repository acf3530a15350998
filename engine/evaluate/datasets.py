"""The bundled benchmark datasets (`data/datasets`, attribution in `data/SOURCES.md`) as `Item`s.

Every loader reads its file, turns each record into an `Item` with the gold answer, the gold
supporting titles (for retrieval recall) and, for long-form datasets, the reference text; a sample
is the first `limit` items of the file's order shuffled with a fixed seed, so the same
`--limit --seed` always gives the same items.

A benchmark item never sees its own answer: an item that carries a reference document (FreshWiki:
the topic's Wikipedia article, which is in the bundled corpus and on the web) excludes that
document from its run's retrieval (`Item.exclusions`, applied by `engine/search/exclusion.py`).
Evidence is not an answer: HotpotQA's and 2Wiki's supporting paragraphs and NQ's gold passage
stay searchable, because finding them is what those benchmarks measure (and recall scores it).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from engine.evaluate import metrics
from engine.search.bundled import BUNDLED_DATA_DIR
from engine.search.exclusion import SearchExclusions

AnswerType = Literal["short", "yesno", "long", "article"]
DEFAULT_SEED = 13


class Item(BaseModel):
    """One benchmark question with everything it is scored against."""

    dataset: str
    id: str
    question: str
    answer_type: AnswerType
    answers: list[str] = Field(default_factory=list, description="Gold answers (aliases); empty when open-ended.")
    supporting_titles: list[str] = Field(default_factory=list, description="Titles of the gold paragraphs.")
    reference_title: str = ""
    reference_url: str = ""
    reference_text: str = Field(default="", description="The reference article (FreshWiki).")
    reference_outline: list[str] = Field(default_factory=list, description="The reference article's headings.")
    meta: dict[str, str] = Field(default_factory=dict, description="level, type: for breakdowns.")

    @property
    def exclusions(self) -> SearchExclusions:
        """The item's own answer, kept out of its run's retrieval."""
        if not (self.reference_text and (self.reference_title or self.reference_url)):
            return SearchExclusions()
        return SearchExclusions(
            titles=[self.reference_title] if self.reference_title else [],
            urls=[self.reference_url] if self.reference_url else [],
        )


class DatasetError(ValueError):
    """An unknown dataset name, a missing file or a bad limit: says what to do."""


@dataclass(frozen=True)
class Dataset:
    name: str
    title: str
    path: str  # relative to data/datasets
    protocol: str  # which paper evaluates on it, and how
    answer_type: AnswerType
    read: Callable[[Path, str], Iterator[Item]]

    def file(self, data_dir: Path = BUNDLED_DATA_DIR) -> Path:
        return data_dir / self.path


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def _titles(supporting_facts: list[list[Any]] | None) -> list[str]:
    seen: dict[str, None] = {}
    for fact in supporting_facts or []:
        seen.setdefault(fact[0], None)
    return list(seen)


def _multihop(path: Path, name: str) -> Iterator[Item]:
    for record in _jsonl(path):
        yield Item(
            dataset=name,
            id=str(record["id"]),
            question=record["question"].strip(),
            answer_type="short",
            answers=[str(record["answer"])],
            supporting_titles=_titles(record.get("supporting_facts")),
            meta={k: str(record[k]) for k in ("level", "type") if record.get(k)},
        )


def _nq(path: Path, name: str) -> Iterator[Item]:
    for record in _jsonl(path):
        gold = [c["title"] for c in record.get("ctxs") or [] if c.get("isgold") or c.get("hasanswer")]
        yield Item(
            dataset=name,
            id=str(record["id"]),
            question=record["question"].strip().rstrip("?") + "?",
            answer_type="short",
            answers=[str(a) for a in record["answers"]],
            supporting_titles=list(dict.fromkeys(gold)),
        )


def _strategyqa(path: Path, name: str) -> Iterator[Item]:
    for record in json.loads(path.read_text(encoding="utf-8")):
        answer = record["answer"]
        # Booleans in the bundled file; a copy with "yes"/"True" strings must not read them as no.
        yes = answer if isinstance(answer, bool) else metrics.yes_no(str(answer))
        if yes is None:
            raise DatasetError(
                f"{path.name}: item {record.get('qid')!r} has the answer {answer!r}, which is "
                "neither yes nor no (true/false); fix the file or use another copy"
            )
        yield Item(
            dataset=name,
            id=str(record["qid"]),
            question=record["question"],
            answer_type="yesno",
            answers=["yes" if yes else "no"],
            meta={"term": str(record.get("term", ""))},
        )


def _article_text(record: dict[str, Any]) -> str:
    text: str = record["text"]
    first, _, rest = text.partition("\n")
    return (rest if first.strip() == record.get("file_stem") else text).strip()


def _freshwiki(path: Path, name: str) -> Iterator[Item]:
    for record in _jsonl(path):
        yield Item(
            dataset=name,
            id=str(record["file_stem"]),
            question=record["topic"],
            answer_type="article",
            reference_title=record["topic"],
            reference_url=record.get("url") or "",
            reference_text=_article_text(record),
            reference_outline=list(record.get("outline") or []),
        )


def _researchy(path: Path, name: str) -> Iterator[Item]:
    for record in _jsonl(path):
        query = record["query"].strip()
        yield Item(
            dataset=name,
            id=str(record["id"]),
            question=query[:1].upper() + query[1:] + ("" if query.endswith("?") else "?"),
            answer_type="long",
        )


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset(
            "hotpotqa-autoact",
            "HotpotQA easy/medium/hard (AutoAct splits, 300)",
            "hotpotqa/hotpotqa_autoact_easy_medium_hard_300.jsonl",
            "FGDIP: EM and F1 of a short answer; retrieval recall of the gold paragraphs",
            "short",
            _multihop,
        ),
        Dataset(
            "hotpotqa-fullwiki",
            "HotpotQA dev fullwiki (500)",
            "hotpotqa/hotpotqa_dev_fullwiki_500.jsonl",
            "MTQA: EM and F1; retrieval recall of the gold paragraphs (on the bundled corpus only 208 of the "
            "500 items have every gold paragraph, so local all-gold recall is at most .416)",
            "short",
            _multihop,
        ),
        Dataset(
            "2wiki",
            "2WikiMultihopQA dev (500)",
            "2wikimultihopqa/2wikimultihopqa_dev_500.jsonl",
            "MTQA: EM and F1; retrieval recall of the gold paragraphs",
            "short",
            _multihop,
        ),
        Dataset(
            "nq",
            "Natural Questions open (500)",
            "nq/nq_open_oracle_first500.jsonl",
            "MTQA: EM and F1 against any gold answer",
            "short",
            _nq,
        ),
        Dataset(
            "strategyqa",
            "StrategyQA dev (229)",
            "strategyqa/strategyqa_dev_fireact_229.json",
            "FGDIP: accuracy of a yes/no answer",
            "yesno",
            _strategyqa,
        ),
        Dataset(
            "freshwiki",
            "FreshWiki (100 topics)",
            "freshwiki/freshwiki_articles_100.jsonl",
            "OmniThink: outline heading recall, ROUGE-L, knowledge density; the topic's own article is "
            "excluded from retrieval",
            "article",
            _freshwiki,
        ),
        Dataset(
            "researchy",
            "Researchy Questions (DeepResearchGym sample, 1,000)",
            "deepresearchgym/researchy_queries_sample_doc_click_1000.jsonl",
            "Deep research / DEoT: judges (clarity, insightfulness, pairwise), citation checks",
            "long",
            _researchy,
        ),
    )
}


def get_dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        raise DatasetError(f"unknown dataset '{name}'. Choose one of: {', '.join(DATASETS)}") from None


def load_items(
    name: str,
    *,
    limit: int | None = None,
    seed: int = DEFAULT_SEED,
    data_dir: Path = BUNDLED_DATA_DIR,
    balance: str | None = None,
) -> list[Item]:
    """The sample of a dataset: its items shuffled with `seed`, the first `limit` of them. With
    `balance` (an item's `meta` key, e.g. "level"), the shuffled items are dealt round-robin across
    the key's values first, so the first `limit` hold the same share of each (HotpotQA AutoAct's
    easy, medium and hard: 90 items are 30 of each)."""
    dataset = get_dataset(name)
    if limit is not None and limit < 1:
        raise DatasetError(f"--limit must be at least 1 (got {limit})")
    path = dataset.file(data_dir)
    if not path.is_file():
        raise DatasetError(f"the {name} data file is missing: {path}. It ships in data/datasets (see data/SOURCES.md)")
    items = list(dataset.read(path, name))
    random.Random(seed).shuffle(items)
    if balance:
        items = balanced(items, balance, name)
    return items[:limit] if limit else items


def breakdown_keys(name: str, data_dir: Path = BUNDLED_DATA_DIR) -> list[str]:
    """The `meta` keys a dataset's items can be balanced and broken down by (e.g. level, type)."""
    dataset = get_dataset(name)
    path = dataset.file(data_dir)
    if not path.is_file():
        return []
    return sorted({key for item in dataset.read(path, name) for key in item.meta})


def balanced(items: list[Item], key: str, name: str) -> list[Item]:
    """`items` dealt round-robin across the values of `meta[key]` (values in sorted order), each
    value's items in their given order."""
    groups: dict[str, list[Item]] = {}
    for item in items:
        if key not in item.meta:
            raise DatasetError(
                f"the {name} items have no '{key}' to balance by "
                f"(they have: {', '.join(sorted(item.meta)) or 'nothing'})"
            )
        groups.setdefault(item.meta[key], []).append(item)
    queues = [groups[value] for value in sorted(groups)]
    dealt: list[Item] = []
    for index in range(max(len(q) for q in queues)):
        dealt.extend(q[index] for q in queues if index < len(q))
    return dealt


def items_by_id(name: str, ids: list[str], *, data_dir: Path = BUNDLED_DATA_DIR) -> dict[str, Item]:
    """The items of a stored benchmark, found again by id (a resumed benchmark reloads them)."""
    wanted = set(ids)
    path = get_dataset(name).file(data_dir)
    return {item.id: item for item in get_dataset(name).read(path, name) if item.id in wanted}


__all__ = [
    "DATASETS",
    "DEFAULT_SEED",
    "Dataset",
    "DatasetError",
    "Item",
    "balanced",
    "breakdown_keys",
    "get_dataset",
    "items_by_id",
    "load_items",
]
