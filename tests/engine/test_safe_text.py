"""engine.safe_text: untrusted Markdown, inline text and URLs render inert with real Markdown
renderers, every known way around a link filter is covered, and terminal text keeps no control."""

from __future__ import annotations

import json

import pytest

from components import safe_markdown
from engine.safe_text import (
    code_span,
    inline_text,
    json_for_terminal,
    markdown_block,
    one_line,
    terminal_text,
    url_text,
)
from tests.support.markdown_rendering import (
    RENDERERS,
    assert_inert,
    links,
    problems_in_every_renderer,
    tag_names,
    visible_text,
)

# ---------------------------------------------------------------- Markdown blocks

BYPASSES = {
    "script": "<script>alert(1)</script>",
    "script inline": "Text <script>alert(1)</script> more",
    "img onerror": '<img src=x onerror="alert(1)">',
    "iframe": '<iframe src="https://evil.example/"></iframe>',
    "svg onload": "<svg onload=alert(1)>",
    "html comment and style": "<!-- x --><style>body{background:url(https://evil.example/t)}</style>",
    "autolink javascript": "<javascript:alert(1)>",
    "autolink http kept as text": "<https://evil.example/>",
    "javascript link": "[x](javascript:alert(1))",
    "javascript link upper case": "[x](JaVaScRiPt:alert(1))",
    "javascript link leading spaces": "[x](   javascript:alert(1))",
    "javascript link next line": "[x](\njavascript:alert(1))",
    "nested brackets": "[[x]](javascript:alert(1))",
    "deeply nested brackets": "[a [b [c]] d](javascript:alert(1))",
    "entity scheme": "[x](&#106;avascript:alert(1))",
    "hex entity scheme": "[x](&#x6A;avascript:alert(1))",
    "named entity colon": "[x](javascript&colon;alert(1))",
    "angle destination": "[x](<javascript:alert(1)>)",
    "backslash in scheme": "[x](java\\script:alert(1))",
    "vbscript": "[x](vbscript:msgbox(1))",
    "data url link": "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "protocol relative": "[x](//evil.example/)",
    "reference definition": "[x]: javascript:alert(1)\n\n[x]",
    "reference definition next line": "[x]:\n  javascript:alert(1)\n\n[x][]",
    "reference definition angle": "[x]: <javascript:alert(1)>\n\n[x]",
    "reference definition in a quote": "> [x]: javascript:alert(1)\n>\n> [x]",
    "reference definition in a list": "- [x]: javascript:alert(1)\n- [x]",
    "collapsed reference": "[x][y]\n\n[y]: data:text/html,hi",
    "remote image": "![pixel](https://evil.example/t.png)",
    "remote image with title": '![pixel](https://evil.example/t.png "t")',
    "reference image": "![pixel][p]\n\n[p]: https://evil.example/t.png",
    "data image": "![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "image after backslash": "\\![x](https://evil.example/t.png)",
    "image after escaped backslash": "\\\\![x](https://evil.example/t.png)",
    "image inside link": "[![x](https://evil.example/t.png)](https://ok.example/)",
    "attr_list onclick": 'Paragraph\n{: onclick="alert(1)" }',
    "attr_list on a link": '[a](https://ok.example/){: onmouseover="alert(1)"}',
    "attr_list style url": 'Paragraph\n{: style="background:url(https://evil.example/t)" }',
    "html block": "<div>\n\n*md*\n\n</div>\n<details open ontoggle=alert(1)>",
    "tag split by newline": "<a\nhref=javascript:alert(1)>x</a>",
    "nul inside tag": "<scr\x00ipt>alert(1)</script>",
}


# Inert as written; kept as guards: a careless rule (inserting a backslash) would make them live.
INERT_AS_WRITTEN = {"autolink http kept as text", "image after backslash", "nul inside tag"}


@pytest.mark.parametrize("name", BYPASSES)
def test_every_bypass_renders_inert_in_every_renderer(name):
    payload = BYPASSES[name]
    # Raw, each payload is live in at least one renderer: the test tests something.
    assert any(problems_in_every_renderer(payload).values()) != (name in INERT_AS_WRITTEN), payload
    assert_inert(markdown_block(payload))


def test_the_whole_list_at_once_is_inert():
    assert_inert(markdown_block("\n\n".join(BYPASSES.values())))


def test_safe_links_lists_and_emphasis_survive_and_a_report_keeps_its_headings_below_ours():
    text = (
        "## Findings\n\n- **Bold** and *italic* [a site](https://example.org/a_(b)) and "
        "[mail](mailto:a@example.org) and [top](#top)\n1. `code < 3`\n\n> quote [1]"
    )
    for name, render in RENDERERS.items():
        html = render(markdown_block(text))
        assert "h2" not in tag_names(html) and "## Findings" in visible_text(html), name
        assert "<h3>Findings</h3>" in render(markdown_block(text, heading_floor=3)), name
        assert "<strong>Bold</strong>" in html and "<li>" in html, name
        assert links(html) == ["https://example.org/a_(b)", "mailto:a@example.org", "#top"], (name, html)
        assert "<blockquote>" in html and "[1]" in html, name


def test_disarmed_constructs_stay_readable_as_text():
    html = RENDERERS["markdown-it (commonmark, html on)"](
        markdown_block("Look: <b>bold?</b> [x](javascript:alert(1)) ![pixel](https://evil.example/t.png)")
    )
    text = visible_text(html)
    assert "<b>bold?</b>" in text
    assert "[x](javascript:alert(1))" in text
    # The image became a link to where it pointed, so nothing loads by itself.
    assert links(html) == ["https://evil.example/t.png"] and "!" in text


def test_our_citation_numbers_cannot_be_redefined():
    # `[1]: https://elsewhere` would make every citation [1] of the report a link to anywhere.
    text = markdown_block("A claim [1].\n\n[1]: https://evil.example/")
    for name, render in RENDERERS.items():
        assert links(render(text)) == [], name
    assert "A claim [1]." in text


def test_markdown_block_is_idempotent():
    once = markdown_block("\n".join(BYPASSES.values()))
    assert markdown_block(once) == once


def test_the_app_wrapper_uses_the_same_rules():
    payload = "\n\n".join(BYPASSES.values())
    assert safe_markdown.sanitize(payload) == markdown_block(payload)
    assert safe_markdown.escape_html('<b a="1">&\'') == "&lt;b a=&quot;1&quot;&gt;&amp;&#x27;"


# ---------------------------------------------------------------- inline text, URLs, code

INLINE_PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[x](javascript:alert(1))",
    "[[x]](javascript:alert(1))",
    "![p](https://evil.example/t.png)",
    "Title\n\n# New heading\n\n<iframe src=https://evil.example>",
    "Title\n[x]: javascript:alert(1)\n[x]",
    "a | b\n--- | ---",
    "`code` *em* _em_ \\[not a link\\](javascript:alert(1))",
    '{: onclick="alert(1)"}',
]


@pytest.mark.parametrize("payload", INLINE_PAYLOADS)
@pytest.mark.parametrize("template", ["# {}", "*Question:* {}  ", "[1] {} — https://example.org/ (corpus)  "])
def test_inline_text_is_inert_and_shows_the_text_on_one_line(payload, template):
    line = template.format(inline_text(payload))
    assert "\n" not in inline_text(payload)
    assert_inert(line)
    for name, render in RENDERERS.items():
        html = render(line)
        # Exactly the elements of the line around it: the text added no heading, link, code, emphasis.
        assert tag_names(html) == tag_names(render(template.format("plain"))), (name, html)
        assert " ".join(payload.split()) in visible_text(html), (name, html)


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JAVASCRIPT:alert(1)",
        " javascript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:x",
        "file:///etc/passwd",
        "https://a/[x](javascript:alert(1))",
        "https://a/<script>",
        "https://a/`b`c",
        "https://a/ b\n# heading",
    ],
)
def test_url_text_is_a_safe_link_or_inert_text(url):
    line = f"[1] Title — {url_text(url)} (corpus)"
    assert_inert(line)
    for render in RENDERERS.values():
        assert all(href.startswith("https://") for href in links(render(line)))
    if not url.strip().lower().startswith("https://"):
        assert links(RENDERERS["markdown-it (commonmark, html on)"](line)) == []


