"""The built-in model's grammar-last sampling (`engine/llm/grammar_sampling.py`), on the real bundled
model in this process: at temperature 0 it writes exactly what llama-cpp-python's grammar-first chain
writes; when the model's favourite token breaks the grammar it draws again under the grammar, so the
output always fits the schema, at a temperature too.

Skipped where the local runtime is not installed, except under scripts/test
(THOUGHTMAP_REQUIRE_LOCAL_MODEL=1), where a missing runtime fails these tests.
"""

from __future__ import annotations

import json
import os

import pytest

from engine.config import LocalModelSettings
from engine.llm import grammar_sampling
from engine.llm.local_model import part_paths, resolve_model_file, runtime_installed

pytestmark = pytest.mark.local_model

# Asked about the sky, the model would say "blue": the schema allows only two animals and a count,
# so the grammar must refuse the model's own first choices.
PROMPT = "<|im_start|>user\nWhat colour is the sky? Answer in JSON.<|im_end|>\n<|im_start|>assistant\n"
SCHEMA = {
    "type": "object",
    "properties": {"animal": {"type": "string", "enum": ["quokka", "axolotl"]}, "count": {"type": "integer"}},
    "required": ["animal", "count"],
}


@pytest.fixture(scope="module")
def model():
    if not runtime_installed() or part_paths() is None:
        message = "the built-in model's runtime or packages are not installed (scripts/setup installs them)"
        if os.environ.get("THOUGHTMAP_REQUIRE_LOCAL_MODEL") == "1":
            pytest.fail(message)
        pytest.skip(message)
    from llama_cpp import Llama

    path = resolve_model_file(LocalModelSettings())
    llm = Llama(model_path=str(path), n_ctx=512, n_threads=2, verbose=False, seed=7)
    yield llm
    llm.close()


def _complete(llm, **kwargs) -> str:
    from llama_cpp import LlamaGrammar

    grammar = LlamaGrammar.from_json_schema(json.dumps(SCHEMA), verbose=False)
    out = llm.create_completion(PROMPT, max_tokens=40, grammar=grammar, **kwargs)
    return out["choices"][0]["text"]


def test_grammar_last_writes_what_grammar_first_writes_and_redraws_refused_tokens(model, monkeypatch):
    from llama_cpp import Llama

    grammar_first = _complete(model, temperature=0)
    samplers = []
    patched = grammar_sampling.grammar_last(Llama._init_sampler)

    def recording(self, *args, **kwargs):
        sampler = patched(self, *args, **kwargs)
        samplers.append(sampler)
        return sampler

    monkeypatch.setattr(Llama, "_init_sampler", recording)
    grammar_last = _complete(model, temperature=0)

    assert grammar_last == grammar_first
    answer = json.loads(grammar_last)
    assert answer["animal"] in ("quokka", "axolotl") and isinstance(answer["count"], int)
    (sampler,) = [s for s in samplers if isinstance(s, grammar_sampling.GrammarLastSampler)]
    # Some tokens were refused and drawn again under the grammar; most were allowed as drawn.
    assert 0 < sampler.redrawn < sampler.drawn


def test_at_a_temperature_every_answer_still_fits_the_schema(model, monkeypatch):
    from llama_cpp import Llama

    monkeypatch.setattr(Llama, "_init_sampler", grammar_sampling.grammar_last(Llama._init_sampler))
    for seed in range(3):
        answer = json.loads(_complete(model, temperature=1.0, seed=seed))
        assert answer["animal"] in ("quokka", "axolotl") and isinstance(answer["count"], int)
