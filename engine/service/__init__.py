"""Thoughtmap as a service: the Python API (`api.py`: `Thoughtmap`), a run's live events
(`feed.py`), the HTTP API (`http.py`, `thoughtmap serve`) and its bearer tokens (`tokens.py`)."""

from engine.service.api import BadRequest, Conflict, NotFound, Thoughtmap

__all__ = ["BadRequest", "Conflict", "NotFound", "Thoughtmap"]
