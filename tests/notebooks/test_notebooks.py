"""The notebooks run top to bottom offline (emulator + scripted model) and show what they promise."""

from __future__ import annotations

import ast
import base64
import re
import struct
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import nbformat
import pytest

from support.notebooks import start

NOTEBOOKS = Path(__file__).parents[2] / 'notebooks'
#: Which notebook each test reads, so only the notebooks of selected tests are executed.
USES = {
    'test_quickstart_shows_live_progress_the_rendered_result_and_a_timeline': '01_research_quickstart',
    'test_deep_agent_answers_both_ways_and_shows_both_traces': '02_deep_agent',
    'test_batch_research_tabulates_refusals_spend_and_plots': '03_batch_research',
    'test_files_tools_functions_show_a_pdf_answer_a_sandbox_chart_and_a_function_call': '04_files_tools_functions',
}

Executed = Callable[[str], Any]


@pytest.fixture(scope='module')
def executed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executed]:
    """Starts every selected notebook at once (each in its own process and kernel); waits for one when asked."""
    wanted = {USES[item.originalname] for item in request.session.items if item.originalname in USES}
    root = tmp_path_factory.mktemp('notebooks')
    running = {
        name: (start(NOTEBOOKS / f'{name}.ipynb', root / f'{name}.ipynb', root / name), root / f'{name}.ipynb')
        for name in sorted(wanted)
    }

    def get(name: str) -> Any:
        process, out = running[name]
        log, _ = process.communicate(timeout=150)
        assert process.returncode == 0, log.decode(errors='replace')[-4000:]
        return nbformat.read(out, as_version=4)

    try:
        yield get
    finally:
        for process, _ in running.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def code_outputs(book: Any) -> list[list[dict[str, Any]]]:
    return [cell.outputs for cell in book.cells if cell.cell_type == 'code']


def texts(outputs: list[dict[str, Any]]) -> str:
    parts = [o.get('text', '') for o in outputs if o['output_type'] == 'stream']
    parts += [o['data'].get('text/plain', '') for o in outputs if 'data' in o]
    return '\n'.join(parts)


def html_or_text(outputs: list[dict[str, Any]]) -> str:
    [value] = [o['data']['text/plain'] for o in outputs if o['output_type'] == 'execute_result']
    return value


def html_of(outputs: list[dict[str, Any]]) -> str:
    [page] = [o['data']['text/html'] for o in outputs if 'text/html' in o.get('data', {})]
    return page


def no_errors(book: Any) -> None:
    for outputs in code_outputs(book):
        assert not [o for o in outputs if o['output_type'] == 'error'], outputs
        assert not [o for o in outputs if o.get('name') == 'stderr'], outputs


class Page(HTMLParser):
    """Checks tags nest; collects links (by class) and table cells."""

    VOID = frozenset({'br', 'img', 'hr', 'meta', 'link', 'input'})

    def __init__(self, page: str) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.links: list[tuple[str, str]] = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.VOID:
            self.stack.append(tag)
        if tag == 'a':
            values = dict(attrs)
            self.links.append((values.get('class') or '', values.get('href') or ''))

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


def test_notebooks_are_committed_without_outputs():
    for path in sorted(NOTEBOOKS.glob('*.ipynb')):
        book = nbformat.read(path, as_version=4)
        nbformat.validate(book)
        for cell in book.cells:
            if cell.cell_type == 'code':
                assert cell.outputs == [] and cell.execution_count is None, path.name
        assert book.metadata['kernelspec']['name'] == 'python3'
    assert {p.stem for p in NOTEBOOKS.glob('*.ipynb')} == set(USES.values())


@pytest.mark.compat  # executed by Jupyter kernels, one process per notebook
def test_quickstart_shows_live_progress_the_rendered_result_and_a_timeline(executed: Executed):
    book = executed('01_research_quickstart')
    no_errors(book)
    setup, live, result, timeline, numbers = code_outputs(book)
    assert 'using the built-in emulator' in texts(setup)

    # The live display was updated in place to its final state: every step, then the outcome.
    progress = html_of(live)
    assert 'completed in' in progress and 'searching:' in progress and 'writing the answer' in progress
    assert Page(progress).errors == []

    # The rendered result: well-formed, every cited marker links a source listed in the sources table.
    page = html_of(result)
    parsed = Page(page)
    assert parsed.errors == [] and parsed.stack == []
    assert 'class="pplx-sources"' in page and '<script' not in page
    cited = {href for cls, href in parsed.links if cls == 'pplx-cite'}
    listed = {href for cls, href in parsed.links if cls == ''}
    assert cited and cited <= listed
    assert re.search(r'\$\d+\.\d{4}', page)  # the cost
    domains = ast.literal_eval(html_or_text(numbers))
    assert len(domains) == len(cited)
    for _, domain in domains:
        assert any(domain in href for href in cited)

    # The timeline: an SVG with the run's searches, fetches and answer.
    svg = html_of(timeline).split('<details', 1)[0]
    tree = ElementTree.fromstring(svg)
    classes = {el.get('class', '') for el in tree.iter()}
    assert {'pplx-step pplx-search', 'pplx-step pplx-fetch', 'pplx-step pplx-answer'} <= classes
    assert 'steps</summary>' in html_of(timeline)


