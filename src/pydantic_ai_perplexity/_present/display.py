"""How results look to people: Markdown and HTML of a run (answer with linked markers, sources, cost) and the
picture of its timeline. Nothing here is read by a model: model-facing text, with spotlighting, is in
`model_text.py`.

The HTML reads the same in an untrusted notebook (one executed elsewhere, e.g. by `nbconvert --execute`): there
JupyterLab still shows `text/html` (its HTML renderer counts as safe and ranks before Markdown) but sanitizes it,
dropping `<style>` blocks and `<svg>` (keeping the SVG's text, run together). So what must survive is in tags and
inline `style` attributes it keeps: markers in `<sup>`, the emulated badge styled inline, the timeline drawn with
inline-styled boxes (`timeline_to_html`), not SVG. Each display object also has a `text/markdown` form.

Notebook reprs (`ResearchResult._repr_html_`, `Timeline._repr_html_`) import this module when they are called, so
the domain modules never import their presentation at import time.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from .._base.words import plural
from .._domain.display_slot import DISPLAY
from .._domain.results import MARKER, marker_refs
from .._domain.timeline import LANES
from .model_text import answer_with_source_numbers, inline_image, plain, safe_url

if TYPE_CHECKING:
    from .._domain.results import ResearchResult, Source
    from .._domain.timeline import Bar, TimelineStep

__all__ = (
    'result_to_html',
    'result_to_markdown',
    'timeline_steps_html',
    'timeline_steps_markdown',
    'timeline_to_html',
    'timeline_to_svg',
)


def _footer(result: ResearchResult, *, cost: bool = True) -> str:
    parts = [result.status]
    if result.emulated:
        parts.append('emulated')
    if result.effort:
        parts.append(result.effort)
    if result.model:
        parts.append(result.model)
    if cost and result.cost_usd is not None:
        parts.append(f'${result.cost_usd:.4f}')
    parts.append(result.response_id)
    return ' · '.join(parts)


def result_to_markdown(result: ResearchResult) -> str:
    """Answer, numbered sources (cited ones marked) and a status line, as Markdown."""
    if not result.done:
        emulated = ' · emulated' if result.emulated else ''
        return f'*Research still going* ({result.progress.summary()}){emulated} · `{result.response_id}`'
    lines: list[str] = []
    if result.error:
        lines.append(f'> **{result.status}**: {result.error}\n')
    lines.append(answer_with_source_numbers(result) or '*(no answer)*')
    if result.sources:
        lines.append('\n**Sources**\n')
        for s in result.sources:
            mark = '' if s.cited else ' *(not cited)*'
            lines.append(f'{s.n}. [{s.title or s.domain}]({s.url}){mark}')
    if result.orphan_markers:
        lines.append(f'\n*Markers pointing at no source: {", ".join(result.orphan_markers)}*')
    images = [(image, url) for image in result.images if (url := safe_url(image.url))]
    if images:
        alt = [plain(image.title or 'image').replace('[', '(').replace(']', ')') for image, _ in images]
        lines.append('\n' + ' '.join(f'![{text}]({url})' for text, (_, url) in zip(alt, images, strict=True)))
    shared = [
        (plain(f.filename or 'shared image').replace('[', '(').replace(']', ')'), src)
        for f in result.files
        if (src := inline_image(f.url))
    ]
    if shared:
        lines.append('\n' + ' '.join(f'![{text}]({src})' for text, src in shared))
    lines.append(f'\n<sub>{_footer(result)}</sub>')
    return '\n'.join(lines)


def _safe_href(url: str) -> str | None:
    """A URL fit for `href`: http(s) only, so a source cannot smuggle `javascript:` into a notebook."""
    return url if url.strip().lower().startswith(('https://', 'http://')) else None


_BULLET = re.compile(r'^\s*[-*•]\s+(.*)$')
_NUMBERED = re.compile(r'^\s*\d{1,3}[.)]\s+(.*)$')
_HEADING = re.compile(r'^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$')
_BOLD = re.compile(r'\*\*(?=\S)(.+?)(?<=\S)\*\*')


def _text_html(text: str) -> str:
    """Plain answer text: escaped, with Markdown `**bold**`."""
    return _BOLD.sub(r'<strong>\1</strong>', html.escape(text))


def _answer_html(answer: str, inline: Callable[[str], str]) -> str:
    """The answer's Markdown blocks as HTML: paragraphs, `-`/`*` bullets and numbered items as real lists,
    headings; `inline` renders the text of each (escaping it and linking its markers)."""
    blocks: list[str] = []
    lines: list[str] = []
    items: list[str] = []
    kind = ''

    def close() -> None:
        nonlocal kind
        if lines:
            blocks.append(f'<p>{"<br>".join(inline(line) for line in lines)}</p>')
            lines.clear()
        if items:
            blocks.append(f'<{kind}>{"".join(f"<li>{inline(item)}</li>" for item in items)}</{kind}>')
            items.clear()

    for raw in answer.splitlines():
        bullet, heading = _BULLET.match(raw), _HEADING.match(raw)
        item = bullet or _NUMBERED.match(raw)
        if not raw.strip():
            close()
        elif heading:
            close()
            level = min(len(heading.group(1)) + 3, 6)  # under the notebook's own headings
            blocks.append(f'<h{level}>{inline(heading.group(2))}</h{level}>')
        elif item:
            want = 'ul' if bullet else 'ol'
            if lines or kind != want:
                close()
            kind = want
            items.append(item.group(1))
        elif items:  # a wrapped line continues the item
            items[-1] += ' ' + raw.strip()
        else:
            lines.append(raw.strip())
    close()
    return ''.join(blocks)


def _linked_answer(result: ResearchResult) -> str:
    """The answer as HTML: Markdown blocks, text escaped, each marker resolved to its source's `[n]` link."""
    by_id = {i: s for s in result.sources for i in s.ids}
    return _answer_html(result.answer, lambda text: _linked_text(text, by_id))


