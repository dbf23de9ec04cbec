"""mbarrier, the arrive side: init, inval, arrive / arrive_drop (+ .noComplete, .expect_tx),
expect_tx, complete_tx (PTX ISA §9.7.13.15; digest §4).

Qualifiers are emitted in the canonical order `.sem.scope.space`
(`mbarrier.arrive.expect_tx.release.cta.shared::cta.b64`). The barrier address is a shared
symbol (`[bar]`), a 32-bit shared register, a 64-bit register (generic unless its hint says
shared) or an `Addr`. The builders take cuda::ptx's overloads (see `_ptx_args`): without a
space argument they emit the space cuda::ptx's overload emits (bare `.shared` for init,
arrive(addr) and noComplete; `.shared::cta` elsewhere); `space=` 'shared' (.shared::cta),
'cluster' (.shared::cluster) or 'generic' picks another form.

The wait side (test_wait, try_wait, pending_count, the `mbarrier_wait` loop and the
`MbarrierPhase` parity tracker) is in `mbarrier_wait.py`.
"""

from __future__ import annotations

import enum

import attrs

from ..errors import OperandError
from ..operands import SINK, Addr, Imm, Reg, Sink
from ..types import Requires, ScalarType, Scope, Sem, StateSpace, req
from . import _ptx_args as A
from ._tma_addr import mbar_addr
from .base import Instruction, check_dst, check_enum, check_src, refuse

__all__ = ["mbarrier_init", "mbarrier_inval", "mbarrier_arrive", "mbarrier_arrive_no_complete",
           "mbarrier_arrive_expect_tx", "mbarrier_arrive_drop",
           "mbarrier_arrive_drop_no_complete", "mbarrier_arrive_drop_expect_tx",
           "mbarrier_expect_tx", "mbarrier_complete_tx"]

S = StateSpace
T = ScalarType
MAX_COUNT = (1 << 20) - 1          # expected/pending arrival count and |tx-count| limit
SPACES = (S.generic, S.shared, S.shared_cta, S.shared_cluster)
LOCAL_SPACES = (S.generic, S.shared, S.shared_cta)
SCOPES = (Scope.cta, Scope.cluster)


def _need(version: str, sm: int = 80) -> Requires:
    return req(version, sm)


def _space_req(space: StateSpace) -> Requires:
    if space is S.shared_cluster:
        return _need("8.0", 90)
    return _need("7.8") if space is S.shared_cta else _need("7.0")


def _sem_req(sem: Sem | None, scope: Scope | None, relaxed: str = "8.6") -> Requires:
    if sem is None:
        return _need("7.0")
    if sem is Sem.relaxed:
        return _need(relaxed, 90)
    return _need("8.0", 90 if scope is Scope.cluster else 80)


def _sem_scope(insn: str, sem, scope, sems: tuple[Sem, ...]):
    """Both or neither (ptxas rejects one without the other); a missing one takes the PTX
    default (.cta scope; the first of `sems`)."""
    if sem is None and scope is None:
        return None, None
    sem = check_enum(insn, "sem", sems[0] if sem is None else sem, Sem, sems)
    scope = check_enum(insn, "scope", Scope.cta if scope is None else scope, Scope, SCOPES)
    return sem, scope


def _qualifiers(sem: Sem | None, scope: Scope | None, space: StateSpace) -> str:
    # _sem_scope gives both or neither
    q = (sem.ptx + scope.ptx) if sem is not None and scope is not None else ""
    return q + space.ptx + ".b64"


def _count(insn: str, operand: str, value, lo: int = 1) -> Reg | Imm:
    """A .b32 register or an immediate in [lo, 2^20-1] (ptxas rejects .b64 registers, and
    a float one: .b32 takes an .f32 register elsewhere, not in a count)."""
    v = check_src(insn, operand, value, T.b32)
    if isinstance(v, Reg) and v.type.is_float:
        raise OperandError(insn, operand, "a 32-bit integer register or an immediate count",
                           f"register %{v.name} of type .{v.type.value}")
    if isinstance(v, Imm) and not lo <= v.value <= MAX_COUNT:
        raise OperandError(insn, operand, f"an immediate in [{lo}, {MAX_COUNT}] (2^20-1)",
                           v.value)
    return v


