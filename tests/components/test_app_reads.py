"""The app reads through one door: `engine/reads.py` (`Services.reads`). components/ and pages/
import nothing from storage and never reach the repository, and that door only reads."""

from __future__ import annotations

import ast
from pathlib import Path

from engine.contract import MethodContract
from engine.evaluate.claims import PROTOCOL
from engine.reads import Reads
from tests import REPO_ROOT
from tests.support.db_backends import statements
from tests.support.fixtures_engine import run_to_end

ROOT = REPO_ROOT
APP_FILES = sorted([ROOT / "app.py", *(ROOT / "components").glob("*.py"), *(ROOT / "pages").glob("*.py")])


def storage_reaches(path: Path, root: Path = ROOT) -> list[str]:
    """Where the file imports storage or touches a `.repo`, as "file:line what"."""
    where = path.relative_to(root)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [
            f"{where}:{node.lineno} imports {name}"
            for name in names
            if name == "storage" or name.startswith("storage.")
        ]
        if isinstance(node, ast.Attribute) and node.attr == "repo":
            found.append(f"{where}:{node.lineno} reads .repo")
    return sorted(found, key=lambda line: int(line.split(":")[1].split()[0]))


def test_the_app_imports_no_storage_and_never_reaches_the_repository():
    assert len(APP_FILES) > 30  # the scan sees the whole app
    offences = [line for path in APP_FILES for line in storage_reaches(path)]
    assert offences == [], "the app reads through engine/reads.py (Services.reads):\n" + "\n".join(offences)


def test_the_scan_finds_a_storage_import_and_a_repository_read(tmp_path):
    sample = tmp_path / "page.py"
    sample.write_text(
        "from storage.models import Run\nimport storage.db\n\ndef f(services):\n"
        "    return services.repo.get_run('x')\n",
        encoding="utf-8",
    )
    assert storage_reaches(sample, tmp_path) == [
        "page.py:1 imports storage.models",
        "page.py:2 imports storage.db",
        "page.py:5 reads .repo",
    ]


def test_every_read_the_app_makes_writes_nothing(services):
    """Each of Reads' calls on a finished run with nodes, sources, events, commands and a report:
    they answer, and not one INSERT, UPDATE or DELETE reaches the database."""
    run_id = run_to_end(services, "What causes the seasons on Earth?", "deot")
    reads: Reads = services.reads
    run = reads.get_run(run_id)
    node = next(n for n in reads.snapshot(run_id).nodes if reads.sources_for_node(n.id))
    contract: MethodContract = services.method(run.method).contract
    with statements(services.repo) as counts:
        answers = {
            "list_runs": reads.list_runs(text="seasons"),
            "count_runs": reads.count_runs(text="seasons"),
            "run_version": reads.run_version(run_id),
            "snapshot": reads.snapshot(run_id).nodes,
            "list_sources": reads.list_sources(run_id),
            "sources_for_node": reads.sources_for_node(node.id),
            "list_events": reads.list_events(run_id, limit=50),
            "list_commands": reads.list_commands(run_id),
            "list_run_states": reads.list_run_states(run_id),
            "graph": reads.graph(run_id, contract).nodes(),
            "latest_report": reads.latest_report(run_id),
            "list_reports": reads.list_reports(run_id),
            "markdown": reads.markdown(run_id),
            "export_json": reads.export_json(run_id),
            "document": reads.document(run_id).blocks,
            "judgments": reads.judgments(run_id, PROTOCOL),
        }
    assert counts["SELECT"] > 0
    assert not {"INSERT", "UPDATE", "DELETE"} & set(counts), dict(counts)
    assert [r.id for r in answers["list_runs"]] == [run_id] and answers["count_runs"] == 1
    assert answers["snapshot"] and answers["list_sources"] and answers["sources_for_node"]
    assert answers["latest_report"] is not None and answers["list_reports"]
    assert "[1]" in answers["markdown"] and answers["export_json"]["run"]["id"] == run_id
    assert answers["document"] and answers["judgments"] == []
    assert answers["list_events"] and answers["run_version"] > 0
