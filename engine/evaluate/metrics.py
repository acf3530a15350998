"""Evaluation metrics: pure functions of predictions, gold data and stored traces (no LLM, no I/O).

Each function names the paper or script it follows. Where the original needs a model we do not
ship (STORM's sentence embeddings, OmniThink's FActScore decomposition), the function takes what
that model would produce (vectors, knowledge units) and `text_vectors` gives an offline stand-in.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import numpy as np

from engine.claim_support import citation_error_rate  # noqa: F401  (one of the harness's metrics)

# --- short answers: the SQuAD v1.1 script, with HotpotQA's yes/no rule -------------------------

_PUNCTUATION = frozenset(string.punctuation)  # ASCII only, as in the SQuAD script
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# HotpotQA's evaluation script: a partial token overlap must not rescue a wrong yes/no answer.
_CLOSED_ANSWERS = frozenset({"yes", "no", "noanswer"})


def normalize_answer(text: str) -> str:
    """The SQuAD v1.1 evaluation script's normalisation, step for step: lower-case, remove ASCII
    punctuation, remove the articles a/an/the, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _require_golds(golds: Sequence[str]) -> Sequence[str]:
    # A bare string would be read as one gold per character: refuse it rather than score nonsense.
    if isinstance(golds, str) or not golds:
        raise ValueError("golds must be a non-empty list of gold answers (aliases)")
    return golds


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """SQuAD v1.1 exact match: 1.0 when the normalised prediction equals any normalised gold."""
    predicted = normalize_answer(prediction)
    return float(any(predicted == normalize_answer(gold) for gold in _require_golds(golds)))


