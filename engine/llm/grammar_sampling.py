"""Grammar-constrained sampling that asks the grammar about the drawn token first, for the built-in
model's server process (installed by `llama_server_main`).

llama-cpp-python puts the JSON grammar in the sampler chain before top-k, so every generated token
runs the grammar over the whole vocabulary (151,000 tokens for Qwen), which costs about a third of
the generation speed of schema-constrained JSON here (`benchmarks/bench_grammar.py`). llama.cpp's own
server draws first and asks the grammar only about the token it drew, constraining the whole
vocabulary only when that token is refused (`common_sampler_sample`). This does the same:

1. the candidates from the logits, through the usual chain without the grammar (penalties, top-k,
   top-p, min-p, temperature, the draw);
2. the grammar asked about the one token drawn; if it allows it, the chain and the grammar accept it;
3. otherwise the candidates afresh, the grammar over all of them first, then the same chain: only an
   allowed token can come out.

The chain sees one history (what was accepted), so repetition penalties stay exact. For greedy
decoding the token is the one the grammar-first chain picks (the best token overall, when allowed,
is the best allowed one); at a temperature it is llama.cpp's own server's behaviour.
"""

from __future__ import annotations

import ctypes
import math
import threading
from typing import Any

import numpy as np

_installed = False
_lock = threading.Lock()
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


class GrammarLastSampler:
    """Stands in for llama-cpp-python's `LlamaSampler` where `Llama.sample` uses it (`sample(ctx, idx)`)."""

    def __init__(self, chain: Any, vocab: Any, n_vocab: int, grammar: Any) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._chain = chain  # a LlamaSampler without the grammar; it frees its chain itself
        self._grammar = llama_cpp.llama_sampler_init_grammar(
            vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self._grammar:
            raise ValueError("llama.cpp did not accept the grammar")
        self._n_vocab = n_vocab
        self._data = (llama_cpp.llama_token_data * n_vocab)()
        # Through a memoryview, the same memory: numpy's stubs list the buffer types it takes, not ctypes arrays.
        self._rows = np.frombuffer(memoryview(self._data), dtype=_TOKEN_DATA)
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self._candidates = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._data, llama_cpp.llama_token_data_p), size=n_vocab, selected=-1, sorted=False
        )
        self._one = (llama_cpp.llama_token_data * 1)()
        self._one_array = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._one, llama_cpp.llama_token_data_p), size=1, selected=-1, sorted=False
        )
        self.drawn = 0
        self.redrawn = 0  # tokens the grammar refused, drawn again under it

    def __del__(self) -> None:
        grammar, self._grammar = getattr(self, "_grammar", None), None
        if grammar:
            self._lib.llama_sampler_free(grammar)

    def allowed(self, token: int) -> bool:
        """Whether the grammar, in its current state, allows `token` next."""
        # llama_cpp annotates `id` as c_int32, but ctypes reads and writes the field as an int.
        self._one[0].id, self._one[0].logit, self._one[0].p = token, 0.0, 0.0  # type: ignore[assignment]
        self._one_array.size, self._one_array.selected, self._one_array.sorted = 1, -1, False
        self._lib.llama_sampler_apply(self._grammar, ctypes.byref(self._one_array))
        return not math.isinf(self._one[0].logit)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        self.drawn += 1
        token = self._draw(ctx, idx, grammar_first=False)
        if not self.allowed(token):
            self.redrawn += 1
            token = self._draw(ctx, idx, grammar_first=True)
        self._lib.llama_sampler_accept(self._chain.sampler, token)
        self._lib.llama_sampler_accept(self._grammar, token)
        return token

    def _draw(self, ctx: Any, idx: int, *, grammar_first: bool) -> int:
        lib = self._lib
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self._n_vocab,))
        self._rows["id"] = self._ids
        self._rows["logit"] = logits
        self._rows["p"] = 0.0
        candidates = self._candidates
        candidates.data = ctypes.cast(self._data, lib.llama_token_data_p)
        candidates.size, candidates.selected, candidates.sorted = self._n_vocab, -1, False
        if grammar_first:
            lib.llama_sampler_apply(self._grammar, ctypes.byref(candidates))
        lib.llama_sampler_apply(self._chain.sampler, ctypes.byref(candidates))
        if not 0 <= candidates.selected < candidates.size:
            raise RuntimeError("the sampler chain selected no token")
        return int(candidates.data[candidates.selected].id)


def grammar_last(original_init_sampler: Any) -> Any:
    """`Llama._init_sampler` that returns a `GrammarLastSampler` whenever a grammar is given."""

    def init_sampler(self: Any, *args: Any, grammar: Any = None, **kwargs: Any) -> Any:
        chain = original_init_sampler(self, *args, grammar=None, **kwargs)
        if grammar is None:
            return chain
        return GrammarLastSampler(chain, self._model.vocab, self._n_vocab, grammar)

    return init_sampler


def install() -> None:
    """Make every grammar-constrained generation of `llama_cpp.Llama` in this process ask the grammar
    about the drawn token first. Idempotent."""
    global _installed
    with _lock:
        if _installed:
            return
        from llama_cpp import Llama

        # Replacing the method is the point: every Llama in the process samples this way.
        Llama._init_sampler = grammar_last(Llama._init_sampler)  # type: ignore[method-assign]
        _installed = True
