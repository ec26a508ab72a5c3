"""The package's version, in a leaf every layer may import (the root package re-exports it)."""

from __future__ import annotations

__all__ = ('__version__',)

__version__ = '0.1.0'
