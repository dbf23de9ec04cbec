"""Can this driver JIT the module's `.version`, and can this device run its `.target`?

Pure functions (no driver import), so the rules are unit-tested on any machine. The loader
calls `check_module_compat` before cuModuleLoadDataEx, turning what would be a bare
CUDA_ERROR_UNSUPPORTED_PTX_VERSION / CUDA_ERROR_INVALID_PTX / NO_BINARY_FOR_GPU into a
message that says what to change.
"""

from __future__ import annotations

from ptxdsl.runtime.errors import CompatibilityError
from ptxdsl.types import PtxVersion, Target

# Highest PTX ISA each CUDA release's driver JIT accepts (digest §8.2; CCCL ptx_isa.h).
# 12.6 kept 8.5; "12.7" (PTX 8.6) was never released, so 12.7 maps to 8.6 only for completeness.
_CUDA_TO_PTX: dict[tuple[int, int], PtxVersion] = {
    (11, 0): PtxVersion(7, 0), (11, 1): PtxVersion(7, 1), (11, 2): PtxVersion(7, 2),
    (11, 3): PtxVersion(7, 3), (11, 4): PtxVersion(7, 4), (11, 5): PtxVersion(7, 5),
    (11, 6): PtxVersion(7, 6), (11, 7): PtxVersion(7, 7), (11, 8): PtxVersion(7, 8),
    (12, 0): PtxVersion(8, 0), (12, 1): PtxVersion(8, 1), (12, 2): PtxVersion(8, 2),
    (12, 3): PtxVersion(8, 3), (12, 4): PtxVersion(8, 4), (12, 5): PtxVersion(8, 5),
    (12, 6): PtxVersion(8, 5), (12, 7): PtxVersion(8, 6), (12, 8): PtxVersion(8, 7),
    (12, 9): PtxVersion(8, 8), (13, 0): PtxVersion(9, 0), (13, 1): PtxVersion(9, 1),
    (13, 2): PtxVersion(9, 2),
}


def cuda_version(driver_version: int) -> tuple[int, int]:
    """(major, minor) of a cuDriverGetVersion value (13000 -> (13, 0), 12080 -> (12, 8))."""
    return driver_version // 1000, (driver_version % 1000) // 10


def max_ptx_version(driver_version: int) -> PtxVersion | None:
    """The highest PTX ISA the driver's JIT accepts; None when the driver is newer than any
    release ptxdsl knows (then nothing is refused on version grounds)."""
    major, minor = cuda_version(driver_version)
    if (major, minor) in _CUDA_TO_PTX:
        return _CUDA_TO_PTX[(major, minor)]
    newest = max(_CUDA_TO_PTX)
    if (major, minor) > newest:
        # Each 13.x so far added exactly one PTX minor (13.1 -> 9.1, 13.2 -> 9.2); assume the
        # pattern within a known major, and refuse nothing for an unknown one.
        if major == newest[0]:
            return PtxVersion(9, minor)
        return None
    return PtxVersion(6, 0)


def check_version(version: PtxVersion, driver_version: int) -> None:
    """Raise CompatibilityError when the driver's JIT cannot read `.version version`."""
    limit = max_ptx_version(driver_version)
    if limit is not None and version > limit:
        major, minor = cuda_version(driver_version)
        raise CompatibilityError(
            f"module is PTX ISA {version} (.version {version}) but the installed CUDA driver "
            f"({major}.{minor}, cuDriverGetVersion={driver_version}) accepts PTX ISA up to "
            f"{limit}; update the driver or lower the module's .version")


def runs_on(target: Target, cc: tuple[int, int]) -> bool:
    """Whether code for `target` runs on a device of compute capability `cc`.

    sm_XXa: exactly that GPU; sm_XXf: the same major family at or above XX; sm_XX: any GPU
    of compute capability >= XX (the driver JITs PTX forward).
    """
    dev = cc[0] * 10 + cc[1]
    if target.suffix == "a":
        return dev == target.sm
    if target.suffix == "f":
        return cc[0] == target.sm // 10 and dev >= target.sm
    return dev >= target.sm


def check_target(target: Target, cc: tuple[int, int], device_name: str = "the device") -> None:
    """Raise CompatibilityError when `.target target` cannot run on compute capability `cc`."""
    if runs_on(target, cc):
        return
    major, minor = target.compute_capability
    if target.suffix == "a":
        need = f"exactly compute capability {major}.{minor} (arch-specific 'a' target)"
    elif target.suffix == "f":
        need = f"compute capability {major}.x with x >= {minor} (family-specific 'f' target)"
    else:
        need = f"compute capability {major}.{minor} or newer"
    raise CompatibilityError(
        f"module targets {target}, which needs {need}; {device_name} is compute capability "
        f"{cc[0]}.{cc[1]} (sm_{cc[0]}{cc[1]}): rebuild the module for that target")


def check_module_compat(version: PtxVersion | None, target: Target | None, driver_version: int,
                        cc: tuple[int, int], device_name: str = "the device") -> None:
    """Both checks; a None version or target (unparsable raw PTX) is left to the driver."""
    if version is not None:
        check_version(version, driver_version)
    if target is not None:
        check_target(target, cc, device_name)


def cubin_arch(target: Target | None, cc: tuple[int, int]) -> str:
    """The nvJitLink -arch for assembling a module for this device.

    An 'a' or 'f' module must be assembled for the device's own a/f arch: ptxas refuses
    `.target sm_90a` PTX for -arch=sm_90 (digest §8.1).
    """
    suffix = target.suffix if target is not None else ""
    return f"sm_{cc[0]}{cc[1]}{suffix}"


def build_arch(target: Target, cc: tuple[int, int] | None) -> tuple[str, str, bool]:
    """(arch, why, loads): the one rule for which arch a cubin is built for when the caller names
    none, shared by `Module.assemble()` and the runtime's cubin path (so the cubin cache key
    sees the same arch). With a device (`cc`): its own arch (keeping an a/f suffix), never
    below the module's target since the device must be able to run that target. With no
    device: the module's target. A device that cannot run the target gets the target, and
    the reason says so and `loads` is False (the cubin cannot load there)."""
    if cc is None:
        return str(target), "the module's target; no GPU found", True
    if runs_on(target, cc):
        arch = cubin_arch(target, cc)
        return arch, f"the GPU in use is compute capability {cc[0]}.{cc[1]}", True
    return str(target), (f"the module's target; it cannot run on the GPU in use (compute "
                         f"capability {cc[0]}.{cc[1]})"), False
