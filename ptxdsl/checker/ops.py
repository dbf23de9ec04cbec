"""What each instruction means to the checker: a `Role` and its operands, as an `Op`.

The families are matched by class and read through their fields, so the hazard code never
depends on one family's layout. Every family is imported defensively: a kernel built without
one (or an older checkout lacking it) is still checked for the rest. Inline PTX (`k.asm`) is
scanned for the few synchronisation instructions that change what the hazards conclude.
"""

from __future__ import annotations

import enum
import importlib
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import attrs

from ..instructions.cluster import Mapa as _Mapa
from ..operands import Addr, Reg, Symbol, Vec
from ..types import ScalarType, Scope, StateSpace


class Role(enum.Enum):
    TMA_LOAD = "tma load"                   # cp.async.bulk.tensor global -> shared
    TMA_STORE = "tma store"                 # cp.async.bulk.tensor / cp.reduce ... -> global
    TMA_PREFETCH = "tma prefetch"           # cp.async.bulk.prefetch.tensor
    BULK_LOAD = "bulk load"                 # cp.async.bulk (1-D) completing on an mbarrier
    BULK_STORE = "bulk store"               # cp.async.bulk / cp.reduce.async.bulk -> global
    COMMIT = "commit_group"
    WAIT_GROUP = "wait_group"
    CTA_BARRIER = "cta barrier"             # bar.sync / barrier.sync / bar.red
    NAMED_BARRIER = "named barrier"         # bar.arrive, or a CTA barrier with a thread count
    CLUSTER_BARRIER = "cluster barrier"     # barrier.cluster.wait (builder or inline PTX)
    CLUSTER_ARRIVE = "cluster arrive"       # barrier.cluster.arrive (field: its sem)
    WARP_SYNC = "warp sync"
    SMEM_WRITE = "shared write"             # st / atom / red that may write shared memory
    TMAP_REPLACE = "tensormap.replace"
    CP_FENCEPROXY = "tensormap.cp_fenceproxy"
    TMAP_ACQUIRE = "tensormap acquire"
    TMAP_RELEASE = "tensormap release"      # fence.proxy.tensormap::generic.release
    PROXY_ASYNC_FENCE = "fence.proxy.async"
    MBAR_INIT_FENCE = "fence.mbarrier_init"
    MBAR_INIT = "mbarrier.init"
    MBAR_INVAL = "mbarrier.inval"
    MBAR_ARRIVE = "mbarrier.arrive"         # count = its txCount for .expect_tx
    MBAR_EXPECT_TX = "mbarrier.expect_tx"
    MBAR_COMPLETE_TX = "mbarrier.complete_tx"
    MBAR_WAIT = "mbarrier wait"
    RING_STEP = "ring counter step"         # a write of a ring-index counter (synthetic)
    MBAR_REMOTE = "remote mbarrier signal"  # st.async/red.async complete_tx, cp.async arrive
    DSMEM_READ = "cluster shared read"      # ld.shared::cluster (another CTA's, through mapa)
    DSMEM_WRITE = "cluster shared write"    # st/atom/red.shared::cluster (also a SMEM_WRITE)
    SMEM_READ = "shared read"               # ld.shared, ldmatrix (reads of TMA destinations)
    WGMMA = "wgmma.mma_async"               # dense or sparse; reads shared memory, d/A regs
    WGMMA_FENCE = "wgmma.fence"
    WGMMA_COMMIT = "wgmma.commit_group"
    WGMMA_WAIT = "wgmma.wait_group"
    WGMMA_REGS = "wgmma register access"    # another statement touching d/A regs (synthetic)
    SETMAXNREG = "setmaxnreg"
    GLOBAL_WRITE = "global write"           # st.global (a generic-proxy write of a map?)
    # The cross-GPU protocol (hazards_xgpu adds these where the context names peer buffers or
    # signal pads): field = the access ('st', 'red', 'atom', 'cas', 'ld', 'tma'), sem and
    # scope its memory order as PTX defines it for that access.
    XG_WRITE = "peer buffer write"
    XG_READ = "peer buffer read"
    XG_PAD_WRITE = "signal pad write"       # value: the value stored (cas: the new value)
    XG_PAD_READ = "signal pad read"         # result: the register loaded
    XG_FENCE = "fence"                      # fence.sem.scope / membar (sem and scope)
    # Tensor memory (hazards_tmem; builders, parsed text and inline PTX alike, `tcgen05_op`):
    # n = the .cta_group (None where the form has none).
    TC_ALLOC = "tcgen05.alloc"              # smem: where it writes the TMEM address
    TC_DEALLOC = "tcgen05.dealloc"          # value: the TMEM address freed
    TC_RELINQUISH = "tcgen05.relinquish_alloc_permit"
    TC_FENCE = "tcgen05.fence"              # field: 'before' or 'after' (_thread_sync)
    TC_COMMIT = "tcgen05.commit"            # mbar: the barrier it arrives on
    TC_WAIT = "tcgen05.wait"                # field: 'ld' or 'st'
    TC_ASYNC = "tcgen05 async op"           # field: mma, cp, shift, ld, st; value: TMEM address;
    #                                         descs: the smem descriptors (mma A and B, cp's source)


