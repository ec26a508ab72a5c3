"""An offline emulator of Perplexity's Agent API, Search API and models list, served over real HTTP on loopback.

```python
from pydantic_ai_perplexity.emulator import Emulator

with Emulator() as emu:
    ...  # point any client at emu.base_url with emu.api_key
```

Answers come from a small local corpus, deterministically, in scaled time; fault directives
(`[[emulate: 429x2, drop@5]]` in the query, or `emu.faults.add(...)`) exercise every failure path.
`Emulator(record=DIR)` is a proxy that records real sessions (secrets removed) and `Emulator(replay=DIR)` serves
them back, matched by request; a replay folder's file it cannot serve is refused at start (`RecordingError`).
`Emulator(corpus=DIR)` (or `PERPLEXITY_EMULATOR_CORPUS`) searches your own pages instead of the built-in ones; a
bad page is refused at start (`CorpusError`, naming the file).
Every emulated response carries the `x-pplx-emulator: <version>` header (`EMULATOR_HEADER`), so that a client
can tell an emulated answer from a real one. See `docs/emulator.md`.
"""

from ._app import EMULATOR_HEADER, RecordedRequest, create_app
from ._corpus import CorpusError
from ._faults import FaultPlan
from ._record import RecordingError
from ._server import Emulator, serve

__all__ = (
    'EMULATOR_HEADER',
    'CorpusError',
    'Emulator',
    'FaultPlan',
    'RecordedRequest',
    'RecordingError',
    'create_app',
    'serve',
)
