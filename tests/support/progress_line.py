"""Reads the Explore page's one-line progress header (`components/run_view.progress_line`) as the
fields a person sees: status, nodes done and total, active and wall time, tokens, cost, the run's model."""

from __future__ import annotations

import re

_LINE = re.compile(
    r"^(?P<status>\w+) · (?P<done>\d+) / (?P<total>\d+) nodes done(?: \((?P<ended>[^)]*)\))? · "
    r"(?:not started|time not recorded|(?:active (?P<active>[\d:]+) \(wall (?P<wall>[\d:]+)\))|wall (?P<wall_only>[\d:]+)) · "
    r"(?P<tokens>[\d,]+) tokens · \$(?P<cost>[\d.]+)(?: · (?P<model>.+))?$"
)


def parse_progress(text: str) -> dict[str, str] | None:
    """The fields of a progress line (Markdown escapes removed), or None if it is not one."""
    match = _LINE.match(text.replace("\\", "").strip())
    if match is None:
        return None
    fields = {k: v for k, v in match.groupdict().items() if v is not None}
    fields["Status"] = fields["status"]
    fields["Nodes done"] = f"{fields['done']} / {fields['total']}"
    fields["Tokens"] = fields["tokens"]
    fields["Cost"] = f"${fields['cost']}"
    return fields


def progress_of(at) -> dict[str, str]:
    """The progress fields an AppTest shows (AssertionError when there is no progress line)."""
    for element in at.markdown:
        fields = parse_progress(element.value)
        if fields is not None:
            return fields
    raise AssertionError("no progress line: " + " | ".join(m.value[:80] for m in at.markdown))