@attrs.frozen
class Op:
    """One role an instruction plays, with the operands that role needs (None: absent)."""

    role: Role
    index: int                   # the statement's index in the kernel body
    map: Any = None              # tensor-map address (a 64-bit register or an Addr)
    smem: Any = None             # shared buffer or shared tensor map written/read
    mbar: Any = None
    count: Any = None            # txCount, bulk size, or the acquire's size
    coords: tuple = ()
    space: StateSpace | None = None
    scope: Scope | None = None
    parity: Any = None           # a parity wait's phase operand
    result: Reg | None = None    # a wait's predicate
    field: str | None = None     # tensormap.replace field, ordinal and new value
    ord: int | None = None
    value: Any = None
    n: int | None = None         # wait_group N
    multicast: bool = False
    read: bool = False           # wait_group.read
    mask: Any = None             # a multicast copy's ctaMask
    arrivals: Any = None         # arrivals an mbarrier.arrive counts (1 unless it says)
    sem: str | None = None       # a memory access's or fence's order (the XG_ roles)
    descs: tuple = ()            # the shared-memory matrix descriptors it reads (WGMMA, TC_ASYNC)


# Roles that make a kernel worth analysing at all (the rest only matter next to them).
TRIGGERS = frozenset({Role.TMA_LOAD, Role.TMA_STORE, Role.TMA_PREFETCH, Role.BULK_LOAD,
                      Role.BULK_STORE, Role.COMMIT, Role.TMAP_REPLACE, Role.CP_FENCEPROXY,
                      Role.TMAP_ACQUIRE, Role.MBAR_INIT, Role.MBAR_ARRIVE, Role.MBAR_EXPECT_TX,
                      Role.MBAR_COMPLETE_TX, Role.MBAR_WAIT, Role.WGMMA, Role.WGMMA_FENCE,
                      Role.WGMMA_COMMIT, Role.WGMMA_WAIT, Role.SETMAXNREG,
                      Role.DSMEM_READ, Role.DSMEM_WRITE, Role.MBAR_REMOTE,
                      Role.NAMED_BARRIER, Role.TC_ALLOC, Role.TC_DEALLOC,
                      Role.TC_RELINQUISH, Role.TC_FENCE, Role.TC_COMMIT, Role.TC_WAIT,
                      Role.TC_ASYNC})

Extractor = Callable[[Any, int], list[Op]]


def _ev(v: Any) -> str:
    """An enum's value, or the string itself."""
    return getattr(v, "value", v) if v is not None else ""


def _coords(v: Any) -> tuple:
    return tuple(v.items) if isinstance(v, Vec) else tuple(v or ())


def _tensor(insn: Any, i: int) -> list[Op]:
    name = type(insn).__name__
    if name == "CpAsyncBulkPrefetchTensor":
        return [Op(Role.TMA_PREFETCH, i, map=insn.tensormap, coords=_coords(insn.coords))]
    if name == "CpReduceAsyncBulkTensor" or getattr(insn, "is_store", False):
        src = insn.src if name == "CpReduceAsyncBulkTensor" else insn.smem
        return [Op(Role.TMA_STORE, i, map=insn.tensormap, coords=_coords(insn.coords), smem=src)]
    return [Op(Role.TMA_LOAD, i, map=insn.tensormap, coords=_coords(insn.coords), smem=insn.smem,
               mbar=insn.mbar, multicast=bool(insn.multicast),
               mask=getattr(insn, "cta_mask", None))]


def _bulk(insn: Any, i: int) -> list[Op]:
    if insn.dst_space is StateSpace.global_:
        return [Op(Role.BULK_STORE, i, smem=insn.src, count=insn.size)]
    if insn.mbar is None:
        return []
    # A copy from this CTA's shared memory into .shared::cluster targets another CTA; one
    # from global into .shared::cluster without multicast lands in this CTA (the space is
    # only the address form), so it is cluster-wide use only with multicast.
    return [Op(Role.BULK_LOAD, i, smem=insn.dst, mbar=insn.mbar, count=insn.size,
               multicast=bool(getattr(insn, "multicast", False)),
               mask=getattr(insn, "cta_mask", None),
               space=StateSpace.shared_cluster if getattr(insn, "src_space", None)
               is StateSpace.shared_cta else None)]


def _barrier(insn: Any, i: int) -> list[Op]:
    # A thread count or an arrive makes it a named barrier some warps share (hazards_namedbar
    # checks who arrives); bar.arrive does not wait: only the sync forms (and bar.red) order
    # the arriving thread.
    named = [Op(Role.NAMED_BARRIER, i)] if insn.count is not None else []
    if type(insn).__name__ == "Barrier" and _ev(insn.op) != "sync":
        return named
    return [Op(Role.CTA_BARRIER, i), *named]


