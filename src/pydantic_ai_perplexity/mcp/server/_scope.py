"""Whose runs a request reaches: the one rule every way to a run over MCP applies.

A request named by a bearer token (its caller) reaches only the runs that token started, as the ledger records them
(`RunRecord.caller`): through `perplexity_research_result`, `perplexity_research_cancel`, the
`perplexity://runs/{id}` resource and the MCP tasks alike. Another caller's run, a run the ledger does not know and
any run on a server without a ledger answer exactly as an id that never existed ("not found"), so an id tells a
caller nothing about anyone else's work. A request with no caller (stdio, or HTTP on loopback without tokens: one
user) reaches every run, as before. `perplexity_research_list` applies the same rule through the ledger's `caller`
filter (its shared view, `PERPLEXITY_MCP_SHARED_LIST`, lists others' runs but reaches none of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from ..._base.errors import NotFoundError

if TYPE_CHECKING:
    from ..._core.researcher import Researcher
    from ..._ledger import RunRecord

__all__ = ('may_reach', 'reach', 'request_caller')


def request_caller(request: object) -> str | None:
    """The caller's name the HTTP front put on the request's ASGI scope (its token's), or None (stdio, no tokens)."""
    from ._tokens import CALLER_SCOPE_KEY

    scope = cast('dict[str, Any] | None', getattr(request, 'scope', None))
    value = (scope or {}).get(CALLER_SCOPE_KEY)
    return value if isinstance(value, str) else None


def may_reach(caller: str | None, record: RunRecord | None) -> bool:
    """The rule: no caller reaches every run; a named caller only a run the ledger records as its own."""
    return caller is None or (record is not None and record.caller == caller)


async def reach(r: Researcher, caller: str | None, response_id: str) -> RunRecord | None:
    """The ledger's row of a run `caller` may reach (None: no row, for a request without a caller).

    NotFoundError, in the words of an unknown id, for a run the caller may not reach.
    """
    record: RunRecord | None = None
    ledger = r.ledger
    if ledger is not None:
        record = await ledger.aio.get(response_id)  # after this instance's own writes: the run may be a moment old
    if not may_reach(caller, record):
        raise NotFoundError(f'No research run {response_id} for this caller.', status_code=404)
    return record