def _linked_text(text: str, by_id: Mapping[int, Source]) -> str:
    """One line of answer text as HTML, each marker resolved to its source's `[n]` link in one pass."""
    esc = html.escape
    out: list[str] = []
    last = 0
    for m in MARKER.finditer(text):
        out.append(_text_html(text[last : m.start()]))
        last = m.end()
        for written, number in marker_refs(m.group(0)):  # a group such as [7, 9] links each of its sources
            source = by_id.get(number)
            if source is None:
                out.append(f'<sup><span class="pplx-orphan" title="points at no source">[{esc(written)}]</span></sup>')
                continue
            href = _safe_href(source.url)
            title = esc(source.title or source.domain, quote=True)
            if href is None:
                out.append(f'<sup><span class="pplx-cite" title="{title}">[{source.n}]</span></sup>')
            else:
                out.append(
                    f'<sup><a class="pplx-cite" href="{esc(href, quote=True)}" title="{title}">[{source.n}]</a></sup>'
                )
    out.append(_text_html(text[last:]))
    return ''.join(out)


#: Classes MathJax skips (JupyterLab's and nbconvert's `tex2jax_ignore`, MathJax 3's own): dollar amounts stay text.
NO_MATH = 'tex2jax_ignore mathjax_ignore'
#: Inline, so no front end's table style (JupyterLab right-aligns cells) and no stripped `<style>` moves it.
_LEFT = ' style="text-align:left"'


def _cost_html(result: ResearchResult) -> str:
    """The billed total, then its parts: input (cache writes and reads included), output, each tool."""
    usage = result.usage
    if usage.cost_usd is None:
        return 'cost not reported'
    parts = usage.breakdown()
    detail = f' ({parts})' if parts else ''
    return f'<strong>${usage.cost_usd:.4f}</strong>{html.escape(detail)}'


_STYLE = (
    '<style>.pplx-result{font-family:system-ui,sans-serif;line-height:1.45;max-width:60em}'
    '.pplx-answer{margin:.3em 0 .8em}.pplx-answer p{margin:.4em 0}.pplx-answer ul,.pplx-answer ol{margin:.3em 0}'
    '.pplx-cite{text-decoration:none}.pplx-orphan{color:#b00}'
    '.pplx-sources{border-collapse:collapse;font-size:.9em}'
    '.pplx-result .pplx-sources td,.pplx-result .pplx-sources th{padding:.15em .6em;text-align:left;'
    'border-bottom:1px solid #ddd}'
    '.pplx-uncited{opacity:.6}.pplx-footer{color:#555;font-size:.85em}.pplx-error{color:#b00}</style>'
)
#: The badge of a result an emulator answered (the built-in one or a replayed recording): never a real answer.
#: Styled inline, so an untrusted notebook (whose `<style>` is dropped) still shows a badge, not a stray word.
_EMULATED_BADGE = (
    '<span class="pplx-emulated" title="answered by an emulator, not Perplexity" style="display:inline-block;'
    'padding:0 .5em;border-radius:.6em;background-color:#fde68a;color:#713f12;font-size:.8em;font-weight:600">'
    'emulated</span>'
)


