"""DEoT, Dual Engines of Thoughts (seed paper 000)."""

from engine.methods.deot.method import DeotMethod

__all__ = ["DeotMethod"]
