"""The notebooks as a person sees them: executed, rendered in JupyterLab and in nbconvert's HTML by headless Chromium.

Each notebook in `notebooks/` runs offline (the emulator and a scripted model, as `tests/notebooks` runs them), then
is shown three times in Debian's `chromium` (driven by Playwright, with no browser of its own): as nbconvert's HTML
page, in a real JupyterLab server on loopback with the notebook trusted as if you had run it yourself, and there again
untrusted, as a notebook someone else executed (`nbconvert --execute`) opens: JupyterLab then sanitizes the HTML
(no `<style>`, no SVG). In all three, the rendered DOM of every output is checked:

- no MathJax element inside any output (a `$` pair in a cost line or a table must never be typeset as LaTeX);
- trace trees in monospace, left-aligned, one line per row (nothing wraps);
- our tables left-aligned, the answer's Markdown bullets real `<li>` items;
- numbers formatted as numbers (no `4.0` for a count);
- a picture the sandbox shared (an inline PNG) loads;
- untrusted: the sanitizer ran (no `<style>` left in our outputs), yet the timeline is still a picture (bars of
  their own width in lanes, not text run together), the emulated badge still a coloured badge, the markers still
  superscripts.

`--screenshots docs/notebooks` writes the PNGs the README shows (a few outputs per notebook, from JupyterLab).
Run: `uv run --frozen --group render python scripts/render_notebooks.py [--screenshots docs/notebooks]`; it exits 1
and lists each problem when a check fails. CI runs it from `.ci/run` (needs `chromium`: `apt-get install chromium`).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tests'))

from support.notebooks import start  # noqa: E402  (the tests' way of executing a notebook)

NOTEBOOKS = sorted((ROOT / 'notebooks').glob('*.ipynb'))
CHROMIUM = os.environ.get('CHROMIUM') or shutil.which('chromium') or '/usr/bin/chromium'
#: The outputs worth a picture, by notebook: (file name, a CSS selector of the output, which one of its matches).
SHOTS = {
    '01_research_quickstart': [('result', '.pplx-result', -1), ('timeline', '.pplx-timeline', 0)],
    '02_deep_agent': [('traces', '.pplx-trace-comparison', 0)],
    '03_batch_research': [('table', 'table.dataframe', 0), ('spend', 'table.dataframe', 1)],
}
#: The notebooks that show our own HTML (03 shows pandas tables and a plot).
EXPECT_OURS = {'01_research_quickstart', '02_deep_agent', '04_files_tools_functions'}
#: What each notebook must still show when opened untrusted (CSS selectors of our outputs).
EXPECT_UNTRUSTED = {
    '01_research_quickstart': ['.pplx-timeline', '.pplx-result', '.pplx-emulated'],
    '02_deep_agent': ['.pplx-trace-comparison'],
    '04_files_tools_functions': ['.pplx-result', '.pplx-emulated', '.pplx-shared-image', '.pplx-functions'],
}
#: True when a trusted JupyterLab page shows a `<style>` in an output: the untrusted check's probe can tell them apart.
_HAS_STYLE_JS = "r => [...r.querySelectorAll('.jp-OutputArea-output')].some(o => o.querySelector('style'))"
SHOT_MAX_HEIGHT = 420
DEADLINE_S = 120.0

# Runs in the page: every problem with our outputs, as text. `root` is the document or JupyterLab's notebook panel.
CHECKS_JS = r"""
(root, expectOurs) => {
  const problems = [];
  const outputs = [...root.querySelectorAll('.jp-OutputArea-output')];
  const ours = outputs.flatMap(o => [...o.querySelectorAll('[class^="pplx-"], [class*=" pplx-"]')]
    .filter(e => !e.parentElement.closest('[class^="pplx-"], [class*=" pplx-"]')));
  const where = e => (e.className.baseVal ?? e.className) + ': ' + (e.textContent || '').trim().slice(0, 60);
  if (expectOurs && !ours.length) problems.push('none of our outputs rendered');
  for (const o of outputs)  // no output of these notebooks means LaTeX: a typeset `$` pair is a dollar amount
    if (o.querySelector('mjx-container, .MathJax, .MathJax_Preview, .MathJax_Display, script[type^="math/tex"]'))
      problems.push('MathJax typeset text in an output: ' + o.textContent.trim().slice(0, 60));
  for (const e of ours) {
    if (e.querySelector('mjx-container, .MathJax, .MathJax_Preview, .MathJax_Display, script[type^="math/tex"]'))
      problems.push('MathJax typeset text inside ' + where(e));
    for (const cell of e.querySelectorAll('td, th')) {
      const align = getComputedStyle(cell).textAlign;
      if (!['left', 'start'].includes(align)) { problems.push(`a ${align}-aligned table cell in ` + where(e)); break; }
    }
    for (const p of e.querySelectorAll('.pplx-answer p, .pplx-answer')) {
      const bare = [...p.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('');
      if (/(^|\n)\s*[-*] \S/.test(bare)) problems.push('a literal "- " bullet (no <li>) in ' + where(e));
    }
  }
  for (const img of root.querySelectorAll('.jp-OutputArea-output img.pplx-shared-image'))
    if (!img.complete || !img.naturalWidth) problems.push('a shared picture that does not load: ' + img.alt);
  for (const pre of root.querySelectorAll('.pplx-trace-comparison pre, pre.pplx-trace')) {
    const style = getComputedStyle(pre);
    const ctx = document.createElement('canvas').getContext('2d');
    ctx.font = `${style.fontSize} ${style.fontFamily}`;
    if (Math.abs(ctx.measureText('iiiiiiiiii').width - ctx.measureText('MMMMMMMMMM').width) > 0.5)
      problems.push(`a trace tree in a proportional font (${style.fontFamily})`);
    if (!['left', 'start'].includes(style.textAlign)) problems.push(`a ${style.textAlign}-aligned trace tree`);
    const lines = pre.textContent.replace(/\n$/, '').split('\n').length;
    const height = pre.getBoundingClientRect().height - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
    const lineHeight = parseFloat(style.lineHeight) || 1.2 * parseFloat(style.fontSize);
    if (height > (lines + 0.5) * lineHeight) problems.push(`a trace tree wraps: ${lines} lines take ${height}px`);
  }
  for (const table of root.querySelectorAll('.jp-OutputArea-output table')) {
    const heads = [...table.querySelectorAll('thead tr:last-child th')].map(th => th.textContent.trim());
    for (const row of table.querySelectorAll('tbody tr')) {
      const cells = [...row.children];
      const offset = cells.length - heads.length;
      const cell = {};
      heads.forEach((name, i) => { cell[name] = (cells[i + offset] || {textContent: ''}).textContent.trim(); });
      for (const name of ['runs', 'sources', 'cited', 'steps', '#'])
        if (cell[name] && !/^\d+$/.test(cell[name])) problems.push(`the count "${name}" shows "${cell[name]}"`);
      const error = cell.error || '';
      if (/budget/i.test(error) && cell.status === 'failed') problems.push('a budget refusal has the status "failed"');
      if (/(\.\.\.|…)$/.test(error)) problems.push(`a truncated error: "${error}"`);
      const words = error.toLowerCase().match(/[a-z]{5,}/g) || [];
      if (words.some((w, i) => words.indexOf(w) !== i && /budget|refus|exceed/.test(w)))
        problems.push(`an error that says it twice: "${error}"`);
    }
  }
  return [...new Set(problems)];
}
"""


# Runs in the page of an untrusted notebook: what must survive JupyterLab's sanitizer.
UNTRUSTED_JS = r"""
(root, expected) => {
  const problems = [];
  const outputs = [...root.querySelectorAll('.jp-OutputArea-output')];
  if (outputs.some(o => o.querySelector('style')))
    problems.push('a <style> survived: the notebook was not shown untrusted');
  for (const selector of expected)
    if (!root.querySelector('.jp-OutputArea-output ' + selector)) problems.push(`no ${selector} rendered`);
  const timelines = [...root.querySelectorAll('.jp-OutputArea-output .pplx-timeline')];
  const results = [...root.querySelectorAll('.jp-OutputArea-output .pplx-result')];
  for (const t of timelines) {
    const bars = [...t.querySelectorAll('.pplx-step')].map(b => b.getBoundingClientRect());
    if (bars.length < 2) problems.push(`a timeline with ${bars.length} bars`);
    if (bars.some(b => b.width < 2 || b.height < 3)) problems.push('a timeline bar with no size');
    if (new Set(bars.map(b => Math.round(b.left))).size < 2) problems.push('timeline bars not placed in time');
    const rows = [...t.children].filter(c => c.tagName === 'DIV');
    if (rows.some(r => r.getBoundingClientRect().height > 40)) problems.push('a timeline row wraps into text');
  }
  for (const r of results) {
    const badge = r.querySelector('.pplx-emulated');
    if (badge && ['rgba(0, 0, 0, 0)', 'transparent'].includes(getComputedStyle(badge).backgroundColor))
      problems.push('the emulated badge lost its colour');
    const cites = [...r.querySelectorAll('.pplx-cite')];
    if (!cites.length) problems.push('a result without markers');
    if (cites.some(c => !c.closest('sup') && getComputedStyle(c).verticalAlign !== 'super'))
      problems.push('a marker that is not a superscript');
  }
  return [...new Set(problems)];
}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def execute(work: Path) -> list[Path]:
    """Every notebook executed at once (each in its own kernel); the executed copies."""
    running = [(start(nb, work / nb.name, work / nb.stem), work / nb.name) for nb in NOTEBOOKS]
    for process, out in running:
        log, _ = process.communicate(timeout=DEADLINE_S)
        if process.returncode:
            sys.exit(f'{out.name} failed to execute:\n{log.decode(errors="replace")[-3000:]}')
    return [out for _, out in running]


def to_html(executed: Path, html_dir: Path) -> Path:
    """nbconvert's HTML (the lab template, as `jupyter nbconvert --to html` writes it)."""
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name='lab').from_notebook_node(nbformat.read(executed, as_version=4))
    page = html_dir / f'{executed.stem}.html'
    page.write_text(body, encoding='utf-8')
    return page


