"""Render Markdown with real renderers, the way report viewers would, and report what in the HTML
could act: tags Markdown itself does not produce, event-handler attributes, images, and links
that are not http(s)/mailto/#.

The renderers are set up permissively on purpose: raw HTML on, and markdown-it's own link filter
off (by default it drops javascript: links itself, which would hide a sanitiser that lets them
through). Python-Markdown is used bare and with `extra` (attr_list can add attributes)."""

from __future__ import annotations

from html.parser import HTMLParser

import markdown as python_markdown
from markdown_it import MarkdownIt

# What Markdown (CommonMark, GFM tables/strikethrough, Python-Markdown extra) produces by itself.
MARKDOWN_TAGS = frozenset(
    "p h1 h2 h3 h4 h5 h6 a ul ol li em strong code pre blockquote hr br del s table thead tbody tr "
    "th td dl dt dd abbr sup div".split()
)
SAFE_HREF_PREFIXES = ("http://", "https://", "mailto:", "#")
# Attributes Markdown renderers write; anything else came from the content.
MARKDOWN_ATTRIBUTES = frozenset({"href", "title", "start", "style", "id", "class", "align"})


def _markdown_it() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.validateLink = lambda url: True
    return md


RENDERERS = {
    "markdown-it (commonmark, html on)": lambda text: _markdown_it().render(text),
    "Python-Markdown": lambda text: python_markdown.markdown(text),
    "Python-Markdown extra": lambda text: python_markdown.markdown(text, extensions=["extra"]),
}


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_data(self, data):
        self.text.append(data)


def active_content(html: str) -> list[str]:
    """Everything in rendered HTML that could run, load or navigate somewhere unsafe."""
    collector = _Collector()
    collector.feed(html)
    collector.close()
    problems = []
    for tag, attrs in collector.tags:
        if tag not in MARKDOWN_TAGS:
            problems.append(f"<{tag}> tag")
        for name, value in attrs:
            if name.startswith("on") or name not in MARKDOWN_ATTRIBUTES:
                problems.append(f"{name}= attribute on <{tag}>")
            if name == "href" and not (value or "").strip().lower().startswith(SAFE_HREF_PREFIXES):
                problems.append(f"href={value!r}")
            if name == "style" and "url(" in (value or "").lower():
                problems.append(f"style={value!r}")
    return problems


def links(html: str) -> list[str]:
    collector = _Collector()
    collector.feed(html)
    return [dict(attrs).get("href") or "" for tag, attrs in collector.tags if tag == "a"]


def tag_names(html: str) -> list[str]:
    collector = _Collector()
    collector.feed(html)
    return [tag for tag, _ in collector.tags]


def visible_text(html: str) -> str:
    collector = _Collector()
    collector.feed(html)
    collector.close()
    return "".join(collector.text)


def problems_in_every_renderer(markdown_text: str) -> dict[str, list[str]]:
    """Renderer name -> what acts in its HTML; empty lists when the Markdown is inert."""
    return {name: active_content(render(markdown_text)) for name, render in RENDERERS.items()}


def assert_inert(markdown_text: str) -> None:
    found = {name: problems for name, problems in problems_in_every_renderer(markdown_text).items() if problems}
    assert not found, f"active content in the rendered Markdown: {found}\n--- Markdown:\n{markdown_text}"
