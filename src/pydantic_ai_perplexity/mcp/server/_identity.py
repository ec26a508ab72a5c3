"""Who the MCP server is, said once: the name, title, description, website and icon that `initialize` answers
with (`serverInfo`), the HTTP server's card (`/.well-known/mcp/server-card.json`) shows, and the MCP Registry's
`server.json` carries (`tests/mcp/test_registry.py` keeps that file, `pyproject.toml` and this module equal).

Standard library only: the stdio front and the card read it without importing the MCP SDK.
"""

from __future__ import annotations

import base64
import functools
from pathlib import Path
from typing import Any

from ..._base.version import __version__

__all__ = (
    'DESCRIPTION',
    'ICON_FILE',
    'PACKAGE',
    'REGISTRY_NAME',
    'SERVER_NAME',
    'TITLE',
    'WEBSITE',
    'icon_data_uri',
    'icons',
    'implementation',
)

#: `serverInfo.name`: what clients show and key the server's tools by.
SERVER_NAME = 'perplexity'
#: The server's human-readable name (`serverInfo.title`).
TITLE = 'Perplexity research'
#: The package's one-line description (pyproject's `description`; the MCP Registry takes at most 100 characters).
DESCRIPTION = "Perplexity's Agent API as a cited research tool for pydantic-ai agents, MCP clients and notebooks."
#: The project's home (pyproject's Homepage): `serverInfo.websiteUrl` and the registry entry's repository.
WEBSITE = 'https://github.com/pydantic-ai-perplexity/pydantic-ai-perplexity'
#: The package on PyPI that runs the server.
PACKAGE = 'pydantic-ai-perplexity'
#: The MCP Registry's name for the server: the GitHub namespace of `WEBSITE` proves ownership, and the README's
#: `mcp-name:` line says it to the registry through the PyPI page.
REGISTRY_NAME = 'io.github.pydantic-ai-perplexity/pydantic-ai-perplexity'
#: The icon (an SVG drawn for this project), shipped in the package.
ICON_FILE = Path(__file__).with_name('icon.svg')


@functools.cache
def icon_data_uri() -> str:
    """The icon as a `data:image/svg+xml;base64,...` URI: shown without the client fetching anything."""
    return 'data:image/svg+xml;base64,' + base64.b64encode(ICON_FILE.read_bytes()).decode('ascii')


def icons() -> list[dict[str, Any]]:
    """The `icons` of `serverInfo` and the card (the 2025-11-25 `Icon` shape)."""
    return [{'src': icon_data_uri(), 'mimeType': 'image/svg+xml', 'sizes': ['any']}]


def implementation() -> dict[str, Any]:
    """`serverInfo` as `initialize` answers it from 2025-11-25 on: name, title, version, description, website, icons."""
    return {
        'name': SERVER_NAME,
        'title': TITLE,
        'version': __version__,
        'description': DESCRIPTION,
        'websiteUrl': WEBSITE,
        'icons': icons(),
    }
