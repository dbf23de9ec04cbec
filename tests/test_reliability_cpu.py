"""Reliability (issue 7), the parts a CPU can check: the debug build's bounded waits and error
record, Python line mapping of assembly errors, the JIT line-info switch, and the generator of
the GPU tensor-map fuzz. The kernels here are also what tests/test_reliability_gpu.py runs."""

from __future__ import annotations

import inspect
import random
import struct

import numpy as np
import pytest

from ptxdsl import AssemblyError, BuildError, Kernel, Module, debug, ptx, t
from ptxdsl.runtime.loader import has_lineinfo
from ptxdsl.runtime.tensormap_desc import validate
from ptxdsl.testing import assemble_declared

WAIT_NS = 300_000_000     # 0.3 s: a wrong wait becomes an exception well within a second


def _pipeline(name: str, body, *, bounded: bool = True, timeout_ns: int = WAIT_NS,
              trap: bool = True):
    """A 32-thread kernel with a shared buffer and an initialised mbarrier; `body(k, bar,
    smem)` issues the work and the wait (bounded by `timeout_ns` unless bounded=False)."""
    k = Kernel(name, reqntid=32)
    if bounded:
        debug.bounded_waits(k, timeout_ns=timeout_ns, trap=trap)
    smem = k.shared_array(t.b8, 1024, align=128, name="smem")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_mbarrier_init(k)
    k.bar_sync(0)
    body(k, bar, smem)
    k.ret()
    return k


def expect_tx_kernel(nbytes_expected: int = 1024, nbytes_sent: int = 512, **kw) -> Kernel:
    """Thread 0 announces `nbytes_expected` bytes, then bulk-copies `nbytes_sent` from `src`;
    every thread waits for phase 0. Unequal counts never complete the phase."""
    def body(k, bar, smem):
        src = k.cvta(k.ld_param(k.param_ptr("src")), "global", to=True)
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_arrive_expect_tx(k, None, None, None, bar, nbytes_expected)
            ptx.cp_async_bulk(k, "shared::cluster", "global", smem, src, nbytes_sent, bar)
        ptx.mbarrier_wait(k, bar, 0)
    return _pipeline(kw.pop("name", "expect_tx"), body, **kw)


def parity_kernel(parity: int = 1, **kw) -> Kernel:
    """Thread 0 arrives once (phase 0 completes); every thread waits for the phase of
    `parity`. Parity 1 is the phase that never comes."""
    def body(k, bar, smem):
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_arrive(k, bar)
        ptx.mbarrier_wait(k, bar, parity)
    return _pipeline(kw.pop("name", "wrong_parity"), body, **kw)


def trap_kernel() -> Kernel:
    k = Kernel("traps", reqntid=32)
    k.trap()
    k.ret()
    return k


def illegal_address_kernel() -> Kernel:
    """Every thread stores to address 0x10 (never mapped)."""
    k = Kernel("illegal_address", reqntid=32)
    bad = k.mov(16, type=t.u64)
    k.st(bad, 1, type=t.u32, space="global")
    k.ret()
    return k


def misaligned_tensormap_kernel() -> Kernel:
    """A TMA load through a tensor map whose own address (`tmap`, a generic pointer) is
    taken from a parameter: the host passes a map copied to a 16-byte (not 64-byte) aligned
    address. The wait is bounded, so no fault would still end in an exception."""
    def body(k, bar, smem):
        tmap = k.ld_param(k.param_ptr("tmap", space=None))
        with k.if_(k.tid.x == 0):
            ptx.mbarrier_arrive_expect_tx(k, None, None, None, bar, 16 * 16 * 4)
            ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", smem, tmap, (0, 0), bar)
        ptx.mbarrier_wait(k, bar, 0)
    return _pipeline("misaligned_tensormap", body)


