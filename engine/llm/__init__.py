"""The LLM seam. See protocol.py for the contract."""
