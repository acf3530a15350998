"""The registered methods. A built-in method is added here; a method kept elsewhere (a plugin, or a
test's own method) is named in `THOUGHTMAP_METHODS` as `module:Class[,module:Class...]`. Either way
it appears in the CLI and the app unchanged, built from its declarations.

`METHODS` knows the built-in methods' names without importing them: a method's module is imported
the first time its class is asked for, so `thoughtmap --help` (which lists the names) loads none."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

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


class RegisteredMethods(MutableMapping[str, "type[Method[Any]]"]):
    """Method classes by name, each imported when first looked up (thread-safe). A class set here
    (a plugin, a test's method) is registered as it is. Looking up one method imports that one: a
    CLI run of `direct` does not pay for the seven others (0.4 s of its start)."""

    def __init__(self, where: Mapping[str, str], loaded: Mapping[str, type[Method[Any]]] | None = None) -> None:
        self._where = dict(where)
        self._loaded: dict[str, type[Method[Any]]] = dict(loaded or {})
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> type[Method[Any]]:
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

    def __setitem__(self, name: str, cls: type[Method[Any]]) -> None:
        with self._lock:
            self._where.setdefault(name, f"{cls.__module__}:{cls.__qualname__}")
            self._loaded[name] = cls

    def __delitem__(self, name: str) -> None:
        with self._lock:
            del self._where[name]
            self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._where  # without importing it

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._where))

    def __len__(self) -> int:
        return len(self._where)

    def copy(self) -> RegisteredMethods:
        """Another registry of the same methods (those loaded stay loaded); setting in it leaves this one alone."""
        with self._lock:
            return RegisteredMethods(self._where, self._loaded)


METHODS: Mapping[str, type[Method[Any]]] = RegisteredMethods(BUILTIN)


class UnknownMethod(LookupError):
    def __init__(self, name: str, available: list[str]) -> None:
        super().__init__(f"unknown method '{name}'. Available methods: {', '.join(available)}")
        self.name = name


class MethodPluginError(ImportError):
    """A method named in THOUGHTMAP_METHODS cannot be loaded; the message says which and why."""


def load_methods(plugins: str = "") -> RegisteredMethods:
    """The built-in methods plus the plugins named as `module:Class` (comma-separated): the
    plugins imported now (a bad name is said at once), the built-in ones when first looked up."""
    from engine.methods.base import Method

    methods = METHODS.copy() if isinstance(METHODS, RegisteredMethods) else RegisteredMethods(BUILTIN)
    for spec in (p.strip() for p in plugins.split(",")):
        if not spec:
            continue
        module_name, _, class_name = spec.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError, ValueError) as exc:
            raise MethodPluginError(
                f"THOUGHTMAP_METHODS names '{spec}', which cannot be loaded ({exc}); "
                "write it as module:Class, importable from here"
            ) from exc
        if not (isinstance(cls, type) and issubclass(cls, Method) and "name" in cls.__dict__):
            raise MethodPluginError(f"THOUGHTMAP_METHODS names '{spec}', which is not a Method subclass with a name")
        if cls.name in methods and methods[cls.name] is not cls:
            raise MethodPluginError(f"THOUGHTMAP_METHODS names '{spec}', but a method called '{cls.name}' exists")
        methods[cls.name] = cls
    return methods


def get_method(name: str, methods: Mapping[str, type[Method[Any]]] | None = None) -> type[Method[Any]]:
    methods = METHODS if methods is None else methods
    try:
        return methods[name]
    except KeyError:
        raise UnknownMethod(name, sorted(methods)) from None