def _wgmma_descs(insn: Any) -> tuple:
    """wgmma's shared-memory descriptors: B's, and A's unless A is in registers (a tuple)."""
    return ((insn.a,) if not isinstance(insn.a, tuple) else ()) + (insn.b_desc,)


def _smem_write(insn: Any, i: int) -> list[Op]:
    if insn.space is StateSpace.global_ and type(insn).__name__ == "St":
        # A tensor map copied into global memory with plain stores needs a tensormap
        # release before its acquire (hazards_tmap); other global stores are ignored there.
        return [Op(Role.GLOBAL_WRITE, i, smem=insn.a, space=insn.space)]
    if insn.space in (StateSpace.global_, StateSpace.local, StateSpace.param,
                      StateSpace.const):
        return []
    out = [Op(Role.SMEM_WRITE, i, smem=insn.a, space=insn.space)]
    if insn.space is StateSpace.shared_cluster:   # may land in another CTA (hazards_cluster)
        out.append(Op(Role.DSMEM_WRITE, i, smem=insn.a, space=insn.space))
    return out


_RAW_SPACES = {"shared": StateSpace.shared, "shared::cta": StateSpace.shared_cta,
               "shared::cluster": StateSpace.shared_cluster, "global": StateSpace.global_,
               "local": StateSpace.local, "param": StateSpace.param, "const": StateSpace.const}


def _raw_memory(insn: Any, i: int) -> list[Op]:
    """A memory access kept as text (a form no class models: `ld.shared.b8` into a 16-bit
    register, a cache operator, ...) still reads or writes shared memory: the same ops as its
    typed twin, on its address operand."""
    parts = insn.op.split(".")
    if parts[0] not in ("ld", "st", "atom", "red") or parts[1:2] == ["async"]:
        return []
    space = next((_RAW_SPACES[q] for q in parts[1:] if q in _RAW_SPACES), StateSpace.generic)
    addr = next((o for o in insn.srcs if isinstance(o, Addr)), None)
    if addr is None:
        return []
    op = SimpleNamespace(space=space, a=addr)
    if parts[0] == "ld":
        return _smem_read(op, i)
    if space is StateSpace.global_:
        return []    # a raw global store is no tensor-map copy the checker could follow
    return _smem_write(op, i)


def _fence_async(insn: Any, i: int) -> list[Op]:
    return [Op(Role.PROXY_ASYNC_FENCE, i, space=insn.space)]


def _acquire(insn: Any, i: int) -> list[Op]:
    return [Op(Role.TMAP_ACQUIRE, i, map=insn.addr, count=insn.size, scope=insn.scope)]


def _mbar(role: Role) -> Extractor:
    def get(insn: Any, i: int) -> list[Op]:
        return [Op(role, i, mbar=insn.addr, space=insn.space)]
    return get


def _arrive(insn: Any, i: int) -> list[Op]:
    tx = insn.count if _ev(insn.kind) == "expect_tx" else None
    n = 1 if tx is not None or insn.count is None else insn.count
    return [Op(Role.MBAR_ARRIVE, i, mbar=insn.addr, space=insn.space, count=tx, arrivals=n)]


def _smem_read(insn: Any, i: int) -> list[Op]:
    if insn.space is StateSpace.shared_cluster:
        return [Op(Role.DSMEM_READ, i, smem=insn.a, space=insn.space)]
    if insn.space not in (StateSpace.shared, StateSpace.shared_cta):
        return []
    return [Op(Role.SMEM_READ, i, smem=insn.a, space=insn.space)]


def _tx(insn: Any, i: int) -> list[Op]:
    role = Role.MBAR_EXPECT_TX if _ev(insn.op) == "expect_tx" else Role.MBAR_COMPLETE_TX
    return [Op(role, i, mbar=insn.addr, space=insn.space, count=insn.tx_count)]


def _wait(insn: Any, i: int) -> list[Op]:
    return [Op(Role.MBAR_WAIT, i, mbar=insn.addr, space=insn.space, result=insn.pred,
               parity=insn.token if insn.parity else None)]


def _replace(insn: Any, i: int) -> list[Op]:
    return [Op(Role.TMAP_REPLACE, i, smem=_first(insn, "addr", "tmap", "dst"),
               space=_first(insn, "space", "ss"), field=_ev(_first(insn, "field")) or None,
               ord=_first(insn, "ord", "ordinal"),
               value=_first(insn, "new_val", "value", "val", "new_value"))]


def _fenceproxy(insn: Any, i: int) -> list[Op]:
    return [Op(Role.CP_FENCEPROXY, i, map=_first(insn, "dst"), smem=_first(insn, "src"),
               scope=_first(insn, "scope"), count=_first(insn, "size"))]


