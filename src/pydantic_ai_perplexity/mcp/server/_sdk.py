"""The MCP SDK internals this server relies on, reached in one place, each with a safe answer if an upgrade moves it.

- `lowlevel(server)`: an `MCPServer`'s low-level runner (`_lowlevel_server`; the SDK's own `Client` reaches it the
  same way), which the stdio front drives with its own streams. None if it moved: stdio then falls back to the
  SDK's own stdio server.
- `cancel_requested(session)`: whether the client sent `notifications/cancelled` for the call, from the request's
  dispatch context (`_request_outbound.cancel_requested`). False if it moved: the run then goes on (it is never
  cancelled by mistake).
- `answer_errors_cleanly(server)`: a middleware on the runner's (provisional) `middleware` list that turns what the
  SDK would answer with code 0 and a traceback on stderr into a proper JSON-RPC error. Skipped if the list moved.
- `installed_sdk()`: the installed `mcp` and `mcp-types` versions, read without importing the SDK, so the stdio
  front can tell whether its handshake snapshot was made with this SDK.

`tests/mcp/test_sdk.py` checks each of them against the installed SDK, so an upgrade that moves one fails there.
"""

from __future__ import annotations

import logging
import os
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.mcpserver import MCPServer

__all__ = ('SDK_DISTRIBUTIONS', 'answer_errors_cleanly', 'cancel_requested', 'installed_sdk', 'lowlevel', 'problems')

_log = logging.getLogger('pydantic_ai_perplexity.mcp')

#: The distributions whose versions decide what the SDK answers to the handshake (import name, distribution).
SDK_DISTRIBUTIONS = (('mcp', 'mcp'), ('mcp_types', 'mcp-types'))
_MAX_MESSAGE_CHARS = 200


def installed_sdk() -> dict[str, str] | None:
    """`{"mcp": version, "mcp-types": version}` from the installed dist-info folders, or None if unclear.

    A few milliseconds, without importing the SDK (which takes most of a second) or `importlib.metadata`.
    """
    versions: dict[str, str] = {}
    for module, distribution in SDK_DISTRIBUTIONS:
        try:
            spec = find_spec(module)
        except (ImportError, ValueError):
            return None
        if spec is None or spec.origin is None:
            return None
        folder = os.path.dirname(os.path.dirname(spec.origin))
        prefix = distribution.replace('-', '_') + '-'
        try:
            found = [n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith('.dist-info')]
        except OSError:
            return None
        if len(found) != 1:  # none (an unusual layout) or several (a broken install): not sure, so no snapshot
            return None
        versions[distribution] = found[0][len(prefix) : -len('.dist-info')]
    return versions


def lowlevel(server: MCPServer[Any]) -> Server[Any] | None:
    """The low-level runner of `server`, or None if this SDK keeps it elsewhere."""
    runner = getattr(server, '_lowlevel_server', None)
    if runner is None or not all(callable(getattr(runner, n, None)) for n in ('run', 'create_initialization_options')):
        return None
    return runner


def cancel_event(session: Any) -> Any:
    """The request's "peer cancelled" event (an `anyio.Event`) on a request-scoped session, or None."""
    outbound = getattr(session, '_request_outbound', None)
    return getattr(outbound, 'cancel_requested', None)


def cancel_requested(session: Any) -> bool:
    """Whether the client sent `notifications/cancelled` for the request `session` serves (False if unknown)."""
    import anyio

    event = cancel_event(session)
    return isinstance(event, anyio.Event) and event.is_set()


class _CleanErrors:
    """Answers a handler's unexpected exception as a JSON-RPC error with a real code and no traceback on stderr.

    Without it the SDK answers `{"code": 0}` and logs the traceback (e.g. `prompts/get` of an unknown name).
    """

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        try:
            return await call_next(ctx)
        except Exception as exc:
            from mcp.shared.exceptions import MCPError
            from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
            from pydantic import ValidationError

            if isinstance(exc, MCPError | ValidationError):  # the SDK answers these properly itself
                raise
            if ctx.method == 'prompts/get' and isinstance(exc, ValueError):
                # `MCPServer.get_prompt` raises ValueError for an unknown name (this server has no prompts).
                raise MCPError(code=INVALID_PARAMS, message=str(exc)[:_MAX_MESSAGE_CHARS]) from None
            _log.error('%s failed with %s; answered as an internal error', ctx.method[:80], type(exc).__name__)
            raise MCPError(code=INTERNAL_ERROR, message='Internal error') from None


def answer_errors_cleanly(server: MCPServer[Any]) -> bool:
    """Install `_CleanErrors` on `server` once; False if this SDK has no middleware list where it is expected."""
    runner = lowlevel(server)
    chain: Any = getattr(runner, 'middleware', None)
    if not isinstance(chain, list):
        return False
    middleware: list[Any] = chain  # pyright: ignore[reportUnknownVariableType]
    if not any(isinstance(m, _CleanErrors) for m in middleware):
        middleware.append(_CleanErrors())
    return True


def problems(server: MCPServer[Any]) -> list[str]:
    """What this module cannot reach on `server` with the installed SDK (empty when all is where expected)."""
    found: list[str] = []
    if installed_sdk() is None:
        found.append('the installed mcp / mcp-types versions (their .dist-info folders)')
    runner = lowlevel(server)
    if runner is None:
        found.append('MCPServer._lowlevel_server (with run and create_initialization_options)')
    elif not isinstance(getattr(runner, 'middleware', None), list):
        found.append('Server.middleware (a list)')
    return found
