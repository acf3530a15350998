"""Methods read node data through their kinds' models (`ctx.graph.data(node, Model)`, a kind's
`model_validate`), not as dicts: a typed read is checked by the type checker and fails loudly on a
field that does not exist. The dict reads still there are counted per file below (issue 44, step 1);
the counts may only go down, and must be lowered when they do, so the list stays true.

    .venv/bin/python -m pytest tests/test_typed_reads.py   # the files and counts found
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# `node.data.get(...)`, `node.data[...]`, `(node.data or {})`: a node's data read as a dict.
DICT_READ = re.compile(r"\.data\.get\(|\.data\[|\.data or \{\}\)")

KNOWN = {
    "engine/methods/base.py": 3,  # the generic layer: report data twice, and any kind's `not_covered`
    # DEoT's method reads a few fields of a question whose stored checkpoint may be spoiled (a partial
    # plan a resume must not reuse): a typed read validates the whole data and would fail on it.
    "engine/methods/deot/method.py": 10,
    "engine/methods/deot/report.py": 2,  # the report's data (not a node's)
    "engine/methods/fgdip/report.py": 1,  # the path's actions, written by trajectory.py from the dicts
    "engine/methods/mtqa/kinds.py": 8,
    "engine/methods/mtqa/matrix.py": 14,
    "engine/methods/mtqa/method.py": 16,
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
