"""Thoughtmap engine: methods, LLM and search seams, runner, reports. Never imports Streamlit."""
