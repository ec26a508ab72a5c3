"""Perplexity's Agent API as a research tool for pydantic-ai agents, MCP clients, notebooks and pipelines."""
