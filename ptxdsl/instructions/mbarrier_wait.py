"""mbarrier, the wait side: test_wait, try_wait (+ .parity, ± suspend-time hint),
pending_count (PTX ISA §9.7.13.15; digest §4), the canonical wait loop `mbarrier_wait`
(optionally bounded by a timeout for debug builds) and the `MbarrierPhase` parity tracker.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import attrs

from ..errors import BuildError, OperandError
from ..operands import Addr, Imm, Reg
from ..types import Requires, ScalarType, Scope, Sem, StateSpace
from . import _ptx_args as A
from ._tma_addr import mbar_addr
from .base import Instruction, _given, check_dst, check_enum, check_src, int_like, refuse
from .mbarrier import SPACES, _need, _qualifiers, _sem_req, _sem_scope, _space_req, bar_args

__all__ = ["mbarrier_test_wait", "mbarrier_test_wait_parity", "mbarrier_try_wait",
           "mbarrier_try_wait_parity", "mbarrier_pending_count", "mbarrier_wait",
           "WaitTimeout", "MbarrierPhase"]

S = StateSpace
T = ScalarType


class WaitOp(enum.Enum):
    test_wait = "test_wait"
    try_wait = "try_wait"


@attrs.frozen
class MbarrierWait(Instruction):
    """`mbarrier.{test_wait,try_wait}{.parity}{.sem.scope}{.shared{::cta}}.b64
    waitComplete, [addr], state|phaseParity{, suspendTimeHint};`

    .sem = .acquire | .relaxed (8.6); waitComplete is a .pred; state a .b64 register;
    phaseParity a .b32 register or 0/1; the hint (try_wait only, ns) a .b32 register or
    immediate. Only the local CTA's barrier can be waited on (no .shared::cluster).
    """

    MNEMONIC = "mbarrier.try_wait"
    op: WaitOp
    parity: bool
    space: StateSpace
    pred: Reg
    addr: Addr
    token: object
    hint: object = None
    sem: Sem | None = None
    scope: Scope | None = None

    def __attrs_post_init__(self):
        op = check_enum("mbarrier", "op", self.op, WaitOp)
        self._set("op", op)
        insn = f"mbarrier.{op.value}" + (".parity" if self.parity else "")
        if self.sem is not None and check_enum(insn, "sem", self.sem, Sem) is Sem.release:
            refuse(insn, "a wait has no .release semantics: use sem='acquire' or 'relaxed'")
        sem, scope = _sem_scope(insn, self.sem, self.scope, (Sem.acquire, Sem.relaxed))
        self._set("sem", sem)
        self._set("scope", scope)
        space = check_enum(insn, "space", self.space, S, SPACES)
        if space is S.shared_cluster:
            refuse(insn, "only the local CTA's barrier can be waited on: .shared::cluster is "
                   "rejected (use .shared::cta, or arrive remotely and wait locally)")
        self._set("space", space)
        name = self.opcode()
        if not isinstance(self.pred, Reg) or self.pred.type is not T.pred:
            raise OperandError(name, "waitComplete", "a .pred register", _given(self.pred))
        self._set("addr", mbar_addr(name, "addr", self.addr, space))
        if self.parity:
            tok = check_src(name, "phaseParity", self.token, T.b32)
            if isinstance(tok, Imm) and tok.value not in (0, 1):
                raise OperandError(name, "phaseParity", "0 or 1 (or a .b32 register)",
                                   tok.value)
        else:
            tok = check_src(name, "state", self.token, T.b64, imm=False)
        self._set("token", tok)
        if self.hint is not None:
            if op is WaitOp.test_wait:
                refuse(name, "takes no suspendTimeHint (only try_wait does)")
            self._set("hint", check_src(name, "suspendTimeHint", self.hint, T.u32))

    @property
    def requires(self) -> Requires:
        if self.op is WaitOp.try_wait:
            r = _need("7.8", 90)
        else:
            r = _need("7.1" if self.parity else "7.0")
        return r.merge(_space_req(self.space)).merge(_sem_req(self.sem, self.scope))

    def opcode(self) -> str:
        q = f"mbarrier.{self.op.value}" + (".parity" if self.parity else "")
        return q + _qualifiers(self.sem, self.scope, self.space)

    def operands(self):
        ops = (self.pred, self.addr, self.token)
        return ops + ((self.hint,) if self.hint is not None else ())


@attrs.frozen
class MbarrierPendingCount(Instruction):
    """`mbarrier.pending_count.b64 count, state;` (count .b32, state .b64)."""

    MNEMONIC = "mbarrier.pending_count.b64"
    REQUIRES = _need("7.0")
    d: Reg
    state: Reg

    def __attrs_post_init__(self):
        check_dst(self.MNEMONIC, "count", self.d, T.b32)
        self._set("state", check_src(self.MNEMONIC, "state", self.state, T.b64, imm=False))

    def opcode(self) -> str:
        return self.MNEMONIC

    def operands(self):
        return (self.d, self.state)


# -- builder functions (cuda::ptx names and overloads, kernel first) ---------------------------
def _waits(token: str, hint: bool) -> tuple[tuple[str, ...], ...]:
    """cuda::ptx's overloads: (addr, token{, hint}) and (sem, scope, addr, token{, hint});
    '*' names are keyword-only ptxdsl extensions."""
    tails = [(token,), (token, "suspend_time_hint")] if hint else [(token,)]
    plain = [("addr", *t, "*space", "*sem", "*scope") for t in tails]
    return (*plain, *(("sem", "scope", "addr", *t, "*space") for t in tails))


def _wait(k, op, parity, args, kw, dst):
    token = "phase_parity" if parity else "state"
    name = f"mbarrier_{op}" + ("_parity" if parity else "")
    _, a = A.bind(name, args, kw, _waits(token, op == "try_wait"))
    # cuda::ptx emits bare .shared for test_wait without sem, .shared::cta everywhere else.
    default = S.shared if op == "test_wait" else S.shared_cta
    sem, scope, sp, bar = bar_args(k, f"mbarrier.{op}", a, default)
    p = dst if dst is not None else k.reg(T.pred)
    k.emit(MbarrierWait(WaitOp(op), parity, sp, p, bar, a[token], a.get("suspend_time_hint"),
                        sem, scope))
    return p


@A.overloads(*_waits("state", False), extra=("*dst",))
def mbarrier_test_wait(k, *args, dst=None, **kw) -> Reg:
    """`(k, addr, state)`: `mbarrier.test_wait.shared.b64 p, [addr], state;`;
    `(k, sem, scope, addr, state)`: `mbarrier.test_wait.sem.scope.shared::cta.b64 ...`.
    Returns p."""
    return _wait(k, "test_wait", False, args, kw, dst)


@A.overloads(*_waits("phase_parity", False), extra=("*dst",))
def mbarrier_test_wait_parity(k, *args, dst=None, **kw) -> Reg:
    """`(k, addr, phase_parity)`: `mbarrier.test_wait.parity.shared.b64 p, [addr], parity;`;
    `(k, sem, scope, addr, phase_parity)`: `... .parity.sem.scope.shared::cta.b64 ...`"""
    return _wait(k, "test_wait", True, args, kw, dst)


@A.overloads(*_waits("state", True), extra=("*dst",))
def mbarrier_try_wait(k, *args, dst=None, **kw) -> Reg:
    """`(k, {sem, scope,} addr, state{, suspend_time_hint})`:
    `mbarrier.try_wait{.sem.scope}.shared::cta.b64 p, [addr], state{, hint};`"""
    return _wait(k, "try_wait", False, args, kw, dst)


@A.overloads(*_waits("phase_parity", True), extra=("*dst",))
def mbarrier_try_wait_parity(k, *args, dst=None, **kw) -> Reg:
    """`(k, {sem, scope,} addr, phase_parity{, suspend_time_hint})`:
    `mbarrier.try_wait.parity{.sem.scope}.shared::cta.b64 p, [addr], parity{, hint};`"""
    return _wait(k, "try_wait", True, args, kw, dst)


def mbarrier_pending_count(k, state, *, dst=None) -> Reg:
    """`mbarrier.pending_count.b64 count, state;` — returns the .b32 count register."""
    d = dst if dst is not None else k.reg(T.u32)
    k.emit(MbarrierPendingCount(d, state))
    return d


def _given_kw(**kw):
    """The keyword arguments that were given (None means "not given")."""
    return {n: v for n, v in kw.items() if v is not None}


# -- the wait loop --------------------------------------------------------------------------------
@attrs.frozen
class WaitTimeout:
    """A bound on `mbarrier_wait` for debug builds: give up after `ns` nanoseconds
    (`%globaltimer`) or `cycles` SM clocks (`%clock64`), emit `on_timeout(k)` (e.g. store an
    error record), then `trap;` (unless `trap=False`, when the loop just falls through).

    A kernel may carry a default in `k.wait_timeout` (a later "debug build" option can set it);
    `mbarrier_wait` uses it when no timeout is passed.
    """

    ns: int | None = None
    cycles: int | None = None
    on_timeout: Callable[[Any], object] | None = None
    trap: bool = True

    def __attrs_post_init__(self):
        if (self.ns is None) == (self.cycles is None):
            raise BuildError("WaitTimeout: give exactly one of ns=... or cycles=...")
        limit = self.ns if self.ns is not None else self.cycles
        limit = int_like(limit)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit < 1 << 63:
            raise OperandError("mbarrier_wait", "timeout", "a positive integer below 2^63",
                               repr(limit))
        if self.on_timeout is not None and not callable(self.on_timeout):
            raise OperandError("mbarrier_wait", "on_timeout", "a callable taking the kernel",
                               repr(self.on_timeout))


def mbarrier_wait(k, bar, parity, *, suspend_time_hint=None, sem=None, scope=None, space=None,
                  timeout: WaitTimeout | None = None, timeout_ns: int | None = None,
                  timeout_cycles: int | None = None,
                  on_timeout: Callable[[Any], object] | None = None) -> Reg:
    """Wait until the phase with parity `parity` (0/1 or a .b32 register) has completed::

        $L__wait_N:
        mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity;
        @!p bra $L__wait_N;

    With a timeout (`timeout=WaitTimeout(...)`, or `timeout_ns=` / `timeout_cycles=` with an
    optional `on_timeout=callable(k)`, or the kernel's `k.wait_timeout`), the loop reads
    %globaltimer (or %clock64) once before it, and after each failed try compares the elapsed
    time with the limit; past it, `on_timeout(k)` is emitted and then `trap;`.

    Returns the try_wait predicate: true after the loop, except when a bounded wait with
    `trap=False` timed out.
    """
    timeout = resolve_timeout("mbarrier_wait", k, timeout, timeout_ns, timeout_cycles,
                              on_timeout)

    def try_once():
        return mbarrier_try_wait_parity(k, addr=bar, phase_parity=parity,
                                        **_given_kw(suspend_time_hint=suspend_time_hint,
                                                    sem=sem, scope=scope, space=space))

    return spin(k, try_once, timeout)


def resolve_timeout(name: str, k, timeout: WaitTimeout | None, timeout_ns: int | None,
                    timeout_cycles: int | None,
                    on_timeout: Callable[[Any], object] | None) -> WaitTimeout | None:
    """The bound of a wait loop built by `name`: `timeout=`, or one made of `timeout_ns=` /
    `timeout_cycles=` (+ `on_timeout=`), else the kernel's default `k.wait_timeout` (set by
    `ptxdsl.debug.bounded_waits`); None for an unbounded wait."""
    if timeout_ns is not None or timeout_cycles is not None:
        if timeout is not None:
            raise BuildError(f"{name}: give timeout=WaitTimeout(...) or timeout_ns/"
                             "timeout_cycles, not both")
        if timeout_ns is not None and timeout_cycles is not None:
            raise BuildError(f"{name}: give timeout_ns=... or timeout_cycles=..., not both")
        try:
            return WaitTimeout(timeout_ns, timeout_cycles, on_timeout)
        except OperandError as e:   # WaitTimeout's checks name mbarrier_wait: name the caller
            raise OperandError(name, e.operand, e.expected, e.given, e.loc) from None
    if on_timeout is not None and timeout is None:
        raise BuildError(f"{name}: on_timeout needs timeout_ns=... or timeout_cycles=...")
    if timeout is not None and not isinstance(timeout, WaitTimeout):
        raise OperandError(name, "timeout", "a WaitTimeout", _given(timeout))
    return timeout if timeout is not None else getattr(k, "wait_timeout", None)


def spin(k, try_once: Callable[[], Reg], timeout: WaitTimeout | None,
         hint: str = "wait") -> Reg:
    """The wait loop of `mbarrier_wait` (and of the signal waits of `ptxdsl.signals`) around
    `try_once()`, which emits one attempt and returns a predicate true once it succeeded;
    bounded by `timeout` as `mbarrier_wait` describes. Returns that predicate."""
    if timeout is None:
        head = k.fresh_label(hint)
        k.place(head)
        p = try_once()
        k.bra(head, when=~p)
        return p
    clock = "globaltimer" if timeout.ns is not None else "clock64"
    limit = timeout.ns if timeout.ns is not None else timeout.cycles
    start = k.read_special(clock)
    head, done = k.fresh_label(hint), k.fresh_label(hint + "done")
    k.place(head)
    p = try_once()
    k.bra(done, when=p)
    elapsed = k.sub(k.read_special(clock), start)
    k.bra(head, when=k.setp("lt", elapsed, limit))
    if timeout.on_timeout is not None:
        timeout.on_timeout(k)
    if timeout.trap:
        k.trap()
    k.place(done)
    return p


class MbarrierPhase:
    """The phase parity of one barrier used over many phases (a pipeline stage).

    `wait()` waits on the current parity and then flips it (`xor.b32 par, par, 1`), so the
    next `wait()` waits for the next phase. The parity lives in a .b32 register, so this works
    inside run-time loops too; its `mov.u32 parity, <initial>` is emitted where the object is
    made, so make it before the loop. A producer waiting on an "empty" barrier starts at
    parity 1 (right after init, the preceding phase counts as complete).

    ::

        full = MbarrierPhase(k, full_bar)          # consumer side of a pipeline stage
        with k.for_range(0, n_tiles):
            full.wait()                            # try_wait.parity loop, then xor parity, 1
            ...
    """

    def __init__(self, k: Any, bar: Any, parity: int = 0, *, space: Any = None,
                 sem: Any = None, scope: Any = None, suspend_time_hint: Any = None,
                 timeout: WaitTimeout | None = None) -> None:
        if parity not in (0, 1):
            raise OperandError("MbarrierPhase", "parity", "0 or 1", repr(parity))
        self.k, self.bar = k, bar
        self._wait_args = {"space": space, "sem": sem, "scope": scope,
                           "suspend_time_hint": suspend_time_hint, "timeout": timeout}
        self.parity: Reg = k.mov(parity, type=T.u32)

    def wait(self) -> None:
        """Wait for the current phase to complete, then advance to the next one."""
        mbarrier_wait(self.k, self.bar, self.parity, **self._wait_args)
        self.flip()

    def try_wait(self) -> Reg:
        """One `try_wait.parity` on the current phase (no flip); returns the predicate."""
        a = {n: v for n, v in self._wait_args.items() if n != "timeout"}
        return mbarrier_try_wait_parity(self.k, addr=self.bar, phase_parity=self.parity,
                                        **_given_kw(**a))

    def flip(self) -> None:
        """Advance to the next phase: `xor.b32 parity, parity, 1;`"""
        self.k.xor(self.parity, 1, dst=self.parity)


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
_M = "mbarrier"
FORMS: list[tuple[str, Requires, str]] = [
    (f"{_M}.test_wait{{.shared}}.b64 p, [a], state", _need("7.0"), ""),
    (f"{_M}.test_wait.parity{{.shared}}.b64 p, [a], parity", _need("7.1"), ""),
    (f"{_M}.test_wait{{.parity}}.acquire.cta.b64", _need("8.0"), ""),
    (f"{_M}.{{test_wait,try_wait}}{{.parity}}.acquire.cluster.b64", _need("8.0", 90), ""),
    (f"{_M}.try_wait{{.parity}}.b64 p, [a], state|parity{{, hint}}", _need("7.8", 90), ""),
    (f"{_M}.{{test_wait,try_wait}}{{.parity}}.relaxed.{{cta,cluster}}.b64", _need("8.6", 90),
     ""),
    (f"{_M}.pending_count.b64 count, state", _need("7.0"), ""),
]
