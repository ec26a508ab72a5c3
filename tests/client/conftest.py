"""Fixtures of the client tests: anyio on asyncio, a clean environment, an emulator and a client of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from pydantic_ai_perplexity.client import PerplexityClient
from pydantic_ai_perplexity.emulator import Emulator
from support.client import SENTINEL_KEY


@pytest.fixture
def anyio_backend() -> str:
    return 'asyncio'


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ('PERPLEXITY_API_KEY', 'PERPLEXITY_BASE_URL'):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope='module')
def shared_emulator() -> Iterator[Emulator]:
    with Emulator(api_key=SENTINEL_KEY, time_scale=0.01) as emulator:
        yield emulator


@pytest.fixture
def emu(shared_emulator: Emulator) -> Emulator:
    """An emulator on loopback whose one accepted key is the sentinel, with no requests or faults recorded yet."""
    shared_emulator.faults.clear()
    shared_emulator.requests.clear()
    return shared_emulator


@pytest.fixture
async def client(emu: Emulator) -> AsyncIterator[PerplexityClient]:
    async with PerplexityClient(api_key=emu.api_key, base_url=emu.base_url) as perplexity:
        yield perplexity
