"""`ptxdsl.ptx`: the cuda::ptx-named convenience functions of every TMA instruction family.

Each takes the kernel first and otherwise mirrors cuda::ptx's name and argument order, so
the C++ of a CUDA sample translates line by line:

    ptx::tensormap_replace_box_dim(space_shared, &smem_tmap, n32_t<0>{}, v);
    ptx.tensormap_replace_box_dim(k, smem_tmap, 0, v)

One call emits one instruction (plus at most the address conversion it needs).
"""

from __future__ import annotations

import enum

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