def test_url_text_keeps_ordinary_web_urls_as_they_are():
    url = "https://en.wikipedia.org/wiki/Mercury_(planet)?a=1&b=2#History"
    assert url_text(url) == url


@pytest.mark.parametrize(
    "ref", ["hotpotqa/123", "/tmp/notes/a file.txt::7", "a`b``c", "<script>alert(1)</script>", "`", " x "]
)
def test_code_span_shows_the_text_verbatim(ref):
    line = f"document {code_span(ref)}"
    assert_inert(line)
    html = RENDERERS["markdown-it (commonmark, html on)"](line)
    assert visible_text(html).strip() == f"document {ref.strip()}"


# ---------------------------------------------------------------- terminals

HOSTILE = (
    "clear\x1b[2J\x1b[H screen"
    " \x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\"
    " \x1b]0;window title\x07"
    " \x1bP1$r\x1b\\"
    " \x9b31mred\x9b0m"
    " nul\x00 bell\x07 bs\x08 del\x7f c1\x85"
    " \u202eevil\u202c \u2066iso\u2069"
    " cr\rover"
    " lone\ud800"
)


def test_terminal_text_removes_every_control_but_newline_and_tab():
    cleaned = terminal_text(HOSTILE + "\nline two\tcolumn")
    assert cleaned.endswith("\nline two\tcolumn")
    for char in cleaned:
        code = ord(char)
        assert char in "\n\t" or (code >= 0x20 and not 0x7F <= code <= 0x9F), repr(char)
        assert not (0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069 or 0xD800 <= code <= 0xDFFF), repr(char)
    assert "evil.example" not in cleaned and "window title" not in cleaned
    assert "click me" in cleaned and "clear" in cleaned and "screen" in cleaned and "red" in cleaned
    cleaned.encode("utf-8")  # printable, never a UnicodeEncodeError


