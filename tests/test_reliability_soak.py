"""Concurrency and resources soak (issue 7, item 6): threads load and unload many modules,
allocate, launch and check results at once; afterwards loaded modules, device memory
(cuMemGetInfo) and contexts are back at the baseline. Prints the counts.

`python -m pytest -m gpu tests/test_reliability_soak.py -s`, or as a script:
`python tests/test_reliability_soak.py THREADS ROUNDS`.
"""

from __future__ import annotations

import gc
import sys
import threading
import weakref
from collections import Counter

import numpy as np
import pytest

from ptxdsl import Kernel, Module, t

MiB = 1 << 20
SLACK = 2 * MiB        # driver bookkeeping granularity allowed between baseline and after


def _kernel(name: str, n: int) -> Kernel:
    """out[i] = i * scale + n (n makes every module's PTX, so every JIT, different)."""
    k = Kernel(name, maxntid=256)
    out = k.ld_param(k.param_ptr("out"))
    scale = k.ld_param(k.param(t.u32, "scale"))
    i = k.mad(k.ctaid.x, k.ntid.x, k.tid.x)
    k.st(k.add(out, k.mul(i, 4, mode="wide"), type=t.u64), k.mad(i, scale, n), type=t.u32,
         space="generic")
    k.ret()
    return k


def _state() -> dict:
    from cuda.bindings import driver as drv

    from ptxdsl.runtime._driver import check
    from ptxdsl.runtime.device import use_device
    ctx = use_device(0)
    free, total = check(drv.cuMemGetInfo(), "cuMemGetInfo")
    dev = check(drv.cuDeviceGet(0), "cuDeviceGet")
    flags, active = check(drv.cuDevicePrimaryCtxGetState(dev), "cuDevicePrimaryCtxGetState")
    return {"free": int(free), "total": int(total), "ctx": int(ctx), "primary_active":
            bool(active), "ctx_id": _ctx_id(drv, ctx)}


def _ctx_id(drv, ctx):
    get = getattr(drv, "cuCtxGetId", None)
    if get is None:
        return None
    err, cid = get(ctx)
    return int(cid) if int(err) == 0 else None


def soak(threads: int = 8, rounds: int = 25, n: int = 4096, out=sys.stdout) -> dict:
    from cuda.bindings import driver as drv

    from ptxdsl.runtime import DeviceBuffer, Stream, load_module
    from ptxdsl.runtime.device import use_device

    def one_round(tid: int, r: int, loaded: weakref.WeakSet, seen: Counter) -> None:
        use_device(0)
        name = f"soak_t{tid}_r{r}"
        mod = load_module(Module([_kernel(name, tid * 1000 + r)], check=False))
        loaded.add(mod)
        with DeviceBuffer.zeros(n, np.uint32) as buf, Stream(non_blocking=True) as s:
            for scale in (1, 3):
                mod[name].launch(n // 256, 256, (buf, scale), stream=s)
                s.synchronize(timeout=60)
                want = np.arange(n, dtype=np.uint32) * scale + tid * 1000 + r
                np.testing.assert_array_equal(buf.to_numpy(), want)
        mod.unload()
        err, cur = drv.cuCtxGetCurrent()
        seen[int(cur)] += 1

    loaded: weakref.WeakSet = weakref.WeakSet()
    seen: Counter = Counter()
    errors: list = []
    peak = [0]

    def worker(tid: int, first: int) -> None:
        try:
            for r in range(first, first + rounds):
                one_round(tid, r, loaded, seen)
                if r % 5 == 0:
                    peak[0] = min(peak[0], _state()["free"])
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append((tid, e))

    def one_pass(first: int) -> None:
        pool = [threading.Thread(target=worker, args=(i, first)) for i in range(threads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        gc.collect()

    # Warm-up pass of the same shape: the driver keeps per-thread and per-stream resources
    # and pools module memory, and keeps them; a leak is what a second pass adds.
    one_pass(0)
    before = _state()
    peak[0] = before["free"]
    one_pass(rounds)
    after = _state()
    live = [m for m in loaded if m.handle is not None]
    result = {
        "threads": threads, "rounds": rounds, "modules_loaded": 2 * threads * rounds,
        "launches": 4 * threads * rounds, "modules_still_loaded": len(live),
        "free_before_MiB": before["free"] / MiB, "free_after_MiB": after["free"] / MiB,
        "free_low_MiB": peak[0] / MiB, "leak_bytes": before["free"] - after["free"],
        "contexts_seen_by_threads": len(seen), "context_same": before["ctx"] == after["ctx"],
        "context_id_before": before["ctx_id"], "context_id_after": after["ctx_id"],
        "primary_context_active": after["primary_active"], "errors": [repr(e) for e in errors],
    }
    print("soak: " + ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                               for k, v in result.items()), file=out, flush=True)
    return result


@pytest.mark.gpu
def test_many_modules_and_threads_leave_no_residue():
    r = soak()
    assert r["errors"] == []
    assert r["modules_still_loaded"] == 0
    assert r["leak_bytes"] <= SLACK, r
    assert r["contexts_seen_by_threads"] == 1 and r["context_same"]
    assert r["context_id_before"] == r["context_id_after"] and r["primary_context_active"]


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    res = soak(*args)
    sys.exit(1 if res["errors"] or res["modules_still_loaded"] or res["leak_bytes"] > SLACK
             else 0)
