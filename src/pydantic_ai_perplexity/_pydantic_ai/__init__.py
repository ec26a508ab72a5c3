"""The pydantic-ai way in: the toolset, the capabilities and the pydantic-deep subagent."""