def test_one_line_collapses_whitespace():
    assert one_line("a\n\n b\t\x1b[31mc\r\nd") == "a b c d"


def test_markdown_block_and_inline_text_strip_terminal_controls_too():
    for cleaned in (markdown_block(HOSTILE), inline_text(HOSTILE)):
        assert "\x1b" not in cleaned and "\x00" not in cleaned and "\x9b" not in cleaned and "\u202e" not in cleaned


def test_json_for_terminal_keeps_the_value():
    value = {"label": HOSTILE, "plain": "ok é"}
    text = json_for_terminal(json.dumps(value, ensure_ascii=False))
    assert json.loads(text) == json.loads(json.dumps(value))
    assert terminal_text(text) == text
    assert "ok é" in text


@pytest.mark.parametrize(
    "hostile",
    [
        "{" * 100_000 + "=",
        "[" * 50_000 + "]" * 50_000 + ":" * 10,
        "](" * 50_000,
        "]:" * 50_000 + "[1",
        "\x1b]" + "x" * 100_000,
        "<" * 100_000,
    ],
)
def test_pathological_input_comes_out_inert(hostile):
    # Model output and corpus text are long and adversarial. That the sanitisers stay linear on
    # these shapes is measured by benchmarks/bench_safe_text.py (docs/benchmarks.md), not timed here.
    block, inline, terminal = markdown_block(hostile), inline_text(hostile), terminal_text(hostile)
    for text in (block, inline, terminal):
        assert "\x1b" not in text
        assert len(text) <= 6 * len(hostile)  # an entity per character at most, never a blow-up
    assert "<" not in block and "<" not in inline
    assert_inert(markdown_block(hostile[:2_000]))  # a prefix: the renderers' own cost is not ours
    assert_inert(inline_text(hostile[:2_000]))


# ---------------------------------------------------------------- headings (issue 12, finding 10)

HEADINGS = {
    "atx": "# Giant heading\ntext",
    "atx deep": "###### small heading",
    "atx indented": "   ## indented",
    "setext equals": "A line\n=====",
    "setext dashes": "A line\n---",
    "setext with spaces": "A line\n  ===   ",
    "in a list item": "- concept one\n- # heading in a list",
    "continuation of a list item": "- concept\n\n  # heading under the item",
    "nested list": "- outer\n  - inner\n    ## nested heading",
    "ordered list": "1. first\n2) ## second",
    "block quote": "> # quoted heading",
    "quote in a list": "- > ### quoted in a list",
    "setext in a list": "- item\n  title\n  ---",
    "setext in a quote": "> title\n> ===",
}


@pytest.mark.parametrize("text", HEADINGS.values(), ids=HEADINGS.keys())
def test_untrusted_text_cannot_make_a_heading(text):
    for name, render in RENDERERS.items():
        html = render(markdown_block(text))
        assert not {"h1", "h2", "h3", "h4", "h5", "h6"} & set(tag_names(html)), (name, html)


def test_a_disarmed_heading_keeps_its_words_as_text():
    html = RENDERERS["markdown-it (commonmark, html on)"](markdown_block("# Giant\n\nline\n==="))
    assert "# Giant" in visible_text(html) and "===" in visible_text(html)


def test_heading_floor_keeps_document_headings_below_our_own_and_never_inside_lists():
    text = "# Top\n## Second\n#### Fourth\n- # in a list\nline\n==="
    for name, render in RENDERERS.items():
        html = render(markdown_block(text, heading_floor=3))
        tags = tag_names(html)
        assert "h1" not in tags and "h2" not in tags, (name, html)
        assert tags.count("h3") == 2 and tags.count("h4") == 1, (name, html)


