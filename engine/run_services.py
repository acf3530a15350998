"""What a run offers its method beyond its LLM, searcher and graph, found by type.

`ctx.service(Embedder)` is the run's embedder or None; likewise `PageFetcher`, `KnowledgeLayer`,
`RerankEndpoint`. `engine/services.py` builds the map once and the runner hands it to every run, so
a new service is one more entry there: no new field on `RunContext`, no new argument of `Runner`.
A method that can do without a service asks and copes with None; one that cannot says so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

S = TypeVar("S")


class RunServices:
    """The services of a run, keyed by the type a method asks for (a Protocol, or a class)."""

    def __init__(self, provided: Mapping[type[Any], object | None] | None = None) -> None:
        self._by_type: dict[type[Any], object] = {}
        for kind, value in (provided or {}).items():
            self.provide(kind, value)

    def provide(self, kind: type[S], value: S | None) -> None:
        """Offer `value` as the run's `kind`; None takes it back (the run goes without)."""
        if value is None:
            self._by_type.pop(kind, None)
        else:
            self._by_type[kind] = value

    def get(self, kind: type[S]) -> S | None:
        """The service offered as `kind`, or None."""
        return cast("S | None", self._by_type.get(kind))

    def __repr__(self) -> str:
        return f"RunServices({', '.join(sorted(kind.__name__ for kind in self._by_type))})"
