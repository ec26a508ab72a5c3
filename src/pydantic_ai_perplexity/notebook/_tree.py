"""A trace drawn as an indented tree of spans (text, Markdown or HTML), and trees compared side by side."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

from ._records import SpanRecord

__all__ = ('SpanTree', 'compare_traces')


class SpanTree:
    """A trace drawn as an indented tree: each span with its duration, other processes' spans marked."""

    def __init__(self, spans: Iterable[SpanRecord], *, title: str | None = None) -> None:
        self.spans = list(spans)
        roots = [s for s in self.spans if s.parent_id is None]
        self.title = title or (roots[0].name if roots else 'trace')

    def names(self) -> list[str]:
        """Span names in tree order (events not included)."""
        return [span.name for _, span, event in self._walk() if event is None]

    def _walk(self) -> list[tuple[str, SpanRecord, tuple[str, int] | None]]:
        ids = {s.span_id for s in self.spans}
        children: dict[str | None, list[SpanRecord]] = {}
        for span in self.spans:
            parent = span.parent_id if span.parent_id in ids else None
            children.setdefault(parent, []).append(span)
        rows: list[tuple[str, SpanRecord, tuple[str, int] | None]] = []

        def visit(span: SpanRecord, prefix: str, last: bool, top: bool) -> None:
            rows.append((prefix + ('' if top else '└─ ' if last else '├─ '), span, None))
            inner = prefix + ('' if top else '   ' if last else '│  ')
            kids = children.get(span.span_id, [])
            branch = inner + ('│  ' if kids else '   ') + '· '
            rows.extend((branch, span, event) for event in span.events if event[0] != 'exception')
            for i, kid in enumerate(kids):
                visit(kid, inner, i == len(kids) - 1, False)

        for root in children.get(None, []):
            visit(root, '', True, True)
        return rows

    def lines(self) -> list[str]:
        """The tree as text lines: branch, name, duration (an event: when, after its span began), and
        `[service]` for another process's spans."""
        rows = self._walk()
        width = max((len(p) + len(e[0] if e else s.name) for p, s, e in rows), default=0)
        lines: list[str] = []
        for prefix, span, event in rows:
            if event is None:
                text = f'{(prefix + span.name).ljust(width)}  {span.duration_s:7.3f} s'
            else:
                at = max(event[1] - span.start_ns, 0) / 1e9
                text = f'{(prefix + event[0]).ljust(width)} @{at:7.3f} s'
            lines.append(text + (f'  [{span.service}]' if span.remote and span.service else ''))
        return lines

    def __str__(self) -> str:
        return '\n'.join([self.title, *self.lines()])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return self.to_html()

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def to_markdown(self) -> str:
        """The tree as Markdown: its title, then its lines in a code block (monospace, aligned, never wrapped)."""
        fence = '````' if any('```' in line for line in self.lines()) else '```'
        return f'**{self.title}** ({len(self.spans)} spans)\n\n{fence}\n' + '\n'.join(self.lines()) + f'\n{fence}'

    def to_html(self) -> str:
        """The tree as an HTML fragment (a titled `<pre>` block, monospace and left-aligned in any front end)."""
        esc = html.escape
        return (
            f'<div class="pplx-trace-tree" style="text-align:left"><strong>{esc(self.title)}</strong> '
            f'({len(self.spans)} spans)<pre class="pplx-trace" style="{_PRE_STYLE}">'
            f'{esc(chr(10).join(self.lines()))}</pre></div>'
        )


#: A trace tree's lines are aligned by character: monospace, never wrapped (scrolls when too wide), left-aligned.
_PRE_STYLE = (
    "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,'DejaVu Sans Mono','Liberation Mono',monospace;"
    'font-size:12px;line-height:1.35;white-space:pre;overflow-x:auto;text-align:left;margin:.3em 0;padding:0'
)


class _Comparison:
    def __init__(self, trees: Mapping[str, SpanTree]) -> None:
        self.trees = dict(trees)

    def __str__(self) -> str:
        return '\n\n'.join(f'== {name} ==\n{tree}' for name, tree in self.trees.items())

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        return '\n\n'.join(
            tree.to_markdown().replace(f'**{tree.title}**', f'**{name}**: {tree.title}', 1)
            for name, tree in self.trees.items()
        )

    def _repr_html_(self) -> str:
        # Side by side in flex boxes, not table cells (which front ends right-align); one under the other when narrow.
        boxes = ''.join(
            f'<div style="flex:0 1 auto;min-width:0;text-align:left"><h4 style="margin:.2em 0">{html.escape(name)}</h4>'
            f'{tree.to_html()}</div>'
            for name, tree in self.trees.items()
        )
        return (
            '<div class="pplx-trace-comparison tex2jax_ignore mathjax_ignore" style="display:flex;flex-wrap:wrap;'
            f'gap:.5em 2.5em;align-items:flex-start;text-align:left">{boxes}</div>'
        )


def compare_traces(trees: Mapping[str, SpanTree]) -> Any:
    """Trees side by side in a notebook (one after the other as text): `compare_traces({'in-process': t1, ...})`."""
    return _Comparison(trees)
