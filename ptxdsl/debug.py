"""Debug builds: mbarrier and signal waits that report instead of hanging, and kernel faults
that become Python exceptions the process survives (issue 7, items 3 and 4).

Build side — `bounded_waits(k, timeout_ns=...)` sets the kernel's default `WaitTimeout`
(`k.wait_timeout`, read by `ptx.mbarrier_wait` and `ptxdsl.signals.signal_wait`), so every
wait loop built afterwards in `k`
gives up after the timeout (%globaltimer), writes an error record and traps. The record goes
to host-mapped memory whose address the host stores in the module variable `ptxdsl_dbg_record`
(0: no record, just the trap); `ptxdsl_dbg_claim` lets only the first thread that times out
write it. Declare both with `declare(module)` (or build the module with `debug.module(...)`).

Host side — `Recorder` allocates the record, points loaded modules at it (`attach`) and reads
it back (`record()`); the host memory stays readable after the context dies. `run(fn, grid,
block, args, timeout=...)` launches, synchronizes with a host-side timeout, and turns a
failure into `KernelFault` (naming the kernel and the CUDA error) or `WaitTimeoutError`
(carrying the record).

A trap or a memory fault is a sticky error: with the CUDA 13 driver (580) no call of the
process succeeds afterwards, a context reset included (cuDevicePrimaryCtxReset succeeds, then
cuDevicePrimaryCtxRetain and cuCtxCreate fail with the same error, seen on an H100). So
`isolated(fn, ...)` runs fault-prone work in a child process and hands its result or its
`KernelFault` back: the calling process, a test suite for instance, goes on.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import weakref
import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import attrs

from .errors import BuildError, CudaError, OperandError, PtxdslError, user_loc
from .instructions.compare import Setp
from .instructions.fence import membar
from .instructions.mbarrier_wait import MbarrierWait, WaitTimeout
from .instructions.memory import Ld
from .kernel import Kernel
from .operands import Addr, Imm, Reg, Symbol, Vec, _show
from .types import ScalarType, Sem, StateSpace

if TYPE_CHECKING:  # pragma: no cover
    from .module import Module

RECORD_NAME = "ptxdsl_dbg_record"       # .global .u64: device address of the record, or 0
CLAIM_NAME = "ptxdsl_dbg_claim"         # .global .u32: 0 until a thread claims the record
MAGIC = 0x70647862                      # 'bxdp': the record is complete
RECORD_BYTES = 64
DEFAULT_TIMEOUT_NS = 2_000_000_000
SPACE_CODES = {StateSpace.generic: 0, StateSpace.shared: 1, StateSpace.shared_cta: 1,
               StateSpace.shared_cluster: 2, StateSpace.global_: 3}
# A signal wait's record (ptxdsl.signals.signal_wait) also says how it compared (word 14: 0 for
# an mbarrier wait) and the last value it read (word 15); its "parity" word holds the value it
# waited for.
COMPARE_CODES = {"eq": 1, "ne": 2, "ge": 3, "gt": 4}
T = ScalarType
_RECORD = Symbol(RECORD_NAME, StateSpace.global_, T.u64, 1, 8)
_CLAIM = Symbol(CLAIM_NAME, StateSpace.global_, T.u32, 1, 4)
# Kernels whose bounded waits use the record variables -> the line of the first such wait.
# The variables are free-standing symbols (declared by name in whichever module), so the
# kernel does not track them: `Module.emit` asks `check_declared` instead.
_RECORD_USERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def kernel_id(name: str) -> int:
    """The 32-bit id a kernel's record carries (crc32 of its name)."""
    if not isinstance(name, str):
        raise OperandError("debug.kernel_id", "name", "a kernel's name (a str)", _show(name))
    return zlib.crc32(name.encode())


