"""A pytest plugin: in CI (`CI` set) a skipped test fails, saying which prerequisite is missing.

Locally a test skips when an outside prerequisite is missing (Node.js and npm, tmux, chromium, nginx, a PostgreSQL
URL, root for a mount, a registry for a fresh venv) and `-ra` lists why. CI installs every prerequisite, so a skip
there means a test silently did not run: it becomes a failure whose message names the test's own skip reason. This
covers each way a test skips (`pytest.skip`, a `skipif` mark, `pytest.importorskip`, at collection or in a fixture).
Loaded by `tests/conftest.py`; `tests/test_suite_rules.py` runs it in a session of its own.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

#: The variable CI services set (GitHub Actions, GitLab, `.ci/run`): skips become failures when it is non-empty.
CI_ENV = 'CI'
#: What a skip turned failure says first: CI's log is searched for it.
PREFIX = 'skipped in CI, where every prerequisite must be installed'


def in_ci() -> bool:
    """Whether this run is CI's (`CI` set to anything but empty, `0` or `false`)."""
    return os.environ.get(CI_ENV, '').strip().lower() not in ('', '0', 'false')


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The skip's reason, from the `(file, line, reason)` a skip report carries."""
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix('Skipped: ')
    return str(longrepr)


def _fail_the_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    report.outcome = 'failed'
    report.longrepr = f'{PREFIX}: {_reason(report)}'


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A test skipped in CI (by a mark, in a fixture or in its body) is reported failed; an xfail stays one."""
    report: pytest.TestReport = yield
    if report.skipped and in_ci() and not hasattr(report, 'wasxfail'):
        _fail_the_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    """A module skipped in CI as it is collected (`pytest.importorskip` at its top) is a collection error."""
    report: pytest.CollectReport = yield
    if report.skipped and in_ci():
        _fail_the_skip(report)
    return report
