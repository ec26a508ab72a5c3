"""The package's layers, by folder, and the one way its imports run.

    base (`_base/`)  <  wire (`client/`)  <  domain (`_domain/`)  <  store (`_ledger/`)  <  presentation (`_present/`)
    <  core (`_core/`)  <  ways in (`_pydantic_ai/`, `mcp/`, `cli/`, `notebook/`, `durable/`, `emulator/`, `testing`)
    <  the package root (`__init__`, which re-exports the public names and wires the slots, `_base/slot.py`)

A module may import its own layer or a lower one, never a higher one; ways in import each other only where
`WAYS_IN_MAY_IMPORT` says; the emulator uses nothing of the library but `_base/`. No import cycle at all, imports made
inside functions included. Read from the source with `ast` (imports under `if TYPE_CHECKING:` never run, so they count
for the direction of imports but not for cycles), so a new import that breaks a rule fails here, not at run time.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

PACKAGE = 'pydantic_ai_perplexity'
SRC = Path(__file__).resolve().parents[1] / 'src' / PACKAGE

#: Each layer and the folders (top-level modules) it holds, lowest first; the rank is the index.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ('base', frozenset({'_base'})),
    ('wire', frozenset({'client'})),
    ('domain', frozenset({'_domain'})),
    ('store', frozenset({'_ledger'})),
    ('presentation', frozenset({'_present'})),
    ('core', frozenset({'_core'})),
    ('ways in', frozenset({'_pydantic_ai', 'mcp', 'cli', 'notebook', 'durable', 'emulator', 'testing'})),
    ('root', frozenset({''})),
)
RANK = {name: rank for rank, (name, _) in enumerate(LAYERS)}
#: The ways in that another way in may import: the CLI runs the MCP server and the emulator; the MCP server and the
#: notebook helpers start an emulator when asked to work offline.
WAYS_IN_MAY_IMPORT = {
    'cli': {'mcp', 'emulator'},
    'mcp': {'emulator'},
    'notebook': {'emulator'},
}
#: Frameworks the layers up to the core never import, even inside a function: only the ways in know them.
FRAMEWORKS = {'dbos', 'pydantic_ai', 'pydantic_deep', 'mcp', 'mcp_types', 'fastmcp', 'IPython'}


def _modules(src: Path) -> dict[str, Path]:
    """Every module under `src`, by dotted name inside the package (`''` is the package's `__init__`)."""
    modules: dict[str, Path] = {}
    for path in src.rglob('*.py'):
        parts = path.relative_to(src).with_suffix('').parts
        modules['.'.join(parts[:-1] if parts[-1] == '__init__' else parts)] = path
    return modules


MODULES = _modules(SRC)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == 'TYPE_CHECKING') or (
        isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING'
    )


def _imports(
    body: list[ast.stmt], *, lazy: bool, typing: bool = False
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Each import statement with whether it runs only when a function is called; the body of `if TYPE_CHECKING:`
    only with `typing` (imports for the type checker, which never run)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, lazy
        elif isinstance(node, ast.If) and _is_type_checking(node):
            yield from _imports([*node.body, *node.orelse] if typing else node.orelse, lazy=lazy, typing=typing)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _imports(node.body, lazy=True, typing=typing)
        else:  # class bodies, try/with/for/match blocks and the rest run at import time too
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ExceptHandler | ast.match_case):
                    yield from _imports(child.body, lazy=lazy, typing=typing)
                elif isinstance(child, ast.stmt):
                    yield from _imports([child], lazy=lazy, typing=typing)


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str | None:
    """The dotted name (inside the package) a `from ... import` reads from; None for another distribution."""
    if node.level:
        base = module.split('.') if module else []
        base = base if is_package else base[:-1]
        base = base[: len(base) - (node.level - 1)]
        return '.'.join([*base, *([node.module] if node.module else [])])
    name = node.module or ''
    if name != PACKAGE and not name.startswith(PACKAGE + '.'):
        return None
    return name.removeprefix(PACKAGE).lstrip('.')


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: Mapping[str, object]) -> set[str]:
    """The package's modules an import statement loads: each named module and the packages above it (a package
    this module is inside is loading already, so it counts only when a name is read from its `__init__`)."""
    named: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == PACKAGE or alias.name.startswith(PACKAGE + '.'):
                named.append(alias.name.removeprefix(PACKAGE).lstrip('.'))
    else:
        prefix = _absolute(module, is_package, node)
        if prefix is None:
            return set()
        submodules = [f'{prefix}.{a.name}'.lstrip('.') for a in node.names]
        named.extend(name for name in submodules if name in known)
        if len(named) < len(submodules):  # a name defined in the package's own `__init__`
            named.append(prefix)
        else:
            named.extend(p for p in _parents(prefix) if not _inside(module, p))
    found: set[str] = set()
    for name in named:
        found.update(p for p in [*_parents(name), name] if p in known and (p == name or not _inside(module, p)))
    found.discard(module)
    return found


