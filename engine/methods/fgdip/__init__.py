"""FGDIP (seed paper 001): feedback-guided dynamic interactive planning."""

from engine.methods.fgdip.method import FgdipMethod

__all__ = ["FgdipMethod"]