# -- build side -----------------------------------------------------------------------------------
def bounded_waits(k, *, timeout_ns: int | None = DEFAULT_TIMEOUT_NS,
                  timeout_cycles: int | None = None, trap: bool = True) -> WaitTimeout:
    """Bound every `mbarrier_wait(k, ...)` built from now on in kernel `k`: past the timeout
    the waiting thread writes the error record (kernel, barrier address and space, parity,
    block, thread, %globaltimer) and traps (`trap=False`: leaves the loop instead)."""
    # Checked here: a non-kernel would fail as a bare AttributeError, and a truthy string
    # such as "no" would silently turn trapping on.
    _check_kernel("debug.bounded_waits", k)
    if type(trap) is not bool:
        raise BuildError(f"debug.bounded_waits: trap must be True or False, got {_show(trap)}")
    if timeout_cycles is not None:
        timeout_ns = None
    if timeout_ns is None and timeout_cycles is None:
        raise BuildError("debug.bounded_waits: give timeout_ns=... or timeout_cycles=... (None "
                         "for both leaves nothing to bound the waits with)")
    try:
        timeout = WaitTimeout(timeout_ns, timeout_cycles, _RecordWriter(kernel_id(k.name)),
                              trap)
    except OperandError as e:   # WaitTimeout's checks name mbarrier_wait: name the caller
        operand = "timeout_ns" if timeout_ns is not None else "timeout_cycles"
        raise OperandError("debug.bounded_waits", operand, e.expected, e.given, e.loc) \
            from None
    k.wait_timeout = timeout
    return timeout


def _check_kernel(what: str, k) -> None:
    # A check, not an isinstance narrowing in the caller: `wait_timeout` is a kernel option
    # that Kernel does not declare (mbarrier_wait reads it with getattr).
    if not isinstance(k, Kernel):
        raise BuildError(f"{what}: expected the Kernel whose waits to bound, got {_show(k)}")


@attrs.frozen
class _RecordWriter:
    """The `on_timeout` hook: emitted right after the wait loop it bounds, it takes the
    barrier and parity from that loop's try_wait (the last `MbarrierWait` in the body)."""

    kid: int

    def __call__(self, k) -> None:
        wait, test = _last_wait(k.body)
        if wait is None:
            raise BuildError("debug.bounded_waits: on_timeout ran with no mbarrier or signal "
                             "wait before it")
        _RECORD_USERS.setdefault(k, user_loc())
        rec = k.ld(_RECORD, type=T.u64, space="global")
        with k.if_(k.setp("ne", rec, 0, type=T.u64)):
            old = k.atom_cas(_CLAIM, 0, 1, type=T.b32, space="global")
            with k.if_(k.setp("eq", old, 0, type=T.b32)):
                self._fields(k, rec, wait, test)

    def _fields(self, k, rec: Reg, wait: MbarrierWait | Ld, test: Setp | None) -> None:
        def put(off: int, value, type=T.u32) -> None:
            k.st(Addr(rec, off), value, type=type, space="global")

        put(4, self.kid)
        if isinstance(wait, MbarrierWait):
            put(8, _bar_address(k, wait.addr), T.u64)
            put(16, wait.token.value if isinstance(wait.token, Imm) else wait.token, T.b32)
        else:
            assert test is not None   # _last_wait pairs a signal's load with its setp
            put(8, _bar_address(k, wait.a if isinstance(wait.a, Addr) else Addr(wait.a)),
                T.u64)
            put(16, test.b.value if isinstance(test.b, Imm) else test.b)
            put(56, COMPARE_CODES[test.cmp])
            put(60, test.a)                        # the word tested: a vector's first
        put(20, SPACE_CODES.get(wait.space, 3))
        for i, axis in enumerate("xyz"):
            put(24 + 4 * i, getattr(k.ctaid, axis))
            put(36 + 4 * i, getattr(k.tid, axis))
        put(48, k.globaltimer, T.u64)
        membar(k, "sys")                           # the fields reach the host before MAGIC
        k.st(Addr(rec, 0), MAGIC, type=T.u32, space="global", sem="volatile")


def _last_wait(body) -> tuple[MbarrierWait | Ld | None, Setp | None]:
    """The wait a bounded loop that just ended polled: its `mbarrier.try_wait`, or a signal
    wait's `ld.acquire` with the `setp` that tests the value it read, or a data poll's
    (`signals.lamport_wait`) first `ld.relaxed` with the `setp` of its first word."""
    test = None
    for s in reversed(body):
        insn = getattr(s, "insn", None)
        if isinstance(insn, MbarrierWait):
            return insn, None
        if isinstance(insn, Setp):
            test = insn
        elif (isinstance(insn, Ld) and insn.sem in (Sem.acquire, Sem.relaxed)
              and test is not None and test.cmp in COMPARE_CODES
              and (test.a is insn.d or (isinstance(insn.d, Vec) and test.a is insn.d.items[0]))):
            return insn, test
    return None, None


