"""A wheel of Thoughtmap ships every package of the engine, storage and components (the editable
install of scripts/setup would hide one missing from the list: the methods added after the list
was written were)."""

from __future__ import annotations

import tomllib

from setuptools import find_packages

from tests import REPO_ROOT

ROOT = REPO_ROOT


def test_every_package_is_shipped():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    shipped = set(find_packages(where=str(ROOT), include=config["include"]))
    on_disk = {
        str(init.parent.relative_to(ROOT)).replace("/", ".")
        for top in ("engine", "storage", "components")
        for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert on_disk and on_disk <= shipped, sorted(on_disk - shipped)
    assert {"engine.methods.mtqa", "engine.methods.fgdip", "engine.methods.research", "engine.knowledge"} <= shipped
    assert not any(name.startswith("tests") for name in shipped)