def _cluster_barrier(insn: Any, i: int) -> list[Op]:
    if _ev(insn.op) == "wait":
        return [Op(Role.CLUSTER_BARRIER, i)]
    return [Op(Role.CLUSTER_ARRIVE, i, field=_ev(insn.sem) or "release")]


def _async_bytes(insn: Any) -> int:
    """The bytes an st.async / red.async delivers (what its complete_tx counts)."""
    n = len(insn.value.items) if isinstance(insn.value, Vec) else 1
    return n * insn.type.bits // 8


def _first(insn: Any, *names: str) -> Any:
    for n in names:
        v = getattr(insn, n, None)
        if v is not None:
            return v
    return None


# (module, class name) -> extractor. Families that are missing are skipped.
_TABLE: tuple[tuple[str, str, Extractor], ...] = (
    ("bulk_tensor", "CpAsyncBulkTensor", _tensor),
    ("bulk_tensor", "CpReduceAsyncBulkTensor", _tensor),
    ("bulk_tensor", "CpAsyncBulkPrefetchTensor", _tensor),
    ("bulk", "CpAsyncBulk", _bulk),
    ("bulk", "CpReduceAsyncBulk", _bulk),
    ("bulk", "CpAsyncBulkCommitGroup", lambda insn, i: [Op(Role.COMMIT, i)]),
    ("bulk", "CpAsyncBulkWaitGroup",
     lambda insn, i: [Op(Role.WAIT_GROUP, i, n=insn.n, read=insn.read)]),
    # try_cancel writes its 16-byte response into shared memory asynchronously and completes
    # those bytes on the mbarrier, as a 1-D bulk copy does (multicast: in every CTA).
    ("clusterlaunchcontrol", "ClusterLaunchControlTryCancel",
     lambda insn, i: [Op(Role.BULK_LOAD, i, smem=insn.addr, mbar=insn.smem_bar, count=16,
                         multicast=insn.multicast)]),
    ("sync", "Barrier", _barrier),
    ("sync", "BarrierRed", _barrier),
    ("sync", "WarpSync", lambda insn, i: [Op(Role.WARP_SYNC, i)]),
    ("cluster", "BarrierCluster", lambda insn, i: _cluster_barrier(insn, i)),
    ("memory", "St", _smem_write),
    ("memory", "Ld", _smem_read),
    ("st_async", "StAsync", lambda insn, i: [Op(Role.MBAR_REMOTE, i, mbar=insn.remote_bar,
                                                 smem=insn.addr, count=_async_bytes(insn))]),
    ("st_async", "RedAsync", lambda insn, i: [Op(Role.MBAR_REMOTE, i, mbar=insn.remote_bar,
                                                 smem=insn.dest, count=_async_bytes(insn))]),
    ("st_async", "CpAsyncMbarrierArrive",
     lambda insn, i: [Op(Role.MBAR_REMOTE, i, mbar=insn.addr)]),
    ("atomic", "Atom", _smem_write),
    ("atomic", "AtomCas", _smem_write),
    ("atomic", "Red", _smem_write),
    ("fence", "FenceProxyAsync", _fence_async),
    ("fence", "FenceProxyTensormapAcquire", _acquire),
    ("fence", "FenceProxyTensormapRelease",
     lambda insn, i: [Op(Role.TMAP_RELEASE, i, scope=insn.scope)]),
    ("fence", "FenceMbarrierInit", lambda insn, i: [Op(Role.MBAR_INIT_FENCE, i)]),
    ("mbarrier", "MbarrierInit", lambda insn, i: [Op(Role.MBAR_INIT, i, mbar=insn.addr,
                                                     space=insn.space, count=insn.count)]),
    ("mbarrier", "MbarrierInval", _mbar(Role.MBAR_INVAL)),
    ("mbarrier", "MbarrierArrive", _arrive),
    ("mbarrier", "MbarrierTx", _tx),
    ("mbarrier_wait", "MbarrierWait", _wait),
    ("tensormap", "TensormapReplace", _replace),
    ("tensormap", "TensormapReplaceDim", _replace),
    ("tensormap", "TensormapCpFenceproxy", _fenceproxy),
    ("inline", "InlineAsm", lambda insn, i: _inline(insn, i)),
    ("raw", "Raw", lambda insn, i: _raw_memory(insn, i) + _raw(insn, i) + _raw_tmem(insn, i)),
    ("matrix", "StMatrix", _smem_write),    # stmatrix writes shared memory (generic proxy)
    ("matrix", "LdMatrix", _smem_read),     # ldmatrix reads 16 bytes per thread, like ld.shared
    ("wgmma", "WgmmaMmaAsync", lambda insn, i: [Op(Role.WGMMA, i, descs=_wgmma_descs(insn))]),
    ("wgmma_sp", "WgmmaMmaAsyncSp",
     lambda insn, i: [Op(Role.WGMMA, i, descs=_wgmma_descs(insn))]),
    ("wgmma", "WgmmaFence", lambda insn, i: [Op(Role.WGMMA_FENCE, i)]),
    ("wgmma", "WgmmaCommitGroup", lambda insn, i: [Op(Role.WGMMA_COMMIT, i)]),
    ("wgmma", "WgmmaWaitGroup", lambda insn, i: [Op(Role.WGMMA_WAIT, i, n=insn.n)]),
    ("setmaxnreg", "SetMaxNReg", lambda insn, i: [Op(Role.SETMAXNREG, i)]),
)

