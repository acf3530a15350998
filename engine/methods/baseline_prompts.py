"""Prompts of the two baselines the papers compare against: "Standard" prompting (direct) and
vanilla retrieval-augmented generation (rag)."""

from engine.prompting import Prompt

DIRECT_ANSWER = Prompt(
    name="direct.answer",
    system=(
        "You are a careful research assistant. Today is $today. Answer from your own knowledge. "
        "Be concise and specific; if you are unsure, say what is uncertain.$answer_form"
    ),
    user="Question: $question",
)

RAG_ANSWER = Prompt(
    name="rag.answer",
    system=(
        "You are a careful research assistant. Today is $today. Answer the question using the "
        "numbered sources below. After every claim taken from a source, cite it with its number in "
        "square brackets, like [2]. Cite only the numbers listed, and only a source that supports the "
        "claim: a source about something else is not evidence. If the sources do not contain the "
        "answer, say so plainly and answer only what they support.$answer_form"
    ),
    user="Sources:\n\n$sources\n\nQuestion: $question",
)


# Appended to a baseline's instructions in yes/no mode (`yes_no`); nothing otherwise, so the
# default prompts are what they were.
# A baseline that may not commit answers "No relevant source was found": no answer, where the papers'
# baselines give one.
YES_NO_FORM = (
    " This question is answered yes or no: the answer's first word is 'Yes' or 'No' (the likelier "
    "one when nothing settles it), followed by the reason in a sentence or two."
)


def answer_form(yes_no: bool) -> str:
    return YES_NO_FORM if yes_no else ""
