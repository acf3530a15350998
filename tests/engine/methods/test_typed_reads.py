"""Methods read node data through their kinds' models (`ctx.graph.data(node, Model)`, a kind's
`model_validate`), not as dicts: a typed read is checked by the type checker and fails loudly on a
field that does not exist. The dict reads still there are counted per file below (issue 44, step 1);
the counts may only go down, and must be lowered when they do, so the list stays true.

    .venv/bin/python -m pytest tests/engine/methods/test_typed_reads.py   # the files and counts found
"""

from __future__ import annotations

import re

from tests import REPO_ROOT

ROOT = REPO_ROOT
# `node.data.get(...)`, `node.data[...]`, `node.data or {}` (then read as a dict): a node's data read
# as a dict. `Model.of(node)` and `ctx.graph.data(node, Model)` are the typed reads.
DICT_READ = re.compile(r"\.data\.get\(|\.data\[|\.data or \{\}")

KNOWN = {
    "engine/methods/base.py": 2,  # the report's data (not a node's), twice
    "engine/methods/deot/report.py": 2,  # the report's data (not a node's)
    "engine/methods/omnithink/method.py": 1,  # the article's data (not a node's)
    "engine/methods/research/method.py": 1,  # the report's data (not a node's)
}


def dict_reads() -> dict[str, int]:
    counts = {}
    for path in sorted((ROOT / "engine" / "methods").rglob("*.py")):
        found = len(DICT_READ.findall(path.read_text(encoding="utf-8")))
        if found:
            counts[str(path.relative_to(ROOT))] = found
    return counts


def test_no_new_dict_reads_of_node_data_in_methods():
    found = dict_reads()
    grown = {f: (KNOWN.get(f, 0), n) for f, n in found.items() if n > KNOWN.get(f, 0)}
    assert not grown, f"new dict reads of node data (file: (allowed, found)); read them typed: {grown}"
    shrunk = {f: (n, found.get(f, 0)) for f, n in KNOWN.items() if found.get(f, 0) < n}
    assert not shrunk, f"fewer dict reads than listed (file: (listed, found)): lower KNOWN: {shrunk}"
