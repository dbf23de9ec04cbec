"""Typed readers: PTX instruction text back into ptxdsl's instruction objects.

A reader takes the opcode split at its dots (`("mbarrier", "try_wait", "parity",
"shared::cta", "b64")`) and the operands the parser made (`Reg`, `SpecialReg`, `NegPred`,
`Addr`, `Vec`, `Symbol`, `Label`, `SINK`, Python numbers, and the front end's `Bracket`,
`PredPair`, `RawOperand`) and returns the instruction object a builder would make, or None
when the text is not a form it reads. It builds the object through the class's own
constructor, so every rule a builder checks holds. The parser keeps a typed reading only
when it renders back to the same tokens (numbers compared by value): a reader can never
change what a program means, only fail to recognise it.

Each family's readers live in a module of this package, registered with `@reader(...)` by
mnemonic (the opcode's first component); every module here is imported. A compiler that
orders an opcode's qualifiers otherwise than ptxdsl renders them (CUTLASS's
`ld.global.acquire.gpu`) is met by `@respell(...)`: the opcode is read and compared in
ptxdsl's order, a permutation of the written qualifiers only.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

from ...instructions.base import Instruction

Reader = Callable[[tuple[str, ...], list[Any]], Instruction | None]
READERS: dict[str, list[Reader]] = {}
# Per mnemonic, opcode -> the same opcode with its qualifiers in the order ptxdsl renders
# (a compiler's other order: CUTLASS's `ldmatrix.sync.aligned.x4.m8n8`); only a
# permutation of the written qualifiers (`respell` checks it), so the meaning is kept.
RESPELL: dict[str, Callable[[str], str]] = {}


def reader(*mnemonics: str) -> Callable[[Reader], Reader]:
    """Register the decorated function as a reader of these mnemonics (an opcode's first component);
    several readers of one mnemonic are tried in turn."""
    def deco(fn: Reader) -> Reader:
        for m in mnemonics:
            READERS.setdefault(m, []).append(fn)
        return fn
    return deco


def respell(*mnemonics: str) -> Callable[[Callable[[str], str]], Callable[[str], str]]:
    """Register the decorated function as respelling these mnemonics' opcodes into ptxdsl's
    qualifier order; a result that is not a permutation of the written qualifiers is ignored."""
    def deco(fn: Callable[[str], str]) -> Callable[[str], str]:
        def checked(opcode: str) -> str:
            out = fn(opcode)
            if out == opcode or sorted(out.split(".")) != sorted(opcode.split(".")):
                return opcode
            return out
        for m in mnemonics:   # a second family's respelling of one mnemonic runs after
            prev = RESPELL.get(m)
            RESPELL[m] = checked if prev is None else _then(prev, checked)
        return fn
    return deco


def _then(first: Callable[[str], str], second: Callable[[str], str]) -> Callable[[str], str]:
    def both(opcode: str) -> str:
        return second(first(opcode))
    return both


def _load() -> None:
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


_load()
