"""Rendering untrusted text (LLM output, web pages) as Markdown without letting it act.

Streamlit escapes raw HTML when `unsafe_allow_html` is off (always, here). On top of that, links
whose scheme is not http(s)/mailto are disarmed and images are turned into plain links, so no
content can run script or load a tracking pixel."""

from __future__ import annotations

import html
import re

_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)]*)\)")
_LINK = re.compile(r"\[([^\]]*)\]\(\s*([^)\s]*)([^)]*)\)")
_SAFE_SCHEMES = ("http://", "https://", "mailto:", "#")


def sanitize(text: str) -> str:
    """Markdown with images as links and only http(s)/mailto link targets."""
    text = _IMAGE.sub(lambda m: f"[image: {m.group(1) or 'untitled'}]({m.group(2)})", text)

    def link(match: re.Match[str]) -> str:
        label, target = match.group(1), match.group(2)
        if target.lower().startswith(_SAFE_SCHEMES):
            return match.group(0)
        return f"{label} (link removed: {html.escape(target[:40])})"

    return _LINK.sub(link, text)


def escape_html(text: str) -> str:
    """For places that would interpret HTML (e.g. the mind map's hover titles)."""
    return html.escape(text, quote=True)


def render(st_module, text: str) -> None:
    """Render untrusted Markdown safely (pass the `streamlit` module)."""
    st_module.markdown(sanitize(text), unsafe_allow_html=False)
