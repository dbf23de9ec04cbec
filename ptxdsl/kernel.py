"""`Kernel`: the builder a user writes kernels with.

The core (parameters, registers, shared memory, labels, guards, rendering) is in
`kernel_core`, structured control flow in `kernel_flow`; the instruction builder methods come
from the instruction families' mixins.
"""

from __future__ import annotations

from .fragments import FragmentOps
from .instructions.arith import ArithOps
from .instructions.atomic import AtomicOps
from .instructions.compare import CompareOps
from .instructions.control import ControlOps
from .instructions.cvt_packed import PackedCvtOps
from .instructions.inline import InlineOps
from .instructions.matrix import MatrixOps
from .instructions.memory import MemoryOps
from .instructions.move import MoveOps
from .instructions.sync import SyncOps
from .instructions.warp import WarpOps
from .kernel_core import KernelCore, Param, Statement
from .kernel_flow import StructuredFlow

__all__ = ["Kernel", "Param", "Statement"]


class Kernel(
    KernelCore, StructuredFlow, MoveOps, ArithOps, CompareOps, MemoryOps, ControlOps,
    SyncOps,
    AtomicOps,
    WarpOps,
    InlineOps,
    MatrixOps,
    PackedCvtOps,
    FragmentOps,
):
    """A `.visible .entry` function under construction.

    >>> k = Kernel("scale", reqntid=128)
    >>> out = k.param_ptr("out")
    """
