"""The package's layers run one way: wire (`client/`) -> domain (results, steps, timeline) -> presentation (render,
display) -> ways in. Read from the source with `ast`, so a new import that closes a loop fails here, not at run time."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = 'pydantic_ai_perplexity'
SRC = Path(__file__).resolve().parents[1] / 'src' / PACKAGE

WIRE = 'client'
DOMAIN = {'results', 'steps', 'timeline'}
PRESENTATION = {'render', 'display'}
#: The research core and everything built on it: the ways in (toolset, MCP, CLI, notebooks, pipelines) and the tools.
WAYS_IN = {
    'researcher', 'reconcile', 'tools', 'toolset', 'capabilities', 'mcp', 'cli', 'notebook', 'batch', 'durable',
    'testing', 'doctor', 'emulator',
}  # fmt: skip
#: Imports made inside a function that are part of the design: a result's and a timeline's notebook reprs.
LAZY_ALLOWED = {('results', 'display'), ('timeline', 'display')}


def _modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for path in SRC.rglob('*.py'):
        parts = path.relative_to(SRC).with_suffix('').parts
        name = '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)
        modules[name] = path
    return modules


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == 'TYPE_CHECKING') or (
        isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING'
    )


def _imports(body: list[ast.stmt], *, lazy: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Each import statement with whether it runs only when a function is called; `if TYPE_CHECKING:` is skipped."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, lazy
        elif isinstance(node, ast.If) and _is_type_checking(node):
            yield from _imports(node.orelse, lazy=lazy)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _imports(node.body, lazy=True)
        else:  # class bodies, try/with/for/match blocks and the rest run at import time too
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ExceptHandler | ast.match_case):
                    yield from _imports(child.body, lazy=lazy)
                elif isinstance(child, ast.stmt):
                    yield from _imports([child], lazy=lazy)


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The package's modules an import statement loads (a parent package's `__init__` included)."""
    is_package = MODULES[module].name == '__init__.py'
    found: set[str] = set()
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = module.split('.') if module else []
            base = base if is_package else base[:-1]
            base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
            prefix = '.'.join([*base, *([node.module] if node.module else [])])
        else:
            prefix = node.module or ''
            if not prefix.startswith(PACKAGE):
                return found
            prefix = prefix.removeprefix(PACKAGE).lstrip('.')
        names = [prefix] + [f'{prefix}.{a.name}' if prefix else a.name for a in node.names]
        names = [PACKAGE + ('.' + n if n else '') for n in names]
    for full in names:
        if not full.startswith(PACKAGE):
            continue
        name = full.removeprefix(PACKAGE).lstrip('.')
        parts = name.split('.') if name else []
        for i in range(len(parts) + 1):
            candidate = '.'.join(parts[:i])
            inside = module == candidate or module.startswith(candidate + '.') if candidate else True
            if candidate in MODULES and (i == len(parts) or not inside):
                found.add(candidate)
    found.discard(module)
    return found


def _graph(*, lazy: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding='utf-8'))
        edges: set[str] = set()
        for node, is_lazy in _imports(tree.body, lazy=False):
            if lazy or not is_lazy:
                edges |= _targets(module, node)
        graph[module] = edges
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _layer(module: str) -> str | None:
    top = module.split('.')[0]
    if top == WIRE:
        return 'wire'
    if top in DOMAIN:
        return 'domain'
    if top in PRESENTATION:
        return 'presentation'
    if top in WAYS_IN:
        return 'ways in'
    return None


def test_the_graph_reader_sees_imports_and_a_cycle():
    graph = _graph(lazy=False)
    assert 'client._models' in graph['results'] and 'results' in graph['render']
    assert 'display' not in graph['results'] and 'display' in _graph(lazy=True)['results']  # lazy, told apart
    assert _cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == ['a', 'b', 'c', 'a']


def test_no_import_cycle_at_import_time():
    assert _cycle(_graph(lazy=False)) is None


@pytest.mark.parametrize(
    ('layer', 'forbidden'),
    [
        ('wire', {'domain', 'presentation', 'ways in'}),
        ('domain', {'presentation', 'ways in'}),
        ('presentation', {'ways in'}),
    ],
)
def test_layers_only_import_downwards(layer: str, forbidden: set[str]):
    wrong = sorted(
        (module, target)
        for module, targets in _graph(lazy=True).items()
        if _layer(module) == layer
        for target in targets
        if _layer(target) in forbidden and (module.split('.')[0], target.split('.')[0]) not in LAZY_ALLOWED
    )
    assert wrong == []


def test_below_the_ways_in_no_cycle_even_counting_imports_inside_functions_but_the_notebook_reprs():
    graph = {m: {t for t in targets if _layer(t) != 'ways in'} for m, targets in _graph(lazy=True).items()}
    graph = {m: targets for m, targets in graph.items() if _layer(m) != 'ways in'}
    for module, target in LAZY_ALLOWED:
        graph[module].discard(target)
    assert _cycle(graph) is None
