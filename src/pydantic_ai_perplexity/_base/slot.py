"""A part a lower layer uses and a higher layer provides, so that no import ever points upward.

A lower layer declares a `Slot` (the wire's observer, the core's durable runner, the domain's display) and calls
what it holds; the layer above fills it when its module is imported. The package root, which may import every layer,
names for each slot the import that fills it (`Slot.loader`), run the first time the slot is read empty: so a slot
is filled whenever it is needed, and the lower layer never names the module that fills it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

__all__ = ('Slot',)

T = TypeVar('T')


class Slot(Generic[T]):
    """One provided part: `fill` by its provider, `get` (or `need`) by its user, loaded on first read if empty."""

    __slots__ = ('_value', 'name')

    #: The import that fills each slot, by slot name, registered by the package root.
    _loaders: ClassVar[dict[str, Callable[[], object]]] = {}
    #: Every slot made, by name.
    made: ClassVar[dict[str, Slot[Any]]] = {}

    def __init__(self, name: str) -> None:
        self.name = name
        self._value: T | None = None
        Slot.made[name] = self

    @classmethod
    def loader(cls, name: str, load: Callable[[], object]) -> None:
        """Name the import that fills the slot `name` (for the package root): run when the slot is read empty."""
        cls._loaders[name] = load

    def fill(self, value: T) -> None:
        """Provide the part (the provider's module does this when it is imported)."""
        self._value = value

    def get(self) -> T | None:
        """The part, loading its provider first if it is not there yet; None if nothing provides it (yet)."""
        value = self._value
        if value is None:
            load = Slot._loaders.get(self.name)
            if load is not None:
                load()
                value = self._value
        return value

    def need(self) -> T:
        """The part, which must be provided.

        Raises:
            RuntimeError: nothing provides it (its provider's module was never imported and no loader is named).
        """
        value = self.get()
        if value is None:
            raise RuntimeError(f'Nothing provides the {self.name}: import the package (pydantic_ai_perplexity) first.')
        return value

    def __repr__(self) -> str:
        return f'Slot({self.name!r}, {"filled" if self._value is not None else "empty"})'
