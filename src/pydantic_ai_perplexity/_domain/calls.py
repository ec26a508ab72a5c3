"""How a research call is made: its callbacks and keywords, shared by the core's `Researcher` and the domain's
follow-ups (`ResearchResult.follow_up`), which reach a researcher through `RunsResearch` only."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, Unpack

from .options import ResearchOptions, ResearchOptionsDict
from .steps import Step

if TYPE_CHECKING:
    from .results import ResearchResult

__all__ = ('BatchKeywords', 'OnProgress', 'OnStarted', 'RunKeywords', 'RunsResearch')

OnProgress = Callable[[Step], Awaitable[None] | None]
"""Called with each research step people see: its kind, description, specifics, the run's id and the counts so far."""

OnStarted = Callable[[str], Awaitable[None] | None]
"""Called with a run's id as soon as the create answered and the id is in the ledger, before any waiting."""


class BatchKeywords(ResearchOptionsDict, total=False):
    """What every run of a batch takes (`research_many`): the options, and how each run is waited for and recorded."""

    options: ResearchOptions | None
    on_progress: OnProgress | None
    wait_seconds: float | None
    caller: str | None
    reuse_within: float | None


class RunKeywords(BatchKeywords, total=False):
    """What `Researcher.run` takes besides the query, as keywords (`run_sync` takes them too)."""

    on_started: OnStarted | None
    request_id: str | None


class RunsResearch(Protocol):
    """What a follow-up needs of a researcher (`Researcher` is one): a run, awaited or in a script."""

    async def run(self, query: str, **keywords: Unpack[RunKeywords]) -> ResearchResult:
        """Start a run and wait for it."""
        ...

    def run_sync(self, query: str, **keywords: Unpack[RunKeywords]) -> ResearchResult:
        """`run` for scripts."""
        ...
