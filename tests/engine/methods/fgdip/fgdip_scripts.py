"""Scripting helpers for the FGDIP tests: each prompt by its name (never its wording), scripted
answers that read the trajectory a prompt carries, and small readers of the stored search tree."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from engine.llm.fake import named, request_text
from engine.llm.protocol import ChatRequest
from storage.models import Node

EXTRACT = named("fgdip.extract")
GENERATE = named("fgdip.generate")
EVALUATE_STEP = named("fgdip.evaluate_step")
WRITE_ANSWER = named("fgdip.write_answer")
EVALUATE_ANSWER = named("fgdip.evaluate_answer")

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"

_ACTION = re.compile(r"^Action (\d+): (\w+)\[(.*)\]$", re.MULTILINE)
_STEPS = re.compile(r"This branch so far \((\d+) steps\)")
_CANDIDATE = re.compile(r"Candidate answer: <<<(.*?)>>>")
_SIBLING_ACTION = re.compile(r"^Action: \w+\[(.*)\]$", re.MULTILINE)


def entities(*names: str) -> dict:
    return {"entities": list(names)}


def step(action: str, argument: str, thought: str = "Scripted thought.") -> dict:
    return {"thought": thought, "action": action, "argument": argument}


def verdict(value: str, why: str = "Scripted judgement.") -> dict:
    return {"judgement": why, "verdict": value}


def judged_answer(accepted: bool, analysis: str = "") -> dict:
    return {"thought": "Scripted check.", "solves": accepted, "on_topic": accepted, "error_analysis": analysis}


# ---------------------------------------------------------------------- reading prompts


def trajectory_actions(request: ChatRequest) -> list[tuple[str, str]]:
    """(action, argument) of each step of the trajectory the prompt carries, in order."""
    return [(m.group(2), m.group(3)) for m in _ACTION.finditer(request_text(request))]


def branch_of(request: ChatRequest) -> str:
    """The argument of the branch's first action: its entity."""
    actions = trajectory_actions(request)
    return actions[0][1] if actions else ""


def last_argument(request: ChatRequest) -> str:
    actions = trajectory_actions(request)
    return actions[-1][1] if actions else ""


def steps_so_far(request: ChatRequest) -> int:
    found = _STEPS.search(request_text(request))
    return int(found.group(1)) if found else 0


def siblings_so_far(request: ChatRequest) -> list[str]:
    """The arguments of the nodes already generated at this layer."""
    text = request_text(request)
    section = text.split("Nodes already generated at this step:", 1)[-1].split("This branch so far", 1)[0]
    return _SIBLING_ACTION.findall(section)


def candidate_of(request: ChatRequest) -> str:
    found = _CANDIDATE.search(request_text(request))
    return found.group(1) if found else ""


# ---------------------------------------------------------------------- scripted responders


def verdicts_by_last_argument(table: Mapping[str, str], default: str = "sure") -> Callable[[ChatRequest], dict]:
    """The Step Evaluator: the verdict of the trajectory's last action, looked up by its argument."""
    return lambda request: verdict(table.get(last_argument(request), default))


def numbered_steps(finish_at: int = 2, answer: Callable[[ChatRequest], str] | str = "Arthur's Magazine"):
    """The Node Generator: a search named after the branch, the depth and the sibling's number until
    the branch has `finish_at` steps, then finish with `answer` (a callable reads the request)."""

    def respond(request: ChatRequest) -> dict:
        if steps_so_far(request) >= finish_at or "you must finish" in request_text(request):
            return step("finish", answer(request) if callable(answer) else answer)
        sibling = len(siblings_so_far(request)) + 1
        return step("search", f"{branch_of(request) or 'root'} d{steps_so_far(request) + 1} s{sibling}")

    return respond


def answers_by_branch(request: ChatRequest) -> str:
    """An answer that names the branch it came from."""
    return f"answer from {branch_of(request)}"


# ---------------------------------------------------------------------- reading the tree


def nodes_of(services, run_id: str, kind: str | None = None) -> list[Node]:
    return services.repo.list_nodes(run_id, kind=kind)


def explored(services, run_id: str) -> list[Node]:
    """The nodes the search took, in the order it took them."""
    taken = [
        n
        for n in nodes_of(services, run_id)
        if (n.data or {}).get("explored_order") is not None and n.parent_id is not None
    ]
    return sorted(taken, key=lambda n: n.data["explored_order"])


def argument(node: Node) -> str:
    return (node.data or {}).get("argument", "")
