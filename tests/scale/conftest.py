"""Fixtures for the scale tests: nginx (installed from Debian's package when missing and we are root), an emulator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support.scale import find_nginx


@pytest.fixture(scope='session')
def nginx_binary() -> str:
    """The nginx binary; the tests skip without it (and fail in CI: `support.skips`)."""
    found = find_nginx(install=True)
    if found is None:
        pytest.skip('the scale tests need nginx: install it with `apt-get install -y nginx` (as root)')
    return found


@pytest.fixture(scope='module')
def emu() -> Iterator[Emulator]:
    """One emulator for a test module: a `fast` run takes 0.05 s, `duration=N` takes N x 10 ms."""
    with Emulator(time_scale=0.01) as emulator:
        yield emulator
