"""Hypothesis strategies for the bad-input property tests: random values and objects of every
kind a careless or hostile caller might pass to a public builder, and the public builders
themselves, enumerated from the package (so a new builder is covered without editing here)."""

from __future__ import annotations

import inspect

import numpy as np
from hypothesis import strategies as st

from ptxdsl import Kernel, ptx, t
from ptxdsl.operands import Addr, Imm, NegPred, Reg, Symbol
from ptxdsl.types import ScalarType, StateSpace

# Text a hostile caller would try to smuggle into the PTX.
INJECTIONS = [
    "0], %r1;\n\ttrap;\n\tst.global.u32 [%rd1", "x; trap", "x\ntrap;", "a // b", "a /* b */",
    "tid.x", "%tid.x", "clock", "r1", "$L__else_1", "_", "", " ", "é", "\x00", "x" * 2000,
    "shared::cta", "global", "u32", ".u32", "sm_90a", "8.0", "{", "}", "[", "]", ";", "\\",
]


def kernel_values(k: Kernel, other: Kernel) -> list:
    """Operands tied to a kernel: its registers, symbols, labels, and a foreign register."""
    p = k.param_ptr(f"p{len(k.params)}")
    smem = k.shared_array(t.u32, 4)
    return [k.reg(t.u32), k.reg(t.u64), k.reg(t.pred), k.reg(t.f32), k.reg(t.b16), p, smem,
            Addr(smem), Addr(k.reg(t.u64), 8), Addr(k.reg(t.u32)), k.fresh_label("J"),
            NegPred(k.reg(t.pred)), other.reg(t.u32), Imm(3, t.u32), Imm(1.5, t.f32),
            k.param_tensormap(f"tm{len(k.params)}")]


def junk(k: Kernel, other: Kernel) -> st.SearchStrategy:
    plain = st.one_of(
        st.none(), st.booleans(), st.integers(), st.integers(-3, 300),
        st.sampled_from([10 ** 400, -(10 ** 400), 1 << 64, 1 << 63, -(1 << 63) - 1]),
        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
        st.sampled_from(INJECTIONS), st.binary(max_size=8),
        st.sampled_from([np.int64(4), np.int32(-1), np.uint64(1 << 63), np.float32(1.5),
                         np.bool_(True), np.float64("nan")]),
        st.sampled_from(list(ScalarType)), st.sampled_from(list(StateSpace)),
        st.sampled_from([object(), {}, [], (), {"a": 1}, set(), print, Ellipsis]),
    )
    tied = st.sampled_from(kernel_values(k, other))
    return st.one_of(plain, tied, st.lists(st.one_of(plain, tied), max_size=4),
                     st.tuples(st.one_of(plain, tied), st.one_of(plain, tied)))


def public_methods() -> list[str]:
    """Every public method of Kernel (the builder's whole surface)."""
    return sorted(n for n, v in inspect.getmembers(Kernel)
                  if not n.startswith("_") and callable(v) and not isinstance(v, type))


def class_methods(classes) -> list[tuple[type, str]]:
    """(class, method) for every public method, static/class method and constructor of
    `classes` (the helper junk tests' cases)."""
    out = []
    for cls in classes:
        for name, member in vars(cls).items():
            fn = getattr(member, "__func__", member)
            if name == "__init__" or not name.startswith("_") and inspect.isfunction(fn):
                out.append((cls, name))
    return out


def ptx_functions() -> list[str]:
    return sorted(n for n in ptx.__all__ if inspect.isfunction(getattr(ptx, n)))


def operand_classes() -> list[type]:
    from ptxdsl import operands
    return [c for c in vars(operands).values()
            if isinstance(c, type) and issubclass(c, operands.Operand)
            and c is not operands.Operand and c.__module__ == operands.__name__]


def positional(fn) -> tuple[int, list[str]]:
    """(number of required positional parameters, names of keyword parameters)."""
    sig = inspect.signature(fn)
    req, kw = 0, []
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            req += 1
        elif p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
            kw.append(p.name)
    return req, kw


def required_keywords(fn) -> list[str]:
    """Keyword-only parameters without a default (always passed, with junk)."""
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.kind is p.KEYWORD_ONLY and p.default is p.empty]


__all__ = ["INJECTIONS", "Reg", "Symbol", "junk", "kernel_values", "operand_classes",
           "positional", "ptx_functions", "public_methods", "required_keywords"]
