"""The Quickstart's main job installs only what it needs: `uv run --no-dev` syncs the package and the core's
dependencies, not the development group, and the README says how many that is."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

# The Quickstart in fresh environments, installed with uv.
pytestmark = pytest.mark.compat

ROOT = Path(__file__).parents[1]
README = (ROOT / 'README.md').read_text(encoding='utf-8')


def _would_install(tmp_path: Path, *flags: str) -> int:
    """How many packages `uv sync --frozen` would install into a fresh environment (a dry run: nothing is fetched)."""
    env_dir = tmp_path / ('venv' + '-'.join(flags))
    done = subprocess.run(
        ['uv', 'sync', '--frozen', '--dry-run', *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={'PATH': str(Path(shutil.which('uv') or 'uv').parent), 'UV_PROJECT_ENVIRONMENT': str(env_dir)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'Would install (\d+) packages', done.stderr + done.stdout)
    assert found, done.stderr[-2000:]
    return int(found.group(1))


@pytest.mark.skipif(shutil.which('uv') is None, reason='the Quickstart runs uv')
def test_the_main_job_installs_what_the_readme_says_and_far_less_than_the_tests(tmp_path: Path) -> None:
    assert 'uv run --no-dev pydantic-ai-perplexity research' in README
    light = _would_install(tmp_path, '--no-dev')
    assert f'The main job installs only what it needs: {light} packages' in README
    full = _would_install(tmp_path)
    assert f'the development group too ({full}:' in README
    assert light < full / 4  # the development group (the tests' tools) is most of it