def result_to_html(result: ResearchResult) -> str:
    """Answer with linked citation markers, a sources table and cost, as a self-contained HTML fragment."""
    esc = html.escape
    badge = f'{_EMULATED_BADGE} ' if result.emulated else ''
    if not result.done:
        return (
            f'{_STYLE if badge else ""}<div class="pplx-result {NO_MATH}">{badge}<em>Research still going</em> '
            f'({esc(result.progress.summary())}) <code>{esc(result.response_id)}</code></div>'
        )
    table = _sources_table(result.sources)
    error = (
        f'<p class="pplx-error"><strong>{esc(result.status)}</strong>: {esc(result.error)}</p>' if result.error else ''
    )
    question = f'<p>{badge}<strong>{esc(result.query or "")}</strong></p>' if result.query or badge else ''
    counts = f'{len(result.cited_sources)} of {plural(len(result.sources), "source")} cited'
    return (
        f'{_STYLE}<div class="pplx-result {NO_MATH}">{question}{error}'
        f'<div class="pplx-answer">{_linked_answer(result)}</div>{_orphans_html(result)}{table}{tools_to_html(result)}'
        f'<p class="pplx-footer">{_cost_html(result)} · {esc(counts)} · {esc(_footer(result, cost=False))}</p>'
        '</div>'
    )