def _parents(name: str) -> list[str]:
    parts = name.split('.') if name else []
    return ['.'.join(parts[:i]) for i in range(len(parts))]


def _inside(module: str, package: str) -> bool:
    return not package or module == package or module.startswith(package + '.')


def _parse(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(encoding='utf-8'))


def _graph(*, lazy: bool, typing: bool = False) -> dict[str, set[str]]:
    """Each module's imports of the package's modules: at import time only, or (`lazy`) inside functions too; and
    (`typing`) those made for the type checker only."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        edges: set[str] = set()
        for node, is_lazy in _imports(_parse(module).body, lazy=False, typing=typing):
            if lazy or not is_lazy:
                edges |= _targets(module, path.name == '__init__.py', node, MODULES)
        graph[module] = edges
    return graph


GRAPH = _graph(lazy=True)
#: With the imports made for the type checker: they must go downward too, though a cycle of them is harmless.
TYPED_GRAPH = _graph(lazy=True, typing=True)


def _frameworks(module: str) -> set[str]:
    """The frameworks (`FRAMEWORKS`) a module imports, inside functions too."""
    found: set[str] = set()
    for node, _ in _imports(_parse(module).body, lazy=False):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or '']
        if isinstance(node, ast.ImportFrom) and node.level:
            continue
        found.update(top for top in (n.split('.')[0] for n in names) if top in FRAMEWORKS)
    return found


def _cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
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


def _top(module: str) -> str:
    return module.split('.')[0]


def _layer(module: str) -> str | None:
    return next((name for name, folders in LAYERS if _top(module) in folders), None)


def test_the_graph_reader_sees_imports_lazy_ones_and_a_cycle():
    eager = _graph(lazy=False)
    assert 'client._models' in eager['_domain.results'] and '_domain.results' in eager['_present.model_text']
    assert '_core.researcher' not in eager['_core.batch'] and '_core.researcher' in GRAPH['_core.batch']  # lazy
    assert '_domain.calls' not in GRAPH['_domain.results']  # under `if TYPE_CHECKING:` only
    assert '_domain.calls' in TYPED_GRAPH['_domain.results']
    assert {'client', 'client._models'} <= GRAPH['_core.researcher']  # a module and the package it is in
    assert 'client' not in GRAPH['client._client']  # `from . import _events`: the submodule, not the package
    assert _cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == ['a', 'b', 'c', 'a']
    assert _cycle({'a': {'b'}, 'b': {'c'}, 'c': set()}) is None


def test_the_graph_reader_on_every_kind_of_import():
    source = textwrap.dedent("""
        from typing import TYPE_CHECKING
        import pydantic_ai_perplexity.x.deep
        from . import sibling, NAME_IN_INIT
        if TYPE_CHECKING:
            from .typed import T
        def f():
            from ..y import thing
    """)
    known = dict.fromkeys(['', 'x', 'x.deep', 'x.pkg', 'x.pkg.m', 'x.pkg.sibling', 'x.pkg.typed', 'x.y'])
    found = {
        (frozenset(_targets('x.pkg.m', False, node, known)), lazy)
        for node, lazy in _imports(ast.parse(source).body, lazy=False)
    }
    typed = {
        frozenset(_targets('x.pkg.m', False, node, known))
        for node, _ in _imports(ast.parse(source).body, lazy=False, typing=True)
    }
    assert typed - {f for f, _ in found} == {frozenset({'x.pkg.typed'})}
    assert found == {
        (frozenset(), False),  # typing
        (frozenset({'x.deep'}), False),  # `x` holds this module: it is loading already
        (frozenset({'x.pkg.sibling', 'x.pkg'}), False),  # NAME_IN_INIT is read from the package's `__init__`
        (frozenset({'x.y'}), True),
    }


def test_every_module_has_a_layer():
    assert sorted(m for m in MODULES if _layer(m) is None) == []


def test_no_import_cycle_even_counting_imports_inside_functions():
    assert _cycle(_graph(lazy=False)) is None
    assert _cycle(GRAPH) is None


def test_imports_go_to_the_same_layer_or_a_lower_one_even_for_the_type_checker():
    upward = sorted(
        (module, target)
        for module, targets in TYPED_GRAPH.items()
        for target in targets
        if RANK[_layer(target) or 'root'] > RANK[_layer(module) or 'root']
    )
    assert upward == []


def test_nothing_imports_the_package_root():
    assert sorted(module for module, targets in GRAPH.items() if '' in targets) == []


def test_ways_in_import_each_other_only_where_allowed():
    crossing = sorted(
        (module, target)
        for module, targets in TYPED_GRAPH.items()
        if _layer(module) == 'ways in'
        for target in targets
        if _layer(target) == 'ways in'
        and _top(target) != _top(module)
        and _top(target) not in WAYS_IN_MAY_IMPORT.get(_top(module), set())
    )
    assert crossing == []


def test_the_emulator_uses_nothing_of_the_library_but_base():
    used = sorted(
        (module, target)
        for module, targets in TYPED_GRAPH.items()
        if _top(module) == 'emulator'
        for target in targets
        if _top(target) not in ('emulator', '_base')
    )
    assert used == []


def test_the_wire_never_reaches_tracing():
    assert (
        sorted(
            t
            for m, targets in TYPED_GRAPH.items()
            if _layer(m) == 'wire'
            for t in targets
            if _layer(t) != 'base' and _top(t) != 'client'
        )
        == []
    )


def test_below_the_ways_in_no_framework_is_imported_even_inside_functions():
    below = [m for m in MODULES if RANK[_layer(m) or 'root'] < RANK['ways in']]
    assert sorted((m, f) for m in below for f in _frameworks(m)) == []


def _slot_names(module: str, call: str) -> set[str]:
    """The names given to `Slot(...)` (or `Slot.loader(...)`) calls in a module's source."""
    names: set[str] = set()
    for node in ast.walk(_parse(module)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == call and node.args:
            first = node.args[0]
            assert isinstance(first, ast.Constant) and isinstance(first.value, str), ast.unparse(node)
            names.add(first.value)
    return names


def test_the_root_names_a_provider_for_every_slot_in_the_package():
    declared = {name for module in MODULES for name in _slot_names(module, 'Slot')}
    assert declared == {'wire observer', 'durable runner', 'display'}
    assert _slot_names('', 'Slot.loader') == declared


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_every_slot_is_filled_by_the_provider_the_root_names_when_first_read():
    """The wire's observer, the core's durable runner and the domain's display: each is read empty at first, and
    the package root's loader fills it from the layer above, which the lower layer never imports. (With DBOS loaded
    the durable runner is filled too: tests/durable/test_durable.py runs an agent in a workflow that never imports
    `durable`, and its research is checkpointed.)"""
    out = _run(
        textwrap.dedent("""
        import sys
        from pydantic_ai_perplexity._base.slot import Slot
        from pydantic_ai_perplexity._core.researcher import DURABLE
        from pydantic_ai_perplexity._domain.display_slot import DISPLAY
        from pydantic_ai_perplexity.client._events import OBSERVER, observer
        print(sorted(Slot.made), sorted(Slot._loaders))
        print(repr(OBSERVER), repr(DISPLAY), repr(DURABLE))
        print(type(observer()).__module__, type(DISPLAY.need()).__module__, DURABLE.get())
        print('pydantic_ai_perplexity.durable' in sys.modules)
    """)
    )
    assert out.splitlines() == [
        "['display', 'durable runner', 'wire observer'] ['display', 'durable runner', 'wire observer']",
        "Slot('wire observer', empty) Slot('display', empty) Slot('durable runner', empty)",
        'pydantic_ai_perplexity._core.tracing pydantic_ai_perplexity._present.display None',
        'False',  # without DBOS loaded, research is never durable and `durable` is not imported
    ]
