"""Fixtures of the client tests: anyio on asyncio, a clean environment."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return 'asyncio'


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ('PERPLEXITY_API_KEY', 'PERPLEXITY_BASE_URL'):
        monkeypatch.delenv(name, raising=False)