@dataclass
class Lab:
    """A JupyterLab server being started: where it listens, its token, and the environment that holds its trust."""

    base: str
    token: str
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes]

    def trust(self, notebooks: list[Path]) -> None:
        """Sign the notebooks: outputs you produce yourself are trusted, and a saved notebook once it is signed."""
        import nbformat
        from nbformat.sign import NotebookNotary

        notary = NotebookNotary(data_dir=self.env['JUPYTER_DATA_DIR'])  # where the server looks for signatures
        for notebook in notebooks:
            notary.sign(nbformat.read(notebook, as_version=4))

    def wait_ready(self) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                with urllib.request.urlopen(f'{self.base}/api/status?token={self.token}', timeout=2):
                    return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    sys.exit('JupyterLab did not start:\n' + self.log.read_text(errors='replace')[-3000:])
                time.sleep(0.2)


@contextmanager
def jupyterlab(notebook_dir: Path, home: Path) -> Iterator[Lab]:
    """Start a JupyterLab server on loopback serving `notebook_dir`, with its own settings, data and runtime dirs."""
    token, port = secrets.token_hex(16), _free_port()
    env = {
        **os.environ,
        'JUPYTER_CONFIG_DIR': str(home / 'config'),
        'JUPYTER_DATA_DIR': str(home / 'data'),
        'JUPYTER_RUNTIME_DIR': str(home / 'runtime'),
        'JUPYTERLAB_SETTINGS_DIR': str(home / 'settings'),
        'JUPYTERLAB_WORKSPACES_DIR': str(home / 'workspaces'),
    }
    for plugin, values in {
        '@jupyterlab/notebook-extension/tracker': {'windowingMode': 'none'},  # render every cell, not just visible
        '@jupyterlab/apputils-extension/notification': {'fetchNews': 'false', 'checkForUpdates': False},
    }.items():
        path = home / 'settings' / f'{plugin}.jupyterlab-settings'
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding='utf-8')
    notebook_dir.mkdir(parents=True, exist_ok=True)
    log = home / 'lab.log'
    server = subprocess.Popen(
        [
            sys.executable, '-m', 'jupyter', 'lab', '--no-browser', f'--ServerApp.port={port}',
            '--ServerApp.ip=127.0.0.1', f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={notebook_dir}',
            '--ServerApp.port_retries=0', '--LabApp.news_url=', '--allow-root',
        ],
        env=env, stdout=subprocess.DEVNULL, stderr=log.open('wb'),
    )  # fmt: skip
    try:
        yield Lab(f'http://127.0.0.1:{port}', token, env, log, server)
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


