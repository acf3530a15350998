"""The search seam. See protocol.py for the contract."""