_EXTRACTORS: dict[type, Extractor] | None = None


def extractors() -> dict[type, Extractor]:
    """Class -> extractor for every family importable now (built once per process)."""
    global _EXTRACTORS
    if _EXTRACTORS is None:
        table: dict[type, Extractor] = {}
        for mod, cls, fn in _TABLE:
            try:
                family = importlib.import_module(f"ptxdsl.instructions.{mod}")
            except ImportError:
                continue
            klass = getattr(family, cls, None)
            if isinstance(klass, type):
                table[klass] = fn
        # Families may name their tensormap classes differently: match by name as well.
        try:
            family = importlib.import_module("ptxdsl.instructions.tensormap")
            for name in dir(family):
                klass = getattr(family, name)
                if isinstance(klass, type) and klass not in table:
                    low = name.lower()
                    if "replace" in low and hasattr(klass, "__attrs_attrs__"):
                        table[klass] = _replace
                    elif "fenceproxy" in low and hasattr(klass, "__attrs_attrs__"):
                        table[klass] = _fenceproxy
        except ImportError:
            pass
        from .tmem_ops import classes
        table.update(classes())
        _EXTRACTORS = table
    return _EXTRACTORS


def extract(insns) -> list[Op]:
    """Every Op of a kernel body, in body order (`insns[i]`: body[i]'s instruction, None for
    a label)."""
    table = extractors()
    out: list[Op] = []
    types = list(map(type, insns))
    for i in [i for i, c in enumerate(types) if c in table]:
        out.extend(table[types[i]](insns[i], i))
    if _Mapa in types:
        extra = _generic_dsmem(insns)
        if extra:
            out = sorted(out + extra, key=lambda o: o.index)   # (stable: a statement's order)
    return out


def _generic_dsmem(insns) -> list[Op]:
    """Generic ld / st / atom / red through the result of a generic `mapa` (moved, converted
    or offset by adds) may reach a peer CTA's shared memory, as their .shared::cluster forms
    do: DSMEM_READ / DSMEM_WRITE ops, which hazards_cluster judges by the address's mapa."""
    from ..instructions.arith import Binary
    from ..instructions.move import Cvt, Mov
    mapped: set[int] = set()
    out: list[Op] = []
    for _ in range(2):   # a second pass for registers a loop defines after their use
        for insn in insns:
            if isinstance(insn, _Mapa) and insn.space is StateSpace.generic:
                mapped.add(id(insn.d))
            elif isinstance(insn, Mov | Cvt) or (isinstance(insn, Binary) and insn.op == "add"):
                if any(id(x) in mapped for x in (insn.a, getattr(insn, "b", None))):
                    mapped.add(id(insn.d))
    for i, insn in enumerate(insns):
        name = type(insn).__name__
        if name not in _GENERIC or getattr(insn, "space", None) is not StateSpace.generic:
            continue
        a = insn.a.base if isinstance(insn.a, Addr) else insn.a
        if id(a) in mapped:
            out.append(Op(_GENERIC[name], i, smem=insn.a, space=insn.space))
    return out


_GENERIC = {"Ld": Role.DSMEM_READ, "St": Role.DSMEM_WRITE, "Atom": Role.DSMEM_WRITE,
            "AtomCas": Role.DSMEM_WRITE, "Red": Role.DSMEM_WRITE}


# -- raw PTX ------------------------------------------------------------------------------------
_RAW_ACQUIRE = re.compile(r"fence\.proxy\.tensormap::generic\.acquire\.(\w+)")


def _raw(insn: Any, i: int) -> list[Op]:
    """A `Raw` statement of parsed PTX whose form a rule judges although the class refuses
    it (as the same text in inline PTX is judged): an acquire fence of a size other than 128
    (tmap-acquire-size)."""
    op, srcs = getattr(insn, "op", None), tuple(getattr(insn, "srcs", None) or ())
    m = _RAW_ACQUIRE.fullmatch(op) if isinstance(op, str) else None
    if m is None or len(srcs) != 2 or isinstance(srcs[1], bool) or not isinstance(srcs[1], int):
        return []
    try:
        scope = Scope(m.group(1))
    except ValueError:
        scope = None
    return [Op(Role.TMAP_ACQUIRE, i, map=srcs[0], count=srcs[1], scope=scope)]


