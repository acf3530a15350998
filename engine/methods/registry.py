"""The registered methods. New methods are added here and appear in the CLI and UI unchanged."""

from __future__ import annotations

from engine.methods.base import Method
from engine.methods.deot import DeotMethod
from engine.methods.direct import DirectMethod
from engine.methods.omnithink import OmniThinkMethod
from engine.methods.rag import RagMethod

METHODS: dict[str, type[Method]] = {cls.name: cls for cls in (DeotMethod, OmniThinkMethod, DirectMethod, RagMethod)}


class UnknownMethod(LookupError):
    def __init__(self, name: str, available: list[str]) -> None:
        super().__init__(f"unknown method '{name}'. Available methods: {', '.join(available)}")
        self.name = name


def get_method(name: str, methods: dict[str, type[Method]] | None = None) -> type[Method]:
    methods = METHODS if methods is None else methods
    try:
        return methods[name]
    except KeyError:
        raise UnknownMethod(name, sorted(methods)) from None
