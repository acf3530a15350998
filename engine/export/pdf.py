"""The report as a PDF (fpdf2, pure Python) in DejaVu Sans from Debian's fonts: Latin, Greek,
Cyrillic, Arabic and Hebrew letters and many symbols. Chinese, Japanese and Korean come from
WenQuanYi Micro Hei when Debian's fonts-wqy-microhei is installed (scripts/test installs it); no
Indic or Thai script. Characters no font has are left out of the PDF, and the PDF says so under its
title, with their code points and, for CJK, the package that would print them (the DOCX and
Markdown downloads keep every character). Text is written as text
(fpdf2's markdown and HTML modes stay off); citations are internal links to their source entry,
and a source's title links to its http(s) URL."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from fpdf import FPDF
from fpdf.fonts import TTFFont

from engine.export.document import Block, ReportDocument

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
FONT = "DejaVu"
LINK_RGB = (31, 90, 166)
_HEADING_SIZES = {1: 18, 2: 15, 3: 13, 4: 12, 5: 11, 6: 11}
_BODY = 10.5
_LINE = 5.5


class PdfFontMissing(RuntimeError):
    """The Unicode font the PDF is written in is not installed; the message says what to install."""


REGULAR, BOLD = FONT_DIR / "DejaVuSans.ttf", FONT_DIR / "DejaVuSans-Bold.ttf"
# Code blocks: DejaVu Sans Mono, shipped in the same package; without it code is set in the regular font.
MONO, MONO_FILE = "DejaVuMono", FONT_DIR / "DejaVuSansMono.ttf"
_CODE = 9
# The glyphs DejaVu lacks for Chinese, Japanese and Korean: fpdf2 takes them from this font (a
# collection: its first face is the proportional one), in every style, code included.
CJK, CJK_FILE, CJK_PACKAGE = "WenQuanYi", Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"), "fonts-wqy-microhei"


def pdf_font_missing() -> str:
    """What to install when the PDF's font is missing ("" when it is there)."""
    if REGULAR.is_file() and BOLD.is_file():
        return ""
    return (
        f"the PDF needs the DejaVu Sans font ({REGULAR}); install Debian's fonts-dejavu-core "
        "package, or download the Markdown or DOCX version"
    )


def _pdf() -> FPDF:
    missing = pdf_font_missing()
    if missing:
        raise PdfFontMissing(missing)
    pdf = FPDF(format="A4")
    pdf.set_margins(18, 18, 18)
    pdf.set_auto_page_break(True, margin=18)
    pdf.add_font(FONT, "", str(REGULAR))
    pdf.add_font(FONT, "B", str(BOLD))
    pdf.add_font(MONO, "", str(MONO_FILE if MONO_FILE.is_file() else REGULAR))
    pdf.add_page()
    return pdf


def _write_parts(pdf: FPDF, parts: tuple[str | int, ...], links: dict[int, int], height: float) -> None:
    for part in parts:
        if isinstance(part, int):
            pdf.set_text_color(*LINK_RGB)
            pdf.write(height, f"[{part}]", link=links[part])
            pdf.set_text_color(0, 0, 0)
        else:
            pdf.write(height, part)


def _write_table(pdf: FPDF, block: Block, links: dict[int, int]) -> None:
    """A GFM table as one line per row, cells apart by a bar, the header row in bold: the cells keep
    their citation links, which fpdf2's own table cells could not hold."""
    for row_number, row in enumerate(block.rows):
        pdf.set_font(FONT, "B" if row_number == 0 else "", _BODY)
        for cell_number, parts in enumerate(row):
            if cell_number:
                pdf.write(_LINE, "  |  ")
            _write_parts(pdf, parts, links, _LINE)
        pdf.ln(_LINE)


MISSING_EXAMPLES = 8


def _texts(document: ReportDocument) -> Iterator[tuple[str, str]]:
    """Each text of the document with the font it is set in ("" regular, "B" bold, MONO code)."""
    yield document.title, "B"
    for fact in document.facts:
        yield fact, ""
    for block in document.blocks:
        style = {"heading": "B", "code": MONO}.get(block.kind, "")
        yield from ((part, style) for part in block.parts if isinstance(part, str))
        for index, row in enumerate(block.rows):
            yield from ((part, "B" if index == 0 else "") for cell in row for part in cell if isinstance(part, str))
    yield "Sources", "B"
    for source in document.sources:
        yield from ((text, "") for text in (source.title, source.where, source.kind))


def _cmap(pdf: FPDF, key: str) -> dict[int, str]:
    """The characters of one of our fonts (all TrueType: fpdf2's core fonts have no cmap)."""
    font = pdf.fonts[key]
    if not isinstance(font, TTFFont):
        raise TypeError(f"the PDF font {key!r} is not a TrueType font")
    return font.cmap


