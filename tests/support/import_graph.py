"""The import graph of `engine/`, `storage/` and `components/`, read from the source (no import runs):
its circles and the arrows that run back up the layers.

Every `import` and `from ... import` counts, at module level or inside a function (an import inside a
function is still a dependency, only a later one), except under `if TYPE_CHECKING:`. `from pkg import
name` counts `pkg.name` when that is a module, else `pkg` itself. Run it to see the graph's state:

    .venv/bin/python -m tests.support.import_graph

`tests/project/test_import_graph.py` keeps both lists from growing.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests import REPO_ROOT

ROOT = REPO_ROOT
PACKAGES = ("engine", "storage", "components")

# (importer, imported): a module under the first may not import one under the second. The layers, from
# the bottom: `FOUNDATION` (below); storage; the LLM and search seams; the knowledge layer; the contract and graph; the
# methods; the runner, services and the evaluation harness over them; the CLI and the app on top.
RULES = (
    ("storage", "components"),
    ("engine", "components"),
    ("storage", "engine"),
    ("engine.llm", "engine.search"),
    ("engine.llm", "engine.knowledge"),
    ("engine.llm", "engine.methods"),
    ("engine.llm", "engine.evaluate"),
    ("engine.search", "engine.methods"),
    ("engine.search", "engine.evaluate"),
    ("engine.search", "engine.knowledge"),
    ("engine.knowledge", "engine.evaluate"),
    ("engine.knowledge", "engine.methods"),
    ("engine.contract", "engine.methods"),
    ("engine.graph", "engine.methods"),
    ("engine.methods", "engine.evaluate"),
    ("engine.methods", "engine.cli"),
    ("engine.methods", "engine.services"),
    ("engine.methods", "engine.runner"),
)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports."""
    known = modules()

    def ours(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    arrows: dict[str, set[str]] = defaultdict(set)
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                submodules = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known]
                targets = submodules if len(submodules) == len(node.names) else [node.module, *submodules]
            else:
                continue
            for target in targets:
                if target.split(".")[0] in PACKAGES and (resolved := ours(target)) and resolved != module:
                    arrows[module].add(resolved)
    return dict(arrows)


def circles(arrows: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    counter = 0

    def visit(start: str) -> None:  # iterative: no recursion limit to meet
        nonlocal counter
        work = [(start, iter(sorted(arrows.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(arrows.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(tuple(sorted(component)))

    for module in sorted(arrows):
        if module not in index:
            visit(module)
    return sorted(found)


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


# The foundation: modules below every layer, storage included, wherever their file is. Each imports
# nothing of ours but other foundation modules (`foundation_breaches` checks it), so importing one
# drags no layer in, and no arrow to one runs back up: storage quotes URLs redacted, refuses a
# question it cannot store, and says a bad database URL as a configuration error, with these.
FOUNDATION = frozenset(
    {"engine.redact", "engine.config_values", "engine.questions", "engine.safe_text", "engine.markdown_code"}
)


def foundation_breaches(arrows: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(foundation module, what it imports that is not foundation): must be none."""
    return sorted((m, t) for m in FOUNDATION for t in arrows.get(m, set()) if t not in FOUNDATION)


def back_arrows(arrows: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs that break a rule of `RULES`; an arrow into `FOUNDATION` breaks none."""
    broken = set()
    for module, targets in arrows.items():
        for target in targets - FOUNDATION:
            for upper, lower in RULES:
                if _under(module, upper) and _under(target, lower) and not _under(module, lower):
                    broken.add((module, target))
    return sorted(broken)


if __name__ == "__main__":
    arrows = graph()
    print(f"{len(arrows)} modules import others of ours, {sum(map(len, arrows.values()))} arrows")
    for circle in circles(arrows):
        print("circle:", " <-> ".join(circle))
    for module, target in back_arrows(arrows):
        print(f"back arrow: {module} -> {target}")
    for module, target in foundation_breaches(arrows):
        print(f"foundation module importing above it: {module} -> {target}")
