"""Persistence: SQLModel tables, the database factory, migrations and the repository API.
Nothing outside this package writes SQL.

The names below are loaded when first used (PEP 562), so importing a light module of this package
(`storage.statuses`) does not load SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from storage.db import Database, open_database
    from storage.models import RunState
    from storage.repository import NodeInput, Repository, RunNotFound

_WHERE = {
    "Database": "storage.db",
    "open_database": "storage.db",
    "RunState": "storage.models",
    "NodeInput": "storage.repository",
    "Repository": "storage.repository",
    "RunNotFound": "storage.repository",
}

__all__ = ["Database", "NodeInput", "Repository", "RunNotFound", "RunState", "open_database"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'storage' has no attribute {name!r}")
