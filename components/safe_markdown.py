"""Rendering untrusted text (LLM output, web pages) in the app without letting it act.

A thin wrapper: the rules live in `engine.safe_text`, shared with the CLI and the exports, so a
report looks and behaves the same in the app and in a downloaded file. Streamlit escapes raw HTML
as well (`unsafe_allow_html` is always off here)."""

from __future__ import annotations

from engine.safe_text import escape_html, inline_text, markdown_block, one_line, prose_block, url_text

__all__ = ["escape_html", "render", "render_document", "render_source", "sanitize"]


def sanitize(text: str) -> str:
    """Markdown with raw HTML shown as text, images as links and only http(s)/mailto/# links."""
    return markdown_block(text)


def render(st_module, text: str) -> None:
    """Render untrusted Markdown safely (pass the `streamlit` module)."""
    st_module.markdown(sanitize(text), unsafe_allow_html=False)


def render_document(st_module, markdown: str) -> None:
    """Render Markdown that `engine.report` built: its untrusted pieces are sanitised there, and its
    own headings (title, sections, Sources) must stay headings, so it is not sanitised again."""
    st_module.markdown(markdown, unsafe_allow_html=False)


def render_source(st_module, title: str, where: str, snippet: str, kind: str | None = None) -> None:
    """One gathered source as a list entry: its title and address shown as text (a page titled
    `[www.who.int](https://evil.example)` must not become a link that lies about where it goes),
    the address a bare link only when it is http(s), the snippet's start as prose (a `# heading` or
    `> quote` at its start is text, not a block in the entry)."""
    line = f"- **{inline_text(title)}** — {url_text(where)}" + (f" ({inline_text(kind)})" if kind else "")
    st_module.markdown(f"{line}\n\n  {prose_block(one_line(snippet[:300]))}", unsafe_allow_html=False)