def _sources_table(sources: Sequence[Source]) -> str:
    """The sources as an HTML table (number, linked title, domain, date, cited), or nothing when there are none."""
    esc = html.escape
    rows: list[str] = []
    for s in sources:
        href = _safe_href(s.url)
        name = esc(s.title or s.domain or s.url)
        cell = f'<a href="{esc(href, quote=True)}">{name}</a>' if href else name
        rows.append(
            f'<tr class="{"pplx-cited" if s.cited else "pplx-uncited"}"><td{_LEFT}>{s.n}</td><td{_LEFT}>{cell}</td>'
            f'<td{_LEFT}>{esc(s.domain)}</td><td{_LEFT}>{esc(s.date or "")}</td>'
            f'<td{_LEFT}>{"yes" if s.cited else ""}</td></tr>'
        )
    if not rows:
        return ''
    return (
        '<table class="pplx-sources"><thead><tr>'
        + ''.join(f'<th{_LEFT}>{name}</th>' for name in ('#', 'Source', 'Domain', 'Date', 'Cited'))
        + f'</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _orphans_html(result: ResearchResult) -> str:
    """The answer's markers that point at no source, in a red line (nothing when there are none)."""
    if not result.orphan_markers:
        return ''
    return (
        f'<p class="pplx-error"><small>Markers pointing at no source: {html.escape(", ".join(result.orphan_markers))}'
        '</small></p>'
    )


#: The most of each kind of tool output a notebook shows.
_MAX_TOOL_ITEMS = 24


def tools_to_html(result: ResearchResult) -> str:
    """What the opt-in tools found, for a notebook: image thumbnails linked to their pages, people, finance records,
    the sandbox's code and output, its shared files. Every address goes through `safe_url` (http(s) only) and a
    shared picture through `inline_image`; images load lazily without a referrer; all text is escaped (web data)."""
    esc = html.escape
    parts: list[str] = []
    images: list[str] = []
    for image in result.images[:_MAX_TOOL_ITEMS]:
        src = safe_url(image.url)
        if not src:
            continue
        title = esc(image.title or '', quote=True)
        thumb = (
            f'<img src="{esc(src, quote=True)}" alt="{title}" title="{title}" loading="lazy" '
            'referrerpolicy="no-referrer" style="max-height:120px;max-width:200px;margin:2px">'
        )
        page = safe_url(image.origin_url)
        images.append(f'<a href="{esc(page, quote=True)}">{thumb}</a>' if page else thumb)
    if images:
        parts.append(f'<div class="pplx-images">{"".join(images)}</div>')
    if result.people:
        items = ''.join(
            f'<li>{_link(p.url, p.name)}{": " + esc(p.summary) if p.summary else ""}</li>'
            for p in result.people[:_MAX_TOOL_ITEMS]
        )
        parts.append(f'<p><strong>People</strong></p><ul class="pplx-people">{items}</ul>')
    if result.finance:
        items = ''.join(
            f'<li>{esc(r.category or "record")}{" (" + esc(", ".join(r.tickers)) + ")" if r.tickers else ""}'
            f'{" " + " ".join(_link(u, f"[{i + 1}]") for i, u in enumerate(r.sources[:5])) if r.sources else ""}</li>'
            for r in result.finance[:_MAX_TOOL_ITEMS]
        )
        parts.append(f'<p><strong>Finance records</strong></p><ul class="pplx-finance">{items}</ul>')
    for run in result.sandbox[:_MAX_TOOL_ITEMS]:
        ended = esc(run.status or 'completed') + (f', exit {run.exit_code}' if run.exit_code is not None else '')
        output = f'<pre>{esc(run.stdout)}</pre>' if run.stdout else ''
        errors = f'<pre class="pplx-error">{esc(run.stderr)}</pre>' if run.stderr else ''
        parts.append(
            f'<p><strong>Sandbox</strong> ({esc(run.language or "code")}, {ended})</p>'
            f'<pre>{esc(run.code)}</pre>{output}{errors}'
        )
    if result.files:
        items = ''.join(
            f'<li>{esc(f.filename or "unnamed")}{f" ({f.size_bytes:,} bytes)" if f.size_bytes is not None else ""}'
            f'{_shared_file_html(f.filename, f.url)}</li>'
            for f in result.files[:_MAX_TOOL_ITEMS]
        )
        parts.append(f'<p><strong>Files shared</strong></p><ul class="pplx-files">{items}</ul>')
    if result.function_calls:
        items = ''.join(
            f'<li><code>{esc(c.name)}({esc(_clip(c.arguments, 200))})</code> → '
            f'{esc(_clip(c.output, 300)) if c.output is not None else "<em>not run</em>"}</li>'
            for c in result.function_calls[:_MAX_TOOL_ITEMS]
        )
        parts.append(f'<p><strong>Local functions called</strong></p><ul class="pplx-functions">{items}</ul>')
    return ''.join(parts)


def _shared_file_html(filename: str, url: str | None) -> str:
    """A shared file's address: the picture itself when it is an inline image (`inline_image`), else the address as
    code (an API path needs the key, so it is not a link)."""
    if src := inline_image(url):
        alt = html.escape(filename or 'shared image', quote=True)
        return f'<br><img class="pplx-shared-image" src="{src}" alt="{alt}" style="max-width:100%;max-height:320px">'
    return f' <code>{html.escape(url)}</code>' if url else ''


def _link(url: str, text: str) -> str:
    """`text` linked to `url` when it is a safe http(s) address, else the text alone (both escaped)."""
    href = safe_url(url)
    label = html.escape(text)
    return f'<a href="{html.escape(href, quote=True)}">{label}</a>' if href else label


# ---------------------------------------------------------------------------------------------------------------
# Timeline picture

_LANE_COLOURS = {
    'run': '#bbbbbb', 'search': '#4c78a8', 'fetch': '#f58518', 'mcp': '#54a24b', 'tool': '#72b7b2', 'answer': '#b279a2'
}  # fmt: skip
_FAILED_COLOUR = '#e45756'
_NICE_STEPS = (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + '…'


def _tick_step(total: float, most: int = 8) -> float:
    return next((s for s in _NICE_STEPS if total / s <= most), _NICE_STEPS[-1])


def timeline_to_svg(bars: Sequence[Bar], *, total_s: float, title: str, width: int = 720) -> str:
    """Bars in lanes (run, search, fetch, remote tools, answer) over a time axis, as an inline SVG element.

    Drawn by hand rather than with matplotlib: a few rectangles need no optional dependency, stay crisp at any
    zoom, render the same in Jupyter, VS Code and on GitHub, and carry each step's detail as a hover title.
    """
    esc = html.escape
    lanes = _lanes_of(bars)
    steps = [b for b in bars if b.lane != 'run']
    left, right, top, lane_h, axis_h = 110, 20, 30, 28, 26
    plot_w = width - left - right
    rows = len(lanes) + (0 if steps else 1)  # a row for the note when no step streamed
    height = top + rows * lane_h + axis_h
    total = max(total_s, max((b.end_s for b in bars), default=0.0), 0.001)

    def x(seconds: float) -> float:
        return round(left + plot_w * seconds / total, 1)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="pplx-timeline" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="system-ui,sans-serif" font-size="12">',
        f'<title>{esc(title)}</title>',
        f'<text x="{left}" y="18" font-weight="bold">{esc(_clip(title, 90))} — {total_s:.1f} s</text>',
    ]
    if not steps:
        note = 'no research steps were streamed (the wait polled)'
        out.append(f'<text x="{left}" y="{top + lane_h + 18}" fill="#555">{note}</text>')
    for row, (key, name) in enumerate(lanes):
        y = top + row * lane_h
        out.append(f'<text x="{left - 8}" y="{y + 18}" text-anchor="end">{esc(name)}</text>')
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y + lane_h}" y2="{y + lane_h}" stroke="#eee"/>')
        out.extend(_svg_bar(bar, x, y) for bar in bars if bar.lane == key)
    axis_y = top + rows * lane_h
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{axis_y}" y2="{axis_y}" stroke="#888"/>')
    for tick in _ticks(total):
        tx = x(tick)
        out.append(f'<line x1="{tx}" x2="{tx}" y1="{axis_y}" y2="{axis_y + 4}" stroke="#888"/>')
        out.append(f'<text x="{tx}" y="{axis_y + 17}" text-anchor="middle" fill="#555">{tick:g} s</text>')
    out.append('</svg>')
    return ''.join(out)


