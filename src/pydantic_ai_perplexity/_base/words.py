"""Small wording helpers shared by the library and the emulator."""

from __future__ import annotations

__all__ = ('plural',)


def plural(n: int, word: str, many: str | None = None) -> str:
    """A count with its noun, singular for exactly one: `1 result`, `3 results`, `2 searches` (`many` if irregular)."""
    return f'{n} {word if n == 1 else (many or word + "s")}'
