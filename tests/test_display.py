"""What people read in a notebook: the answer's Markdown as HTML, the cost said once, nothing for MathJax to
typeset, cells left-aligned whatever the front end's table style (`scripts/render_notebooks.py`: the same in a browser).
"""

from __future__ import annotations

import re

from pydantic_ai_perplexity._domain.results import ResearchResult
from pydantic_ai_perplexity._domain.timeline import TimelineStep
from pydantic_ai_perplexity._present.display import NO_MATH, result_to_html, timeline_steps_html
from support.results import TagCollector, make_result


def test_markdown_bullets_numbers_headings_and_bold_become_html():
    answer = '## Summary\nIt **matters** [1].\nSecond line.\n\n- First point [2].\n- Second point\n  goes on.\n'
    answer += '1. One\n2) Two'
    page = result_to_html(make_result(answer=answer))
    parser = TagCollector()
    parser.feed(page)
    assert parser.errors == [] and parser.stack == []
    assert '<h5>Summary</h5>' in page and '<strong>matters</strong>' in page
    assert re.search(
        r'<ul><li>First point <sup><a class="pplx-cite"[^>]*>\[2\]</a></sup>\.</li>'
        r'<li>Second point goes on\.</li></ul>',
        page,
    )
    assert '<ol><li>One</li><li>Two</li></ol>' in page
    assert '- First' not in page and 'pre-wrap' not in page


def test_the_cost_is_said_once_and_no_dollar_pair_reaches_mathjax():
    page = result_to_html(make_result())
    assert page.count('$0.0123') == 1
    root = re.search(r'<div class="pplx-result ([^"]+)">', page)
    assert root is not None and set(NO_MATH.split()) <= set(root.group(1).split())


def test_table_cells_carry_their_left_alignment_inline():
    page = result_to_html(make_result())
    cells = re.findall(r'<t[dh]( style="[^"]*")?>', page)
    assert cells and all('text-align:left' in style for style in cells)
    steps = timeline_steps_html([TimelineStep(elapsed_s=0.5, kind='search', detail='searching: $5 and $6')])
    assert NO_MATH in steps
    assert all('text-align:left' in style for style in re.findall(r'<t[dh]( style="[^"]*")?>', steps))


def test_an_emulated_result_wears_a_badge_in_html_and_says_so_in_markdown():
    real = make_result()
    assert 'class="pplx-emulated"' not in result_to_html(real) and 'emulated' not in real.to_markdown()
    for result in (make_result(), ResearchResult(response_id='resp_g', status='in_progress')):
        result.emulated = True
        page = result_to_html(result)
        parser = TagCollector()
        parser.feed(page)
        assert parser.errors == [] and parser.stack == []
        assert re.search(r'<span class="pplx-emulated"[^>]*>emulated</span>', page)
        assert 'emulated' in result.to_markdown()
    finished = make_result()
    finished.emulated = True
    footer = re.search(r'<p class="pplx-footer">(.*?)</p>', result_to_html(finished))
    assert footer is not None and ' · completed · emulated · medium' in footer.group(1)
    assert finished.to_markdown().splitlines()[-1] == (
        '<sub>completed · emulated · medium · openai/gpt-5.5 · $0.0123 · resp_r</sub>'
    )


def test_the_cost_shows_input_with_cache_output_and_each_tool():
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_low_fetch_url.json, captured 2026-10-09: the input is
    billed as cache writes and reads with input_cost 0; fetch_url has its own calls and cost. A fetched page cited as
    [web:0] links to its source."""
    from pydantic_ai_perplexity.client._models import parse_response
    from support.live_shapes import fetch_item, fetch_usage, message, run

    response = parse_response(
        run([fetch_item('https://a.example/pep8', 'PEP 8'), message('79 [web:0]')], usage=fetch_usage())
    )
    page = result_to_html(ResearchResult.from_response(response))
    footer = re.search(r'<p class="pplx-footer">(.*?)</p>', page)
    assert footer is not None
    assert '<strong>$0.0037</strong> (input $0.0002 (cache write $0.0002, cache read $0.0000), output $0.0000, ' in (
        footer.group(1)
    )
    assert 'fetch_url 1 call $0.0035)' in footer.group(1)
    assert re.search(r'<a class="pplx-cite" href="https://a.example/pep8" title="PEP 8">\[1\]</a>', page)
    assert 'class="pplx-orphan"' not in page


def _untrusted(page: str) -> str:
    """Untrusted HTML as JupyterLab keeps it (its sanitizer): `<style>` blocks dropped, `<svg>` and its parts
    dropped with their text kept; tags, `class`, `title` and inline `style` stay."""
    page = re.sub(r'<style>.*?</style>', '', page, flags=re.DOTALL)
    return re.sub(r'</?(?:svg|rect|path|line|text|title|g)\b[^>]*>', '', page)


def test_a_result_keeps_its_badge_and_superscript_markers_in_an_untrusted_notebook():
    result = make_result(answer='- First point [1].\n- Second point [2].')
    result.emulated = True
    page = _untrusted(result_to_html(result))
    badge = re.search(r'<span class="pplx-emulated"[^>]*style="([^"]*)"[^>]*>emulated</span>', page)
    assert badge and 'background-color:#fde68a' in badge.group(1) and 'border-radius' in badge.group(1)
    assert len(re.findall(r'<sup><a class="pplx-cite" href="https://[^"]+"[^>]*>\[\d\]</a></sup>', page)) == 2


def test_the_timeline_in_a_notebook_is_made_of_what_an_untrusted_notebook_keeps():
    from pydantic_ai_perplexity._domain.timeline import Timeline

    timeline = Timeline('How do heat pumps work?')
    timeline.steps = [
        TimelineStep(elapsed_s=0.1, kind='search', detail='searching: heat pumps', queries=('heat pumps',), ref=1),
        TimelineStep(elapsed_s=0.4, kind='results', detail='found 3 results', ref=1),
        TimelineStep(elapsed_s=0.6, kind='answer', detail='writing the answer'),
    ]
    timeline.end_s, timeline.status = 1.0, 'completed'
    page = timeline._repr_html_()
    assert _untrusted(page) == page  # nothing a sanitizer drops, so nothing runs together
    search = re.search(r'<div class="pplx-step pplx-search" title="([^"]*)" style="([^"]*)"', page)
    assert search and search.group(1).startswith('heat pumps → found 3 results')
    assert 'left:10.00%' in search.group(2) and 'width:30.00%' in search.group(2)
    assert re.search(r'>How do heat pumps work\? · completed — 1\.0 s<', page)
    markdown = timeline._repr_markdown_()
    assert '| 0.40 s | results | found 3 results |' in markdown.splitlines()
