"""Report downloads beyond Markdown and JSON: DOCX and PDF, built from the report's structure
(`document.py`), never from Markdown or HTML a converter would interpret. No Streamlit here.

`to_docx` and `to_pdf` load python-docx and fpdf when first asked for (PEP 562): together they
cost about 0.35 s of a process's start, which a CLI run that writes neither should not pay."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from engine.export.document import ReportDocument, build_document

if TYPE_CHECKING:
    from engine.export.docx import to_docx
    from engine.export.pdf import to_pdf

__all__ = ["ReportDocument", "build_document", "to_docx", "to_pdf"]

_LAZY = {"to_docx": "engine.export.docx", "to_pdf": "engine.export.pdf"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
