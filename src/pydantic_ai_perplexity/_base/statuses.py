"""The statuses of a run, and which of them are "unfinished", defined once.

The API's seven statuses (perplexity-api.md §L) and the three more a ledger row may have before or around them.
A leaf (standard library only): the wire, the ledger, the CLI's `--status` choice (read at its import), the MCP
server, reconciliation and the emulator all use these sets instead of spelling their own.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = (
    'CANCELLING',
    'END_EVENTS',
    'RESERVED',
    'ROW_STATUSES',
    'SETTLED_STATUSES',
    'STARTING',
    'TERMINAL_STATUSES',
    'UNFINISHED_ROWS',
    'UNFINISHED_STATUSES',
    'RunStatus',
)

#: Every status of a run at the API.
RunStatus = Literal['queued', 'in_progress', 'requires_action', 'completed', 'incomplete', 'failed', 'cancelled']
_API_UNFINISHED = ('queued', 'in_progress', 'requires_action')
#: Statuses after which a run never changes again.
TERMINAL_STATUSES: Final = frozenset({'completed', 'failed', 'cancelled', 'incomplete'})
#: Statuses of a run that has not ended: it may still change at the API. `requires_action` is one: the run waits for
#: the caller's tool results and then goes on (and may cost more).
UNFINISHED_STATUSES: Final = frozenset(_API_UNFINISHED)
#: Statuses after which waiting longer changes nothing: the terminal ones, and `requires_action` (the run waits on
#: the caller, not on time).
SETTLED_STATUSES: Final = TERMINAL_STATUSES | {'requires_action'}
#: The stream events that end a run, and the status each one means.
END_EVENTS: Final[dict[str, RunStatus]] = {
    'response.completed': 'completed',
    'response.failed': 'failed',
    'response.incomplete': 'incomplete',
    'response.cancelled': 'cancelled',
}

#: A ledger row whose budget is held before the run is sent (it has no run id yet).
RESERVED: Final = 'reserved'
#: A ledger row of a run being created (sent; the API has not answered with its id yet).
STARTING: Final = 'starting'
#: A ledger row of a run whose cancel was asked for and not yet seen to end it.
CANCELLING: Final = 'cancelling'
#: Rows whose run has not ended: the ledger's own states and the API's unfinished ones. Such a row holds its
#: reservation against the budget until it reports a cost, and is refreshed from the API when it has a run id.
UNFINISHED_ROWS: Final = (RESERVED, STARTING, CANCELLING, *_API_UNFINISHED)
#: Every status a ledger row may have, in the order a run goes through them.
ROW_STATUSES: Final = (RESERVED, STARTING, *get_args(RunStatus), CANCELLING)
