"""`python -m pydantic_ai_perplexity.cli`: the command line, as the `pydantic-ai-perplexity` script runs it."""

from . import main

main()
