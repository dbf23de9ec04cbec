"""ptxdsl: an inline PTX assembler DSL in Python for Hopper TMA kernels.

Build kernels with `Kernel`, collect them in a `Module`, `emit()`/`write()` PTX, assemble it
offline with nvJitLink (`Module.assemble`) and load and launch it through the CUDA driver
(`Module.load`, in `ptxdsl.runtime`).
"""

import logging as _logging

# The library's logger (cache hits/misses, assembler and JIT logs, fallbacks): silent unless the
# application configures logging, e.g. logging.getLogger("ptxdsl").setLevel(logging.DEBUG).
_logging.getLogger("ptxdsl").addHandler(_logging.NullHandler())

from . import types  # noqa: E402
from . import types as t  # noqa: E402
from ._version import __version__  # noqa: E402
from .errors import (  # noqa: E402
    AssemblyError,
    BuildError,
    CudaError,
    OperandError,
    PtxdslError,
    VersionError,
)
from .kernel import Kernel  # noqa: E402
from .module import Module  # noqa: E402
from .operands import Addr, Imm, Reg, Symbol  # noqa: E402

__all__ = ["Kernel", "Module", "types", "t", "Addr", "Imm", "Reg", "Symbol", "PtxdslError",
           "BuildError", "OperandError", "VersionError", "AssemblyError", "CudaError",
           "__version__"]