def oob_store_kernel():
    """(kernel, the Python line of the faulting store): a store outside `out`, for
    compute-sanitizer to report against this file's line.

    Its address is unambiguous on every board: an `st.global` (a generic store's address can
    fall in a shared-memory window: an H100 reported a generic store 1 GiB past `out` as an
    `Invalid __remote_shared__ write`) into the null page (`out & 0xF00`: computed at run
    time so ptxas cannot fold it, 256-aligned as `out` is, and never mapped)."""
    k = Kernel("oob_store", reqntid=32)
    out = k.ld_param(k.param_ptr("out"))
    null_page = k.and_(out, 0xF00, type=t.b64)
    line = inspect.currentframe().f_lineno + 1
    k.st(null_page, 7, type=t.u32, space="global")
    k.ret()
    return k, line


# -- CPU tests -------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [expect_tx_kernel, parity_kernel, misaligned_tensormap_kernel])
def test_bounded_wait_kernels_assemble_with_the_record(make):
    text = debug.module([make()], check=False).emit()
    assemble_declared(text)
    for needed in ("%globaltimer", "trap;", "ptxdsl_dbg_record", "atom.global.cas.b32",
                   "membar.sys;", f"{debug.MAGIC};"):
        assert needed in text, needed
    assert text.count(".visible .global .align 8 .u64 ptxdsl_dbg_record[1] = {0};") == 1


def test_unbounded_wait_has_no_record_code():
    text = Module([parity_kernel(bounded=False)], check=False).emit()
    assert "ptxdsl_dbg_record" not in text and "trap;" not in text


def test_declare_is_idempotent_and_needed():
    m = Module([parity_kernel()], check=False)
    with pytest.raises(BuildError, match=r"ptxdsl_dbg_record, which module 'module' does not "
                       r"declare: call debug.declare\(module\)"):
        m.assemble()
    debug.declare(m)
    debug.declare(m)
    m.assemble()


def test_a_late_bounded_waits_does_not_bound_earlier_waits():
    # The option applies to waits built after it: set it first (the GPU test once set it
    # after building, and the kernel hung).
    k = parity_kernel(1, name="late", bounded=False)
    debug.bounded_waits(k)
    assert "%globaltimer" not in Module([k], check=False).emit()
    k = parity_kernel(1, name="slow", timeout_ns=3_000_000_000, trap=False)
    text = debug.module([k], check=False).emit()
    assert "3000000000;" in text and "trap;" not in text


# -- isolation: children (importable, so a spawned process can run them) ----------------------
def child_value(x):
    return {"twice": 2 * x}


def child_fault():
    rec = debug.ErrorRecord("k", 1, 0x400, "shared::cta", 1, (0, 0, 0), (5, 0, 0), 99)
    raise debug.WaitTimeoutError("k", "CUDA_ERROR_LAUNCH_FAILED", "cuEventQuery, code 719",
                                 rec, True, 0.4)


def child_dies():
    import os
    os._exit(3)


def child_sleeps():
    import time
    time.sleep(60)


