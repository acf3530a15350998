"""No circle and no arrow back up the layers (`tests/support/import_graph.py` reads the graph and says the
rules; `.venv/bin/python -m tests.support.import_graph` prints what it finds). Both lists below are empty
since issue 44's steps 2 and 4; a test fails when something is found that is not listed."""

from __future__ import annotations

import ast
from pathlib import Path

from tests import REPO_ROOT
from tests.support.import_graph import back_arrows, circles, foundation_breaches, graph

KNOWN_CIRCLES: set[tuple[str, str]] = set()
KNOWN_BACK_ARROWS: set[tuple[str, str]] = set()


def test_no_new_circle():
    found = set(circles(graph()))
    assert found <= KNOWN_CIRCLES, f"new import circles: {sorted(found - KNOWN_CIRCLES)}"
    assert found == KNOWN_CIRCLES, f"gone, take them off KNOWN_CIRCLES: {sorted(KNOWN_CIRCLES - found)}"


def test_no_new_back_arrow():
    found = set(back_arrows(graph()))
    assert found <= KNOWN_BACK_ARROWS, f"new arrows back up the layers: {sorted(found - KNOWN_BACK_ARROWS)}"
    assert found == KNOWN_BACK_ARROWS, f"gone, take them off KNOWN_BACK_ARROWS: {sorted(KNOWN_BACK_ARROWS - found)}"


def test_the_reader_sees_a_circle_and_a_back_arrow():
    # The reader itself: a made-up graph with one circle (a <-> b) and one arrow up (engine.llm -> methods).
    arrows = {
        "engine.llm.a": {"engine.llm.b", "engine.methods.x"},
        "engine.llm.b": {"engine.llm.a"},
        "engine.methods.x": {"storage.models"},
    }
    assert circles(arrows) == [("engine.llm.a", "engine.llm.b")]
    assert back_arrows(arrows) == [("engine.llm.a", "engine.methods.x")]
    # An arrow into the foundation is not one; a foundation module importing above it is a breach.
    assert back_arrows({"storage.db": {"engine.redact"}}) == []
    assert foundation_breaches({"engine.redact": {"engine.graph"}}) == [("engine.redact", "engine.graph")]


def test_the_foundation_imports_nothing_above_it():
    assert foundation_breaches(graph()) == []


def streamlit_imports(root: Path) -> list[str]:
    """Every import of Streamlit under `root`, as "file:line"."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            if any(name == "streamlit" or name.startswith("streamlit.") for name in names):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_the_engine_and_storage_never_import_streamlit(tmp_path):
    # The CLI, the workers and the service run the engine without a web app.
    root = REPO_ROOT
    assert streamlit_imports(root / "engine") == [] and streamlit_imports(root / "storage") == []
    sample = tmp_path / "engine"
    sample.mkdir()
    (sample / "x.py").write_text("def f():\n    from streamlit import session_state\n", encoding="utf-8")
    assert streamlit_imports(sample) == ["engine/x.py:2"]
