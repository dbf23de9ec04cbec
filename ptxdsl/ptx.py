"""`ptxdsl.ptx`: the cuda::ptx-named convenience functions of every TMA instruction family.

Each takes the kernel first and otherwise mirrors cuda::ptx's name and argument order, so
the C++ of a CUDA sample translates line by line:

    ptx::tensormap_replace_box_dim(space_shared, &smem_tmap, n32_t<0>{}, v);
    ptx.tensormap_replace_box_dim(k, smem_tmap, 0, v)

One call emits one instruction (plus at most the address conversion it needs).
"""

from __future__ import annotations

from .instructions.bulk import *  # noqa: F403
from .instructions.bulk_tensor import *  # noqa: F403
from .instructions.cache_policy import *  # noqa: F403
from .instructions.cvt_packed import *  # noqa: F403
from .instructions.fence import *  # noqa: F403
from .instructions.matrix import *  # noqa: F403
from .instructions.mbarrier import *  # noqa: F403
from .instructions.mbarrier_wait import *  # noqa: F403
from .instructions.setmaxnreg import *  # noqa: F403
from .instructions.tensormap import *  # noqa: F403

globals().pop("FORMS", None)   # a family's forms table is not a builder function
__all__ = sorted(name for name, value in globals().items()
                 if not name.startswith("_")
                 and getattr(value, "__module__", "").startswith("ptxdsl.instructions."))
