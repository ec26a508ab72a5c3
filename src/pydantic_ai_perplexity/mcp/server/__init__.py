"""The MCP server: `build_mcp_server` and `serve`, loaded on first use so the stdio front stays lean.

`python -m pydantic_ai_perplexity.mcp` imports `._stdio` from here without paying for the MCP SDK.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._build import build_mcp_server, serve

__all__ = ('build_mcp_server', 'serve')


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(import_module('._build', __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