@attrs.frozen
class MbarrierInit(Instruction):
    """`mbarrier.init{.shared{::cta}}.b64 [addr], count;` (count 1..2^20-1)."""

    MNEMONIC = "mbarrier.init"
    space: StateSpace
    addr: Addr
    count: object

    def __attrs_post_init__(self):
        self._set("space", check_enum(self.MNEMONIC, "space", self.space, S, LOCAL_SPACES))
        name = self.opcode()
        self._set("addr", mbar_addr(name, "addr", self.addr, self.space))
        self._set("count", _count(name, "count", self.count))

    @property
    def requires(self) -> Requires:
        return _space_req(self.space)

    def opcode(self) -> str:
        return "mbarrier.init" + self.space.ptx + ".b64"

    def operands(self):
        return (self.addr, self.count)


@attrs.frozen
class MbarrierInval(Instruction):
    """`mbarrier.inval{.shared{::cta}}.b64 [addr];`"""

    MNEMONIC = "mbarrier.inval"
    space: StateSpace
    addr: Addr

    def __attrs_post_init__(self):
        self._set("space", check_enum(self.MNEMONIC, "space", self.space, S, LOCAL_SPACES))
        self._set("addr", mbar_addr(self.opcode(), "addr", self.addr, self.space))

    @property
    def requires(self) -> Requires:
        return _space_req(self.space)

    def opcode(self) -> str:
        return "mbarrier.inval" + self.space.ptx + ".b64"

    def operands(self):
        return (self.addr,)


class ArriveOp(enum.Enum):
    arrive = "arrive"
    arrive_drop = "arrive_drop"


class ArriveKind(enum.Enum):
    plain = ""
    no_complete = "noComplete"
    expect_tx = "expect_tx"


@attrs.frozen
class MbarrierArrive(Instruction):
    """`mbarrier.<op>{.noComplete|.expect_tx}{.sem.scope}{.space}.b64 state, [addr]{, n};`

    op = arrive | arrive_drop; .sem = .release | .relaxed (8.6); .scope = .cta | .cluster.
    `n` is the arrival count (optional for plain, required for .noComplete) or the txCount
    (required for .expect_tx, which has no count). `state` is a .b64 register or the sink
    `_`; it must be `_` for a `.shared::cluster` (remote) barrier. `.noComplete` takes at
    most `.release.cta`.
    """

    MNEMONIC = "mbarrier.arrive"
    op: ArriveOp
    kind: ArriveKind
    space: StateSpace
    state: Reg | Sink
    addr: Addr
    count: object = None
    sem: Sem | None = None
    scope: Scope | None = None

    def __attrs_post_init__(self):
        op = check_enum("mbarrier", "op", self.op, ArriveOp)
        self._set("op", op)
        insn = f"mbarrier.{op.value}"
        kind = check_enum(insn, "kind", self.kind, ArriveKind)
        self._set("kind", kind)
        if kind is not ArriveKind.plain:
            insn += "." + kind.value
        if self.sem is not None and check_enum(insn, "sem", self.sem, Sem) is Sem.acquire:
            refuse(insn, "an arrive has no .acquire semantics (it releases; waits acquire): "
                   "use sem='release' or 'relaxed'")
        sem, scope = _sem_scope(insn, self.sem, self.scope, (Sem.release, Sem.relaxed))
        if kind is ArriveKind.no_complete and sem is not None and (
                sem is not Sem.release or scope is not Scope.cta):
            refuse(insn, "takes at most .release.cta (ptxas rejects other sem/scope here)")
        self._set("sem", sem)
        self._set("scope", scope)
        space = check_enum(insn, "space", self.space, S, SPACES)
        self._set("space", space)
        if space is S.shared_cluster and kind is ArriveKind.no_complete:
            refuse(insn, "has no .shared::cluster form")
        name = self.opcode()
        if isinstance(self.state, str) and self.state == "_":
            self._set("state", SINK)
        if space is S.shared_cluster and not isinstance(self.state, Sink):
            refuse(name, "a remote (.shared::cluster) arrive returns no state: the "
                   "destination must be the sink '_' (dst='_')")
        if not isinstance(self.state, Sink):
            check_dst(name, "state", self.state, T.b64)
        self._set("addr", mbar_addr(name, "addr", self.addr, space))
        if kind is ArriveKind.expect_tx:
            if self.count is None:
                refuse(name, "needs a txCount (bytes) operand")
            self._set("count", _count(name, "txCount", self.count, lo=0))
        elif kind is ArriveKind.no_complete and self.count is None:
            refuse(name, "needs a count operand")
        elif self.count is not None:
            self._set("count", _count(name, "count", self.count))

    @property
    def requires(self) -> Requires:
        r = _space_req(self.space).merge(_sem_req(self.sem, self.scope))
        if self.kind is ArriveKind.expect_tx:
            r = r.merge(_need("8.0", 90))
        elif self.kind is ArriveKind.plain and self.count is not None:
            r = r.merge(_need("7.8", 90))   # a count without .noComplete needs sm_90
        if isinstance(self.state, Sink) and self.op is ArriveOp.arrive:
            r = r.merge(_need("7.1"))       # arrive_drop accepts '_' from PTX 7.0 [ptxas]
        return r

    def opcode(self) -> str:
        q = f"mbarrier.{self.op.value}" + (f".{self.kind.value}" if self.kind.value else "")
        return q + _qualifiers(self.sem, self.scope, self.space)

    def operands(self):
        ops = (self.state, self.addr)
        return ops + ((self.count,) if self.count is not None else ())