def _bar_address(k, addr: Addr) -> Reg:
    """The barrier's address as a .u64 (a shared-window offset zero-extended)."""
    base = addr.base
    assert not isinstance(base, int)   # the wait's check_addr refused an absolute address
    a = k.mov(base) if isinstance(base, Symbol) else base
    if a.type.bits == 32:
        a = k.cvt(a, T.u64, atype=T.u32)
    return k.add(a, addr.offset, type=T.u64) if addr.offset else a


def check_declared(module) -> None:
    """Refuse (at emit) a kernel whose bounded waits use the record variables in a module that
    does not declare them: ptxas would say only "Illegal operand type ... [ptxdsl_dbg_record]".
    """
    _check_module("debug.check_declared", module)
    names = {s.name for s, _ in module.globals}
    if {RECORD_NAME, CLAIM_NAME} <= names:
        return
    for k in module.kernels:
        used = _RECORD_USERS.get(k)
        if used is not None:
            raise BuildError(f"kernel {k.name}: its bounded waits (debug.bounded_waits; the "
                             f"first built at {used}) write the error record {RECORD_NAME}, "
                             f"which module '{module.name}' does not declare: call "
                             "debug.declare(module) on it, or build it with debug.module(...)",
                             module.loc)


def _check_module(what: str, module: Any) -> None:
    from .module import Module
    if not isinstance(module, Module):
        raise OperandError(what, "module", "a ptxdsl Module", _show(module))


def declare(module) -> None:
    """Declare the record variables in `module` (idempotent)."""
    _check_module("debug.declare", module)
    names = {s.name for s, _ in module.globals}
    if RECORD_NAME not in names:
        module.global_array(T.u64, 1, name=RECORD_NAME, align=8, init=[0])
    if CLAIM_NAME not in names:
        module.global_array(T.u32, 1, name=CLAIM_NAME, align=4, init=[0])


def module(kernels: Iterable[Kernel], **kwargs: Any) -> Module:
    """A `Module` of `kernels` with the record variables declared."""
    from .module import Module
    m = Module(kernels, **kwargs)
    declare(m)
    return m


# -- host side ------------------------------------------------------------------------------------
@attrs.frozen
class ErrorRecord:
    """What the timed-out thread wrote: the kernel (name when known), the barrier (address
    and space: 'generic', 'shared::cta', 'shared::cluster'), the phase parity it waited for,
    its block and thread, and %globaltimer (ns) when it gave up. For a signal wait
    (`ptxdsl.signals.signal_wait`), `barrier` is the signal's address (space 'global'),
    `parity` the value it waited for, `compare` how ('ge', 'eq', ...) and `seen` the last
    value it read; both None for an mbarrier wait."""

    kernel: str
    kernel_id: int
    barrier: int
    space: str
    parity: int
    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    globaltimer_ns: int
    compare: str | None = None
    seen: int | None = None

    @classmethod
    def parse(cls, raw: bytes, names=()) -> ErrorRecord | None:
        """The record in `raw` (RECORD_BYTES), or None when none was written."""
        if not isinstance(raw, bytes | bytearray | memoryview) or len(raw) < RECORD_BYTES:
            raise OperandError("debug.ErrorRecord.parse", "raw", f"the record's "
                               f"{RECORD_BYTES} bytes (Recorder.raw())", _show(raw))
        w32 = [int.from_bytes(raw[i:i + 4], "little") for i in range(0, RECORD_BYTES, 4)]
        if w32[0] != MAGIC:
            return None
        kid = w32[1]
        name = next((n for n in names if kernel_id(n) == kid), f"<kernel id {kid:#010x}>")
        space = {0: "generic", 1: "shared::cta", 2: "shared::cluster",
                 3: "global"}.get(w32[5], "?")
        compare = {v: n for n, v in COMPARE_CODES.items()}.get(w32[14])
        return cls(name, kid, int.from_bytes(raw[8:16], "little"), space, w32[4],
                   (w32[6], w32[7], w32[8]), (w32[9], w32[10], w32[11]),
                   int.from_bytes(raw[48:56], "little"), compare,
                   w32[15] if compare is not None else None)

    def __str__(self) -> str:
        where = f"block {self.block}, thread {self.thread}"
        if self.compare is not None:
            return (f"kernel '{self.kernel}' gave up waiting on the signal at "
                    f"{self.barrier:#x} ({self.space}) for a value {self.compare} "
                    f"{self.parity} (last read {self.seen}): {where}")
        return (f"kernel '{self.kernel}' gave up waiting on the mbarrier at {self.barrier:#x} "
                f"({self.space}) for the phase of parity {self.parity}: {where}")


