"""Qualifier text to enum members, for the readers of the synchronisation families."""

from __future__ import annotations

import enum
from typing import TypeVar

from ...types import Scope, Sem

E = TypeVar("E", bound=enum.Enum)


def by_value(cls: type[E]) -> dict[str, E]:
    """Each member by its PTX spelling (a table, so a reader looks a qualifier up once)."""
    return {m.value: m for m in cls}


SEMS = by_value(Sem)
SCOPES = by_value(Scope)
