"""`python -m pydantic_ai_perplexity.cli`: the same as the `pydantic-ai-perplexity` command."""

from . import main

main()
