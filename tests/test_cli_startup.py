"""The CLI's start-up: `thoughtmap --help` loads the grammar only (no method, no database layer, no
model client), every command it lists is dispatched to a function, and the choices the grammar
writes out agree with the modules that define them. Start-up time itself is measured by
benchmarks/bench_startup.py, not here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from engine import cli
from engine.cli import parser as grammar
from engine.config import RerankerName, Retriever
from engine.evaluate.judges import PAIRWISE_PROTOCOLS
from engine.evaluate.retrieval_setup import DATASETS
from engine.evaluate.rubrics import RUBRICS
from engine.knowledge.chunks import DEFAULT_CHUNK_TOKENS
from engine.methods.registry import BUILTIN, METHODS, load_methods

ROOT = Path(__file__).resolve().parents[1]

# Modules `--help` must not load: each costs a large share of a second (docs/benchmarks.md, "CLI start-up").
HEAVY = ("sqlalchemy", "sqlmodel", "storage.models", "storage.repository", "engine.methods.base", "engine.runner",
         "engine.services", "openai", "fpdf", "numpy", "pydantic", "engine.evaluate.claims")


def _modules_loaded_by(code: str) -> set[str]:
    result = subprocess.run([sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
                            cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_help_loads_the_grammar_only():
    loaded = _modules_loaded_by(
        "import contextlib, io\nfrom engine.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['--help'])\n    except SystemExit:\n        pass")
    assert "engine.cli.parser" in loaded
    assert not [m for m in HEAVY if m in loaded], sorted(m for m in HEAVY if m in loaded)
    assert not [m for m in loaded if m.startswith("engine.methods.") and m != "engine.methods.registry"]
    assert not [m for m in loaded if m.startswith("engine.cli.") and m not in
                ("engine.cli.parser", "engine.cli.input", "engine.cli.basics")]


def test_a_commands_help_loads_no_command_module():
    loaded = _modules_loaded_by(
        "import contextlib, io\nfrom engine.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    try:\n        main(['kg', 'build', '--help'])\n    except SystemExit:\n        pass")
    assert "engine.cli.kg" not in loaded  # a command's --help is still the grammar's
    assert "sqlalchemy" not in loaded


def test_every_command_of_the_grammar_is_dispatched():
    parser = grammar.build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert set(commands) == set(cli.COMMANDS)
    for name in cli.COMMANDS:
        assert callable(cli.command(name)), name


def test_the_grammars_written_out_choices_agree_with_their_definitions():
    assert set(grammar.PAIRWISE_PROTOCOL_NAMES) == set(PAIRWISE_PROTOCOLS)
    assert set(grammar.RUBRIC_NAMES) == set(RUBRICS)
    assert grammar.RETRIEVER_NAMES == get_args(Retriever)
    assert grammar.RERANKER_NAMES == get_args(RerankerName)
    assert grammar.SEARCH_EVAL_DATASETS == tuple(DATASETS)
    assert grammar.DEFAULT_CHUNK_TOKENS == DEFAULT_CHUNK_TOKENS


def test_the_registry_names_its_methods_without_importing_them():
    loaded = _modules_loaded_by("from engine.methods.registry import METHODS\nnames = sorted(METHODS)")
    assert not [m for m in loaded if m.startswith("engine.methods.") and m != "engine.methods.registry"]
    assert list(METHODS) == list(BUILTIN)
    for name in BUILTIN:
        assert METHODS[name].name == name  # the class the registry points at carries that name
    assert load_methods() == {name: METHODS[name] for name in BUILTIN}
    with pytest.raises(KeyError):
        METHODS["no-such-method"]
