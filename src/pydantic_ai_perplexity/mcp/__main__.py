"""`python -m pydantic_ai_perplexity.mcp`: serve the research tools over MCP (stdio, or `--transport http`)."""

import sys

from .server import main

sys.exit(main())