def _lanes_of(bars: Sequence[Bar]) -> list[tuple[str, str]]:
    """`(key, name)` of the lanes that hold a bar, in the usual order."""
    return [(key, name) for key, name in LANES if any(b.lane == key for b in bars)]


def _ticks(total: float) -> list[float]:
    """The times the axis marks: 0 and every nice step up to `total`."""
    step = _tick_step(total)
    ticks: list[float] = []
    tick = 0.0
    while tick <= total + 1e-9:
        ticks.append(tick)
        tick = round(tick + step, 6)
    return ticks


def _bar_colour(bar: Bar) -> str:
    """A bar's colour: its lane's, or red when its step failed."""
    return _LANE_COLOURS.get(bar.lane, '#888') if bar.ok else _FAILED_COLOUR


def _svg_bar(bar: Bar, x: Callable[[float], float], y: int) -> str:
    """One step in its lane (top at `y`): a diamond for an instant, else a bar; the whole run is a thin bar."""
    key, colour = bar.lane, _bar_colour(bar)
    tip = html.escape(f'{bar.label} ({bar.start_s:.2f} to {bar.end_s:.2f} s)')
    if bar.end_s <= bar.start_s:  # an instant: a diamond
        cx, cy = x(bar.start_s), y + 14
        return (
            f'<path class="pplx-step pplx-{key}" d="M{cx} {cy - 7}L{cx + 7} {cy}L{cx} {cy + 7}L{cx - 7} {cy}Z" '
            f'fill="{colour}"><title>{tip}</title></path>'
        )
    x0 = x(bar.start_s)
    w = max(x(bar.end_s) - x0, 2.0)
    bar_y, bar_h = (y + 11, 6) if key == 'run' else (y + 6, 16)  # the whole run: a thin bar behind the steps
    return (
        f'<rect class="pplx-step pplx-{key}" x="{x0}" y="{bar_y}" width="{w:.1f}" height="{bar_h}" rx="3" '
        f'fill="{colour}" fill-opacity="0.85"><title>{tip}</title></rect>'
    )


def timeline_steps_html(steps: Sequence[TimelineStep]) -> str:
    """The steps as a collapsed table under the picture: time, kind, what happened."""
    esc = html.escape
    rows = ''.join(
        f'<tr><td style="text-align:left;white-space:nowrap">{s.elapsed_s:.2f} s</td><td{_LEFT}>{esc(s.kind)}</td>'
        f'<td{_LEFT}>{esc(s.detail)}</td></tr>'
        for s in steps
    )
    head = ''.join(f'<th{_LEFT}>{name}</th>' for name in ('at', 'kind', 'step'))
    return (
        f'<details class="pplx-steps {NO_MATH}"><summary>{plural(len(steps), "step")}</summary>'
        f'<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></details>'
    )


