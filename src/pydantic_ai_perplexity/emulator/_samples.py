"""The sample recordings shipped with the tests, made by the emulator itself: an emulator as the upstream and a
recording proxy in front of it. Regenerate them with
`uv run --frozen python -m pydantic_ai_perplexity.emulator._samples tests/emulator/recordings`."""

from __future__ import annotations

from pathlib import Path

import httpx2

from ._server import Emulator

__all__ = ('SAMPLE_RUNS', 'SAMPLE_SEARCH', 'make_samples')

#: What `make_samples` records: small runs as the library's research calls send them, a search, the model list.
SAMPLE_RUNS = (
    {'input': 'What is the EU AI Act?', 'effort': 'fast'},
    {'input': 'How do heat pumps work?', 'effort': 'low'},
)
SAMPLE_SEARCH = {'query': 'heat pumps', 'max_results': 3}


def make_samples(directory: Path) -> list[Path]:
    """Record the sample sessions into `directory`: an emulator is the upstream, a recording proxy in front of it.

    Each run is created as a background stream, as the library's research calls are, so its timing is recorded.
    """
    for old in directory.glob('*.json'):
        old.unlink()
    with Emulator(time_scale=0.002) as upstream, Emulator(record=directory, upstream=upstream.base_url) as proxy:
        headers = {'Authorization': f'Bearer {upstream.api_key}'}
        with httpx2.Client(base_url=proxy.base_url, headers=headers, timeout=60) as client:
            for body in SAMPLE_RUNS:
                streamed = {**body, 'background': True, 'store': True, 'stream': True}
                with client.stream('POST', '/v1/agent', json=streamed) as response:
                    response.read()
            client.post('/search', json=SAMPLE_SEARCH).raise_for_status()
            client.get('/v1/models').raise_for_status()
    return sorted(directory.glob('*.json'))


if __name__ == '__main__':  # pragma: no cover - regenerates tests/emulator/recordings
    import sys

    for written in make_samples(Path(sys.argv[1] if len(sys.argv) > 1 else 'tests/emulator/recordings')):
        print(written)