def _raw_tmem(insn: Any, i: int) -> list[Op]:
    from .tmem_ops import raw  # (tmem_ops builds on this module)
    return raw(insn, i)


# -- inline PTX ---------------------------------------------------------------------------------
_ASM = (
    (re.compile(r"\b(?:bar|barrier)\.(?:sync|red)\b"), Role.CTA_BARRIER),
    (re.compile(r"\bbarrier\.cluster\.wait\b"), Role.CLUSTER_BARRIER),
    (re.compile(r"\bbarrier\.cluster\.arrive(\.relaxed)?\b"), Role.CLUSTER_ARRIVE),
    (re.compile(r"\bbar\.warp\.sync\b"), Role.WARP_SYNC),
    (re.compile(r"\bfence\.proxy\.async(?:\.(global|shared::cta|shared::cluster))?\s*;"),
     Role.PROXY_ASYNC_FENCE),
    (re.compile(r"\bfence\.mbarrier_init\b"), Role.MBAR_INIT_FENCE),
)
_ACQUIRE = re.compile(r"\bfence\.proxy\.tensormap::generic\.acquire\.(\w+)\s*"
                      r"\[\s*\$(\d+)\s*\]\s*,\s*(\w+)")


# A try_wait (or test_wait) on a bound barrier: `pred, [$N], $M` (parity or state token).
# The barrier is `[$N]`, or `$N` bound to a variable or an address (which renders in brackets).
_TRY = re.compile(r"\bmbarrier\.(?:try_wait|test_wait)(\.parity)?[\w.:]*\s+(%?\w+|\$\d+)\s*,"
                  r"\s*(?:\[\s*\$(\d+)\s*\]|\$(\d+))\s*,\s*(\$\d+|\d+)[^;]*;")
_LABEL = re.compile(r"(?:^|[;{}\s])(\w+)\s*:(?!:)")


def _spin_waits(text: str, bound: Any, i: int) -> list[tuple[int, Op]]:
    """The wait loops an inline statement holds whole (CUTLASS's `ClusterBarrier::wait`):
    `L: mbarrier.try_wait... P, [$N], $M;` then `@!P bra L;`, or `@P bra D; bra L;`, with L
    before the try_wait. Such a statement returns only once the phase completed: a blocking
    wait on bound[N]. A try_wait whose result goes to an output predicate (`$K, [$N], $M;`)
    is a try_wait with that result, for the rules to see whether the kernel loops on it
    (`trywait`); one whose result the statement neither loops on nor returns is left out."""
    out = []
    for m in _TRY.finditer(text):
        labels = [x.group(1) for x in _LABEL.finditer(text[:m.start()])]
        pred, rest = re.escape(m.group(2)), text[m.end():]
        retry = None
        if labels:
            head = re.escape(labels[-1])
            retry = re.match(rf"\s*@!{pred}\s+bra(?:\.uni)?\s+{head}\s*;", rest) or re.match(
                rf"\s*@{pred}\s+bra(?:\.uni)?\s+\w+\s*;\s*bra(?:\.uni)?\s+{head}\s*;", rest)
        result = None
        if retry is None and m.group(2).startswith("$") and int(m.group(2)[1:]) < len(bound):
            result = bound[int(m.group(2)[1:])]
            if not (isinstance(result, Reg) and result.type is ScalarType.pred):
                continue
        elif retry is None:
            # CUTLASS's ClusterBarrier::try_wait: the local predicate as a 0/1 output
            sel = re.search(rf"\bselp\.[bsu]32\s+\$(\d+)\s*,\s*1\s*,\s*0\s*,\s*{pred}\s*;",
                            rest)
            if sel is not None and int(sel.group(1)) < len(bound) \
                    and isinstance(bound[int(sel.group(1))], Reg):
                result = bound[int(sel.group(1))]
        n = int(m.group(3) or m.group(4))
        if (retry is None and result is None) or n >= len(bound) or (
                m.group(4) and not isinstance(bound[n], Addr | Symbol)):
            continue
        token = m.group(5)
        parity = bound[int(token[1:])] if token.startswith("$") else int(token)
        if token.startswith("$") and int(token[1:]) >= len(bound):
            continue
        space = StateSpace.shared_cta if ".shared" in m.group(0) else StateSpace.generic
        out.append((m.start(), Op(Role.MBAR_WAIT, i, mbar=bound[n], space=space,
                                  parity=parity if m.group(1) else None, result=result)))
    return out


