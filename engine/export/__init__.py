"""Report downloads beyond Markdown and JSON: DOCX and PDF, built from the report's structure
(`document.py`), never from Markdown or HTML a converter would interpret. No Streamlit here."""

from engine.export.document import ReportDocument, build_document
from engine.export.docx import to_docx
from engine.export.pdf import to_pdf

__all__ = ["ReportDocument", "build_document", "to_docx", "to_pdf"]
