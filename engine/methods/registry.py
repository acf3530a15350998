"""The registered methods. A built-in method is added here; a method kept elsewhere (a plugin, or a
test's own method) is named in `THOUGHTMAP_METHODS` as `module:Class[,module:Class...]`. Either way
it appears in the CLI and the app unchanged, built from its declarations.

`METHODS` knows the built-in methods' names without importing them: a method's module is imported
the first time its class is asked for, so `thoughtmap --help` (which lists the names) loads none."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.methods.base import Method

# name -> "module:Class"; the order is the app's menu order.
BUILTIN: dict[str, str] = {
    "deot": "engine.methods.deot:DeotMethod",
    "omnithink": "engine.methods.omnithink:OmniThinkMethod",
    "mtqa": "engine.methods.mtqa:MtqaMethod",
    "fgdip": "engine.methods.fgdip:FgdipMethod",
    "research": "engine.methods.research:ResearchMethod",
    "direct": "engine.methods.direct:DirectMethod",
    "rag": "engine.methods.rag:RagMethod",
    "react": "engine.methods.react:ReactMethod",
}
# What `thoughtmap run` and `thoughtmap bench` use when no method is named: the cheap baselines.
DEFAULT_METHOD = "rag"
DEFAULT_BENCH_METHODS = ("direct", "rag")


class RegisteredMethods(Mapping[str, "type[Method]"]):
    """Method classes by name, each imported when first looked up (thread-safe)."""

    def __init__(self, where: Mapping[str, str]) -> None:
        self._where = dict(where)
        self._loaded: dict[str, type[Method]] = {}
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> type[Method]:
        cls = self._loaded.get(name)
        if cls is None:
            spec = self._where[name]  # KeyError for a name not registered, as a dict
            module_name, _, class_name = spec.partition(":")
            cls = getattr(importlib.import_module(module_name), class_name)
            if cls.name != name:
                raise RuntimeError(f"the registry names {spec} '{name}', but the class is called '{cls.name}'")
            with self._lock:
                self._loaded[name] = cls
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


METHODS: Mapping[str, type[Method]] = RegisteredMethods(BUILTIN)


class UnknownMethod(LookupError):
    def __init__(self, name: str, available: list[str]) -> None:
        super().__init__(f"unknown method '{name}'. Available methods: {', '.join(available)}")
        self.name = name


class MethodPluginError(ImportError):
    """A method named in THOUGHTMAP_METHODS cannot be loaded; the message says which and why."""


def load_methods(plugins: str = "") -> dict[str, type[Method]]:
    """The built-in methods plus the plugins named as `module:Class` (comma-separated)."""
    from engine.methods.base import Method

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
