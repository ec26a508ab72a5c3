"""How results and timelines are shown to people: the presentation layer provides the renderers (`DISPLAY`), and
the domain's `to_markdown`, `to_html` and notebook reprs call them, so the domain never imports presentation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from .._base.slot import Slot

if TYPE_CHECKING:
    from .results import ResearchResult
    from .timeline import Bar, TimelineStep

__all__ = ('DISPLAY', 'Display')


class Display(Protocol):
    """The renderers of `_present/display.py`, as the domain calls them."""

    def result_to_markdown(self, result: ResearchResult) -> str:
        """The answer with numbered sources and a status line, as Markdown."""
        ...

    def result_to_html(self, result: ResearchResult) -> str:
        """The answer with linked sources and a status line, as HTML."""
        ...

    def timeline_to_svg(self, bars: Sequence[Bar], *, total_s: float, title: str, width: int = 720) -> str:
        """A timeline's picture, as SVG."""
        ...

    def timeline_to_html(self, bars: Sequence[Bar], *, total_s: float, title: str) -> str:
        """A timeline's picture, as inline-styled HTML."""
        ...

    def timeline_steps_html(self, steps: Sequence[TimelineStep]) -> str:
        """A timeline's steps, as HTML."""
        ...

    def timeline_steps_markdown(self, steps: Sequence[TimelineStep], *, title: str, total_s: float) -> str:
        """A timeline's steps, as a Markdown table under a title line."""
        ...


#: The renderers: `_present/display.py` fills it when imported (the package root imports it on first use).
DISPLAY: Slot[Display] = Slot('display')
