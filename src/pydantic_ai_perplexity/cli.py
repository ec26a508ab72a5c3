"""The `pydantic-ai-perplexity` command."""


def main() -> None:
    """Run the command line."""
