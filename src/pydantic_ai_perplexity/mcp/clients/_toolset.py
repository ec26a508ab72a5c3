"""`PerplexityMCPToolset`: pydantic-ai's `MCPToolset` for this server, made safe for paid, long calls."""

from __future__ import annotations

import logging
from typing import Any, Self

from pydantic_ai import ModelRetry, RunContext, ToolFailed
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import InstructionPart
from pydantic_ai.toolsets import ToolsetTool

from ..._base.errors import ConfigurationError

__all__ = ('PerplexityMCPToolset',)

_log = logging.getLogger('pydantic_ai_perplexity.mcp')
_PAID = frozenset({'perplexity_research'})


class PerplexityMCPToolset(MCPToolset[Any]):
    """An `MCPToolset` that fails loudly when the server cannot start, and never re-runs a paid call.

    - A server that fails to start ends the agent run with a `ConfigurationError` saying why, unless `optional`:
      then it contributes no tools (one warning, until it starts again); the agent runs on with its other tools,
      and the next entry tries again.
    - A protocol-level failure of `perplexity_research` (which pydantic-ai would turn into a retry prompt)
      becomes a terminal `ToolFailed` pointing at `perplexity_research_list`, since the run may have started
      and a retry would bill a second one. Tool errors are already terminal (`tool_error_behavior='failed'`).
    """

    _down: int = 0
    _warned: bool = False
    #: Run the agent on without the tools when the server cannot start (else fail the run).
    optional: bool = False

    async def __aenter__(self) -> Self:
        try:
            entered = await super().__aenter__()
        except Exception as exc:
            if not self.optional:
                raise ConfigurationError(
                    f'The Perplexity MCP server did not start: {_reason(exc)}. Check it with '
                    '`pydantic-ai-perplexity doctor`, or pass optional=True to perplexity_mcp_toolset() to run '
                    'the agent on without research tools.'
                ) from exc
            self._down += 1
            if not self._warned:
                self._warned = True
                _log.warning('Perplexity MCP server unavailable; continuing without its tools: %s', _reason(exc))
            return self
        self._warned = False
        return entered

    async def __aexit__(self, *args: Any) -> bool | None:
        if self._down:
            self._down -= 1
            return None
        return await super().__aexit__(*args)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        if self._down:
            return {}
        try:
            return await super().get_tools(ctx)
        except Exception as exc:
            if not self.optional:
                raise ConfigurationError(
                    f'The Perplexity MCP server did not list its tools: {_reason(exc)}. Check it with '
                    '`pydantic-ai-perplexity doctor`, or pass optional=True to perplexity_mcp_toolset() to run '
                    'the agent on without research tools.'
                ) from exc
            _log.warning('Perplexity MCP server did not list its tools; continuing without them: %s', _reason(exc))
            return {}

    async def get_instructions(self, ctx: RunContext[Any]) -> InstructionPart | None:
        if self._down:
            return None
        try:
            return await super().get_instructions(ctx)
        except Exception:
            return None

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        try:
            return await super().call_tool(name, tool_args, ctx, tool)
        except ModelRetry as exc:
            if name not in _PAID:
                raise
            raise ToolFailed(
                f'{exc.message} A research run may have started anyway: call perplexity_research_list to find it '
                'before starting another.'
            ) from exc


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