# An unpredicated init, arrive, arrive.expect_tx or expect_tx on a bound barrier (ThunderKittens'
# and CUTLASS's `arrive_and_expect_tx`, FA3's releases): `[_|state,] [$N][, $M|count];`.
# A predicated one (`@p mbarrier.arrive...`), arrive_drop and .noComplete are left out, as
# the rest of the statement is: the rules then see less, never a wrong count.
_ARRIVE = re.compile(r"(?<![\w.])mbarrier\.(arrive|expect_tx)"
                     r"((?:\.[\w:]+)*)\s+(?:[%$]?\w+\s*,\s*)?\[\s*\$(\d+)\s*\]"
                     r"(?:\s*,\s*(\$\d+|\d+))?\s*;")
_PRED = re.compile(r"@!?%?\w+\s*$")


def _space_of(mods: str) -> StateSpace:
    if ".shared::cluster" in mods:
        return StateSpace.shared_cluster
    if ".shared::cta" in mods:
        return StateSpace.shared_cta
    return StateSpace.shared if ".shared" in mods else StateSpace.generic


# CUTLASS's ClusterBarrier::init: `mbarrier.init.shared::cta.b64 [$N], $M|count;`.
_INIT = re.compile(r"(?<![\w.])mbarrier\.init((?:\.[\w:]+)*)\s+\[\s*\$(\d+)\s*\]\s*,"
                   r"\s*(\$\d+|\d+)\s*;")


def _inline_arrives(text: str, bound: Any, i: int) -> list[tuple[int, Op]]:
    out = []
    for m in _INIT.finditer(text):
        n, tok = int(m.group(2)), m.group(3)
        if _PRED.search(text[:m.start()]) or n >= len(bound) or (
                tok.startswith("$") and int(tok[1:]) >= len(bound)):
            continue
        count: Any = bound[int(tok[1:])] if tok.startswith("$") else int(tok)
        out.append((m.start(), Op(Role.MBAR_INIT, i, mbar=bound[n], space=_space_of(m.group(1)),
                                  count=count)))
    for m in _ARRIVE.finditer(text):
        what, mods, n, tok = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        if _PRED.search(text[:m.start()]) or ".noComplete" in mods or n >= len(bound):
            continue
        if tok is not None and tok.startswith("$") and int(tok[1:]) >= len(bound):
            continue
        val: Any = None if tok is None else bound[int(tok[1:])] if tok.startswith("$") \
            else int(tok)
        space = _space_of(mods)
        if what == "expect_tx":
            if val is not None:
                out.append((m.start(), Op(Role.MBAR_EXPECT_TX, i, mbar=bound[n], space=space,
                                          count=val)))
        elif ".expect_tx" in mods:
            if val is not None:
                out.append((m.start(), Op(Role.MBAR_ARRIVE, i, mbar=bound[n], space=space,
                                          count=val, arrivals=1)))
        else:
            out.append((m.start(), Op(Role.MBAR_ARRIVE, i, mbar=bound[n], space=space,
                                      arrivals=1 if val is None else val)))
    return out


# CUTLASS's tma_store_arrive / tma_store_wait<N> and warpgroup_arrive / commit_batch /
# wait<N>: the bulk and wgmma group instructions, N literal or a bound immediate.
_GROUPS = re.compile(r"(?<![\w.])(cp\.async\.bulk\.commit_group|wgmma\.fence\.sync\.aligned|"
                     r"wgmma\.commit_group\.sync\.aligned)\s*;|(?<![\w.])(cp\.async\.bulk\."
                     r"wait_group(\.read)?|wgmma\.wait_group\.sync\.aligned)\s+(\$\d+|\d+)\s*;")
_GROUP_ROLES = {"cp.async.bulk.commit_group": Role.COMMIT,
                "wgmma.fence.sync.aligned": Role.WGMMA_FENCE,
                "wgmma.commit_group.sync.aligned": Role.WGMMA_COMMIT}


def _inline_groups(text: str, bound: Any, i: int) -> list[tuple[int, Op]]:
    """The unpredicated group instructions of an inline statement (a wait whose N is not a
    known immediate is left out: the rules then see no wait, never a wrong one)."""
    out = []
    for m in _GROUPS.finditer(text):
        if _PRED.search(text[:m.start()]):
            continue
        if m.group(1):
            out.append((m.start(), Op(_GROUP_ROLES[m.group(1)], i)))
            continue
        tok = m.group(4)
        n: Any = int(tok) if tok.isdigit() else bound[int(tok[1:])] \
            if int(tok[1:]) < len(bound) else None
        n = getattr(n, "value", n)
        if not isinstance(n, int) or isinstance(n, bool):
            continue
        if m.group(2).startswith("wgmma"):
            out.append((m.start(), Op(Role.WGMMA_WAIT, i, n=n)))
        else:
            out.append((m.start(), Op(Role.WAIT_GROUP, i, n=n, read=m.group(3) is not None)))
    return out


# CUTLASS's st.async / red.async into a peer CTA, completing bytes on its mbarrier.
_ASYNC = re.compile(r"(?<![\w.])(?:st|red)\.async((?:\.[\w:]+)*)\s+\[\s*\$(\d+)\s*\]\s*,"
                    r"\s*(?:\{[^}]*\}|\$\d+)\s*,\s*\[\s*\$(\d+)\s*\]\s*;")