class TxOp(enum.Enum):
    expect_tx = "expect_tx"
    complete_tx = "complete_tx"


@attrs.frozen
class MbarrierTx(Instruction):
    """`mbarrier.{expect_tx,complete_tx}{.relaxed.scope}{.space}.b64 [addr], txCount;`"""

    MNEMONIC = "mbarrier.expect_tx"
    op: TxOp
    space: StateSpace
    addr: Addr
    tx_count: object
    sem: Sem | None = None
    scope: Scope | None = None

    def __attrs_post_init__(self):
        op = check_enum("mbarrier", "op", self.op, TxOp)
        self._set("op", op)
        insn = f"mbarrier.{op.value}"
        given = None if self.sem is None else check_enum(insn, "sem", self.sem, Sem)
        if given is not None and given is not Sem.relaxed:
            refuse(insn, f"only .relaxed is allowed (ptxas rejects .{given.value} here): use "
                   "sem 'relaxed'")
        sem, scope = _sem_scope(insn, self.sem, self.scope, (Sem.relaxed,))
        self._set("sem", sem)
        self._set("scope", scope)
        self._set("space", check_enum(insn, "space", self.space, S, SPACES))
        name = self.opcode()
        self._set("addr", mbar_addr(name, "addr", self.addr, self.space))
        self._set("tx_count", _count(name, "txCount", self.tx_count, lo=0))

    @property
    def requires(self) -> Requires:
        return _need("8.0", 90).merge(_space_req(self.space)).merge(
            _sem_req(self.sem, self.scope, relaxed="8.0"))

    def opcode(self) -> str:
        return f"mbarrier.{self.op.value}" + _qualifiers(self.sem, self.scope, self.space)

    def operands(self):
        return (self.addr, self.tx_count)


# -- builder functions (cuda::ptx names and overloads, kernel first) ---------------------------
# Each builder takes cuda::ptx's overloads positionally (after k) or by keyword; names with '*'
# are ptxdsl extensions, keyword only. Without a space argument the space is the one cuda::ptx's
# overload emits (bare .shared for some, .shared::cta for others); 'shared' is .shared::cta.
_EXT = ("*space", "*sem", "*scope")


def bar_args(k, insn: str, a: dict, default: StateSpace, allowed=SPACES):
    """(sem, scope, space, address) of a bound call: names normalised, the space defaulting to
    `default` (cuda::ptx's text for the overload; .shared::cta once sem/scope are given), a
    generic barrier pointer converted to it."""
    sem = None if a.get("sem") is None else A.sem(insn, a["sem"])
    scope = None if a.get("scope") is None else A.scope(insn, a["scope"])
    if a.get("space") is None:
        sp = S.shared_cta if sem is not None or scope is not None else default
    else:
        sp = A.space(insn, "space", a["space"], allowed)
    return sem, scope, sp, A.space_addr(k, insn, a["addr"], sp)


_INIT = (("addr", "count", "*space"),)


