"""The report as a Word document (python-docx). Text goes in as runs of text (XML-escaped by the
library), never as markup; citations are internal hyperlinks to a bookmark on their source entry,
and a source's title links to its http(s) URL."""

from __future__ import annotations

import io

from docx import Document
from docx.document import Document as WordDocument
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.oxml.xmlchemy import BaseOxmlElement
from docx.shared import Pt
from docx.text.paragraph import Paragraph

from engine.export.document import Block, ReportDocument

LINK_COLOUR = "1F5AA6"
CODE_FONT = "Courier New"  # Word's own monospace font, on every system that opens the file


def bookmark_name(number: int) -> str:
    return f"source_{number}"


def _link_run(text: str) -> BaseOxmlElement:
    run = OxmlElement("w:r")
    properties = OxmlElement("w:rPr")
    colour = OxmlElement("w:color")
    colour.set(qn("w:val"), LINK_COLOUR)
    underline = OxmlElement("w:u")
    underline.set(qn("w:val"), "single")
    properties.extend([colour, underline])
    run.append(properties)
    text_element = OxmlElement("w:t")
    text_element.text = text
    text_element.set(qn("xml:space"), "preserve")
    run.append(text_element)
    return run


def _add_link(paragraph: Paragraph, text: str, *, anchor: str = "", url: str = "") -> None:
    """A hyperlink run: to a bookmark in the document (`anchor`) or to a web address (`url`)."""
    link = OxmlElement("w:hyperlink")
    if anchor:
        link.set(qn("w:anchor"), anchor)
    else:
        link.set(qn("r:id"), paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True))
    link.append(_link_run(text))
    paragraph._p.append(link)


def _add_bookmark(paragraph: Paragraph, name: str, bookmark_id: int) -> None:
    start, end = OxmlElement("w:bookmarkStart"), OxmlElement("w:bookmarkEnd")
    start.set(qn("w:id"), str(bookmark_id))
    start.set(qn("w:name"), name)
    end.set(qn("w:id"), str(bookmark_id))
    paragraph._p.insert(0, start)
    paragraph._p.append(end)


def _fill(paragraph: Paragraph, parts: tuple[str | int, ...], *, bold: bool = False) -> None:
    for part in parts:
        if isinstance(part, int):
            _add_link(paragraph, f"[{part}]", anchor=bookmark_name(part))
        else:
            run = paragraph.add_run(part)
            if bold:
                run.bold = True


def _add_table(doc: WordDocument, block: Block) -> None:
    """A GFM table as a Word table, its header row in bold."""
    table = doc.add_table(rows=0, cols=len(block.rows[0]))
    table.style = "Table Grid"
    for row_number, row in enumerate(block.rows):
        for cell, parts in zip(table.add_row().cells, row):
            _fill(cell.paragraphs[0], parts, bold=row_number == 0)


def to_docx(document: ReportDocument) -> bytes:
    doc = Document()
    doc.add_heading(document.title, level=1)
    for fact in document.facts:
        doc.add_paragraph(fact).runs[0].italic = True
    for block in document.blocks:
        if block.kind == "table":
            _add_table(doc, block)
            continue
        if block.kind == "code":
            # One paragraph, its lines kept (python-docx writes each "\n" as a line break), in monospace.
            run = doc.add_paragraph().add_run(str(block.parts[0]))
            run.font.name, run.font.size = CODE_FONT, Pt(9)
            continue
        if block.kind == "heading":
            paragraph = doc.add_paragraph(style=f"Heading {min(block.level, 6)}")
        elif block.kind == "bullet":
            paragraph = doc.add_paragraph(style="List Bullet")
        elif block.kind == "numbered":
            # The writer's own number, as text: Word's "List Number" would renumber every list as one.
            paragraph = doc.add_paragraph(style="List")
            paragraph.add_run(f"{block.number}. ")
        else:
            paragraph = doc.add_paragraph()
        _fill(paragraph, block.parts)
    if document.sources:
        doc.add_heading("Sources", level=2)
        for source in document.sources:
            paragraph = doc.add_paragraph()
            _add_bookmark(paragraph, bookmark_name(source.number), source.number)
            paragraph.add_run(f"[{source.number}] ")
            if source.url:
                _add_link(paragraph, source.title, url=source.url)
            else:
                paragraph.add_run(source.title)
            paragraph.add_run(f" — {source.where} ({source.kind})")
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()
