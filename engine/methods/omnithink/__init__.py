"""OmniThink (seed paper 003)."""

from engine.methods.omnithink.method import OmniThinkMethod

__all__ = ["OmniThinkMethod"]
