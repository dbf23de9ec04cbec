"""cuda::ptx's ld / st builders (cuda::ptx ld.h, st.h): every combination of `.nc`,
`.L1::evict_{normal,unchanged,first,last}` / `.L1::no_allocate`, `.L2::cache_hint` and
`.L2::64B/128B/256B` that cuda::ptx names, each a builder of the same name::

    B32 v = ptx::ld_nc_L1_evict_last_L2_cache_hint(ptx::space_global, p, policy);
    v = ptx.ld_nc_L1_evict_last_L2_cache_hint(k, "global", p, policy, type=t.b32)

    ptx::st_L1_no_allocate(ptx::space_global, p, v);   ptx.st_L1_no_allocate(k, "global", p, v)

cuda::ptx picks `.b8/.b16/.b32/.b64/.b128` from the pointee's size; here `type=` gives it (any
type of that size: `t.f32` loads `.b32`), or a store's value does. The instruction is the one
`Ld` / `St` class of `memory.py` (so `k.ld(..., l1=..., prefetch=..., cache_policy=...)` reaches
the same forms, and every space, vector width and memory order those allow).
"""

from __future__ import annotations

import itertools

from ..errors import BuildError
from ..operands import Imm, Reg
from ..types import Requires, ScalarType, StateSpace, req
from . import _ptx_args as A
from .base import check_enum
from .memory import L1Eviction, L2Prefetch

S = StateSpace
T = ScalarType
_BITS: dict[int | None, T] = {8: T.b8, 16: T.b16, 32: T.b32, 64: T.b64, 128: T.b128}
_L1 = (None, *L1Eviction)
_PREFETCH = (None, *L2Prefetch)


def builder_name(op: str, nc: bool, l1: L1Eviction | None, hint: bool,
                 prefetch: L2Prefetch | None) -> str:
    """cuda::ptx's name: ld_nc_L1_evict_last_L2_cache_hint_L2_64B, st_L1_no_allocate, ..."""
    name = op + ("_nc" if nc else "")
    name += f"_L1_{l1.value}" if l1 is not None else ""
    name += "_L2_cache_hint" if hint else ""
    return name + (f"_L2_{prefetch.value}" if prefetch is not None else "")


def _bits_type(name: str, type, value=None) -> ScalarType:
    """The .bN type of `type` (or of the stored value's register)."""
    if type is None:
        items = value if isinstance(value, tuple | list) else (value,)
        for v in items:
            if isinstance(v, Reg | Imm):
                type = v.type
                break
    if type is None:
        raise BuildError(f"{name}: pass type=... (t.b8, t.b16, t.b32, t.b64 or t.b128, or any "
                         "type of that size): cuda::ptx takes it from the pointer's type")
    if isinstance(type, str):
        type = check_enum(name, "type", type, T)
    bits = _BITS.get(getattr(type, "bits", None))
    if bits is None or type is T.pred:
        raise BuildError(f"{name}: type must be 8, 16, 32, 64 or 128 bits wide, got {type!r}")
    return bits


def _space_addr(k, name: str, space, addr):
    """cuda::ptx's space_global ('global'), or 'generic' (an extension); a generic pointer
    given for .global is converted with cvta.to.global, as cuda::ptx converts its pointers."""
    sp = A.space(name, "space", space, (S.global_, S.generic))
    return sp, A.space_addr(k, name, addr, sp)


def _policy_arg(name: str, hint: bool, args: tuple, cache_policy, sig: str, hinted: str):
    """The cache policy of a `..._L2_cache_hint` builder (positional after `sig`, or by
    keyword); any other builder takes none and names its cache-hinted twin."""
    if hint:
        if len(args) > 1 or args and cache_policy is not None:
            raise BuildError(f"{name}: takes ({sig}, cache_policy)")
        cache_policy = args[0] if args else cache_policy
        if cache_policy is None:
            raise BuildError(f"{name}: needs the cache policy (a 64-bit register from "
                             f"createpolicy): ({sig}, cache_policy)")
    elif args or cache_policy is not None:
        raise BuildError(f"{name}: takes ({sig}); the cache-hinted form is {hinted}")
    return cache_policy


