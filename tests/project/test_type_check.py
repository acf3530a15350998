"""The type checker, mypy in strict mode (`[tool.mypy]` in pyproject.toml), over `engine/` and
`storage/`: no findings. Run it yourself with `.venv/bin/python -m mypy` (its cache keeps reruns
quick); a `# type: ignore` needs its error code and a comment that says why."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests import REPO_ROOT

FINDING = re.compile(r"^(?P<file>[^:\s]+\.py):\d+: error: ")


@pytest.mark.timeout(600)
def test_mypy_strict_finds_nothing_in_the_engine_and_storage():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    if result.returncode not in (0, 1):  # 2: mypy itself failed (a bad config, a crash)
        raise RuntimeError(f"mypy failed (exit {result.returncode}): {result.stderr or result.stdout}"[:2000])
    findings = [line for line in result.stdout.splitlines() if FINDING.match(line)]
    assert not findings, f"{len(findings)} type findings:\n" + "\n".join(findings[:60])
    assert result.returncode == 0, result.stdout[-2000:]
