"""Fixtures of the emulator tests: one shared emulator (fast clock), cleared before each test, and HTTP clients."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx2
import pytest

from pydantic_ai_perplexity.emulator import Emulator


@pytest.fixture
def anyio_backend() -> str:
    return 'asyncio'


@pytest.fixture(scope='session')
def shared_emulator() -> Iterator[Emulator]:
    """One emulator for the whole session: a `medium` run takes 60 ms, a `fast` one 5 ms."""
    with Emulator(time_scale=0.001) as emu:
        yield emu


@pytest.fixture
def emu(shared_emulator: Emulator) -> Emulator:
    """The shared emulator with no queued faults and an empty request log."""
    shared_emulator.faults.clear()
    shared_emulator.requests.clear()
    return shared_emulator


@pytest.fixture(scope='session')
def shared_client(shared_emulator: Emulator) -> Iterator[httpx2.Client]:
    """One keep-alive client for the session (building a client per test costs more than most tests)."""
    headers = {'Authorization': f'Bearer {shared_emulator.api_key}'}
    with httpx2.Client(base_url=shared_emulator.base_url, headers=headers, timeout=10) as c:
        yield c


@pytest.fixture
def client(emu: Emulator, shared_client: httpx2.Client) -> httpx2.Client:
    """A client of the shared emulator, authenticated."""
    return shared_client


@pytest.fixture
async def aclient(emu: Emulator) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(
        base_url=emu.base_url, headers={'Authorization': f'Bearer {emu.api_key}'}, timeout=10
    ) as c:
        yield c


@pytest.fixture
def upstream() -> Iterator[Emulator]:
    """An emulator for a recording proxy to forward to, with a key that must never reach a recording."""
    with Emulator(time_scale=0.001, api_key='pplx-upstream-secret-key-0000') as emu:
        yield emu
