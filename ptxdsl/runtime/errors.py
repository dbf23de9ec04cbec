"""Exceptions of the runtime layer (driver calls, loading, launching, tensor maps).

All of them derive from ptxdsl's own `PtxdslError` (most through `CudaError`), so one
`except PtxdslError` catches everything ptxdsl raises on purpose.
"""

from __future__ import annotations

from ptxdsl.errors import AssemblyError, CudaError, PtxdslError, SourceLoc


class NoDriverError(CudaError):
    """cuda.bindings or the CUDA driver (libcuda) is not usable on this machine."""


class DriverError(CudaError):
    """A driver call returned an error code.

    `call` is the driver function (e.g. 'cuLaunchKernelEx'), `code` the CUresult as an int and
    `name` its spelling (e.g. 'CUDA_ERROR_INVALID_VALUE').
    """

    def __init__(self, call: str, code: int, name: str, description: str = "",
                 context: str = "", loc: SourceLoc | None = None):
        self.call = call
        self.code = code
        self.name = name
        self.description = description
        text = f"{call} failed: {name} ({code})"
        if description:
            text += f": {description}"
        if context:
            text = f"{context}: {text}"
        super().__init__(text, loc)


class PeerAccessError(CudaError):
    """One device cannot be given access to another's memory (no peer path, or the driver
    refused cuCtxEnablePeerAccess / cuCtxDisablePeerAccess)."""


class SymmetricMemoryError(PtxdslError, ValueError):
    """Symmetric memory refused: a handle without the attributes ptxdsl reads, a world size
    or pointer count that does not match, a rank outside the world, a region past a buffer."""


class CompatibilityError(CudaError):
    """The module's .version or .target cannot run with this driver or on this device."""


class JitError(CudaError, AssemblyError):
    """The driver's PTX JIT rejected a module (cuModuleLoadDataEx).

    `log` is the JIT error log, `ptx_line` the first PTX line the log blames (1-based, or None),
    `ptx_text` that line's text, `loc` the Python line that built it where the module can say
    (`Module.locate`), and `info_log` the JIT info log.
    """

    def __init__(self, message: str, log: str, ptx_line: int | None = None,
                 ptx_text: str | None = None, loc: SourceLoc | None = None,
                 info_log: str = "", result: str = ""):
        self.info_log = info_log
        self.result = result
        AssemblyError.__init__(self, message, log, ptx_line, ptx_text, loc)


class KernelNotFoundError(PtxdslError, KeyError):
    """`LoadedModule[name]` (or `Module.kernel(name)`) names no `.entry` of the module."""

    def __str__(self) -> str:
        return Exception.__str__(self)


class LaunchError(CudaError):
    """A launch was refused before reaching the driver (bad grid, block, cluster, stream)."""


class ArgumentError(LaunchError, TypeError):
    """A kernel argument does not fit its declared parameter.

    Names the kernel, the parameter, what was expected and what was given.
    """

    def __init__(self, kernel: str, param: str, expected: str, given: object,
                 loc: SourceLoc | None = None):
        self.kernel = kernel
        self.param = param
        self.expected = expected
        self.given = given
        super().__init__(
            f"kernel '{kernel}': parameter '{param}': expected {expected}, got {given}", loc)


class SharedMemoryError(LaunchError):
    """More dynamic shared memory was requested than the device allows per block."""


class SyncTimeoutError(CudaError, TimeoutError):
    """Work on the GPU did not finish within the timeout given to a synchronize call.

    The work is still running: the context stays busy until it ends or the process exits.
    """


class TensorMapRuleError(PtxdslError, ValueError):
    """A tensor-map description breaks one or more cuTensorMapEncodeTiled rules.

    `violations` holds one `Violation` (rule id + message) per broken rule.
    """

    def __init__(self, violations: list, loc: SourceLoc | None = None):
        self.violations = list(violations)
        lines = "\n".join(f"  [{v.rule}] {v.message}" for v in self.violations)
        n = len(self.violations)
        super().__init__(f"invalid tensor map ({n} rule{'s' if n != 1 else ''} broken):\n"
                         f"{lines}", loc)

    @property
    def rules(self) -> list[str]:
        """The tensor-map rules the map breaks, one line each."""
        return [v.rule for v in self.violations]


class DevicePointerError(PtxdslError, TypeError, ValueError):
    """An object does not stand for a device address (None, NaN, a float, host memory, a
    `__cuda_array_interface__` without a usable `data`). Also a TypeError and a ValueError,
    the exceptions this refusal raised before it was a ptxdsl error."""


class DeviceOrdinalError(PtxdslError, TypeError, ValueError):
    """A device that names no GPU: not an ordinal (a bool, a float, a string), a negative
    one, or one past the devices visible. Refused before any driver call; also a TypeError
    and a ValueError (an ordinal past the count was a plain ValueError before)."""


class DLPackExportError(PtxdslError, BufferError, ValueError):
    """A DeviceBuffer cannot be exported as asked through `__dlpack__` (another device, a
    copy, a stream handle the protocol disallows, a dtype DLPack has no code for). A
    BufferError, as the DLPack protocol says a producer's refusal is; never a TypeError,
    which consumers read as "no max_version keyword" and retry without it."""


class ObjectCodeError(PtxdslError, ValueError):
    """A cuda.core `ObjectCode` (or its code) that ptxdsl's loader cannot take: a code type the
    driver does not load (LTO IR, relocatable objects, libraries), unreadable code, or a cubin
    without the PTX signatures its arguments are packed by."""


class CacheError(PtxdslError):
    """The cubin cache directory cannot be used (not a directory, not writable)."""
