"""`python -m pydantic_ai_perplexity.cli`: the command, as the console script runs it."""

from . import main

main()
