"""The CLI's start-up: `thoughtmap --help` loads the grammar only (no method, no database layer, no
model client), every command it lists is dispatched to a function, and the choices the grammar
writes out agree with the modules that define them. Start-up time itself is measured by
benchmarks/bench_startup.py, not here."""

from __future__ import annotations

import json
import subprocess
import sys
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
from tests import REPO_ROOT

ROOT = REPO_ROOT

# Modules `--help` must not load: each costs a large share of a second (docs/benchmarks.md, "CLI start-up").
HEAVY = (
    "sqlalchemy",
    "sqlmodel",
    "storage.models",
    "storage.repository",
    "engine.methods.base",
    "engine.runner",
    "engine.services",
    "openai",
    "fpdf",
    "numpy",
    "pydantic",
    "engine.evaluate.claims",
)


def _modules_loaded_by(code: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_help_loads_the_grammar_only():
    loaded = _modules_loaded_by(
        "import contextlib, io\nfrom engine.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['--help'])\n    except SystemExit:\n        pass"
    )
    assert "engine.cli.parser" in loaded
    assert not [m for m in HEAVY if m in loaded], sorted(m for m in HEAVY if m in loaded)
    assert not [m for m in loaded if m.startswith("engine.methods.") and m != "engine.methods.registry"]
    assert not [
        m
        for m in loaded
        if m.startswith("engine.cli.") and m not in ("engine.cli.parser", "engine.cli.input", "engine.cli.basics")
    ]


def test_a_commands_help_loads_no_command_module():
    loaded = _modules_loaded_by(
        "import contextlib, io\nfrom engine.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    try:\n        main(['kg', 'build', '--help'])\n    except SystemExit:\n        pass"
    )
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


def test_a_run_loads_its_own_method_and_no_report_writer():
    """A CLI run of one method imports that method's package, not the seven others, and not fpdf or
    python-docx (loaded when a PDF or DOCX is written): together 0.4-0.7 s of every run's start."""
    loaded = _modules_loaded_by(
        "import engine.cli.runs, engine.services\n"
        "from engine.methods.registry import load_methods\nload_methods()['direct']"
    )
    packages = {spec.partition(":")[0] for spec in BUILTIN.values()}
    assert "engine.methods.direct" in loaded
    others = sorted(m for m in loaded for p in packages - {"engine.methods.direct"} if m == p or m.startswith(p + "."))
    assert not others, others
    assert not [m for m in ("fpdf", "docx") if m in loaded]
    methods = load_methods()
    assert "react" in methods and len(methods) == len(BUILTIN)  # named without being imported


def test_a_registry_copy_takes_a_method_without_changing_the_original():
    from engine.methods.direct import DirectMethod

    class Probe(DirectMethod):
        name = "probe-method"

    mine = load_methods()
    mine[Probe.name] = Probe
    assert mine[Probe.name] is Probe and list(mine)[-1] == Probe.name
    assert Probe.name not in METHODS and Probe.name not in load_methods()
    del mine[Probe.name]
    assert Probe.name not in mine
