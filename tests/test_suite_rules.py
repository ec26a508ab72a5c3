"""Rules of the test suite itself: shared code lives in `tests/support`, no test module imports another test module
(or a conftest), in CI a skipped test fails with the reason it skipped (`support.skips`), and the default run is the
fast tier and says what it left out (`support.tiers`)."""

from __future__ import annotations

import ast
import shlex
import tomllib
from pathlib import Path

import pytest

from support.skips import PREFIX
from support.tiers import FAST, OTHERS

TESTS = Path(__file__).resolve().parent
SUPPORT = TESTS / 'support'


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob('*.py') if '__pycache__' not in p.parts)


def _imported_modules(path: Path) -> list[str]:
    """Every module `path` imports by name (relative imports, which a test folder without `__init__` cannot use,
    count as their dotted tail)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            names.append(base)
            names += [f'{base}.{alias.name}'.lstrip('.') for alias in node.names]
    return names


def _is_test_module(name: str) -> bool:
    parts = name.split('.')
    return parts[0] == 'tests' or any(part.startswith('test_') or part == 'conftest' for part in parts)


def test_no_test_module_imports_another_test_module_or_a_conftest() -> None:
    offenders = {
        f'{path.relative_to(TESTS)}: {name}'
        for path in _python_files()
        for name in _imported_modules(path)
        if _is_test_module(name)
    }
    assert not offenders, f'move what is shared into tests/support and import it from there: {sorted(offenders)}'


def test_the_rule_sees_each_way_to_import_a_test_module(tmp_path: Path) -> None:
    module = tmp_path / 'test_probe.py'
    module.write_text(
        'import test_a\nfrom test_b import x\nfrom mcp import test_c\nimport conftest\n'
        'from tests.cli import helpers\nfrom support.mcp_servers import server_env\nimport pytest\n',
        encoding='utf-8',
    )
    found = [name for name in _imported_modules(module) if _is_test_module(name)]
    assert found == ['test_a', 'test_b', 'test_b.x', 'mcp.test_c', 'conftest', 'tests.cli', 'tests.cli.helpers']


def test_shared_test_code_lives_in_the_support_package() -> None:
    astray = [
        str(path.relative_to(TESTS))
        for path in _python_files()
        if SUPPORT not in path.parents and not path.name.startswith('test_') and path.name != 'conftest.py'
    ]
    assert astray == [], f'helpers belong in tests/support (imported as `support.NAME`): {astray}'
    assert (SUPPORT / '__init__.py').is_file()


# -- skips in CI ---------------------------------------------------------------------------------------------------

SKIPPING = """
import pytest

needs_tool = pytest.mark.skipif(True, reason='the tool is not installed')


@pytest.fixture
def tool():
    pytest.skip('the tool is not on PATH')


def test_skips_in_its_body():
    pytest.skip('no registry to install from')


@needs_tool
def test_skips_by_a_mark():
    pass


def test_skips_in_a_fixture(tool):
    pass


@pytest.mark.xfail(reason='a known bug')
def test_an_expected_failure():
    assert False


def test_runs():
    pass
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest('-p', 'support.skips', '-p', 'no:cacheprovider', '-ra', *args)


@pytest.mark.parametrize('value', ['', '0', 'false'])
def test_outside_ci_a_missing_prerequisite_skips_and_says_why(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv('CI', value)
    pytester.makepyfile(test_tools=SKIPPING)
    result = _run(pytester)
    result.assert_outcomes(passed=1, skipped=3, xfailed=1)
    result.stdout.fnmatch_lines(['*SKIPPED*no registry to install from*'])
    assert PREFIX not in result.stdout.str()


def test_in_ci_every_skip_fails_with_its_reason(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('CI', 'true')
    pytester.makepyfile(test_tools=SKIPPING)
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=1, errors=2, xfailed=1)  # a skip in setup (mark, fixture) is an error
    result.stdout.fnmatch_lines_random(
        [
            f'*FAILED*test_skips_in_its_body*{PREFIX}: no registry to install from*',
            f'*ERROR*test_skips_by_a_mark*{PREFIX}: the tool is not installed*',
            f'*ERROR*test_skips_in_a_fixture*{PREFIX}: the tool is not on PATH*',
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_in_ci_a_module_skipped_as_it_is_collected_is_an_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    optional = "import pytest\n\npytest.importorskip('no_such_module_here')\n\n\ndef test_x():\n    pass\n"
    pytester.makepyfile(test_optional=optional)
    monkeypatch.delenv('CI', raising=False)
    _run(pytester).assert_outcomes(skipped=1)
    monkeypatch.setenv('CI', '1')
    result = _run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{PREFIX}: could not import 'no_such_module_here'*"])


# -- tiers ---------------------------------------------------------------------------------------------------------


def test_the_default_run_is_the_fast_tier() -> None:
    config = tomllib.loads((TESTS.parent / 'pyproject.toml').read_text(encoding='utf-8'))['tool']['pytest']
    addopts = shlex.split(config['ini_options']['addopts'])
    assert addopts[addopts.index('-m') + 1] == FAST
    assert {line.split(':')[0] for line in config['ini_options']['markers']} == {'slow', 'compat'}


def test_a_default_run_that_left_tests_out_says_how_to_run_them(pytester: pytest.Pytester) -> None:
    pytester.makeini('[pytest]\nmarkers =\n    slow: long\n    compat: outside prerequisite\n')
    pytester.makepyfile(
        test_tiers='import pytest\n\n\n@pytest.mark.slow\ndef test_a():\n    pass\n\n\n'
        '@pytest.mark.compat\ndef test_b():\n    pass\n\n\ndef test_c():\n    pass\n'
    )
    fast = pytester.runpytest('-p', 'support.tiers', '-p', 'no:cacheprovider', '-m', FAST)
    fast.assert_outcomes(passed=1, deselected=2)
    fast.stdout.fnmatch_lines([f'2 tests deselected by the default selection*run them with -m "{OTHERS}"*'])
    others = pytester.runpytest('-p', 'support.tiers', '-p', 'no:cacheprovider', '-m', OTHERS)
    others.assert_outcomes(passed=2, deselected=1)
    assert 'deselected by the default selection' not in others.stdout.str()
