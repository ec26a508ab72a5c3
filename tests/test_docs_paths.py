"""Every file path and module name the docs quote in backticks exists, so README.md and docs/*.md cannot drift.

A quoted word is checked when it is one of ours: a `pydantic_ai_perplexity.<module>` dotted name (the module must
import, the rest be attributes of it); a dotted name from a layer folder or the CLI (`_ledger.ESTIMATED_COST_USD`);
a package path with an attribute (`_core/tracing.watch_wire()`); a path that starts in a folder of the repository
or the package (relative to the repository, to `src/` or to the package, as architecture.md writes them); a bare
Python file or folder name (some file or folder of that name must exist); and no name of a module of the old flat
layout (`render.plain`, `tools.py`). URLs, model names, MCP methods and a user's own files are not checked.
"""

from __future__ import annotations

import importlib
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / 'src' / 'pydantic_ai_perplexity'
DOCS = [ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md'))]
_TOP_FOLDERS = ('src/', 'tests/', 'docs/', 'scripts/', 'benchmarks/', 'agents/', 'notebooks/', 'deploy/', '.ci/')
_SUFFIXES = ('.py', '.md', '.json', '.svg', '.toml', '.sh', '.yaml', '.yml', '.ipynb', '.sql', '.conf', '.txt')

# Quoted paths of ours that must stay although nothing is there in a checkout, each with its reason.
ALLOWED = {
    'deploy/tokens/mcp-tokens': 'the tokens file a deployment writes (from deploy/mcp-tokens.example), never committed',
    'tests/pages': "an example of the user's own corpus folder, in the user's project",
}

# Modules of the flat layout whose names no module has now, and where their contents went: `render.plain` or
# `tools.py` in a doc is a name from before the move.
FORMER = {
    'render': '_present/model_text.py',
    'tools': '_core/tool_spec.py',
    '_live_prices': '_base/prices.py',
    '_terminal': '_present/terminal.py',
    'offline': 'emulator/_offline.py',
    '_redact': '_base/redact.py',
    '_safe_write': '_base/safe_write.py',
}

_QUOTED = re.compile(r'`([^`\n]+)`')
_DOTTED = re.compile(r'\bpydantic_ai_perplexity(?:\.[A-Za-z_]\w*)+')
_WORD = re.compile(r'[A-Za-z0-9_.~:/@{}<>?*=\[\]-]+')
# A dotted name inside the package, written from a layer folder or the CLI (`_ledger.ESTIMATED_COST_USD`).
_INNER_DOTTED = re.compile(r'^(?:_base|_core|_domain|_ledger|_present|_pydantic_ai|cli)(?:\.[A-Za-z_]\w*)+$')
_PATH_ATTR = re.compile(r'^((?:[A-Za-z_]\w*/)+)([A-Za-z_]\w*)\.([A-Za-z_]\w*)')


def quoted(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of every backtick span in a Markdown file, code blocks included."""
    spans: list[tuple[int, str]] = []
    for number, line in enumerate(path.read_text(encoding='utf-8').splitlines(), start=1):
        spans.extend((number, match.group(1)) for match in _QUOTED.finditer(line))
    return spans


@cache
def file_names() -> frozenset[str]:
    """The name of every file in the repository's own folders (the venv and caches left out)."""
    names: set[str] = set()
    for top in ('src', 'tests', 'docs', 'scripts', 'benchmarks', 'agents', 'notebooks', 'deploy'):
        names.update(p.name for p in (ROOT / top).rglob('*') if '__pycache__' not in p.parts)
    names.update(p.name for p in ROOT.iterdir())
    return frozenset(names)


def module_problem(dotted: str) -> str | None:
    """None if the longest importable prefix of `dotted` is a module and the rest are attributes of it."""
    parts = dotted.split('.')
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module('.'.join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return f'{".".join(parts[:cut])} has no {attribute!r}'
            target = getattr(target, attribute)
        return None
    return 'no such module'  # pragma: no cover - the package itself always imports


def resolve(word: str) -> Path | None:
    """The existing file or folder a path word names, relative to the repository, `src/` or the package."""
    relative = word.removesuffix('/')
    for base in (ROOT, ROOT / 'src', PACKAGE):
        if '*' in relative:
            if matches := sorted(base.glob(relative)):
                return matches[0]
        elif (base / relative).exists():
            return base / relative
    return None


def path_problem(word: str) -> str | None:
    """Why a path-like word of ours names nothing, or None if it exists or is not one of our paths.

    A bare name is ours when it is a Python file or a folder (`tools.py`, `cli/`); a longer path when it starts in
    `src/` or its first folder is one of the repository's or the package's (`mcp/_tokens.py`): a user's own files
    (`.cursor/mcp.json`) and third-party files (the live captures, by name) are not checked.
    """
    word = word.split('::')[0].rstrip('.,;:)').removeprefix('./')
    if (
        not word
        or (word.startswith('.') and not word.startswith('.ci/'))
        or word.startswith(('~', '/', '$'))
        or '://' in word
        or '{' in word
        or '<' in word
        or word in ALLOWED
    ):
        return None
    if '/' not in word and '.' in word and word.split('.')[0] in FORMER:
        return f'a module of the old layout, now {FORMER[word.split(".")[0]]}'
    if not word.endswith(_SUFFIXES) and (match := _INNER_DOTTED.match(word)):
        return module_problem(f'pydantic_ai_perplexity.{match.group(0)}')
    if not word.endswith(_SUFFIXES) and (match := _PATH_ATTR.match(word)):
        folders, module, attribute = match.groups()
        target = resolve(f'{folders}{module}.py') or resolve(f'{folders}{module}')
        if target is not None and target.is_relative_to(PACKAGE):
            parts = target.relative_to(ROOT / 'src').with_suffix('').parts
            return module_problem('.'.join(parts) + '.' + attribute)
    name = word.removesuffix('/')
    if '/' not in name:
        if word.endswith(('/', '.py')):
            return None if name in file_names() else 'no file or folder of that name'
        return None
    first = name.split('/')[0]
    if first != 'src' and not name.endswith('.py') and resolve(first) is None:
        return None
    if not (word.endswith(_SUFFIXES) or word.endswith('/') or word.startswith(_TOP_FOLDERS) or resolve(first)):
        return None
    return None if resolve(word) is not None else 'no such path'


def problems(path: Path) -> list[str]:
    """Every quoted path or module name in one doc that names nothing, as 'file:line: `word`: why'."""
    found: list[str] = []
    for number, span in quoted(path):
        for dotted in _DOTTED.findall(span):
            if why := module_problem(dotted):
                found.append(f'{path.name}:{number}: `{dotted}`: {why}')
        for word in _WORD.findall(span):
            if word.startswith('pydantic_ai_perplexity.'):
                continue
            if why := path_problem(word):
                found.append(f'{path.name}:{number}: `{word}`: {why}')
    return found


@pytest.mark.parametrize('doc', DOCS, ids=lambda p: p.name)
def test_every_path_and_module_a_doc_quotes_exists(doc: Path):
    assert problems(doc) == []


def test_the_check_catches_a_moved_module_a_missing_file_and_a_missing_attribute(tmp_path: Path):
    doc = tmp_path / 'old.md'
    doc.write_text(
        'See `pydantic_ai_perplexity.render`, `src/pydantic_ai_perplexity/tools.py`, `mcp/server.py`,\n'
        '`_terminal.py`, `render.plain`, `_core/tracing.no_such_function()`, `cli._option_params` and\n'
        '`pydantic_ai_perplexity._core.tracing.nope`;\n'
        'but `_core/tool_spec.py`, `pydantic_ai_perplexity._domain.options`, `tasks/get`, `openai/gpt-5.5`,\n'
        '`_core/tracing.watch_wire()`, `cli/_research._option_params`, `tests/test_docs_paths.py::test_x`,\n'
        '`.cursor/mcp.json` and `https://x/y.py` are fine.\n',
        encoding='utf-8',
    )
    assert [line.split(': ', 2)[1] for line in problems(doc)] == [
        '`pydantic_ai_perplexity.render`',
        '`src/pydantic_ai_perplexity/tools.py`',
        '`mcp/server.py`',
        '`_terminal.py`',
        '`render.plain`',
        '`_core/tracing.no_such_function`',
        '`cli._option_params`',
        '`pydantic_ai_perplexity._core.tracing.nope`',
    ]