def child_hangs_with_a_helper(pids_file):
    """Hangs, as a kernel that never finishes does, after starting a helper process; both
    ignore SIGTERM, so only the SIGKILL after the grace period ends them."""
    import os
    import signal
    import subprocess
    import sys
    import time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)   # inherited by the helper across exec
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(pids_file, "w") as f:
        f.write(f"{os.getpid()} {helper.pid}")
    time.sleep(120)


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie waiting for init to reap it is not)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_isolated_ends_a_hung_child_and_what_it_started(tmp_path, monkeypatch):
    import time
    monkeypatch.setattr(debug, "KILL_GRACE_S", 1.0)
    pids = tmp_path / "pids"
    with pytest.raises(debug.IsolatedCrash,
                       match=r"did not finish within 6 s in its child process \(pid \d+\): "
                             r"killed \(it ignored SIGTERM for 1 s; SIGKILL ended it [\d.]+ s "
                             r"later\), with its process group"):
        debug.isolated(child_hangs_with_a_helper, str(pids), timeout=6)
    child, helper = map(int, pids.read_text().split())
    assert not _running(child)
    deadline = time.monotonic() + 10   # SIGKILL is delivered, the exit takes a moment
    while _running(helper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(helper)
    t0 = time.monotonic()
    assert debug.isolated(child_value, 21) == {"twice": 42}
    assert time.monotonic() - t0 < 30


def test_isolated_ends_its_child_when_the_wait_is_interrupted(tmp_path, monkeypatch):
    """Ctrl-C (here an alarm) in the parent while the child runs: the child does not live on."""
    import signal
    import time

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    monkeypatch.setattr(debug, "KILL_GRACE_S", 1.0)
    pids = tmp_path / "pids"
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.alarm(6)
        with pytest.raises(KeyboardInterrupt):
            debug.isolated(child_hangs_with_a_helper, str(pids), timeout=60)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    child, helper = map(int, pids.read_text().split())
    deadline = time.monotonic() + 10
    while (_running(child) or _running(helper)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child) and not _running(helper)


def test_isolated_returns_and_raises_across_the_process():
    assert debug.isolated(child_value, 21) == {"twice": 42}
    with pytest.raises(debug.WaitTimeoutError) as err:
        debug.isolated(child_fault)
    e = err.value
    assert (e.kernel, e.error, e.sticky, e.seconds) == ("k", "CUDA_ERROR_LAUNCH_FAILED", True,
                                                         0.4)
    assert e.record.thread == (5, 0, 0) and "kernel 'k' gave up waiting" in str(e)
    with pytest.raises(debug.IsolatedCrash, match="exit code 3"):
        debug.isolated(child_dies)
    with pytest.raises(debug.IsolatedCrash, match=r"did not finish within 2 s in its child "
                       r"process \(pid \d+\): killed \(SIGTERM ended it [\d.]+ s later\)"):
        debug.isolated(child_sleeps, timeout=2)


def test_bounded_waits_sets_the_kernel_default():
    k = Kernel("k")
    timeout = debug.bounded_waits(k, timeout_ns=5)
    assert k.wait_timeout is timeout and timeout.ns == 5 and timeout.trap


def test_error_record_round_trip():
    raw = struct.pack("<IIQII3I3IQ", debug.MAGIC, debug.kernel_id("pipe"), 0x400, 1, 1,
                      3, 0, 0, 31, 0, 0, 123456789)
    raw += bytes(debug.RECORD_BYTES - len(raw))
    rec = debug.ErrorRecord.parse(raw, ["other", "pipe"])
    assert rec == debug.ErrorRecord("pipe", debug.kernel_id("pipe"), 0x400, "shared::cta", 1,
                                    (3, 0, 0), (31, 0, 0), 123456789)
    assert "kernel 'pipe'" in str(rec) and "parity 1" in str(rec)
    assert debug.ErrorRecord.parse(bytes(debug.RECORD_BYTES)) is None


def test_assembly_error_names_the_python_line():
    k = Kernel("bad")
    line = inspect.currentframe().f_lineno + 1
    k.asm("fence.bogus.gpu;")
    k.ret()
    m = Module([k], lineinfo=True, check=False)
    text = m.emit()
    assert has_lineinfo(text) and f'.file 1 "{__file__}"' in text
    with pytest.raises(AssemblyError) as err:
        m.assemble()
    assert (err.value.loc.file, err.value.loc.line) == (__file__, line)
    assert f"{__file__}:{line}" in str(err.value)


def test_line_info_only_with_lineinfo():
    k, line = oob_store_kernel()
    with_info = Module([k], lineinfo=True, check=False).emit()
    # st.global: what test_compute_sanitizer_names_the_python_line expects memcheck to call
    # an `Invalid __global__ write`.
    assert f"\t.loc 1 {line} 0\n\tst.global.u32" in with_info
    assert not has_lineinfo(Module([oob_store_kernel()[0]], check=False).emit())
    assemble_declared(with_info)


def test_tensormap_fuzz_generator():
    from tests.gpu_tensormap_fuzz import MUTATIONS, random_desc, valid_desc
    rng = random.Random(3)
    for _ in range(500):
        assert validate(valid_desc(rng, 1 << 20), (9, 0)) == []
    for name, mutate in MUTATIONS.items():
        hits = 0
        for _ in range(40):
            d = mutate(rng, valid_desc(rng, 1 << 20))
            hits += d is not None and name in {v.rule for v in validate(d, (9, 0))}
        assert hits, name
    kinds = [random_desc(rng, 1 << 20)[1] for _ in range(400)]
    assert kinds.count("valid") > 50 and len(set(kinds)) > 20


def test_validator_matches_recorded_driver_verdicts():
    """The driver's verdicts on 10,676 descriptions (H100, driver 580; every one the old
    rules accepted or the driver accepted): ptxdsl must refuse every one the driver refused,
    and accept every one it accepted but those of the documented interleave32_swizzle rule."""
    import gzip
    import json
    import pathlib

    from ptxdsl.runtime.tensormap_desc import TiledDesc
    path = pathlib.Path(__file__).parent / "data" / "tensormap_driver_verdicts.jsonl.gz"
    false_accepts, over_refusals, n = [], [], 0
    for line in gzip.open(path, "rt"):
        if line.startswith("#"):
            continue
        dt, addr, gd, gs, bd, es, il, sw, l2, oob, verdict = json.loads(line)
        d = TiledDesc(dt, 0x10000 + addr, gd, gs, bd, es, il, sw, l2, oob)
        rules = {v.rule for v in validate(d, (9, 0))}
        n += 1
        if not rules and verdict is not None:
            false_accepts.append(d)
        if rules and verdict is None and rules != {"interleave32_swizzle"}:
            over_refusals.append((d, rules))
    assert n == 10676 and false_accepts == [] and over_refusals == []


# -- bad-input probes of the debug helpers: named at the caller's line -----------------------------
@pytest.mark.parametrize("call, message", [
    (lambda: debug.bounded_waits(Kernel("bw"), timeout_ns="1"),
     "debug.bounded_waits: operand 'timeout_ns'"),
    (lambda: debug.bounded_waits(Kernel("bw"), timeout_cycles=1.5),
     "debug.bounded_waits: operand 'timeout_cycles'"),
    (lambda: debug.bounded_waits(Kernel("bw"), timeout_ns=None),
     "debug.bounded_waits: give timeout_ns=... or timeout_cycles=..."),
    (lambda: debug.declare("m"), "debug.declare: operand 'module': expected a ptxdsl Module"),
    (lambda: debug.check_declared(None), "debug.check_declared: operand 'module'"),
    (lambda: debug.kernel_id(3), "debug.kernel_id: operand 'name'"),
    (lambda: debug.ErrorRecord.parse("x"), "debug.ErrorRecord.parse: operand 'raw'"),
    (lambda: debug.ErrorRecord.parse(b"\0" * 8), "the record's 64 bytes"),
    (lambda: debug.run("fn", 1, 1), "debug.run: operand 'fn': expected a loaded kernel"),
    # checked before a child process is started
    (lambda: debug.isolated(print, timeout="1"), "debug.isolated: operand 'timeout'"),
])
def test_debug_helpers_refuse_bad_input_by_name(call, message):
    with pytest.raises(BuildError, match=message) as e:
        call()
    assert (e.value.loc.file, e.value.loc.line) == (__file__, call.__code__.co_firstlineno)


def test_debug_helpers_take_numpy_integers():
    k = Kernel("np_bound")
    assert debug.bounded_waits(k, timeout_ns=np.int64(1000)).ns == 1000
    assert debug.ErrorRecord.parse(bytes(debug.RECORD_BYTES)) is None