@A.overloads(*_INIT)
def mbarrier_init(k, *args, **kw) -> None:
    """`(k, addr, count)`: `mbarrier.init.shared.b64 [addr], count;` (cuda::ptx's text);
    `space=` 'shared' (.shared::cta) or 'generic' picks another form."""
    _, a = A.bind("mbarrier_init", args, kw, _INIT)
    _, _, sp, bar = bar_args(k, "mbarrier.init", a, S.shared, LOCAL_SPACES)
    k.emit(MbarrierInit(sp, bar, a["count"]))


_INVAL = (("addr", "*space"),)


@A.overloads(*_INVAL)
def mbarrier_inval(k, *args, **kw) -> None:
    """`(k, addr)`: `mbarrier.inval.shared::cta.b64 [addr];` (no cuda::ptx counterpart)."""
    _, a = A.bind("mbarrier_inval", args, kw, _INVAL)
    _, _, sp, bar = bar_args(k, "mbarrier.inval", a, S.shared_cta, LOCAL_SPACES)
    k.emit(MbarrierInval(sp, bar))


_ARRIVE = (("addr", *_EXT), ("addr", "count", *_EXT), ("sem", "scope", "space", "addr"),
           ("sem", "scope", "space", "addr", "count"))
# cuda::ptx: arrive(addr) emits bare .shared, arrive(addr, count) .shared::cta.
_ARRIVE_DEFAULT = (S.shared, S.shared_cta, None, None)


def _arrive(k, op, kind, name, args, kw, dst, overloads=_ARRIVE,
            defaults=_ARRIVE_DEFAULT) -> Reg | None:
    i, a = A.bind(name, args, kw, overloads)
    insn = f"mbarrier.{op}"
    sem, scope, sp, bar = bar_args(k, insn, a, defaults[i] or S.shared_cta)
    count = a.get("count", a.get("tx_count"))
    if dst is None:
        dst = SINK if sp is S.shared_cluster else k.reg(T.b64)
    elif isinstance(dst, str) and dst == "_":
        dst = SINK
    k.emit(MbarrierArrive(ArriveOp(op), kind, sp, dst, bar, count, sem, scope))
    return None if isinstance(dst, Sink) else dst


@A.overloads(*_ARRIVE, extra=("*dst",))
def mbarrier_arrive(k, *args, dst=None, **kw) -> Reg | None:
    """cuda::ptx's overloads: `(k, addr)` -> `mbarrier.arrive.shared.b64 state, [addr];`,
    `(k, addr, count)` -> `mbarrier.arrive.shared::cta.b64 state, [addr], count;`,
    `(k, sem, scope, space, addr{, count})` -> `mbarrier.arrive.sem.scope.space.b64 ...`.
    Returns the state register, or None when the destination is the sink (`dst='_'`, or a
    'cluster' barrier)."""
    return _arrive(k, "arrive", ArriveKind.plain, "mbarrier_arrive", args, kw, dst)


_NO_COMPLETE = (("addr", "count", *_EXT),)


@A.overloads(*_NO_COMPLETE, extra=("*dst",))
def mbarrier_arrive_no_complete(k, *args, dst=None, **kw) -> Reg | None:
    """`(k, addr, count)`: `mbarrier.arrive.noComplete.shared.b64 state, [addr], count;`"""
    return _arrive(k, "arrive", ArriveKind.no_complete, "mbarrier_arrive_no_complete", args, kw,
                   dst, _NO_COMPLETE, (S.shared,))


_EXPECT_TX = (("sem", "scope", "space", "addr", "tx_count"), ("addr", "tx_count", *_EXT))


@A.overloads(*_EXPECT_TX, extra=("*dst",))
def mbarrier_arrive_expect_tx(k, *args, dst=None, **kw) -> Reg | None:
    """`(k, sem, scope, space, addr, tx_count)`: `mbarrier.arrive.expect_tx.sem.scope.space.b64
    state, [addr], tx_count;` (sem/scope None leave them out; `(k, addr, tx_count)` is the form
    without them, a ptxdsl extension)."""
    return _arrive(k, "arrive", ArriveKind.expect_tx, "mbarrier_arrive_expect_tx", args, kw,
                   dst, _EXPECT_TX, (None, None))


@A.overloads(*_ARRIVE, extra=("*dst",))
def mbarrier_arrive_drop(k, *args, dst=None, **kw) -> Reg | None:
    """As mbarrier_arrive: `mbarrier.arrive_drop{.sem.scope}{.space}.b64 state, [addr]{, count};`"""
    return _arrive(k, "arrive_drop", ArriveKind.plain, "mbarrier_arrive_drop", args, kw, dst)