def timeline_to_html(bars: Sequence[Bar], *, total_s: float, title: str) -> str:
    """The timeline's picture as HTML boxes with inline styles: a row per lane, a bar per step over a time axis.

    The same picture as `timeline_to_svg`, drawn with what an untrusted notebook keeps (`div`s and inline `style`
    with percentages), so it stays a picture there; each bar carries its step as a hover title.
    """
    esc = html.escape
    lanes = _lanes_of(bars)
    total = max(total_s, max((b.end_s for b in bars), default=0.0), 0.001)

    def pct(seconds: float) -> str:
        return f'{100 * min(max(seconds, 0.0), total) / total:.2f}%'

    label = 'display:inline-block;width:8em;text-align:right;padding-right:.6em;vertical-align:top'
    track = 'display:inline-block;position:relative;width:36em;max-width:70%;height:22px;border-bottom:1px solid #eee'
    rows: list[str] = []
    if not any(b.lane != 'run' for b in bars):
        rows.append(
            '<div style="color:#555;padding-left:8.6em">no research steps were streamed (the wait polled)</div>'
        )
    for key, name in lanes:
        boxes = ''.join(_html_bar(bar, pct) for bar in bars if bar.lane == key)
        rows.append(
            f'<div style="white-space:nowrap"><span style="{label}">{esc(name)}</span>'
            f'<span style="{track}">{boxes}</span></div>'
        )
    ticks = [
        f'<span style="position:absolute;left:{pct(tick)};top:2px;font-size:.85em">{tick:g} s</span>'
        for tick in _ticks(total)
    ]
    rows.append(
        f'<div style="white-space:nowrap"><span style="{label}"></span><span style="{track};border-bottom:0;'
        f'border-top:1px solid #888;color:#555">{"".join(ticks)}</span></div>'
    )
    return (
        f'<div class="pplx-timeline {NO_MATH}" style="font-family:system-ui,sans-serif;font-size:12px;'
        f'text-align:left;margin:.3em 0"><div style="font-weight:bold;margin-bottom:.3em">{esc(_clip(title, 90))} '
        f'— {total_s:.1f} s</div>{"".join(rows)}</div>'
    )


def _html_bar(bar: Bar, pct: Callable[[float], str]) -> str:
    """One step as a box placed by percentages in its lane; the whole run is a thin bar behind the steps."""
    tip = html.escape(f'{bar.label} ({bar.start_s:.2f} to {bar.end_s:.2f} s)', quote=True)
    thin = bar.lane == 'run'
    width = f'width:{pct(bar.end_s - bar.start_s)};min-width:6px' if bar.end_s > bar.start_s else 'width:8px'
    return (
        f'<div class="pplx-step pplx-{bar.lane}" title="{tip}" style="position:absolute;left:{pct(bar.start_s)};'
        f'{width};top:{"9px" if thin else "3px"};height:{"5px" if thin else "16px"};border-radius:3px;'
        f'background-color:{_bar_colour(bar)};opacity:0.85"></div>'
    )


def _cell(text: str) -> str:
    """Text fit for a Markdown table cell: one line, its `|` escaped."""
    return ' '.join(text.split()).replace('|', '\\|')


def timeline_steps_markdown(steps: Sequence[TimelineStep], *, title: str, total_s: float) -> str:
    """The timeline as Markdown, for front ends that show `text/markdown`: a title line and a table of the steps."""
    lines = [
        f'**{title}** — {total_s:.1f} s, {plural(len(steps), "step")}',
        '',
        '| at | kind | step |',
        '|---|---|---|',
    ]
    lines += [f'| {s.elapsed_s:.2f} s | {s.kind} | {_cell(s.detail)} |' for s in steps]
    return '\n'.join(lines)


class _Display:
    """The renderers the domain's `to_markdown`, `to_html` and notebook reprs call (`_domain/display_slot.py`)."""

    result_to_markdown = staticmethod(result_to_markdown)
    result_to_html = staticmethod(result_to_html)
    timeline_to_svg = staticmethod(timeline_to_svg)
    timeline_to_html = staticmethod(timeline_to_html)
    timeline_steps_html = staticmethod(timeline_steps_html)
    timeline_steps_markdown = staticmethod(timeline_steps_markdown)


DISPLAY.fill(_Display())