def _settled(page: Any, count_js: str) -> None:
    """Wait until the outputs have rendered and stopped changing (MathJax typesets after the first paint)."""
    deadline, last, same = time.monotonic() + DEADLINE_S, None, 0
    while same < 3:
        if time.monotonic() > deadline:
            sys.exit(f'the page did not settle: {last}')
        now = page.evaluate(count_js)
        same = same + 1 if now == last and now[0] > 0 else 0
        last = now
        page.wait_for_timeout(250)


_COUNT_JS = """() => [document.querySelectorAll('.jp-OutputArea-output').length,
  document.querySelectorAll('mjx-container, .MathJax').length, document.querySelectorAll('[class*="pplx-"]').length]"""


def _shoot(page: Any, target: Any, path: Path) -> None:
    """A PNG of one output, at most `SHOT_MAX_HEIGHT` pixels tall, in 128 colours (small enough for the README)."""
    from PIL import Image

    box = target.bounding_box()
    clip = {'x': box['x'], 'y': box['y'], 'width': box['width'], 'height': min(box['height'], SHOT_MAX_HEIGHT)}
    page.screenshot(path=str(path), clip=clip)
    with Image.open(path) as image:
        small = image.convert('RGB').quantize(colors=128)
    small.save(path, optimize=True)


def render(executed: list[Path], html_dir: Path, lab: Lab, shots: Path | None) -> list[str]:
    """Show each notebook in nbconvert's HTML and in JupyterLab; the problems found, and screenshots if asked."""
    from playwright.sync_api import sync_playwright

    base, token = lab.base, lab.token
    lab.trust(executed)
    lab.wait_ready()
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=['--no-sandbox'])
        context = browser.new_context(viewport={'width': 1280, 'height': 900})
        # Offline, as CI is: nbconvert's page asks a CDN for MathJax and require.js; fail those at once.
        context.route(
            lambda url: url.startswith(('http://', 'https://')) and not url.startswith(base),
            lambda route: route.abort(),
        )
        page = context.new_page()
        for notebook in executed:
            began = time.perf_counter()
            page.goto(to_html(notebook, html_dir).as_uri())
            _settled(page, _COUNT_JS)
            ours = notebook.stem in EXPECT_OURS
            found = page.locator('body').evaluate(CHECKS_JS, ours)
            problems += [f'{notebook.stem}, nbconvert HTML: {p}' for p in found]

            page.goto(f'{base}/lab/tree/{notebook.name}?token={token}&reset')
            page.wait_for_selector('.jp-Notebook .jp-OutputArea-output', timeout=DEADLINE_S * 1000)
            _settled(page, _COUNT_JS)
            if page.locator('#jp-left-stack:visible').count():  # the file browser off: the width goes to the notebook
                page.keyboard.press('Control+b')
                page.locator('#jp-left-stack').wait_for(state='hidden')
            panel = page.locator('.jp-NotebookPanel:visible .jp-Notebook').first
            found = panel.evaluate(CHECKS_JS, ours)
            problems += [f'{notebook.stem}, JupyterLab: {p}' for p in found]
            if '.pplx-result' in EXPECT_UNTRUSTED.get(notebook.stem, []) and not panel.evaluate(_HAS_STYLE_JS):
                problems.append(f'{notebook.stem}, JupyterLab: no <style> when trusted, so untrusted proves nothing')
            problems += [f'{notebook.stem}, JupyterLab untrusted: {p}' for p in _untrusted(page, lab, notebook, ours)]
            print(f'rendered {notebook.stem} ({time.perf_counter() - began:.0f} s)')
            if shots is not None:
                page.add_style_tag(content='.jp-Toast-Container, .Toastify { display: none !important; }')
                for name, selector, index in SHOTS.get(notebook.stem, []):
                    target = panel.locator(f'.jp-OutputArea-output:has({selector})').nth(index)
                    target.evaluate("e => e.scrollIntoView({block: 'start'})")
                    _shoot(page, target, shots / f'{notebook.stem}-{name}.png')
        browser.close()
    return problems


