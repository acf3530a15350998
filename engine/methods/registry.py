"""The registered methods. A built-in method is added here; a method kept elsewhere (a plugin, or a
test's own method) is named in `THOUGHTMAP_METHODS` as `module:Class[,module:Class...]`. Either way
it appears in the CLI and the app unchanged, built from its declarations."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from engine.methods.base import Method
from engine.methods.deot import DeotMethod
from engine.methods.direct import DirectMethod
from engine.methods.fgdip import FgdipMethod
from engine.methods.mtqa import MtqaMethod
from engine.methods.omnithink import OmniThinkMethod
from engine.methods.rag import RagMethod
from engine.methods.research import ResearchMethod

METHODS: dict[str, type[Method]] = {
    cls.name: cls for cls in (DeotMethod, OmniThinkMethod, MtqaMethod, FgdipMethod, ResearchMethod, DirectMethod,
                               RagMethod)}


class UnknownMethod(LookupError):
    def __init__(self, name: str, available: list[str]) -> None:
        super().__init__(f"unknown method '{name}'. Available methods: {', '.join(available)}")
        self.name = name


class MethodPluginError(ImportError):
    """A method named in THOUGHTMAP_METHODS cannot be loaded; the message says which and why."""


def load_methods(plugins: str = "") -> dict[str, type[Method]]:
    """The built-in methods plus the plugins named as `module:Class` (comma-separated)."""
    methods = dict(METHODS)
    for spec in (p.strip() for p in plugins.split(",")):
        if not spec:
            continue
        module_name, _, class_name = spec.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError, ValueError) as exc:
            raise MethodPluginError(f"THOUGHTMAP_METHODS names '{spec}', which cannot be loaded ({exc}); "
                                    "write it as module:Class, importable from here") from exc
        if not (isinstance(cls, type) and issubclass(cls, Method) and "name" in cls.__dict__):
            raise MethodPluginError(f"THOUGHTMAP_METHODS names '{spec}', which is not a Method subclass with a name")
        if cls.name in methods and methods[cls.name] is not cls:
            raise MethodPluginError(f"THOUGHTMAP_METHODS names '{spec}', but a method called '{cls.name}' exists")
        methods[cls.name] = cls
    return methods


def get_method(name: str, methods: Mapping[str, type[Method]] | None = None) -> type[Method]:
    methods = METHODS if methods is None else methods
    try:
        return methods[name]
    except KeyError:
        raise UnknownMethod(name, sorted(methods)) from None
