"""A method is named only in its own folder and the registry: no other code of `engine/`, `storage/`,
`components/` or `pages/` holds a method's name as a string, nor imports a method's module, so adding
or changing a method touches its folder alone. Read from the source (nothing is imported); the names
that remain elsewhere are listed below with why, and the list must equal what is found.

    .venv/bin/python -m pytest tests/engine/methods/test_method_names.py   # shows any new place by file and line
"""

from __future__ import annotations

import ast
from pathlib import Path

from engine.methods.registry import BUILTIN
from tests import REPO_ROOT

ROOT = REPO_ROOT
PACKAGES = ("engine", "storage", "components", "pages")
REGISTRY = Path("engine/methods/registry.py")

# (file, name) pairs still found, each with why it is not a method's name being used.
KNOWN = {
    # The papers' evaluation protocols, named after the paper that defined them; they judge any method.
    ("engine/cli/parser.py", "deot"),
    ("engine/cli/parser.py", "mtqa"),
    ("engine/cli/parser.py", "omnithink"),
    ("engine/cli/judge.py", "deot"),
    ("engine/evaluate/judges.py", "deot"),
    ("engine/evaluate/judges.py", "mtqa"),
    ("engine/evaluate/pairwise_bench.py", "deot"),
    ("engine/evaluate/rubrics.py", "omnithink"),
    ("engine/evaluate/item_judges.py", "omnithink"),
    # Migrations of rows written by earlier versions of DEoT: history, not a use of the method.
    ("storage/migrations.py", "deot"),
}


def _own_file(path: Path, names: set[str]) -> bool:
    parts = path.parts
    if path == REGISTRY:
        return True
    if parts[:2] == ("engine", "methods") and len(parts) > 3 and parts[2] in names:
        return True  # engine/methods/<name>/...
    return parts[:2] == ("engine", "methods") and len(parts) == 3 and path.stem in names  # direct.py, rag.py


def named_outside() -> dict[tuple[str, str], list[int]]:
    names = set(BUILTIN)
    found: dict[tuple[str, str], list[int]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if _own_file(relative, names):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                hits: list[str] = []
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                    hits = [node.value]
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    modules = (
                        [a.name for a in node.names]
                        if isinstance(node, ast.Import)
                        else [f"{node.module}.{a.name}" for a in node.names]
                    )
                    hits = [n for n in names for m in modules if m.startswith(f"engine.methods.{n}")]
                for name in hits:
                    found.setdefault((str(relative), name), []).append(node.lineno)
    return found


def test_no_method_is_named_outside_its_folder_and_the_registry():
    found = named_outside()
    new = {key: lines for key, lines in found.items() if key not in KNOWN}
    assert not new, f"a method named outside its folder (file, name): lines {new}"
    gone = KNOWN - found.keys()
    assert not gone, f"no longer named there, take them off KNOWN: {sorted(gone)}"


def test_the_scan_sees_a_name_and_an_import(tmp_path, monkeypatch):
    """The scan itself: a module naming a method and one importing a method's module are both found."""
    package = tmp_path / "pages"
    package.mkdir()
    (package / "a.py").write_text('METHOD = "fgdip"\n', encoding="utf-8")
    (package / "b.py").write_text("from engine.methods.mtqa.params import MtqaParams\n", encoding="utf-8")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert named_outside() == {("pages/a.py", "fgdip"): [1], ("pages/b.py", "mtqa"): [1]}
