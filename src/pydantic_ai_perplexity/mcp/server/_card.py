"""The server card (SEP-2127, at `/.well-known/mcp/server-card.json`): what the HTTP server is, before connecting.

Public like `/healthz` (no token) and free of secrets: the identity `initialize` gives (`_identity`), the
Streamable HTTP endpoint as the client reached it, the protocol versions, the capabilities and a summary of the
tools (name, title, description). Nothing about the caller, the tokens, the ledger or the upstream API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _identity as identity

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ('CARD_PATH', 'server_card')

CARD_PATH = '/.well-known/mcp/server-card.json'


async def server_card(server: MCPServer[Any], endpoint: str, *, token_required: bool) -> dict[str, Any]:
    """The card of `server`, whose Streamable HTTP endpoint is `endpoint` (an absolute URL); `token_required`
    says whether a call needs a bearer token (never which)."""
    from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

    from ._sdk import lowlevel

    runner = lowlevel(server)
    capabilities: dict[str, Any] = {}
    if runner is not None:
        options = runner.create_initialization_options()
        capabilities = options.capabilities.model_dump(by_alias=True, mode='json', exclude_none=True)
    tools = [
        {'name': t.name, **({'title': t.title} if t.title else {}), 'description': t.description or ''}
        for t in await server.list_tools()
    ]
    return {
        'name': identity.REGISTRY_NAME,
        'title': identity.TITLE,
        'description': identity.DESCRIPTION,
        'version': identity.implementation()['version'],
        'websiteUrl': identity.WEBSITE,
        'icons': identity.icons(),
        'repository': {'url': identity.WEBSITE, 'source': 'github'},
        'serverInfo': identity.implementation(),
        'remotes': [{'type': 'streamable-http', 'url': endpoint}],
        'protocolVersions': list(SUPPORTED_PROTOCOL_VERSIONS),
        'capabilities': capabilities,
        'authentication': {'required': token_required, 'schemes': ['bearer'] if token_required else []},
        'tools': tools,
    }
