"""Prompt templates with checked placeholders (`$name`): a missing or unexpected value is a bug
we want to see at once, not a silently wrong prompt."""

from __future__ import annotations

from dataclasses import dataclass
from string import Template

from engine.llm.protocol import Message


class PromptError(KeyError):
    pass


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    user: str

    def placeholders(self) -> set[str]:
        return set(Template(self.system).get_identifiers()) | set(Template(self.user).get_identifiers())

    def render(self, **values: object) -> list[Message]:
        expected = self.placeholders()
        missing = expected - values.keys()
        extra = values.keys() - expected
        if missing or extra:
            raise PromptError(
                f"prompt '{self.name}': missing {sorted(missing)}, unexpected {sorted(extra)}"
            )
        text = {k: str(v) for k, v in values.items()}
        return [
            Message("system", Template(self.system).substitute(text)),
            Message("user", Template(self.user).substitute(text)),
        ]
