"""Running a test kernel on the GPU in a child process (`debug.isolated`): built with bounded
waits, launched through `debug.run` with an error record attached, so a hang or a fault in one
case becomes an exception in the test and the rest of the run goes on."""

from __future__ import annotations

import numpy as np

from ptxdsl import debug
from ptxdsl.runtime import DeviceBuffer, TensorMap, load_module


def run_isolated(module, kernel: str, grid, block, args, *, cluster=None, shared_mem=0,
                 timeout=60.0):
    """`run` in a fresh process; returns what it returns (the outputs as numpy arrays)."""
    return debug.isolated(run, module, kernel, grid, block, args, cluster=cluster,
                          shared_mem=shared_mem, timeout=timeout)


def run(module, kernel: str, grid, block, args, *, cluster=None, shared_mem=0):
    """Load `module`, turn the argument specs into device objects, launch, return the outputs.

    Specs: ("in", array) an input buffer; ("out", shape, dtype) a zeroed output (returned);
    ("map", array, box) a TensorMap over a new input buffer; anything else passes as is.
    """
    loaded = load_module(module)
    fn = loaded[kernel]
    keep, outs, real = [], [], []
    for a in args:
        if isinstance(a, tuple) and a and a[0] == "in":
            buf = DeviceBuffer.from_numpy(np.ascontiguousarray(a[1]))
            keep.append(buf)
            real.append(buf)
        elif isinstance(a, tuple) and a and a[0] == "out":
            buf = DeviceBuffer.zeros(a[1], a[2])
            outs.append(buf)
            real.append(buf)
        elif isinstance(a, tuple) and a and a[0] == "map":
            buf = DeviceBuffer.from_numpy(np.ascontiguousarray(a[1]))
            keep.append(buf)
            real.append(TensorMap.from_array(buf, box=a[2]))
        else:
            real.append(a)
    with debug.Recorder() as rec:
        rec.attach(loaded)
        debug.run(fn, grid, block, tuple(real), timeout=30, recorder=rec, cluster=cluster,
                  shared_mem=shared_mem)
    return [o.to_numpy() for o in outs]