def missing_characters(pdf: FPDF, document: ReportDocument) -> list[str]:
    """The characters of the document the font each is set in has no glyph for (fpdf2 drops them
    silently): code's DejaVu Sans Mono lacks Hebrew, for one, which the regular font has."""
    cmaps = {"": _cmap(pdf, FONT.lower()), "B": _cmap(pdf, FONT.lower() + "B"), MONO: _cmap(pdf, MONO.lower())}
    fallback = _cmap(pdf, CJK.lower()) if CJK.lower() in pdf.fonts else {}
    return sorted(
        {
            char
            for text, style in _texts(document)
            for char in text
            if not char.isspace() and ord(char) not in cmaps[style] and ord(char) not in fallback
        }
    )


def _cjk(char: str) -> bool:
    """A Chinese, Japanese or Korean character (by its Unicode name): what the CJK font would print."""
    return unicodedata.name(char, "").startswith(("CJK ", "HIRAGANA", "KATAKANA", "HANGUL", "BOPOMOFO", "IDEOGRAPHIC"))


def to_pdf(document: ReportDocument) -> bytes:
    pdf = _pdf()
    missing = missing_characters(pdf, document)
    if CJK_FILE.is_file() and any(map(_cjk, missing)):
        # Only then: the 5 MB collection costs a third of a second to load, and its (empty) subset
        # would be embedded in every PDF.
        pdf.add_font(CJK, "", str(CJK_FILE), collection_font_number=0)
        pdf.set_fallback_fonts([CJK], exact_match=False)  # bold headings too, in its one weight
        missing = missing_characters(pdf, document)
    if missing:
        # By code point: the font cannot show the characters themselves.
        shown = ", ".join(f"U+{ord(char):04X}" for char in missing[:MISSING_EXAMPLES])
        shown += ", …" if len(missing) > MISSING_EXAMPLES else ""
        install = (
            f" Chinese, Japanese and Korean print once Debian's {CJK_PACKAGE} font is installed."
            if not CJK_FILE.is_file() and any(map(_cjk, missing))
            else ""
        )
        document = replace(
            document,
            facts=[
                *document.facts,
                (
                    f"{len(missing)} different characters of this report are not in the PDF's font and are left out "
                    f"({shown}); the DOCX and Markdown downloads keep them.{install}"
                ),
            ],
        )
    # One internal link per source, placed on its entry when the Sources list is written.
    links = {source.number: pdf.add_link() for source in document.sources}
    pdf.set_font(FONT, "B", _HEADING_SIZES[1])
    pdf.multi_cell(0, 9, document.title, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(FONT, "", 9)
    for fact in document.facts:
        pdf.multi_cell(0, 5, fact, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(3)
    for block in document.blocks:
        if block.kind == "heading":
            size = _HEADING_SIZES[min(block.level, 6)]
            pdf.ln(2)
            pdf.set_font(FONT, "B", size)
            _write_parts(pdf, block.parts, links, size * 0.5)
            pdf.ln(size * 0.5)
        elif block.kind == "code":
            # One shaded monospace block, its lines kept (tabs as spaces: the font has no tab glyph).
            pdf.set_font(MONO, "", _CODE)
            pdf.set_fill_color(242, 242, 242)
            pdf.multi_cell(0, _CODE * 0.5, str(block.parts[0]).expandtabs(4), fill=True, new_x="LMARGIN", new_y="NEXT")
        elif block.kind == "table":
            _write_table(pdf, block, links)
        else:
            pdf.set_font(FONT, "", _BODY)
            if block.kind == "bullet":
                pdf.write(_LINE, "•  ")
            elif block.kind == "numbered":
                pdf.write(_LINE, f"{block.number}.  ")
            _write_parts(pdf, block.parts, links, _LINE)
            pdf.ln(_LINE)
        pdf.ln(1.5)
    if document.sources:
        pdf.ln(2)
        pdf.set_font(FONT, "B", _HEADING_SIZES[2])
        pdf.multi_cell(0, 8, "Sources", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font(FONT, "", _BODY)
        for source in document.sources:
            pdf.set_link(links[source.number], page=pdf.page_no(), y=pdf.get_y())
            pdf.write(_LINE, f"[{source.number}] ")
            if source.url:
                pdf.set_text_color(*LINK_RGB)
                pdf.write(_LINE, source.title, link=source.url)
                pdf.set_text_color(0, 0, 0)
            else:
                pdf.write(_LINE, source.title)
            pdf.write(_LINE, f" — {source.where} ({source.kind})")
            pdf.ln(_LINE + 1.5)
    return bytes(pdf.output())
