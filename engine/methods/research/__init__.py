"""The deep research agent (seed paper 002, the MMU-RAG winner): search → rerank → summarize with
citation markers → iterate; a long-form answer whose every citation is checked."""

from engine.methods.research.method import ResearchMethod

__all__ = ["ResearchMethod"]
