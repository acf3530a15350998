"""Prompts of the two baselines the papers compare against: "Standard" prompting (direct) and
vanilla retrieval-augmented generation (rag)."""

from engine.prompting import Prompt

DIRECT_ANSWER = Prompt(
    name="direct.answer",
    system=(
        "You are a careful research assistant. Today is $today. Answer from your own knowledge. "
        "Be concise and specific; if you are unsure, say what is uncertain."
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
        "answer, say so plainly and answer only what they support."
    ),
    user="Sources:\n\n$sources\n\nQuestion: $question",
)
