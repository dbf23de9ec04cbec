"""`ptxdsl.ptx`: the cuda::ptx-named functions of the TMA families, and cuda::ptx's tags.

One calling convention (docs/CONTRIBUTING.md, `instructions/_ptx_args.py`): after the kernel,
each function takes cuda::ptx's arguments in cuda::ptx's order and meaning, overload by
overload, or the same arguments by keyword (cuda::ptx's parameter names in snake_case), so the
C++ of a CUDA sample translates line by line::

    ptx::tensormap_replace_box_dim(ptx::space_shared, &smem_tmap, ptx::n32_t<0>{}, v);
    ptx.tensormap_replace_box_dim(k, ptx.space_shared, smem_tmap, 0, v)
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &bar, n);
    ptx.mbarrier_arrive_expect_tx(k, ptx.sem_release, ptx.scope_cta, ptx.space_shared, bar, n)

A literal port emits the PTX cuda::ptx emits for that overload (bare `.shared` where it writes
that), or is refused with a message listing the overloads. Names mean the same in every family:
'shared' / `space_shared` is `.shared::cta`, 'cluster' / `space_cluster` `.shared::cluster`,
'global' / `space_global` `.global`, 'generic' (an extension) the generic form; scopes and
semantics are 'cta' ... 'sys' / `scope_*` and 'release' ... / `sem_*`; cuda::ptx's tag spellings
('space_shared', 'op_and_op', ...) are accepted as strings too. A generic pointer (a pointer
parameter, or a register loaded from one) is converted with cvta.to.<space>, as cuda::ptx does.

One call emits one instruction (plus at most the address conversion it needs). Keyword-only
extensions: `dst=` (the result register), `space=` on overloads without one, `cache_policy=`,
`mode=`, `im2col=`, ...

Type checkers read `ptx.pyi` beside this module, one `@overload` per cuda::ptx overload
(generated from the builders' tables, docs/CONTRIBUTING.md); `inspect.signature` and `help()`
show the same overloads. Its argument types are here too, for annotating helpers of one's own:
`ptx.Address` (a symbol, register or `Addr`), `ptx.Value` (a register or an immediate),
`ptx.SpaceArg`, `ptx.ScopeArg`, `ptx.SemArg`, ...
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable as _Callable
from collections.abc import Sequence as _Sequence
from typing import Any as _Any
from typing import SupportsIndex as _SupportsIndex

from .instructions import _ptx_args as _tags
from .instructions._ptx_args import scope_cluster as scope_cluster
from .instructions._ptx_args import scope_cta as scope_cta
from .instructions._ptx_args import scope_gpu as scope_gpu
from .instructions._ptx_args import scope_sys as scope_sys
from .instructions._ptx_args import sem_acq_rel as sem_acq_rel
from .instructions._ptx_args import sem_acquire as sem_acquire
from .instructions._ptx_args import sem_relaxed as sem_relaxed
from .instructions._ptx_args import sem_release as sem_release
from .instructions._ptx_args import sem_sc as sem_sc
from .instructions._ptx_args import space_cluster as space_cluster
from .instructions._ptx_args import space_global as space_global
from .instructions._ptx_args import space_shared as space_shared
from .instructions.bits import *  # noqa: F403
from .instructions.bulk import *  # noqa: F403
from .instructions.bulk import CtaGroup, RedOp
from .instructions.bulk_tensor import *  # noqa: F403
from .instructions.cache_policy import *  # noqa: F403
from .instructions.cluster import *  # noqa: F403
from .instructions.clusterlaunchcontrol import *  # noqa: F403
from .instructions.control_ptx import *  # noqa: F403
from .instructions.fence import *  # noqa: F403
from .instructions.ld_st import *  # noqa: F403
from .instructions.mbarrier import *  # noqa: F403
from .instructions.mbarrier_wait import *  # noqa: F403
from .instructions.multimem import *  # noqa: F403
from .instructions.setmaxnreg import *  # noqa: F403
from .instructions.sreg import *  # noqa: F403
from .instructions.st_async import *  # noqa: F403
from .instructions.st_bulk import *  # noqa: F403
from .instructions.tcgen05 import *  # noqa: F403
from .instructions.tcgen05_ldst import *  # noqa: F403
from .instructions.tcgen05_mma import *  # noqa: F403
from .instructions.tcgen05_mma import TAGS as _KIND_TAGS
from .instructions.tcgen05_mma_ptx import *  # noqa: F403
from .instructions.tensormap import *  # noqa: F403
from .instructions.wgmma import *  # noqa: F403
from .instructions.wgmma import WgmmaType as _WgmmaType
from .instructions.wgmma_desc import MatrixDescriptor as _MatrixDescriptor
from .instructions.wgmma_sp import *  # noqa: F403
from .operands import Addr as _Addr
from .operands import Imm as _Imm
from .operands import Reg as _Reg
from .operands import Symbol as _Symbol
from .types import ScalarType as _ScalarType
from .types import Scope as _Scope
from .types import Sem as _Sem
from .types import StateSpace as _StateSpace

# cuda::ptx's tag constants (space_shared, scope_gpu, sem_release, ...: imported above from
# _ptx_args, which names them for its own messages) and the reduction ops and CTA groups.
op_add, op_min, op_max, op_inc, op_dec = RedOp.add, RedOp.min, RedOp.max, RedOp.inc, RedOp.dec
op_and_op, op_or_op, op_xor_op = RedOp.and_, RedOp.or_, RedOp.xor
cta_group_1, cta_group_2 = CtaGroup.one, CtaGroup.two
_CONSTANTS = (*_tags.TAGS, "op_add", "op_min", "op_max", "op_inc", "op_dec", "op_and_op",
              "op_or_op", "op_xor_op", "cta_group_1", "cta_group_2", *_KIND_TAGS)

# The argument types ptx.pyi's signatures are written with, for user code that annotates its
# own helpers (`def load(k: Kernel, smem: ptx.Address, n: ptx.Value) -> None`): the stub's
# public aliases, from tools/ptx_stub.py's ALIASES (tests/test_ptx_types.py checks them).
# (The names are imported private: an instruction class imported by name would join __all__.)
Int = int | _SupportsIndex
Value = _Reg | _Imm | Int
Address = _Reg | _Symbol | _Addr
Coords = _Sequence[Value]
SpaceArg = _StateSpace | str
ScopeArg = _Scope | str
SemArg = _Sem | str
OpArg = RedOp | str
TypeArg = _ScalarType | str
Desc = _Reg | _Imm | Int | _MatrixDescriptor
WgmmaTypeArg = _WgmmaType | _ScalarType | str

globals().pop("FORMS", None)   # a family's forms table is not a builder function
__all__ = sorted([name for name, value in globals().items()
                  if not name.startswith("_")
                  and getattr(value, "__module__", "").startswith("ptxdsl.instructions.")
                  and not isinstance(value, enum.Enum)] + list(_CONSTANTS))


def _kernel_first(name: str, fn: _Callable[..., _Any]) -> _Callable[..., _Any]:
    """`fn` refusing a first argument that is no kernel (`ptx.mbarrier_init(bar, 1)`, the
    kernel left out) by name, before the builder calls a method of it."""
    import functools

    from .errors import OperandError
    from .instructions.base import _given
    from .kernel_core import KernelCore

    @functools.wraps(fn)
    def builder(*args: _Any, **kw: _Any) -> _Any:
        k = args[0] if args else kw.get("k")
        if not isinstance(k, KernelCore):
            raise OperandError(name, "k", "the Kernel to build into, first",
                               _given(k) if args or "k" in kw else "nothing")
        return fn(*args, **kw)
    return builder


def _fail_closed_all() -> None:
    from .errors import fail_closed
    g = globals()
    for name in __all__:
        if inspect.isfunction(g[name]):
            fn = g[name]
            if inspect.unwrap(fn).__code__.co_varnames[:1] == ("k",):
                fn = _kernel_first(name, fn)
            g[name] = fail_closed(name, fn)
            _tags.describe(name, g[name])


_fail_closed_all()