@A.overloads(*_NO_COMPLETE, extra=("*dst",))
def mbarrier_arrive_drop_no_complete(k, *args, dst=None, **kw) -> Reg | None:
    """`(k, addr, count)`: `mbarrier.arrive_drop.noComplete.shared.b64 state, [addr], count;`"""
    return _arrive(k, "arrive_drop", ArriveKind.no_complete, "mbarrier_arrive_drop_no_complete",
                   args, kw, dst, _NO_COMPLETE, (S.shared,))


@A.overloads(*_EXPECT_TX, extra=("*dst",))
def mbarrier_arrive_drop_expect_tx(k, *args, dst=None, **kw) -> Reg | None:
    """As mbarrier_arrive_expect_tx: `mbarrier.arrive_drop.expect_tx.sem.scope.space.b64 ...`"""
    return _arrive(k, "arrive_drop", ArriveKind.expect_tx, "mbarrier_arrive_drop_expect_tx",
                   args, kw, dst, _EXPECT_TX, (None, None))


def _tx(k, op: TxOp, args, kw) -> None:
    _, a = A.bind(f"mbarrier_{op.value}", args, kw, _EXPECT_TX)
    sem, scope, sp, bar = bar_args(k, f"mbarrier.{op.value}", a, S.shared_cta)
    k.emit(MbarrierTx(op, sp, bar, a["tx_count"], sem, scope))


@A.overloads(*_EXPECT_TX)
def mbarrier_expect_tx(k, *args, **kw) -> None:
    """`(k, sem, scope, space, addr, tx_count)`: `mbarrier.expect_tx.relaxed.scope.space.b64
    [addr], txCount;`"""
    _tx(k, TxOp.expect_tx, args, kw)


@A.overloads(*_EXPECT_TX)
def mbarrier_complete_tx(k, *args, **kw) -> None:
    """`(k, sem, scope, space, addr, tx_count)`: `mbarrier.complete_tx.relaxed.scope.space.b64
    [addr], txCount;` (no cuda::ptx counterpart; mirrors mbarrier_expect_tx)."""
    _tx(k, TxOp.complete_tx, args, kw)


# -- forms: (form, requires, note) — rendered by ptxdsl.forms ----------------------------------
_M = "mbarrier"
FORMS: list[tuple[str, Requires, str]] = [
    (f"{_M}.{{init,inval}}{{.shared}}.b64", _need("7.0"), "generic or bare .shared"),
    (f"{_M}.{{init,inval}}.shared::cta.b64", _need("7.8"), ""),
    (f"{_M}.{{arrive,arrive_drop}}{{.shared}}.b64 state, [a]", _need("7.0"), ""),
    (f"{_M}.arrive{{.shared}}.b64 _, [a]", _need("7.1"), "arrive_drop: 7.0"),
    (f"{_M}.{{arrive,arrive_drop}}.noComplete{{.shared}}.b64 state, [a], count",
     _need("7.0"), ""),
    (f"{_M}.{{arrive,arrive_drop}}.shared::cta.b64", _need("7.8"), "::cta sub-qualifier"),
    (f"{_M}.{{arrive,arrive_drop}}.b64 state, [a], count", _need("7.8", 90),
     "count without .noComplete"),
    (f"{_M}.{{arrive,arrive_drop}}{{.noComplete}}.release.cta.b64", _need("8.0"), ""),
    (f"{_M}.{{arrive,arrive_drop}}.release.cluster.b64", _need("8.0", 90), ""),
    (f"{_M}.{{arrive,arrive_drop}}.shared::cluster.b64 _, [a]", _need("8.0", 90),
     "remote: sink only"),
    (f"{_M}.{{arrive,arrive_drop}}.expect_tx{{.release.scope}}.b64 state, [a], txCount",
     _need("8.0", 90), "no count operand"),
    (f"{_M}.{{arrive,arrive_drop}}{{.expect_tx}}.relaxed.{{cta,cluster}}.b64", _need("8.6", 90),
     ""),
    (f"{_M}.{{expect_tx,complete_tx}}{{.relaxed.scope}}.b64 [a], txCount", _need("8.0", 90),
     ".relaxed from 8.0 here [ptxas]"),
]
