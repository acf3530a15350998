"""Turn HTML and PDF bytes into plain text (shared by the file loaders and the page fetcher)."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser


class ExtractionError(ValueError):
    """The content could not be turned into text (encrypted or broken PDF, empty page...)."""


class _TextAndTitle(HTMLParser):
    """Collects the <title> and the visible text; skips script/style/head noise."""

    _SKIP = {"script", "style", "noscript", "template", "svg", "head"}
    _BLOCK = {
        "p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header",
        "footer", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "hr", "main",
    }  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title_parts: list[str] = []
        self.parts: list[str] = []
        self._skip_depth = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in self._SKIP:
            self._skip_depth += 1
        elif tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self._SKIP and self._skip_depth:
            self._skip_depth -= 1
        elif tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title_parts.append(data)
        elif not self._skip_depth:
            self.parts.append(data)


def _tidy(text: str) -> str:
    text = re.sub(r"[ \t\r\f\v]+", " ", text)
    text = re.sub(r" *\n *", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def html_to_text(html: str) -> tuple[str, str]:
    """(title, main text) of an HTML page.

    trafilatura finds the main content (drops menus, footers); when it finds nothing (tiny or
    unusual pages) the tag-stripped visible text is used so no page comes back empty by accident.
    """
    parser = _TextAndTitle()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # noqa: BLE001 - HTMLParser is lenient; never fail on broken markup
        pass
    title = " ".join("".join(parser.title_parts).split())
    text = ""
    try:
        import trafilatura  # imported here: it is slow to import and only needed for HTML

        text = trafilatura.extract(html, include_comments=False, include_tables=True) or ""
    except Exception:  # noqa: BLE001 - extraction problems fall back to stripped text
        text = ""
    if not text.strip():
        text = _tidy("".join(parser.parts))
    return title, text.strip()


def pdf_to_text(data: bytes) -> tuple[str, str]:
    """(title from the PDF metadata or "", text of all pages). Raises ExtractionError."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            # Many PDFs are "encrypted" with an empty user password and open fine.
            try:
                ok = reader.decrypt("")
            except Exception as exc:  # noqa: BLE001
                raise ExtractionError(f"encrypted PDF that cannot be opened ({exc})") from exc
            if not ok:
                raise ExtractionError("encrypted PDF: a password is needed to read it")
        pages = [page.extract_text() or "" for page in reader.pages]
        title = ""
        try:
            meta = reader.metadata
            title = str(meta.title).strip() if meta and meta.title else ""
        except Exception:  # noqa: BLE001 - metadata is optional
            title = ""
    except ExtractionError:
        raise
    except Exception as exc:  # noqa: BLE001 - broken PDFs raise many kinds of errors
        raise ExtractionError(f"unreadable PDF ({exc})") from exc
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text:
        raise ExtractionError("the PDF has no extractable text (a scanned image?)")
    return title, text
