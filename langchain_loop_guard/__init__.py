"""Stop runaway LLM-agent loops in LangChain and LangGraph before they burn tokens."""
