"""The Python API as the README shows it (its example is executed here, as written), and its
events: resumable by cursor, the same nodes as stored, a clear error for what cannot be done."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from engine.service import BadRequest, Conflict, NotFound, Thoughtmap
from tests.support.fixtures_corpus import bundled_corpus, prebuilt_corpus_home  # noqa: F401

README = Path(__file__).resolve().parents[3] / "README.md"


def _readme_example() -> str:
    text = README.read_text(encoding="utf-8")
    after = text.split("**Python.**", 1)[1]
    match = re.search(r"```python\n(.*?)```", after, re.S)
    assert match, "README's Python example is missing"
    return match.group(1)


def test_the_readme_example_runs_as_written(prebuilt_corpus_home) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_readme_example(), "README.md", "exec"), {"__name__": "readme"})  # noqa: S102
    said = out.getvalue()
    assert re.search(r"^done What caused the decline of the Roman Empire\?$", said, re.M), said
    assert "[[1]](#source-1)" in said or "source-1" in said


def test_events_resume_from_a_cursor_and_end_with_the_stored_graph(prebuilt_corpus_home) -> None:
    with Thoughtmap(llm="fake") as tm:
        run = tm.start("What caused the decline of the Roman Empire?", method="deot", params={"max_nodes": 3})
        first = []
        for event in tm.events(run.id):
            first.append(event)
            if sum(e.kind == "log" for e in first) == 3:
                break
        rest = list(tm.events(run.id, after=first[-1].cursor))
        assert rest[-1].kind == "end" and rest[-1].data["status"] == "done"
        everything = list(tm.events(run.id))
        logs = [e.data["id"] for e in first + rest if e.kind == "log"]
        assert logs == [e.data["id"] for e in everything if e.kind == "log"] and len(logs) == len(set(logs))
        nodes = {e.data["id"]: e.data["status"] for e in first + rest if e.kind == "node"}
        assert nodes == {n["id"]: n["status"] for n in tm.graph(run.id)["nodes"]}
        assert tm.status(run.id)["progress"] == {"done": len(nodes)}
        assert tm.feed.watched() == 0  # a finished run's watch is not kept

        tm.steer(run.id, "ask", {"node_id": 1, "question": "How did the plague of 165 matter?"})
        reopened = list(tm.events(run.id, after=rest[-1].cursor))
        assert reopened[-1].kind == "end" and reopened[-1].data["status"] == "done"
        assert any(
            e.kind == "node" and e.data["label"] == "How did the plague of 165 matter?" and e.data["status"] == "done"
            for e in reopened
        )


def test_what_cannot_be_done_is_said(prebuilt_corpus_home) -> None:
    with Thoughtmap(llm="fake") as tm:
        with pytest.raises(BadRequest, match="unknown method 'nope'"):
            tm.start("Why?", method="nope")
        with pytest.raises(BadRequest, match="unknown parameter"):
            tm.start("Why?", method="rag", params={"top": 3})
        with pytest.raises(BadRequest, match="max_cost must be a positive"):
            tm.start("Why?", method="rag", max_cost=float("nan"))
        with pytest.raises(BadRequest, match="unknown report format"):
            tm.report("x", "odt")
        with pytest.raises(NotFound, match="nope"):
            tm.status("nope")
        with pytest.raises(NotFound):
            list(tm.events("nope"))
        assert tm.runs() == []  # nothing stored half-way
        run = tm.start("Why is the sky blue?", method="rag")
        tm.wait(run.id)
        with pytest.raises(Conflict, match="already done"):
            tm.stop(run.id)
        with pytest.raises(BadRequest, match="has no command 'fly'"):
            tm.steer(run.id, "fly")
