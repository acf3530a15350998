"""The knowledge layer (MTQA, paper 004, Steps 1-2): an LLM-built knowledge graph over documents,
its key-value index, 1-2 hop expansion and knowledge units. `units.py` is the seam methods use;
`RunContext.knowledge(...)` opens one for a run. Never imports Streamlit."""