class KernelFault(CudaError):
    """A kernel failed on the GPU: `kernel` (the launched one), `error` (the CUDA error name,
    e.g. 'CUDA_ERROR_ILLEGAL_ADDRESS'), `record` (an `ErrorRecord` when a bounded wait timed
    out), `sticky` (True when the error poisoned the process: with CUDA 13 drivers every later
    CUDA call of the process fails, and no new context can be made — run such kernels with
    `isolated`), `seconds` (from the launch to the failure)."""

    def __init__(self, kernel: str, error: str, detail: str, record: ErrorRecord | None = None,
                 sticky: bool = False, seconds: float | None = None):
        self.kernel, self.error, self.detail, self.record = kernel, error, detail, record
        self.sticky, self.seconds = sticky, seconds
        what = str(record) if record is not None else f"kernel '{kernel}' failed"
        text = f"{what}: {error} ({detail})"
        if sticky:
            text += ("; a sticky error: CUDA is unusable in this process from now on (run "
                     "fault-prone kernels with ptxdsl.debug.isolated)")
        super().__init__(text)

    def __reduce__(self):   # crosses the process boundary of `isolated`
        return (type(self), (self.kernel, self.error, self.detail, self.record, self.sticky,
                             self.seconds))


class WaitTimeoutError(KernelFault, TimeoutError):
    """A bounded mbarrier wait timed out (see `bounded_waits`); `record` says where."""


class Recorder:
    """The error record in page-locked, device-mapped host memory (cuMemHostRegister on an
    mmap), so it can be read after the kernel trapped and the context died."""

    def __init__(self, device: int = 0):
        from .runtime._driver import check, driver
        from .runtime.device import on_device
        self.device = device
        buf = mmap.mmap(-1, mmap.PAGESIZE)
        self._buf: mmap.mmap | None = buf
        self._view = (ctypes.c_char * mmap.PAGESIZE).from_buffer(buf)
        self.host_ptr = ctypes.addressof(self._view)
        drv = driver()
        with on_device(device):
            check(drv.cuMemHostRegister(self.host_ptr, mmap.PAGESIZE,
                                        drv.CU_MEMHOSTREGISTER_DEVICEMAP), "cuMemHostRegister")
            self.ptr = int(check(drv.cuMemHostGetDevicePointer(self.host_ptr, 0),
                                 "cuMemHostGetDevicePointer"))
            self.names: list[str] = []
            self._modules: list = []

    def attach(self, loaded) -> Recorder:
        """Point a loaded module's `ptxdsl_dbg_record` at this record (and clear its claim).
        The module must be loaded on this recorder's device."""
        from .runtime._driver import check, driver
        from .runtime.device import on_device
        device = getattr(loaded, "device", self.device)
        if device != self.device:
            # The record is mapped for the recorder's device (in its context): a module on
            # another device needs a recorder of its own.
            raise PtxdslError(f"debug.Recorder.attach: this recorder is on device "
                              f"{self.device}, the module is loaded on device {device}: make "
                              f"it with debug.Recorder({device})")
        with on_device(self.device):
            drv = driver()
            for name, value, size in ((RECORD_NAME, self.ptr, 8), (CLAIM_NAME, 0, 4)):
                dptr, nbytes = check(drv.cuModuleGetGlobal(loaded.handle, name.encode()),
                                     "cuModuleGetGlobal", f"{name} (build with debug.declare)")
                data = (ctypes.c_uint8 * size).from_buffer_copy(value.to_bytes(size, "little"))
                check(drv.cuMemcpyHtoD(dptr, ctypes.addressof(data), size), "cuMemcpyHtoD", name)
            self.names += [n for n in loaded.kernels if n not in self.names]
            self._modules.append(loaded)
            return self

    def raw(self) -> bytes:
        return self._view.raw[:RECORD_BYTES]

    def record(self) -> ErrorRecord | None:
        return ErrorRecord.parse(self.raw(), self.names)

    def clear(self) -> None:
        """Forget the record and re-arm every attached module (after a non-sticky report)."""
        ctypes.memset(self.host_ptr, 0, RECORD_BYTES)
        modules, self._modules = self._modules, []
        for m in modules:
            if m.handle is not None:
                self.attach(m)

    def close(self) -> None:
        """Unregister the memory (an error is ignored: the context may be broken)."""
        if self._buf is None:
            return
        try:
            from .runtime._driver import driver
            driver().cuMemHostUnregister(self.host_ptr)
        finally:
            del self._view
            self._buf.close()
            self._buf = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run(fn, grid, block, args=(), *, timeout: float = 30.0, recorder: Recorder | None = None,
        **launch_kw) -> None:
    """Launch `fn` and wait for it (at most `timeout` s, then `SyncTimeoutError`). A failure
    raises `KernelFault` naming `fn` and the CUDA error — `WaitTimeoutError` when `recorder`
    holds a record (also when the kernel finished: bounded waits built with trap=False)."""
    import time

    from .runtime import DriverError, SyncTimeoutError, synchronize
    from .runtime.launch import Function
    if not isinstance(fn, Function):
        raise OperandError("debug.run", "fn", "a loaded kernel (a ptxdsl Function: "
                           "module.load()['name'])", _show(fn))
    _seconds("debug.run", timeout)
    if recorder is not None and not isinstance(recorder, Recorder):
        raise OperandError("debug.run", "recorder", "a debug.Recorder", _show(recorder))
    t0 = time.monotonic()
    try:
        fn.launch(grid, block, args, **launch_kw)
        synchronize(timeout, device=fn.device)
    except DriverError as e:
        rec = recorder.record() if recorder is not None else None
        cls = WaitTimeoutError if rec is not None else KernelFault
        raise cls(fn.name, e.name, f"{e.call}, code {e.code}", rec,
                  context_broken(fn.device), time.monotonic() - t0) from e
    except SyncTimeoutError as e:
        rec = recorder.record() if recorder is not None else None
        if rec is None:
            raise
        raise WaitTimeoutError(fn.name, "host timeout", str(e), rec, False,
                               time.monotonic() - t0) from e
    rec = recorder.record() if recorder is not None else None
    if rec is not None:
        raise WaitTimeoutError(fn.name, "no CUDA error (trap=False)", "the kernel finished",
                               rec, False, time.monotonic() - t0)


