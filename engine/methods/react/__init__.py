"""ReAct (Yao et al., 2022): the thought / action / observation loop that FGDIP's paper (seed 001)
compares against, over our searcher. See `method.py`."""

from engine.methods.react.method import ReactMethod

__all__ = ["ReactMethod"]
