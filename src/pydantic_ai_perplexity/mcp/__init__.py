"""Perplexity research over MCP: the server, and the configs that plug it into pydantic-deep, pydantic-ai and clients.

```python
from pydantic_ai_perplexity.mcp import perplexity_mcp_config, perplexity_mcp_toolset, build_mcp_server
```

Importing this package is cheap: each name loads its module (and the MCP SDK, pydantic-ai or pydantic-deep) on
first use, so `python -m pydantic_ai_perplexity.mcp` starts answering before any of them is imported.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .clients.config import add_to_pydantic_deep, client_snippet, perplexity_mcp_config, perplexity_mcp_toolset
    from .server._build import build_mcp_server, serve

__all__ = (
    'add_to_pydantic_deep',
    'build_mcp_server',
    'client_snippet',
    'perplexity_mcp_config',
    'perplexity_mcp_toolset',
    'serve',
)

_LAZY = {
    'build_mcp_server': '.server._build',
    'serve': '.server._build',
    'perplexity_mcp_config': '.clients.config',
    'perplexity_mcp_toolset': '.clients.config',
    'client_snippet': '.clients.config',
    'add_to_pydantic_deep': '.clients.config',
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
