"""The tests mirror the packages they test: `tests/engine/methods/deot/` tests `engine/methods/deot/`,
`tests/storage/` tests `storage/`, and so on. `tests/support/` holds what several of them share
(fixtures, scripted servers, helpers), `tests/project/` the checks over the whole code (imports,
types, packaging), `tests/e2e/` the browser tests."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
