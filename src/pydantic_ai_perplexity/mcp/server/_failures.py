"""What an MCP client reads for a failed call: shared by the tool calls (`_tools.py`) and the task calls."""

from __future__ import annotations

from ..._base.errors import PerplexityError

__all__ = ('error_text',)

_MASKED = (
    'Research failed: an internal error occurred in the Perplexity MCP server (the details are in its log). '
    'Any run already started goes on: see perplexity_research_list.'
)


def error_text(exc: Exception) -> str:
    """The text a model reads for a failed call: the toolset's words, never a traceback, key or raw upstream body."""
    if isinstance(exc, PerplexityError):
        from ..._present.model_text import error_for_model

        return error_for_model(exc)[0]
    return _MASKED