def _inline_async(text: str, bound: Any, i: int) -> list[tuple[int, Op]]:
    """Unpredicated st.async / red.async with complete_tx: the bytes they deliver."""
    out = []
    for m in _ASYNC.finditer(text):
        mods, a, b = m.group(1), int(m.group(2)), int(m.group(3))
        bits = re.findall(r"\.[bsuf](8|16|32|64)\b", mods)
        vec = re.search(r"\.v(2|4)\b", mods)
        if _PRED.search(text[:m.start()]) or "complete_tx" not in mods or not bits \
                or max(a, b) >= len(bound):
            continue
        count = int(bits[-1]) // 8 * (int(vec.group(1)) if vec else 1)
        out.append((m.start(), Op(Role.MBAR_REMOTE, i, mbar=bound[b], smem=bound[a],
                                  count=count)))
    return out


# An inline statement that is one elect.sync into an output predicate
# (`{ .reg .b32 %rx; elect.sync %rx|$0, 0xffffffff; }`), or CUTLASS's elect_one_sync, which
# sets a read-write flag to 1 in the elected lane (`elect.sync %rx|%px, $2; @%px mov.s32 $1,
# 1;`): the same election as the builder's.
_ELECT = re.compile(r"^\s*\{?\s*(?:\.reg\s+\.\w+\s+%\w+\s*;\s*)*elect\.sync\s+(?:%?\w+)\|"
                    r"\$(\d+)\s*,\s*(0x[0-9a-fA-F]+|-?\d+)\s*;\s*\}?\s*$")
_ELECT_FLAG = re.compile(r"\belect\.sync\s+%?\w+\|(%\w+)\s*,\s*(\$\d+|0x[0-9a-fA-F]+|-?\d+)\s*;"
                         r"\s*@\1\s+mov\.[bsu]32\s+\$(\d+)\s*,\s*1\s*;")


def inline_elect(insn: Any) -> tuple[Any, int, bool] | None:
    """(the register, the constant membermask, whether it is a flag the statement only sets
    to 1) of an inline elect.sync statement, else None."""
    if type(insn).__name__ != "InlineAsm":
        return None
    text, outs = getattr(insn, "template", "") or "", getattr(insn, "outs", ())
    m = _ELECT.match(text)
    if m is not None:
        n = int(m.group(1))
        return (outs[n], int(m.group(2), 0), False) if n < len(outs) else None
    m = _ELECT_FLAG.search(text)
    if m is None or text.count("elect.sync") != 1:
        return None
    n, mask = int(m.group(3)), _bound(getattr(insn, "bound", ()), m.group(2))
    mask = getattr(mask, "value", mask)
    if n >= len(outs) or not isinstance(mask, int) or isinstance(mask, bool) or re.search(
            rf"\${n}\b", text[:m.start()] + text[m.end():]):
        return None
    return outs[n], mask, True


def _bound(bound: Any, token: str | None) -> Any:
    """A template operand: $M's bound operand, or a literal number (None: absent, unbound)."""
    if token is None:
        return None
    if token.startswith("$"):
        return bound[int(token[1:])] if int(token[1:]) < len(bound) else None
    return int(token)


def _inline(insn: Any, i: int) -> list[Op]:
    text = getattr(insn, "template", "")
    bound = getattr(insn, "bound", ())
    found: list[tuple[int, Op]] = _spin_waits(text, bound, i)
    # A template that branches may skip what follows: its counts are left out (see above).
    if not re.search(r"\bbra(?:\.uni)?\s", text):
        from .tmem_ops import inline  # (tmem_ops builds on this module)
        found += (_inline_arrives(text, bound, i) + _inline_groups(text, bound, i)
                  + _inline_async(text, bound, i) + inline(text, bound, i))
    for pattern, role in _ASM:
        for m in pattern.finditer(text):
            space, sem = None, None
            if role is Role.PROXY_ASYNC_FENCE:
                space = StateSpace(m.group(1)) if m.group(1) else StateSpace.generic
            if role is Role.CLUSTER_ARRIVE:
                sem = "relaxed" if m.group(1) else "release"
            found.append((m.start(), Op(role, i, space=space, field=sem)))
    # in the order the statement runs them (a cluster arrive before its wait)
    out = [op for _, op in sorted(found, key=lambda x: x[0])]
    for m in _ACQUIRE.finditer(text):
        n = int(m.group(2))
        size: Any = int(m.group(3)) if m.group(3).isdigit() else m.group(3)
        try:
            scope = Scope(m.group(1))
        except ValueError:
            scope = None
        out.append(Op(Role.TMAP_ACQUIRE, i, map=bound[n] if n < len(bound) else None,
                      count=size, scope=scope))
    return out
