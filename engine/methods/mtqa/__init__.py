"""MTQA: Matrix of Thought over an LLM-built knowledge graph (seed paper 004)."""

from engine.methods.mtqa.method import MtqaMethod

__all__ = ["MtqaMethod"]
