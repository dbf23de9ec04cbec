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
"""

from __future__ import annotations

import enum
import inspect

from .instructions import _ptx_args as _tags
from .instructions.bits import *  # noqa: F403
from .instructions.bulk import *  # noqa: F403
from .instructions.bulk import CtaGroup, RedOp
from .instructions.bulk_tensor import *  # noqa: F403
from .instructions.cache_policy import *  # noqa: F403
from .instructions.cluster import *  # noqa: F403
from .instructions.control_ptx import *  # noqa: F403
from .instructions.fence import *  # noqa: F403
from .instructions.ld_st import *  # noqa: F403
from .instructions.mbarrier import *  # noqa: F403
from .instructions.mbarrier_wait import *  # noqa: F403
from .instructions.multimem import *  # noqa: F403
from .instructions.setmaxnreg import *  # noqa: F403
from .instructions.sreg import *  # noqa: F403
from .instructions.st_async import *  # noqa: F403
from .instructions.tensormap import *  # noqa: F403
from .instructions.wgmma import *  # noqa: F403
from .instructions.wgmma_sp import *  # noqa: F403

# cuda::ptx's tag constants: space_shared, scope_gpu, sem_release, ... (see _ptx_args)
globals().update({name: getattr(_tags, name) for name in _tags.TAGS})
op_add, op_min, op_max, op_inc, op_dec = RedOp.add, RedOp.min, RedOp.max, RedOp.inc, RedOp.dec
op_and_op, op_or_op, op_xor_op = RedOp.and_, RedOp.or_, RedOp.xor
cta_group_1, cta_group_2 = CtaGroup.one, CtaGroup.two
_CONSTANTS = (*_tags.TAGS, "op_add", "op_min", "op_max", "op_inc", "op_dec", "op_and_op",
              "op_or_op", "op_xor_op", "cta_group_1", "cta_group_2")

globals().pop("FORMS", None)   # a family's forms table is not a builder function
__all__ = sorted([name for name, value in globals().items()
                  if not name.startswith("_")
                  and getattr(value, "__module__", "").startswith("ptxdsl.instructions.")
                  and not isinstance(value, enum.Enum)] + list(_CONSTANTS))


def _fail_closed_all() -> None:
    from .errors import fail_closed
    g = globals()
    for name in __all__:
        if inspect.isfunction(g[name]):
            g[name] = fail_closed(name, g[name])


_fail_closed_all()
