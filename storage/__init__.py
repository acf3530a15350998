"""Persistence: SQLModel tables, the database factory, migrations and the repository API.

Nothing outside this package writes SQL.
"""

from storage.db import Database, open_database
from storage.repository import Repository, RunNotFound

__all__ = ["Database", "Repository", "RunNotFound", "open_database"]
