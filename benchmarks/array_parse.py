"""CPU-side cost of reading an array argument's address and layout (issue 18), no GPU needed.

    PYTHONPATH=. python -m benchmarks.array_parse

Rows: cuda.core's `StridedMemoryView.from_dlpack` alone and as `arrays.dlpack_info` reads a
layout with it (the ctypes capsule reader it replaced is gone, issue 31), on a NumPy array's
capsule (the parse is the same for a CUDA producer's; only the producer's own export cost
differs), and the
`__cuda_array_interface__` path of `device_pointer` as a launch uses it (a CPU-side fake CAI
object whose exporter stream is the launch stream, so no driver call is made). Best of 7
repeats; the microseconds are this machine's, compare rows of one run only.
"""

from __future__ import annotations

import timeit

import numpy as np

from ptxdsl.runtime import arrays


class _Cai:
    def __init__(self, stream):
        self.__cuda_array_interface__ = {"data": (0x7000_0000, False), "shape": (64, 64),
                                         "typestr": "<f4", "strides": None, "version": 3,
                                         "stream": stream}


def rows(n: int = 20000) -> list[tuple[str, float]]:
    a = np.zeros((64, 64), np.float32)
    ro = a.copy()
    ro.flags.writeable = False

    def us(fn) -> float:
        return min(timeit.repeat(fn, number=n, repeat=7)) / n * 1e6

    smv = arrays._strided_memory_view()
    out = [("cuda.core StridedMemoryView.from_dlpack", us(lambda: smv.from_dlpack(a, -1))),
           ("cuda.core StridedMemoryView.from_dlpack, read-only",
            us(lambda: smv.from_dlpack(ro, -1))),
           ("dlpack_info (layout through StridedMemoryView)", us(lambda: arrays.dlpack_info(a)))]
    cai = _Cai(stream=0x10)
    out.append(("CAI device_pointer, exporter stream == launch stream",
                us(lambda: arrays.device_pointer(cai, 0x10))))
    return out


if __name__ == "__main__":
    for name, t in rows():
        print(f"{t:8.2f} us  {name}")
