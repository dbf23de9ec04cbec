"""The front end's round trip on the GPU: PTX read and written back by ptxdsl (and the Python
program `lift` writes for it) loads in the driver and computes what the original computes.
Marked `gpu` (skipped without a Hopper GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ptxdsl.frontend import parse_ptx
from ptxdsl.frontend.lift import lift_ptx
from ptxdsl.runtime import DeviceBuffer, TensorMap, device_info, load_ptx, synchronize
from ptxdsl.testing import declared_target
from tests import gpu_kernels_runtime as K
from tests.test_runtime_gpu import _expected_tile

pytestmark = pytest.mark.gpu

CORPUS = Path(__file__).parent / "corpus"
GOLDEN = Path(__file__).parent / "golden"


def _loadable(text: str) -> bool:
    """A target this GPU runs: its own sm (arch-specific or not) or an older portable one."""
    target = declared_target(text)
    sm = int("".join(ch for ch in target[3:] if ch.isdigit()))
    cap = device_info(0).compute_capability
    have = cap[0] * 10 + cap[1]
    return sm == have or (sm < have and target[-1].isdigit())


def _texts() -> list[tuple[str, str]]:
    files = sorted(json.loads((CORPUS / "MANIFEST.json").read_text())["files"])
    out = [(f"corpus/{f}", (CORPUS / "ptx" / f).read_text()) for f in files]
    out += [(f"golden/{p.relative_to(GOLDEN)}", p.read_text())
            for p in sorted(GOLDEN.rglob("*.ptx"))]
    return out


def _load(text: str, name: str) -> str:
    """'' when the driver loads the PTX, else the error's class and message."""
    try:
        load_ptx(text, name=name, cache=False).unload()
    except Exception as e:  # noqa: BLE001 - compared between the two texts
        return f"{type(e).__name__}: {str(e).splitlines()[0]}"
    return ""


# Files whose original PTX kills the process in the driver's JIT (measured with driver
# 580.159.04, CUDA 13.0, on an H200: cuModuleLoadDataEx segfaults on the original and on the
# round-tripped text alike; nvJitLink 13.5 assembles both).
DRIVER_CRASHES = {"golden/prefetch/prefetch.ptx", "golden/wgmma/fragments.ptx"}


def test_every_round_tripped_file_loads_in_the_driver_as_the_original_does():
    loaded = 0
    for name, text in _texts():
        if not _loadable(text) or name in DRIVER_CRASHES:
            continue
        want = _load(text, name)
        got = _load(parse_ptx(text, file=name).emit(), name)
        assert bool(got) == bool(want), (name, want, got)
        loaded += not got
    assert loaded > 100


@pytest.mark.parametrize("how", ["parsed", "lifted"])
def test_a_round_tripped_tma_kernel_computes_what_the_original_does(how):
    text = K.tma_load_2d(512)
    if how == "parsed":
        again = parse_ptx(text).emit()
    else:
        scope: dict = {}
        exec(compile(lift_ptx(text).source, "lifted.py", "exec"), scope)
        again = scope["build_module"]().emit()
    assert again != text or how == "lifted"
    fn = load_ptx(again, name=how)["tma_load_2d"]
    rng = np.random.default_rng(3)
    host = rng.integers(1, 2**31, size=(32, 64), dtype=np.uint32)
    with DeviceBuffer.from_numpy(host) as src, DeviceBuffer.empty((8, 16), np.uint32) as out:
        tm = TensorMap.from_array(src, box=(8, 16))
        for x, y in [(0, 0), (16, 8), (56, 28), (-8, -4)]:
            out.memset(0xAB)
            fn.launch(1, 128, (tm, out, x, y))
            synchronize()
            np.testing.assert_array_equal(out.to_numpy(), _expected_tile(host, x, y, 8, 16))