def _untrusted(page: Any, lab: Lab, notebook: Path, ours: bool) -> list[str]:
    """Open an unsigned copy of `notebook` (as one executed elsewhere arrives) in JupyterLab; the problems found."""
    import nbformat

    copy = notebook.parent / 'untrusted' / notebook.name
    copy.parent.mkdir(exist_ok=True)
    node = nbformat.read(notebook, as_version=4)
    # Another digest than the signed notebook's (its metadata is not signed; its cells are), and never signed.
    node.cells.append(nbformat.v4.new_markdown_cell('A copy executed elsewhere, opened untrusted.'))
    nbformat.write(node, copy)
    page.goto(f'{lab.base}/lab/tree/untrusted/{copy.name}?token={lab.token}&reset')
    page.wait_for_selector('.jp-Notebook .jp-OutputArea-output', timeout=DEADLINE_S * 1000)
    _settled(page, _COUNT_JS)
    panel = page.locator('.jp-NotebookPanel:visible .jp-Notebook').first
    expected = EXPECT_UNTRUSTED.get(notebook.stem, [])
    return list(panel.evaluate(CHECKS_JS, ours)) + list(panel.evaluate(UNTRUSTED_JS, expected))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--screenshots', type=Path, help='write the README pictures here (e.g. docs/notebooks)')
    parser.add_argument('--keep', type=Path, help='keep the executed notebooks and HTML pages here')
    parser.add_argument('--reuse', action='store_true', help='with --keep: render the notebooks executed last time')
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f'chromium not found at {CHROMIUM}: apt-get install chromium (or set CHROMIUM)')
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix='render-notebooks-') as tmp:
        work = args.keep or Path(tmp)
        (work / 'html').mkdir(parents=True, exist_ok=True)
        if args.screenshots:
            args.screenshots.mkdir(parents=True, exist_ok=True)
        with jupyterlab(work / 'executed', work / 'jupyter') as lab:  # starts while the notebooks run
            reuse = sorted((work / 'executed').glob('*.ipynb')) if args.reuse else []
            executed = reuse or execute(work / 'executed')
            print(f'executed {len(executed)} notebooks ({time.perf_counter() - started:.0f} s)')
            problems = render(executed, work / 'html', lab, args.screenshots)
    for problem in problems:
        print(f'FAIL {problem}')
    took = time.perf_counter() - started
    print(f'{len(problems)} problems in {len(executed)} notebooks, each rendered three times ({took:.0f} s)')
    sys.exit(1 if problems else 0)


if __name__ == '__main__':
    main()