def _token_f1(prediction: str, gold: str) -> float:
    predicted, expected = normalize_answer(prediction), normalize_answer(gold)
    if (predicted in _CLOSED_ANSWERS or expected in _CLOSED_ANSWERS) and predicted != expected:
        return 0.0
    predicted_tokens, gold_tokens = predicted.split(), expected.split()
    same = sum((Counter(predicted_tokens) & Counter(gold_tokens)).values())
    if same == 0:  # also both empty: SQuAD v1.1 scores that 0, unlike v2.0
        return 0.0
    precision, recall = same / len(predicted_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1(prediction: str, golds: Sequence[str]) -> float:
    """Token F1 as the SQuAD v1.1 script computes it (bag-of-tokens overlap of the normalised
    answers), the maximum over gold aliases; with the HotpotQA script's rule that a prediction or
    gold of yes / no / noanswer scores 0 unless both are the same."""
    return max(_token_f1(prediction, gold) for gold in _require_golds(golds))


_YES_NO_PREFIX = re.compile(r"^(?:final answer|answer|the answer is|my answer is)\s*:?\s*", re.IGNORECASE)
# Every punctuation mark but the ASCII hyphen and slash, which join words ("No-one", "Yes/no": not an
# answer) and which `normalize_answer` then removes, as before.
_ANY_PUNCTUATION = re.compile(r"[^\w\s/-]")
_YES_WORDS = frozenset({"yes", "true"})
_NO_WORDS = frozenset({"no", "false"})


def yes_no(text: str) -> bool | None:
    """Reads a yes/no answer from its first word: "Yes.", "yes, because ..." and "True" are
    True; "No", "no, because ..." and "False" are False; anything else (including an answer that
    hedges first, "Probably not") is None. A leading "Answer:" or "The answer is" is skipped."""
    # Any punctuation, not only ASCII (EM's normalisation, kept official, strips ASCII only): “Yes”,
    # ‘No’, "Yes—it would" and "No…" are answers too.
    stripped = _YES_NO_PREFIX.sub("", text.strip().lstrip("*#>- \t"))
    words = normalize_answer(_ANY_PUNCTUATION.sub(" ", stripped)).split()
    if not words:
        return None
    if words[0] in _YES_WORDS:
        return True
    if words[0] in _NO_WORDS:
        return False
    return None


def yes_no_accuracy(prediction: str, gold: str) -> float:
    """FGDIP's StrategyQA accuracy for one item: 1.0 when the prediction reads as the gold's
    yes/no. A prediction that is neither yes nor no is wrong (0.0); a gold that is neither is a
    dataset error (ValueError)."""
    expected = yes_no(gold)
    if expected is None:
        raise ValueError(f"the gold answer {gold!r} is not a yes/no answer")
    return float(yes_no(prediction) is expected)


# --- retrieval recall of the gold supporting paragraphs ----------------------------------------

# A web result's title names the site after the article ("Uniondale, New York - Wikipedia"). A
# parenthesised suffix is part of a title ("Battle of Cambrai (1917)" is not "... (1918)"): kept.
_SITE_SUFFIX = re.compile(r"\s+[-–—|]\s+wikipedia$")


def title_key(title: str) -> str:
    """The form two titles are compared in: case, whitespace and a " - Wikipedia" suffix left out."""
    return _SITE_SUFFIX.sub("", " ".join(title.casefold().replace("_", " ").split()))


@dataclass(frozen=True)
class Recall:
    """Recall of one item's gold titles among a run's first k distinct retrieved titles."""

    any_gold: float  # 1.0 when at least one gold title was retrieved
    all_gold: float  # 1.0 when every gold title was retrieved (HotpotQA needs both paragraphs)
    fraction: float  # the share of gold titles retrieved


def retrieval_recall(retrieved_titles: Sequence[str], gold_titles: Sequence[str], k: int = 10) -> Recall | None:
    """Recall@k of the gold supporting paragraphs (HotpotQA, 2WikiMultihopQA), as MTQA and the
    retrieval literature report it: any-gold, all-gold and the fraction found among the first `k`
    distinct retrieved titles, compared case- and whitespace-insensitively (a web result's
    " - Wikipedia" left out); "Foo (1988)" and "Foo" are different articles.

    None when there are no gold titles: recall is undefined there (an NQ item none of whose
    passages holds the answer), and such an item must be left out of the mean, not counted as 0
    or 1; returning None makes every caller decide that explicitly."""
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    gold = {title_key(title) for title in gold_titles if title.strip()}
    if not gold:
        return None
    top: list[str] = []
    for title in retrieved_titles:
        key = title_key(title)
        if key and key not in top:
            top.append(key)
            if len(top) == k:
                break
    found = len(gold.intersection(top))
    return Recall(any_gold=float(found > 0), all_gold=float(found == len(gold)), fraction=found / len(gold))


# --- OmniThink: knowledge density and information diversity ------------------------------------


def knowledge_density(units: Sequence[str], text_tokens: int) -> float:
    """OmniThink §4.2, eq. 3: KD = (number of unique atomic knowledge units) / (article length),
    with the length in tokens. Units count as duplicates when they are equal after
    `normalize_answer` (case, punctuation, articles, spacing); the paper deduplicates with an LLM,
    which is the judge's job (it splits the article into units) before this count. An empty
    article has density 0."""
    if text_tokens < 0:
        raise ValueError(f"text_tokens must not be negative, not {text_tokens}")
    unique = {key for key in map(normalize_answer, units) if key}
    if not text_tokens:
        if unique:
            raise ValueError(f"{len(unique)} knowledge units in an article of 0 tokens")
        return 0.0
    return len(unique) / text_tokens


def _unit_rows(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    """The vectors as L2-normalised rows; all-zero vectors (a text without a word) are dropped,
    since their cosine similarity to anything is undefined."""
    matrix = np.asarray(vectors, dtype=float)
    if matrix.ndim != 2:
        raise ValueError("vectors must all have the same length")
    norms = np.linalg.norm(matrix, axis=1)
    keep = norms > 0
    rows: np.ndarray = matrix[keep] / norms[keep, None]
    return rows


def information_diversity(vectors: Sequence[Sequence[float]]) -> float:
    """OmniThink's information diversity (after Co-STORM, Jiang et al. 2024): the mean over all
    pairs of retrieved pages of (1 - cosine similarity) of their vectors. Orthogonal pages give 1,
    identical pages 0. Fewer than two (non-empty) pages have no pair to differ: 0."""
    if len(vectors) < 2:
        return 0.0
    rows = _unit_rows(vectors)
    n = len(rows)
    if n < 2:
        return 0.0
    similarity = np.clip(rows @ rows.T, -1.0, 1.0)
    upper = np.triu_indices(n, k=1)
    return float(np.mean(1.0 - similarity[upper]))


_WORD = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token pattern


def text_vectors(texts: Sequence[str]) -> list[list[float]]:
    """Deterministic TF-IDF vectors of `texts`, the offline stand-in for sentence embeddings when
    no embeddings endpoint is configured (OmniThink and STORM use SentenceBERT models, which we do
    not ship). The same numbers as scikit-learn's `TfidfVectorizer()` defaults: lower-cased words
    of two or more word characters, raw counts, smooth idf = ln((1 + n) / (1 + df)) + 1, rows
    L2-normalised, vocabulary in sorted order. TF-IDF sees shared words, not meaning: two texts
    that say the same thing in other words count as different."""
    counts = [Counter(_WORD.findall(text.lower())) for text in texts]
    vocabulary = sorted(set().union(*counts)) if counts else []
    if not vocabulary:
        return [[] for _ in texts]
    column = {word: i for i, word in enumerate(vocabulary)}
    matrix = np.zeros((len(texts), len(vocabulary)))
    for row, counter in enumerate(counts):
        for word, count in counter.items():
            matrix[row, column[word]] = count
    document_frequency = np.count_nonzero(matrix, axis=0)
    matrix *= np.log((1 + len(texts)) / (1 + document_frequency)) + 1
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    rows: list[list[float]] = matrix.tolist()
    return rows


# --- FreshWiki / STORM: outline heading recall and ROUGE-L -------------------------------------

# Headings every Wikipedia article ends with; they say nothing about the topic's outline.
BOILERPLATE_HEADINGS = frozenset({"references", "external links", "see also", "notes", "further reading"})
# Markdown hashes and outline numbering ("1. ", "2.3 "), never a heading's own number ("2020 election").
_HEADING_MARKUP = re.compile(r"^\s*#*\s*(?:\d+(?:\.\d+)*\.\s+|\d+(?:\.\d+)+\s+)?")

Vectorizer = Callable[[Sequence[str]], Sequence[Sequence[float]]]


def _outline(headings: Iterable[str]) -> list[str]:
    cleaned = (" ".join(_HEADING_MARKUP.sub("", heading).split()) for heading in headings)
    return list(dict.fromkeys(h for h in cleaned if h and h.casefold() not in BOILERPLATE_HEADINGS))


def _soft_cardinality(similarity: np.ndarray) -> float:
    # Each heading counts 1 / (how many headings of the set it resembles, softly): n distinct
    # headings count n, n copies of one heading count 1.
    return float(np.sum(1.0 / similarity.sum(axis=1)))


def heading_recall(generated: Sequence[str], reference: Sequence[str], vectorize: Vectorizer = text_vectors) -> float:
    """STORM's heading soft recall (eval/metrics.py `heading_soft_recall`, after Fujita et al.'s
    soft cardinality): with card(S) = sum over s in S of 1 / sum over t in S of sim(s, t),
    recall = (card(R) + card(G) - card(R ∪ G)) / card(R), R the reference headings, G the
    generated ones, sim the cosine similarity of their vectors.

    STORM embeds headings with SentenceBERT; here `vectorize` does (default: `text_vectors`, TF-IDF
    fitted on R ∪ G, so a heading counts as covered when it shares words, not meaning; pass an
    embeddings function for STORM's behaviour). Headings are compared without "#"/numbering,
    duplicates dropped, and the boilerplate headings References, External links, See also, Notes
    and Further reading ignored on both sides. Negative similarities are clipped to 0 and the
    result to [0, 1], so that soft cardinalities stay between 1 and the number of headings.
    No generated heading scores 0; a reference without headings is a ValueError."""
    reference_headings, generated_headings = _outline(reference), _outline(generated)
    if not reference_headings:
        raise ValueError("the reference outline has no headings (other than boilerplate) to recall")
    if not generated_headings:
        return 0.0
    union = list(dict.fromkeys(reference_headings + generated_headings))
    rows = np.asarray(vectorize(union), dtype=float)
    if rows.shape[0] != len(union):
        raise ValueError(f"vectorize returned {rows.shape[0]} vectors for {len(union)} headings")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    rows = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
    similarity = np.clip(rows @ rows.T, 0.0, 1.0)
    np.fill_diagonal(similarity, 1.0)  # a heading is itself, even one without a word TF-IDF knows
    index = {heading: i for i, heading in enumerate(union)}

    def card(headings: list[str]) -> float:
        picked = [index[h] for h in headings]
        return _soft_cardinality(similarity[np.ix_(picked, picked)])

    card_reference = card(reference_headings)
    overlap = card_reference + card(generated_headings) - card(union)
    return min(1.0, max(0.0, overlap / card_reference))


_ROUGE_TOKEN = re.compile(r"[^\W_]+")


def _rouge_tokens(text: str) -> list[str]:
    # rouge-score's tokenizer: lower-case runs of letters and digits, everything else separates.
    return _ROUGE_TOKEN.findall(text.lower())


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token sequences, bit-parallel (Allison &
    Dix 1986, Hyyrö 2004): one big-integer step per token of `b`, so two 5,000-word articles
    take milliseconds where the textbook table takes seconds and 25 million cells."""
    if not a or not b:
        return 0
    positions: dict[str, int] = {}
    for i, token in enumerate(a):
        positions[token] = positions.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    row = full  # bit i cleared: the LCS gains a token ending at a[i]
    for token in b:
        match = row & positions.get(token, 0)
        row = ((row + match) | (row - match)) & full
    return len(a) - row.bit_count()


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F-measure (Lin 2004) on tokens, as rouge-score's `rougeL` computes it without a
    stemmer: LCS / len(candidate) is the precision, LCS / len(reference) the recall, and the score
    their harmonic mean. Tokens are lower-cased runs of letters and digits (rouge-score keeps only
    [a-z0-9], so on ASCII text the scores are the same). STORM passes use_stemmer=True; without a
    stemmer, inflected forms ("cities"/"city") do not match. 0 when either text has no token.
    We do not depend on rouge-score itself: its LCS is the quadratic pure-Python table (8.7 s for
    a pair of 5,000-word articles here) and it pulls in nltk and absl."""
    candidate_tokens, reference_tokens = _rouge_tokens(candidate), _rouge_tokens(reference)
    common = lcs_length(candidate_tokens, reference_tokens)
    if not common:
        return 0.0
    precision, recall = common / len(candidate_tokens), common / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


# --- aggregation ------------------------------------------------------------------------------


def bootstrap_ci(
    values: Sequence[float], *, resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float, float]:
    """(mean, low, high): the sample mean and the percentile bootstrap interval of the mean
    (Efron & Tibshirani 1993): `resamples` resamples with replacement, the interval between the
    (1 - confidence) / 2 and (1 + confidence) / 2 quantiles of their means (linear interpolation).
    The same values and seed always give the same interval; one value gives (v, v, v)."""
    if not values:
        raise ValueError("bootstrap_ci needs at least one value")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    if len(data) == 1:
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return mean, float(low), float(high)


class _TreeNode(Protocol):
    id: int | None
    parent_id: int | None


class _TimedCall(Protocol):
    # Read-only members, so a stored `LLMCall` (its `created_at` never None) fits.
    @property
    def node_id(self) -> int | None: ...

    @property
    def latency_s(self) -> float: ...

    @property
    def created_at(self) -> datetime | None:
        """When the call was stored: its end."""


def _busy_seconds(calls: list[_TimedCall]) -> float:
    """Seconds during which at least one of the calls ran: the union of their [end − latency, end]
    intervals, so calls made concurrently (MTQA's chunk extractions under one node) count once, and
    calls made one after the other add up. A call without a time is taken to run on its own."""
    timed = sorted(
        (c.created_at.timestamp() - c.latency_s, c.created_at.timestamp()) for c in calls if c.created_at is not None
    )
    total = sum(c.latency_s for c in calls if c.created_at is None)
    current_start: float = 0.0
    current_end: float | None = None
    for start, end in timed:
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


# A call counts as started after its source ended when it started no more than this before:
# stored times carry the storage's own delay.
_AFTER_TOLERANCE_S = 0.25


def critical_path_seconds(
    nodes: Iterable[_TreeNode], calls: Iterable[_TimedCall], waits: Iterable[tuple[int, int]] = ()
) -> float:
    """The run's wall time if every branch ran at once, for any method: the longest chain of
    dependent nodes, each node weighing the time its LLM calls were running (a node starts after
    its parent's calls; otherwise nodes run concurrently; a node's own concurrent calls overlap, its
    sequential ones add up), plus the run-level calls (node_id None: planning before the tree and
    the report after it, which run in sequence). `waits` are the dependencies a method declares
    beyond the tree, (source id, node id): the node's calls made after the source's last call (all
    of them for MTQA's thought below a thought; for FGDIP's backtrack, the children generated once
    the search came back to a node judged long before) run after the source. Works on
    `storage.models.Node` / `LLMCall` or anything with those attributes. A call whose node is not
    among `nodes` still took time that no branch can hide: it is counted like a run-level call."""
    parents: dict[int, list[int]] = {node.id: [] for node in nodes if node.id is not None}
    for node in nodes:
        if node.id is not None and node.parent_id in parents:
            parents[node.id].append(node.parent_id)
    by_node: dict[int | None, list[_TimedCall]] = {}
    for call in calls:
        by_node.setdefault(call.node_id if call.node_id in parents else None, []).append(call)
    own = {node_id: _busy_seconds(by_node.get(node_id, [])) for node_id in parents}
    waited: dict[int, list[tuple[int, float]]] = {node_id: [] for node_id in parents}
    for source, target in waits:
        if source in parents and target in parents and source != target:
            waited[target].append(
                (source, _busy_seconds(_calls_after(by_node.get(target, []), by_node.get(source, []))))
            )
    sequential = _busy_seconds(by_node.get(None, []))
    # chain[n] = seconds from the start to the end of n; filled iteratively (chains can be deep).
    chain: dict[int, float] = {}
    for start in parents:
        if start in chain:
            continue
        stack: list[tuple[int, bool]] = [(start, False)]
        on_path: set[int] = set()
        while stack:
            node_id, expanded = stack.pop()
            if expanded:
                on_path.discard(node_id)
                chain[node_id] = max(
                    own[node_id] + max((chain[p] for p in parents[node_id]), default=0.0),
                    max((chain[s] + after for s, after in waited[node_id]), default=0.0),
                )
                continue
            if node_id in chain:
                continue
            if node_id in on_path:
                raise ValueError(f"the nodes' dependencies form a cycle through node {node_id}")
            on_path.add(node_id)
            stack.append((node_id, True))
            stack.extend((p, False) for p in (*parents[node_id], *(s for s, _ in waited[node_id])) if p not in chain)
    return max(chain.values(), default=0.0) + sequential


def _calls_after(calls: list[_TimedCall], source_calls: list[_TimedCall]) -> list[_TimedCall]:
    """The `calls` that started once `source_calls` had all ended (all of them when either side has
    no times: then nothing says they overlapped)."""
    ends = [c.created_at.timestamp() for c in source_calls if c.created_at is not None]
    if not ends:
        return calls
    cutoff = max(ends) - _AFTER_TOLERANCE_S
    return [c for c in calls if c.created_at is None or c.created_at.timestamp() - c.latency_s >= cutoff]