def context_broken(device: int = 0) -> bool:
    """Whether the device's context holds a sticky error (every call fails with it)."""
    from .runtime._driver import driver
    from .runtime.device import enter_device, leave_device
    try:
        saved = enter_device(device)
    except CudaError:
        return True
    try:
        drv = driver()
        err, ptr = drv.cuMemAlloc(256)
        if int(err) == 0:
            drv.cuMemFree(ptr)
            return False
        return True
    finally:
        if saved is not None:     # (the caller's context, as on_device gives it back)
            leave_device(saved)


# -- isolation --------------------------------------------------------------------------------
class IsolatedCrash(CudaError):
    """The child process of `isolated` died (a signal, os._exit) or hung past its timeout."""


# How long a hung child of `isolated` has to exit after SIGTERM (its atexit handlers and the
# driver's context teardown run) before SIGKILL, and how long to wait for it after that.
KILL_GRACE_S = 5.0
KILL_WAIT_S = 30.0


def _end(proc) -> str:
    """End a hung child of `isolated` and every process in its process group (it made its
    own, `_child`): SIGTERM, then SIGKILL if it is still there after `KILL_GRACE_S`; reap it.
    Says what it took, for the error."""
    import os
    import signal
    import time
    group = _own_group(proc.pid)

    def send(sig: signal.Signals) -> None:
        try:
            if group is not None:
                os.killpg(group, sig)
            elif proc.exitcode is None:   # the pid is not reaped yet, so still the child's
                os.kill(proc.pid, sig)
        except ProcessLookupError:
            pass

    t0 = time.monotonic()
    send(signal.SIGTERM)
    proc.join(KILL_GRACE_S)
    if proc.exitcode is not None:
        said = f"killed (SIGTERM ended it {time.monotonic() - t0:.2f} s later)"
    else:
        send(signal.SIGKILL)
        t1 = time.monotonic()
        proc.join(KILL_WAIT_S)
        ignored = f"it ignored SIGTERM for {KILL_GRACE_S:g} s"
        said = (f"killed ({ignored}; SIGKILL ended it {time.monotonic() - t1:.2f} s later)"
                if proc.exitcode is not None else
                f"not ended: {ignored} and still ran {KILL_WAIT_S:g} s after SIGKILL (stuck "
                "in the GPU driver? nvidia-smi shows it)")
    # What the child started may outlive it, or ignore SIGTERM: nothing in its group has a
    # reason to live on. (The group's id stays reserved while any member lives, so this
    # cannot reach a stranger's group.)
    if group is not None:
        send(signal.SIGKILL)
        said += ", with its process group (anything it started)"
    return said