@pytest.mark.compat  # executed by Jupyter kernels, one process per notebook
def test_deep_agent_answers_both_ways_and_shows_both_traces(executed: Executed):
    book = executed('02_deep_agent')
    no_errors(book)
    _, in_process, over_mcp, comparison = code_outputs(book)
    for outputs in (in_process, over_mcp):
        answer = texts(outputs)
        assert 'Sources:' in answer and 'https://' in answer
    assert 'server spans received: True' in texts(over_mcp)

    page = html_of(comparison)
    assert Page(page).errors == []
    local, remote = re.findall(r'<pre[^>]*>(.*?)</pre>', page, flags=re.DOTALL)
    local_lines = local.splitlines()
    # In-process: the research run's spans under the agent's tool call, all in this process.
    assert any('execute_tool perplexity_research' in line for line in local_lines)
    research = next(line for line in local_lines if 'perplexity.research' in line)
    assert '[' not in research.split('perplexity.research')[1]
    assert any('perplexity.search' in line for line in local_lines)
    # Over MCP: the client's MCP span, then the server's spans, from the other process, in the same trace.
    assert 'MCP send tools/call' in remote
    server_lines = [line for line in remote.splitlines() if '[perplexity-mcp]' in line]
    assert any('perplexity.research' in line for line in server_lines)
    assert any('perplexity.search' in line for line in server_lines)


@pytest.mark.compat  # executed by Jupyter kernels, one process per notebook
def test_batch_research_tabulates_refusals_spend_and_plots(executed: Executed):
    book = executed('03_batch_research')
    no_errors(book)
    _, run, table, spend, plot = code_outputs(book)
    lines = [line for line in texts(run).splitlines() if line.strip()]
    assert len(lines) == 16
    assert sum(' completed ' in line for line in lines) >= 4
    assert all(' failed ' in line for line in lines if ' high ' in line)  # $1.00 estimate, $0.60 cap: refused

    page = html_of(table)
    assert Page(page).errors == []
    assert len(re.findall(r'<tr[ >]', page)) == 17  # header + one row per question and effort
    assert '<td>refused</td>' in page and re.search(
        r'estimate \d\.\d{4} \+ used \d\.\d{4} &gt; cap 0\.60 USD</td>', page
    )

    summary = texts(spend)
    spent = float(re.search(r'spent \$(\d+\.\d+) of the \$0\.60 cap', summary).group(1))  # type: ignore[union-attr]
    assert 0 < spent <= 0.60
    refused = sum(' failed ' in line for line in lines)
    assert f'refused: {refused} runs' in summary
    assert 'image/png' in plot[0]['data']


@pytest.mark.compat  # executed by Jupyter kernels, one process per notebook
def test_files_tools_functions_show_a_pdf_answer_a_sandbox_chart_and_a_function_call(executed: Executed):
    book = executed('04_files_tools_functions')
    no_errors(book)
    _, pdf, over_pdf, sandbox, with_function, calls, batch = code_outputs(book)
    assert re.search(r'storage-report\.pdf: [\d,]+ bytes', texts(pdf))

    # The run over the PDF: the answer quotes the file by name, and the sandbox's chart is a picture in the result.
    page = html_of(over_pdf)
    parsed = Page(page)
    assert parsed.errors == [] and parsed.stack == [] and '<script' not in page
    assert 'storage-report.pdf' in page and '8 GWh in 2024 to 12 GWh in 2026' in page
    [encoded] = re.findall(r'<img class="pplx-shared-image" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    png = base64.b64decode(encoded)
    assert png.startswith(b'\x89PNG\r\n\x1a\n') and png[12:16] == b'IHDR'
    width, height = struct.unpack('>II', png[16:24])
    assert width >= 100 and height >= 50
    assert 'Sandbox</strong> (python, completed, exit 0)' in page
    ran = texts(sandbox)
    assert 'sandbox (python, completed, exit 0): chart.png: storage' in ran  # 'storage' is the commonest word
    assert re.search(r'shared: chart\.png, [\d,]+ bytes', ran) and "'sandbox': 0.03" in ran

    # The run that called a local function: the call, what it answered, and the answer quoting it.
    shown = html_of(with_function)
    assert Page(shown).errors == [] and 'class="pplx-functions"' in shown and '<code>company_wiki(' in shown
    listed = texts(calls)
    call_line, output_line = listed.splitlines()[:2]
    assert call_line.startswith('company_wiki({"topic": ') and call_line.endswith('->')
    assert (
        output_line.strip()
        == 'Office energy: Every office stores its solar power in a 40 kWh battery pack, installed in 2025.'
    )
    answer = listed.split('\n\n', 1)[1]
    assert 'company_wiki: Office energy: Every office stores its solar power in a 40 kWh battery pack' in answer

    # The flex runs bill their tokens at less than the default tier; the filtered search lists pages.
    lines = texts(batch).splitlines()
    tiers = [
        re.match(r'(default|flex) +completed \$\d\.\d{4} \(tokens \$(\d\.\d{5})\)  (.+)', line) for line in lines[:4]
    ]
    assert all(tiers), lines
    tokens = {(m.group(3), m.group(1)): float(m.group(2)) for m in tiers if m}
    for question in {q for q, _ in tokens}:
        assert tokens[question, 'flex'] < tokens[question, 'default']
    assert lines[4:] and all(re.match(r'- .+ \(https://[^ ]+\)$', line) for line in lines[4:])
