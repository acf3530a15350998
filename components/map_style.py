"""What the map's colours and line styles mean, one meaning each for every method:

* fill = the node's kind (its declared colour, variant or depth palette: `engine/contract.py`);
* border = the node's status, with a second cue that is not colour (a dashed border for pending, a
  glyph beside the node's number for the others), so colour-blind readers and a greyscale print can
  tell them apart too;
* line colour and dashes = the edge's kind.

The status borders are kept apart from every declared fill (`resembles`, checked for every
registered method in the tests), so a red or yellow fill never reads as "failed" or "running".
Selection and hover never change a colour: the frame adds a blue halo
(`components/mindmap_frontend/map.js`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.reads import NodeStatus


@dataclass(frozen=True)
class StatusStyle:
    """How one node status shows on the map and in the legend."""

    border: str  # the border colour
    glyph: str  # shown after the node's number: the cue that is not colour
    dashes: bool  # a dashed border (pending: not started yet)
    words: str  # the legend's wording


STATUS_STYLES = {
    NodeStatus.PENDING: StatusStyle("#8A8A8A", "◌", True, "pending (dashed border)"),
    NodeStatus.RUNNING: StatusStyle("#FF8C00", "▶", False, "running"),
    NodeStatus.DONE: StatusStyle("#2CA02C", "✓", False, "done"),
    NodeStatus.FAILED: StatusStyle("#D62728", "✖", False, "failed"),
    NodeStatus.PRUNED: StatusStyle("#5A5A5A", "✂", True, "pruned (faded)"),
}
UNKNOWN_STATUS = StatusStyle("#8A8A8A", "?", True, "unknown")

NEUTRAL_FILL = "#B9A8E6"  # a node whose kind the contract does not declare (or no contract)
PRUNED_FILL = "#E4E4E4"

# A fill closer than this (CIE76 ΔE in Lab; about 2 is just noticeable) to a status border would read
# as that status. The grey borders (pending, pruned) are dashed as well.
# Two colours this clear (Lab chroma) whose hues are closer than this look like the same colour.
MIN_CHROMA = 25.0
MIN_HUE_DEGREES = 25.0
MIN_FILL_BORDER_DISTANCE = 20.0


def status_style(status: str) -> StatusStyle:
    return STATUS_STYLES.get(status, UNKNOWN_STATUS)  # type: ignore[call-overload]


# --------------------------------------------------------------------------- colour arithmetic


def rgb(colour: str) -> tuple[int, int, int]:
    colour = colour.lstrip("#")
    if len(colour) == 3:
        colour = "".join(c * 2 for c in colour)
    try:
        return int(colour[0:2], 16), int(colour[2:4], 16), int(colour[4:6], 16)
    except ValueError:
        return 157, 157, 157


def is_dark(colour: str) -> bool:
    r, g, b = rgb(colour)
    return 0.299 * r + 0.587 * g + 0.114 * b < 150


def _lab(colour: str) -> tuple[float, float, float]:
    def linear(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb(colour))
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    fx, fy, fz = f(x), f(y), f(z)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def colour_distance(a: str, b: str) -> float:
    """How different two colours look (CIE76 ΔE: about 2 is just noticeable, 30 is another colour)."""
    return math.dist(_lab(a), _lab(b))


def _hue_chroma(colour: str) -> tuple[float, float]:
    _, a, b = _lab(colour)
    return math.degrees(math.atan2(b, a)) % 360, math.hypot(a, b)


def resembles(fill: str, border: str) -> bool:
    """Close in Lab, or two clear colours of nearly the same hue (a salmon fill reads as a red border
    though ΔE between them is large: lightness counts fully in ΔE, not in how people name hues)."""
    if colour_distance(fill, border) < MIN_FILL_BORDER_DISTANCE:
        return True
    (hue_a, chroma_a), (hue_b, chroma_b) = _hue_chroma(fill), _hue_chroma(border)
    apart = min(abs(hue_a - hue_b), 360 - abs(hue_a - hue_b))
    return chroma_a > MIN_CHROMA and chroma_b > MIN_CHROMA and apart < MIN_HUE_DEGREES


# Names for the legend's words: the nearest of these describes a declared colour.
_NAMED_COLOURS = (
    ("dark blue", "#2F4B7C"),
    ("blue", "#4C78A8"),
    ("light blue", "#9ECAE9"),
    ("pale blue", "#C6DBEF"),
    ("teal", "#72B7B2"),
    ("sea green", "#16A085"),
    ("green", "#54A24B"),
    ("dark green", "#1E7B34"),
    ("red", "#E45756"),
    ("dark red", "#A93226"),
    ("pink", "#FF9DA6"),
    ("magenta", "#CE6DBD"),
    ("yellow", "#F2B701"),
    ("orange", "#F58518"),
    ("brown", "#9D755D"),
    ("purple", "#8E44AD"),
    ("violet", "#9467BD"),
    ("lilac", "#B279A2"),
    ("grey", "#9D9D9D"),
    ("light grey", "#DDDDDD"),
    ("dark grey", "#555555"),
    ("black", "#222222"),
    ("white", "#FFFFFF"),
)


def colour_name(colour: str) -> str:
    """A declared colour in words, for the legend ("#8E44AD" -> "purple")."""
    return min(_NAMED_COLOURS, key=lambda item: colour_distance(colour, item[1]))[0]
