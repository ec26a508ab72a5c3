"""Fixtures for the scale tests: nginx (installed from Debian's package when missing and we are root), an emulator."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from scale_support import find_nginx

from pydantic_ai_perplexity.emulator import Emulator


@pytest.fixture(scope='session')
def nginx_binary() -> str:
    """The nginx binary; the tests skip without it locally, and fail in CI (where `CI` is set)."""
    found = find_nginx(install=True)
    if found is None:
        reason = 'the scale tests need nginx: install it with `apt-get install -y nginx` (as root)'
        if os.environ.get('CI'):
            pytest.fail(f'nginx is not installed in CI and could not be installed: {reason}')
        pytest.skip(reason)
    return found


@pytest.fixture(scope='module')
def emu() -> Iterator[Emulator]:
    """One emulator for a test module: a `fast` run takes 0.05 s, `duration=N` takes N x 10 ms."""
    with Emulator(time_scale=0.01) as emulator:
        yield emulator