def _own_group(pid: int) -> int | None:
    """The child's process group, when it is the leader of one of its own: never the
    caller's group (the child may not have reached its `setpgid` yet)."""
    import os
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        return None
    return group if group == pid and group != os.getpgrp() else None


def _child(conn, target, args, kwargs) -> None:
    import os
    import pickle
    # Its own process group, so that ending a hung child (`_end`) also ends whatever it
    # started (a server, a compiler) and never reaches the parent's group. Without one
    # (refused: a session leader) `_end` signals the child alone.
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    try:
        result = (True, target(*args, **kwargs))
    except BaseException as e:  # noqa: BLE001 - every failure goes back to the parent
        result = (False, e)
    try:
        pickle.loads(pickle.dumps(result))
    except Exception as e:  # noqa: BLE001 - an unpicklable result or exception
        result = (False, CudaError(f"{type(result[1]).__name__}: {result[1]} (not picklable: "
                                   f"{e})"))
    conn.send(result)
    conn.close()


def _seconds(what: str, timeout: Any) -> None:
    """A time limit: a positive, finite number of seconds (numpy's too)."""
    import math
    import numbers
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) \
            or not 0 < float(timeout) < math.inf:
        raise OperandError(what, "timeout", "a positive number of seconds", _show(timeout))


def isolated(target, *args, timeout: float = 300.0, **kwargs):
    """Run `target(*args, **kwargs)` in a fresh Python process (multiprocessing spawn: CUDA
    cannot cross a fork) and return its result, or raise its exception here — a `KernelFault`
    with its record, for instance. A sticky CUDA error then poisons only the child: this
    process, and a test suite running in it, goes on. `target` must be importable (a
    module-level function). A child that dies or runs past `timeout` s raises
    `IsolatedCrash`; one that hangs is ended (`_end`: SIGTERM, SIGKILL after `KILL_GRACE_S`,
    the processes it started with it), and its GPU work with it."""
    import multiprocessing as mp
    import pickle
    # The spawn start pickles all three for the child; a lambda or nested function fails
    # there with a bare pickling AttributeError that does not say what `isolated` needs.
    if not callable(target):
        raise BuildError(f"debug.isolated: expected a function to run, got {_show(target)}")
    _seconds("debug.isolated", timeout)   # before a child process is started
    try:
        pickle.dumps(target)
    except Exception as e:  # noqa: BLE001 - pickle raises several types
        raise BuildError(f"debug.isolated: {getattr(target, '__qualname__', target)!r} cannot "
                         "be sent to the child process: the target must be importable (a "
                         f"module-level function, not a lambda or a nested function) ({e})"
                         ) from None
    try:
        pickle.dumps((args, kwargs))
    except Exception as e:  # noqa: BLE001 - pickle raises several types
        raise BuildError("debug.isolated: the arguments for the child process must be "
                         f"picklable ({e})") from None
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, target, args, kwargs), daemon=True,
                       name=f"ptxdsl-isolated-{getattr(target, '__name__', 'target')}")
    proc.start()
    child.close()
    answered = ended = False
    try:
        if not parent.poll(timeout):
            ended = True
            raise IsolatedCrash(f"{target.__name__} did not finish within {timeout:g} s in its "
                                f"child process (pid {proc.pid}): {_end(proc)}")
        try:
            ok, value = parent.recv()
        except EOFError:
            proc.join(10)
            raise IsolatedCrash(f"{target.__name__}: the child process died (exit code "
                                f"{proc.exitcode})") from None
        answered = True
    finally:
        parent.close()
        if answered:
            proc.join(30)
        # A child left running (the wait interrupted by Ctrl-C, or one stuck on its way out)
        # keeps the GPU busy, and the next child's kernels would queue behind it.
        if proc.exitcode is None and not ended:
            _end(proc)
    if ok:
        return value
    raise value
