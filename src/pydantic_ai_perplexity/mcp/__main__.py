"""`python -m pydantic_ai_perplexity.mcp`: serve the research tools over MCP (stdio, or `--transport http`)."""

import sys

from .server._exit import quiet_until_serving

quiet_until_serving()  # first: a signal while starting ends the process quietly (_exit.py)

from .server._build import main  # noqa: E402

sys.exit(main())
