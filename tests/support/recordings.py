"""A replayable recording whose answer cites with grouped markers (`[11, 12]`, `[web:12, web:14]`).

Made from the shipped `What is the EU AI Act?` recording: its result ids become 11..14 (so they differ from the
sources' numbers 1..4) and its answer gains a line with grouped markers. Replayed by `Emulator(replay=...)`, it
reaches every way in as a real run over HTTP.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SHIPPED = Path(__file__).parents[1] / 'emulator' / 'recordings' / 'run-what-is-the-eu-ai-act-2c713eef2f.json'
QUESTION = 'What is the EU AI Act?'
EFFORT = 'fast'
GROUPED_LINE = '\n- Both timelines agree [11, 12], as do the summaries [web:12, web:14].'
#: The same line as a model must read it: each result id renumbered to its source's `[n]`.
RENUMBERED_LINE = '- Both timelines agree [1, 2], as do the summaries [2, 4].'
_SHIFT = 10


def _shift_markers(text: str) -> str:
    return re.sub(r'\[(\d+)\]', lambda m: f'[{int(m.group(1)) + _SHIFT}]', text)


def grouped_marker_recordings(directory: Path) -> Path:
    """Write the recording into `directory` (made if needed) and return it, for `Emulator(replay=directory)`."""
    recording: dict[str, Any] = json.loads(SHIPPED.read_text(encoding='utf-8'))
    final = recording['run']['final']
    [message] = [item for item in final['output'] if item['type'] == 'message']
    old = message['content'][0]['text']
    new = _shift_markers(old) + GROUPED_LINE

    def rewrite(value: Any) -> Any:
        if isinstance(value, str):
            return new if value == old else value
        if isinstance(value, list):
            return [rewrite(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
        if isinstance(value, dict):
            out = {k: rewrite(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
            if results := out.get('results'):
                out['results'] = [
                    {**r, 'id': r['id'] + _SHIFT} if isinstance(r, dict) and isinstance(r.get('id'), int) else r
                    for r in results
                ]
            return out
        return value

    recording = rewrite(recording)
    deltas = [e['event'] for e in recording['run']['events'] if e['event']['type'] == 'response.output_text.delta']
    for i, event in enumerate(deltas):  # the whole answer in the first delta: no marker split across chunks
        event['delta'] = new if i == 0 else ''
    directory.mkdir(parents=True, exist_ok=True)
    (directory / SHIPPED.name).write_text(json.dumps(recording), encoding='utf-8')
    return directory
