"""`python -m pydantic_ai_perplexity.cli`: the command line (the package layout made `cli` a package)."""

from . import main

main()