def _make_ld(nc, l1, hint, prefetch):
    name = builder_name("ld", nc, l1, hint, prefetch)

    @A.overloads(("space", "addr", *(("cache_policy",) if hint else ())), extra=("=type",))
    def build(k, space, addr, *args, type=None, cache_policy=None) -> Reg:
        cache_policy = _policy_arg(name, hint, args, cache_policy, "k, space, addr",
                                   builder_name("ld", nc, l1, True, prefetch))
        sp, addr = _space_addr(k, name, space, addr)
        return k.ld(addr, type=_bits_type(name, type), space=sp, nc=nc, l1=l1,
                    prefetch=prefetch, cache_policy=cache_policy)

    build.__doc__ = (f"`ld.space{'.nc' if nc else ''}{_quals(l1, hint, prefetch)}.bN dest, "
                     f"[addr]{', cache_policy' if hint else ''};` returns dest "
                     f"(cuda::ptx::{name}).")
    return name, build


def _make_st(l1, hint):
    name = builder_name("st", False, l1, hint, None)

    @A.overloads(("space", "addr", "src", *(("cache_policy",) if hint else ())),
                 extra=("*type",))
    def build(k, space, addr, src, *args, type=None, cache_policy=None) -> None:
        cache_policy = _policy_arg(name, hint, args, cache_policy, "k, space, addr, src",
                                   builder_name("st", False, l1, True, None))
        sp, addr = _space_addr(k, name, space, addr)
        k.st(addr, src, type=_bits_type(name, type, src), space=sp, l1=l1,
             cache_policy=cache_policy)

    build.__doc__ = (f"`st.space{_quals(l1, hint, None)}.bN [addr], src"
                     f"{', cache_policy' if hint else ''};` (cuda::ptx::{name}).")
    return name, build


def _quals(l1, hint, prefetch) -> str:
    q = f".L1::{l1.value}" if l1 is not None else ""
    q += ".L2::cache_hint" if hint else ""
    return q + (f".L2::{prefetch.value}" if prefetch is not None else "")


_BUILDERS = dict(
    [_make_ld(nc, l1, hint, pf)
     for nc, l1, hint, pf in itertools.product((False, True), _L1, (False, True), _PREFETCH)]
    + [_make_st(l1, hint) for l1, hint in itertools.product(_L1, (False, True))])
for _name, _fn in _BUILDERS.items():
    _fn.__name__ = _fn.__qualname__ = _name
globals().update(_BUILDERS)
__all__ = sorted(_BUILDERS)


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
_NOTE = "ptx.ld*/st* builders: global (and generic) only; ptxdsl's floor is sm_75"
FORMS: list[tuple[str, Requires, str]] = [
    ("ld{.ss}{.nc}.{b8,b16,b32,b64}", req("6.3"), "every k.ld space, order, .v2/.v4"),
    ("ld/st{.ss}.b128", req("8.3"), ""),
    ("ld.global{.nc}.L1::{evict_normal,evict_unchanged,evict_first,evict_last,no_allocate}",
     req("7.4"), _NOTE),
    ("ld.global{.nc}{.L1::*}.L2::{64B,128B}", req("7.4"), _NOTE),
    ("ld.global{.nc}{.L1::*}.L2::256B", req("7.4", 80), _NOTE),
    ("ld.global{.nc}{.L1::*}.L2::cache_hint{.L2::64B,128B,256B} d, [a], policy", req("7.4", 80),
     _NOTE),
    ("st.global.L1::{evict_normal,evict_unchanged,evict_first,evict_last,no_allocate}",
     req("7.4"), _NOTE),
    ("st.global{.L1::*}.L2::cache_hint [a], b, policy", req("7.4", 80), _NOTE),
]
