"""Persistence: SQLModel tables, the database factory, migrations and the repository API.

Nothing outside this package writes SQL.
"""

from storage.db import Database, open_database
from storage.models import RunState
from storage.repository import NodeInput, Repository, RunNotFound

__all__ = ["Database", "NodeInput", "Repository", "RunNotFound", "RunState", "open_database"]
