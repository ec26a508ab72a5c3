"""`python -m pydantic_ai_perplexity.cli`: the console script."""

from . import main

if __name__ == '__main__':  # pragma: no cover
    main()