def test_images_nested_in_lists_are_links_and_html_is_text():
    text = "- item\n  - ![pixel](https://evil.example/t.png)\n  - <img src=x onerror=alert(1)>"
    for name, render in RENDERERS.items():
        html = render(markdown_block(text))
        assert "img" not in tag_names(html), (name, html)
        assert links(html) == ["https://evil.example/t.png"], (name, html)


def test_titles_and_map_labels_cut_at_a_word_but_never_down_to_the_first_word():
    from components.mindmap import short_label
    from engine.report import TITLE_CHARS, report_title
    from engine.safe_text import cut_at_word

    assert cut_at_word("Who designed the Eiffel Tower in Paris", 20) == "Who designed the"
    assert cut_at_word("short", 20) == "short"
    # One long word after a short one (a pasted URL, a word without spaces): cut inside it.
    long_word = "Is " + "x" * 500
    assert report_title(long_word) == long_word[:TITLE_CHARS] + " …"
    assert short_label(long_word, 42) == long_word[:42] + "…"
    assert report_title("word " * 60).endswith("word …") and len(report_title("word " * 60)) <= TITLE_CHARS + 2


def test_a_padded_or_multiline_numeric_label_cannot_take_over_our_citations():
    from engine.citation_links import link_citations

    for definition in (
        "[1" + " " * 24 + "]: https://evil.example",
        "[\n1\n]: https://evil.example",
        "[ " + " " * 900 + "1]: https://evil.example",
    ):
        body = link_citations(markdown_block(f"Okapis live in Congo [1].\n\n{definition}"), {1})
        for name, render in RENDERERS.items():
            html = render(body)
            assert links(html) == ["#source-1"], (name, definition[:12], html)
    # A reference link of words keeps working.
    html = RENDERERS["markdown-it (commonmark, html on)"](markdown_block("See [docs].\n\n[docs]: https://ok.example"))
    assert links(html) == ["https://ok.example"]


def test_a_report_heading_cannot_take_the_anchor_of_a_source_entry():
    # A report body is a document whose own headings are kept; one that would get the id of our
    # "Source 1" entry (or a node's "Node 5 source 1") would take the citation's jump.
    body = markdown_block(
        "# Source 1\nFake entry: https://phish.example\n\n# Node 5 source 2 #\n\n# Sources\n\n## Findings\n",
        heading_floor=2,
    )
    html = RENDERERS["markdown-it (commonmark, html on)"](body)
    # "Sources" takes no entry's anchor, but it is the name of the section the report frame adds
    # below the body: a body heading of that name would start a forged one, so its words stay as a
    # line of text (not "# Sources" shown literally).
    assert tag_names(html).count("h2") == 1 and "Source 1" in visible_text(html)
    assert "## Findings" in body and "## Source 1" not in body and "## Sources" not in body
    assert "<p>Sources</p>" in html


def test_inline_text_cannot_open_a_block_at_the_start_of_a_line():
    for title in ("# Big", "## Big", "#Big", "- item", "+ item", "1. item", "12) item", "---", "===", "- - -"):
        for name, render in RENDERERS.items():
            html = render("- " + inline_text(title))
            assert tag_names(html) == ["ul", "li"], (name, title, html)
            assert visible_text(html).strip() == title, (name, title, html)
    # Ordinary titles are left as they are.
    for title in ("C# in depth", "-5 degrees", "1.5 million", "Hello - world"):
        assert inline_text(title) == title
    # Python-Markdown makes a heading of `#hashtag` at a line's start: it is written as a reference.
    assert inline_text("#hashtag") == "&#35;hashtag"


def test_a_source_title_is_text_not_a_link_that_lies_about_where_it_goes():
    shown = []

    class St:
        @staticmethod
        def markdown(text, unsafe_allow_html=False):
            assert unsafe_allow_html is False
            shown.append(text)

    safe_markdown.render_source(
        St,
        "[www.who.int](https://evil.example)",
        "https://example.org/okapi",
        "The okapi ![x](https://t.example/p.png) lives in [Congo](javascript:alert(1)).",
        "web",
    )
    safe_markdown.render_source(St, "Local notes", "corpus:notes.txt#2", "# Heading\nplain")
    for text in shown:
        assert_inert(text)
    html = RENDERERS["markdown-it (commonmark, html on)"](shown[0])
    assert "evil.example" not in " ".join(links(html)) and "[www.who.int](https://evil.example)" in visible_text(html)
    assert "<h1>" not in RENDERERS["markdown-it (commonmark, html on)"](shown[1])
