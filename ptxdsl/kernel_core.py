"""The kernel builder's core: parameters, registers, shared memory, labels, statements, guards,
structured control flow and rendering of one `.entry`.

Instruction builder methods (`k.add`, `k.ld`, ...) are mixins in `ptxdsl/builders/`, one
file per instruction family, above the instruction classes they emit (which know nothing of the
kernel); `ptxdsl.kernel.Kernel` puts the core and the mixins together.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar, cast

import attrs

from .checker.context import MapInfo, map_info
from .errors import BuildError, OperandError, SourceLoc, user_loc
from .instructions._tma_box import declared_box, declared_width, desc_box
from .instructions.base import Instruction, check_pred, dests
from .instructions.control import Bra
from .instructions.move import Mov
from .instructions.sync import Barrier, BarrierRed
from .kernel_directives import (
    DIRECTIVES,
    FLAGS,
    Dims,
    barrier_count_fits,
    cta_threads,
    directive_property,
)
from .kernel_host import KernelHost
from .operands import (
    AUTO_DECL,
    AUTO_NAME,
    READABLE_SPECIAL_REGISTERS,
    Addr,
    IntLike,
    Label,
    NegPred,
    Reg,
    SpecialReg,
    Symbol,
    Vec,
    _show,
    as_int,
    check_identifier,
    check_register_name,
    check_shared_type,
    decl_type,
    plain_str,
    registers_in,
    symbols_in,
)
from .provenance import check_pending, forget_written
from .statements import LabelDef, Param, Statement, _param_kind  # noqa: F401 (re-exported)
from .types import (
    Requires,
    ScalarType,
    SpaceLike,
    StateSpace,
    Target,
    TypeLike,
    req,
    scalar_type,
)

if TYPE_CHECKING:  # pragma: no cover
    from .checker.findings import Finding
    from .kernel_directives import Directive

# Register-name prefixes by (kind, bits); the type each prefix is declared with is AUTO_DECL.
_PREFIX = {("pred", 1): "p", ("int", 16): "rs", ("int", 32): "r", ("int", 64): "rd",
           ("int", 128): "q", ("f", 16): "h", ("f", 32): "f", ("f", 64): "fd",
           ("int", 8): "rc"}
_REG_DECL = {ScalarType.bf16: "b16", ScalarType.bf16x2: "b32"}


_I = TypeVar("_I", bound=Instruction)

_FIELDS: dict[type, tuple[str, ...]] = {}
_HOLDS_REGS = (Reg, NegPred, Addr, Vec, tuple, list)
# Operands that belong to a kernel (or a module): registers, and the symbols and labels they
# name. A symbol resolves by name in the PTX, so another kernel's `x` would silently become
# this kernel's `x` (with the other's type): ownership is checked like a register's.
_HOLDS_OWNED = (*_HOLDS_REGS, Symbol, Label)


def _operand_values(insn: Instruction) -> list[tuple[str, object]]:
    """(field name, value) of every field that can hold a register, a symbol or a label
    (cached per class)."""
    return [(n, v) for n in _field_names(type(insn))
            if isinstance(v := getattr(insn, n), _HOLDS_OWNED)]


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in attrs.fields(cls))
    return names


_GETTERS: dict[type, Callable[[Instruction], tuple]] = {}
# Types none of whose instances can hold a register (str, int, enums, Imm, ...): learnt as
# they are met, from `isinstance(value, _HOLDS_REGS)` being false for the type.
_NO_REGS: set[type] = {str, int, bool, float, type(None)}


def _getter(cls: type) -> Callable[[Instruction], tuple]:
    """All field values of an instruction class's object, as one tuple (one C call)."""
    names = _field_names(cls)
    get: Callable[[Instruction], tuple]
    if len(names) > 1:
        get = operator.attrgetter(*names)
    elif names:
        single = operator.attrgetter(names[0])

        def get(insn):
            return (single(insn),)
    else:
        def get(insn):
            return ()
    _GETTERS[cls] = get
    return get


def _instruction_getter(cls: type) -> Callable[[Instruction], tuple]:
    if not (isinstance(cls, type) and issubclass(cls, Instruction)):
        raise BuildError(f"emit expects an instruction object, got {cls.__name__}")
    return _getter(cls)


def _prefix(t: ScalarType) -> str:
    hit = _TYPE_PREFIX.get(t)
    return hit if hit is not None else _compute_prefix(t)


def _compute_prefix(t: ScalarType) -> str:
    if t is ScalarType.pred:
        return "p"
    # Packed f16x2/bf16x2 values live in .b32 registers: ptxas refuses an .f32 one for them.
    kind = "f" if t in (ScalarType.f32, ScalarType.f64) else "int"
    if t in (ScalarType.f16, ScalarType.bf16):
        kind = "f"
    prefix = _TYPE_PREFIX[t] = _PREFIX[(kind, t.bits)]
    return prefix


_TYPE_PREFIX: dict[ScalarType, str] = {}   # filled by _compute_prefix: one lookup per register


_new_statement = tuple.__new__   # Statement(...) without the NamedTuple's Python-level __new__


class _Guard:
    """`with k.guard(p):` — a plain context manager (no generator: guards are frequent)."""

    __slots__ = ("kernel", "pred")

    def __init__(self, kernel: KernelCore, pred: Reg | NegPred):
        self.kernel, self.pred = kernel, pred

    def __enter__(self) -> None:
        pred = check_pred("@guard", "pred", self.pred, negatable=True)
        if self.kernel._guard is not None:
            raise BuildError("guards do not nest: PTX allows one guard predicate per "
                             "instruction; combine predicates with and.pred first")
        self.kernel._guard = pred

    def __exit__(self, *exc) -> None:
        self.kernel._guard = None


@attrs.frozen
class _Dim3:
    kernel: KernelCore
    base: str

    def _read(self, axis: str) -> Reg:
        return self.kernel.read_special(f"{self.base}.{axis}")

    @property
    def x(self) -> Reg:
        return self._read("x")

    @property
    def y(self) -> Reg:
        return self._read("y")

    @property
    def z(self) -> Reg:
        return self._read("z")


# Special registers `read_special` knows: one table, shared with the inline-asm checker.
SPECIAL_REGISTERS = READABLE_SPECIAL_REGISTERS

# Special registers whose value is fixed for a thread's whole life (PTX ISA §10: ids and
# dimensions of the thread, CTA, cluster and grid; the lane; the shared-memory sizes): read
# once per kernel. %warpid, %smid, %clock*, %globaltimer may change between reads: never cached.
_INVARIANT_SREGS = frozenset(
    n for n in READABLE_SPECIAL_REGISTERS
    if n.split(".")[0] in ("tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid",
                           "cluster_ctaid", "cluster_nctaid", "laneid", "cluster_ctarank",
                           "cluster_nctarank", "is_explicit_cluster", "dynamic_smem_size",
                           "total_smem_size"))


def special(name: str) -> SpecialReg:
    """A special register by its PTX name without '%', e.g. special('tid.x')."""
    if type(name) is not str or name not in SPECIAL_REGISTERS:
        shown = f"%{name}" if type(name) is str else _show(name)
        raise BuildError(f"unknown special register {shown}; known: "
                         + ", ".join(sorted(SPECIAL_REGISTERS)))
    t, r = SPECIAL_REGISTERS[name]
    return SpecialReg(name, t, r.sm, str(r.version))



# ptxas's limit on an entry's static shared memory (its own .shared arrays plus the module-scope
# ones it uses), in bytes, as nvJitLink 13 reports it ("uses too much shared data"): 48 KiB for
# portable and family ('f') targets; an arch-specific target gets its chip's whole opt-in size.
# Past the limit (and far past it: a 4 GiB array wraps to 0 and assembles) only dynamic shared
# memory serves.
STATIC_SHARED_LIMIT = 48 * 1024
_ARCH_SHARED_LIMIT = {90: 227 * 1024, 100: 227 * 1024, 101: 227 * 1024, 103: 227 * 1024,
                      110: 227 * 1024, 120: 99 * 1024, 121: 99 * 1024}
MAX_STATIC_SHARED = max(_ARCH_SHARED_LIMIT.values())


def static_shared_limit(target: Target) -> int:
    """ptxas's limit on one entry's static shared memory for `target` (a types.Target)."""
    if target.suffix == "a":
        return _ARCH_SHARED_LIMIT.get(target.sm, STATIC_SHARED_LIMIT)
    return STATIC_SHARED_LIMIT


def shared_limit_error(what: str, total: int, limit: int, sym: Symbol,
                       target: object = None) -> BuildError:
    """The error for static shared memory past `limit`, at the line that declared `sym`."""
    where = (f" for .target {target}" if target is not None
             else " for any target (the most, on sm_90a and sm_100a)")
    return BuildError(
        f"{what}: static shared memory reaches {total} bytes with {sym.name} ({sym.size} "
        f"bytes), above the {limit} bytes ptxas allows{where}; use dynamic shared memory "
        "instead: k.extern_shared(...) sized at launch (the launch's shared-memory size; above "
        "48 KiB the kernel's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, set with "
        "cuFuncSetAttribute)", sym.loc)


_PTR_SPACES = {"global": StateSpace.global_, "shared": StateSpace.shared,
               "const": StateSpace.const, "local": StateSpace.local, "generic": None}


class KernelCore(KernelHost):
    """One `.entry` function being built. See `ptxdsl.kernel.Kernel` for the full API."""

    def __init__(self, name: str, *, maxntid: Dims | None = None, reqntid: Dims | None = None,
                 minnctapersm: IntLike | None = None, maxnreg: IntLike | None = None,
                 reqnctapercluster: Dims | None = None, explicitcluster: bool = False,
                 maxclusterrank: IntLike | None = None, visible: bool = True) -> None:
        self.loc = user_loc()
        self.name = name
        # (CTAs, who): helpers built for a cluster of at least that many CTAs (an MbarrierRing
        # with peers=); the cluster directives, set before or after, must allow them.
        self._cluster_needs: list[tuple[int, str]] = []
        for attr in DIRECTIVES:   # unset first: each assignment is checked against the rest
            setattr(self, "_" + attr, False if attr in FLAGS else None)
        # The constructor assigns through the same checked properties as `k.maxntid = ...`
        # does later, in this order (each rule between two directives is checked by the
        # second one assigned).
        self.visible = visible
        self.explicitcluster = explicitcluster
        self.maxntid = maxntid
        self.reqntid = reqntid
        self.reqnctapercluster = reqnctapercluster
        self.maxclusterrank = maxclusterrank
        self.minnctapersm = minnctapersm
        self.maxnreg = maxnreg
        self.params: list[Param] = []
        self._map_boxes: dict[Param, MapInfo] = {}   # param -> declared box (map_boxes)
        self.body: list[Statement | LabelDef] = []
        self.shared: list[Symbol] = []
        self._names: set[str] = set()       # params, shared symbols, named registers
        self._counters: dict[str, int] = {}
        self._named_regs: list[Reg] = []
        self._labels: dict[str, Label] = {}
        self._placed: dict[str, SourceLoc] = {}
        self.decl_locs: dict[str, SourceLoc] = {}   # shared variable -> where it was declared
        # Module variables the body uses -> (instruction, operand, line) of the first use:
        # `Module.emit` refuses one declared by another module.
        self._module_syms: dict[Symbol, tuple[str, str, SourceLoc]] = {}
        self._used_labels: dict[str, SourceLoc] = {}
        # Address provenance (ptxdsl.provenance): the registers that have some, the labels
        # placed so far, and the checks put off until rendering.
        self._origin_regs: set[Reg] = set()
        self._labels_placed = 0
        self._pending_fits: list = []
        self._guard: Reg | NegPred | None = None
        self._loops: list[tuple[Label, Label]] = []
        self._last_if: tuple[int, Label, SourceLoc] | None = None
        self._sreg_regs: dict[str, Reg] = {}   # invariant special register -> its one read
        self._n_entry = 0                       # statements at the top of body reading them
        self._txn_depth = 0   # public builder calls in progress (errors.fail_closed counts)
        self.tid = _Dim3(self, "tid")
        self.ntid = _Dim3(self, "ntid")
        self.ctaid = _Dim3(self, "ctaid")
        self.nctaid = _Dim3(self, "nctaid")
        self.clusterid = _Dim3(self, "clusterid")
        self.nclusterid = _Dim3(self, "nclusterid")
        self.cluster_ctaid = _Dim3(self, "cluster_ctaid")
        self.cluster_nctaid = _Dim3(self, "cluster_nctaid")

    if TYPE_CHECKING:  # pragma: no cover - what each directive reads back and is assigned
        visible: Directive[bool, bool]
        explicitcluster: Directive[bool, bool]
        maxntid: Directive[tuple[int, ...] | None, Dims | None]
        reqntid: Directive[tuple[int, ...] | None, Dims | None]
        reqnctapercluster: Directive[tuple[int, ...] | None, Dims | None]
        maxclusterrank: Directive[int | None, IntLike | None]
        minnctapersm: Directive[int | None, IntLike | None]
        maxnreg: Directive[int | None, IntLike | None]
    else:
        visible = directive_property("visible")
        explicitcluster = directive_property("explicitcluster")
        maxntid = directive_property("maxntid")
        reqntid = directive_property("reqntid")
        reqnctapercluster = directive_property("reqnctapercluster")
        maxclusterrank = directive_property("maxclusterrank")
        minnctapersm = directive_property("minnctapersm")
        maxnreg = directive_property("maxnreg")

    # -- names -------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The `.entry` name (checked on assignment: it reaches the PTX)."""
        return self._name

    @name.setter
    def name(self, value: str) -> None:   # checked on every assignment: it reaches the PTX
        self._name = check_identifier(value, "kernel")

    def _claim(self, name: str, what: str) -> str:
        name = check_identifier(name, what)
        if name in self._names:
            raise BuildError(f"kernel {self.name}: {what} name {name!r} is already used in "
                             "this kernel")
        self._names.add(name)
        return name

    def _rename(self, obj: Any, old: str, new: str) -> None:
        """`obj` (a register, parameter or shared variable of this kernel) renamed from `old`
        to `new` (checked as an identifier): claimed as `_claim`/`reg` claim a first name."""
        what = "register" if isinstance(obj, Reg) else "symbol"
        if old not in self._names:   # an automatic register: declared by number, %r<N>
            raise BuildError(f"kernel {self.name}: %{old} is one of ptxdsl's automatic "
                             "registers, declared by number; it cannot be renamed (name it "
                             "when it is made: k.reg(type, name))")
        if what == "register" and AUTO_NAME.match(new):
            raise BuildError(f"register name {new!r} collides with ptxdsl's automatic names "
                             "(p1, r1, rd1, f1, ...); choose another")
        if new in self._names:
            raise BuildError(f"kernel {self.name}: {what} name {new!r} is already used in this "
                             "kernel")
        self._names.discard(old)
        self._names.add(new)

    # -- parameters ----------------------------------------------------------------------------
    _SCALAR_PARAM_TYPES = (ScalarType.u16, ScalarType.u32, ScalarType.s32, ScalarType.u64,
                           ScalarType.s64, ScalarType.f32, ScalarType.f64, ScalarType.s16,
                           ScalarType.b32, ScalarType.b64, ScalarType.pred)

    def param(self, type: ScalarType, name: str) -> Param:
        """A scalar parameter: `.param .u32 name`. A .pred parameter travels as a .u32."""
        if type not in self._SCALAR_PARAM_TYPES:
            given = f".{type.value}" if isinstance(type, ScalarType) else _show(type)
            raise OperandError(".param", str(name), "a ptxdsl type, one of " + ", ".join(
                f"t.{t.value}" for t in self._SCALAR_PARAM_TYPES), given)
        is_bool = type is ScalarType.pred
        t = ScalarType.u32 if is_bool else type
        p = Param(self._claim(name, "parameter"), StateSpace.param, t, 1, None, self,
                  is_bool=is_bool)
        self.params.append(p)
        return p

    def param_ptr(self, name: str, *, space: SpaceLike | None = "global",
                  align: IntLike | None = None) -> Param:
        """A pointer parameter: `.param .u64 .ptr .global .align N name` (the .ptr part only when
        `space` or `align` is given; it is a hint to ptxas)."""
        sp: StateSpace | None = None
        if space is not None and not isinstance(space, StateSpace | str):
            raise OperandError(".param .ptr", str(name), "space 'global', 'shared', 'const', "
                               "'local' or None", _show(space))
        if isinstance(space, StateSpace):
            sp = space
        elif space is not None:
            if space not in _PTR_SPACES:
                raise OperandError(".param .ptr", name, "space 'global', 'shared', 'const', "
                                   "'local' or None", repr(space))
            sp = _PTR_SPACES[space]
        if align is not None and as_int(align) is not None:
            align = as_int(align)      # a numpy integer as a Python int
        if align is not None and (not isinstance(align, int) or align < 1
                                  or align & (align - 1)):
            raise OperandError(".param .ptr", name, "a power-of-two alignment", repr(align))
        p = Param(self._claim(name, "parameter"), StateSpace.param, ScalarType.u64, 1, None,
                  self, kind="pointer", ptr_space=sp, ptr_align=align)
        self.params.append(p)
        return p

    def param_tensormap(self, name: str, *, box: Any = None, dtype: Any = None,
                        swizzle: Any = None) -> Param:
        """A CUtensorMap by value: `.param .align 64 .b8 name[128]`.

        `box=` declares what one TMA copy through the map moves, for the hazard checker (the
        expect_tx bytes, buffer sizes and swizzle alignment; docs/hazards.md, "Context"):
        the box dimensions with `dtype` (a ptxdsl type, a PTX type name or a numpy dtype)
        and optionally `swizzle` ('128B', ...), as `TensorMap.tiled` takes them; or an
        `SmemLayout` (the box that writes one atom column: its `tma_box`, element type and
        swizzle); or a `TensorMap` / `TiledDesc` built for the kernel. Recorded in
        `map_boxes`."""
        info = None if box is None and dtype is None and swizzle is None else \
            self._box_info("param_tensormap", box, dtype, swizzle)
        p = Param(self._claim(name, "parameter"), StateSpace.param, ScalarType.b8, 128, 64,
                  self, kind="tensormap")
        self.params.append(p)
        if info is not None:
            self._map_boxes[p] = info
        return p

    @property
    def map_boxes(self) -> Mapping[Param, MapInfo]:
        """The box size and swizzle declared for each tensor-map parameter (by
        `param_tensormap(box=...)` or `MbarrierRing(..., loads=...)`), read by the hazard
        checker where `check_module(maps=...)` says nothing of the parameter."""
        return MappingProxyType(self._map_boxes)

    def _box_info(self, what: str, box: Any, dtype: Any, swizzle: Any) -> MapInfo:
        """The `MapInfo` of a box declaration (see `param_tensormap`)."""
        if box is None:
            raise OperandError(what, "box", "the box dimensions (with dtype=), an SmemLayout "
                               "or a TensorMap", "nothing")
        if hasattr(box, "desc") and box.desc is None:
            raise OperandError(what, "box", "a TensorMap encoded from its description (one "
                               "built from raw bytes carries no box)", _show(box))
        if hasattr(box, "box_dim") or hasattr(getattr(box, "desc", None), "box_dim"):
            if dtype is not None or swizzle is not None:
                raise OperandError(what, "dtype, swizzle", "nothing beside a TensorMap or "
                                   "TiledDesc (its own are used)", f"{dtype!r}, {swizzle!r}")
            desc_box(what, box if hasattr(box, "box_dim") else box.desc)
            info = map_info(box, "")
            return MapInfo(info.box_bytes, info.swizzle_repeat, "the tensor map's box",
                           info.swizzle_width)
        return MapInfo(*declared_box(what, box, dtype, swizzle), declared_width(box, swizzle))

    def _declare_box(self, what: str, param: Any, info: MapInfo) -> None:
        """Record the box of the maps `param` carries; a second, different one is refused."""
        if not isinstance(param, Param) or param.kernel is not self or \
                param.kind not in ("tensormap", "pointer"):
            raise OperandError(what, "loads", "this kernel's tensor-map parameters "
                               "(k.param_tensormap, or k.param_ptr for maps in global memory) "
                               "as keys", _show(param))
        old = self._map_boxes.get(param)
        if old is None:
            self._map_boxes[param] = info
            return
        # A swizzle left out (None) agrees with any: the first declaration's stays.
        if old.box_bytes != info.box_bytes or None not in (
                old.swizzle_repeat, info.swizzle_repeat) and \
                old.swizzle_repeat != info.swizzle_repeat:
            raise OperandError(what, "loads", f"the box already declared for {param.name} "
                               f"({old.source}: {old.box_bytes} bytes, swizzle repeat "
                               f"{old.swizzle_repeat})", f"{info.source}: {info.box_bytes} "
                               f"bytes, swizzle repeat {info.swizzle_repeat}")

    # -- registers -----------------------------------------------------------------------------
    def reg(self, type: ScalarType, name: str | None = None) -> Reg:
        """A fresh virtual register; named ones keep their name (made unique with a suffix)."""
        if not isinstance(type, ScalarType):
            raise BuildError(f"register type must be a ptxdsl type such as t.u32, got {type!r}")
        if name is None:
            prefix = _TYPE_PREFIX.get(type) or _compute_prefix(type)
            counters = self._counters
            n = counters.get(prefix, 0) + 1
            counters[prefix] = n
            return Reg._trusted(type, prefix + str(n), self)
        name = check_register_name(name)
        if AUTO_NAME.match(name):
            raise BuildError(f"register name {name!r} collides with ptxdsl's automatic names "
                             "(p1, r1, rd1, f1, ...); choose another")
        base, n = name, 1
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        r = Reg(type, name, self)
        self._named_regs.append(r)
        return r

    def read_special(self, name: str) -> Reg:
        """The value of a special register in a register (PTX reads them only with mov).

        A register fixed for the thread's life (%tid.x, %ctaid.y, %laneid, ...) is read once
        per kernel: the first use adds `mov` at the very top of the body and every use returns
        that register, which is read-only (writing it is refused). That is correct wherever
        the first use is: the top of the body runs unconditionally on entry, before any label
        or branch, so the read dominates every use, and the value read there is the value any
        later read would give. Other special registers (%clock, %warpid, ...) get a fresh
        `mov` at each call.
        """
        sreg = special(name)
        if name not in _INVARIANT_SREGS:
            return self.mov(sreg)
        r = self._sreg_regs.get(name)
        if r is None:
            r = self.reg(sreg.type)
            self.body.insert(self._n_entry, Statement(Mov(sreg.type, r, sreg), None, user_loc()))
            self._n_entry += 1
            if self._last_if is not None:   # an else_() inserts at the index recorded by if_()
                index, label, loc = self._last_if
                self._last_if = (index + 1, label, loc)
            self._sreg_regs[name] = r
        return r

    def _check_special_reads(self) -> None:
        """Refuse a write to a register that holds a once-read special register: every later
        `k.tid.x` would see the written value."""
        held = {id(r): name for name, r in self._sreg_regs.items()}
        for st in self.body[self._n_entry:]:
            if type(st) is Statement:
                for d in dests(st.insn):
                    if id(d) in held:
                        raise BuildError(f"{st.insn.name}: writes %{d.name}, which holds "
                                         f"%{held[id(d)]} (read once per kernel, read-only); "
                                         "copy it first: k.mov(k.tid.x)", st.loc)

    @property
    def laneid(self) -> Reg:
        """`%laneid` (read once per kernel)."""
        return self.read_special("laneid")

    @property
    def warpid(self) -> Reg:
        """`%warpid` (a fresh read each time: the warp may move)."""
        return self.read_special("warpid")

    @property
    def clock64(self) -> Reg:
        """`%clock64` (a fresh read each time)."""
        return self.read_special("clock64")

    @property
    def globaltimer(self) -> Reg:
        """`%globaltimer` in nanoseconds (a fresh read each time)."""
        return self.read_special("globaltimer")

    @property
    def cluster_ctarank(self) -> Reg:
        """`%cluster_ctarank` (read once per kernel)."""
        return self.read_special("cluster_ctarank")

    @property
    def cluster_nctarank(self) -> Reg:
        """`%cluster_nctarank` (read once per kernel)."""
        return self.read_special("cluster_nctarank")

    # -- shared memory ---------------------------------------------------------------------------
    def shared_array(self, type: ScalarType, count: IntLike, *, align: IntLike | None = None,
                     name: str | None = None) -> Symbol:
        """A static `.shared .align A .type name[count];` declared in this kernel.

        A .bf16/.bf16x2 array is declared with the bit type of its size (.b16/.b32): ptxas has
        no .shared .bf16; the symbol keeps its type for the instructions that use it."""
        check_shared_type(".shared", name, type)
        n = as_int(count)
        if n is None or n < 1 or n >= 1 << 40:
            raise OperandError(".shared", name or "?", "a positive element count", _show(count))
        a = as_int(align)
        if align is not None and (a is None or a < 1 or a & (a - 1)):
            raise OperandError(".shared", name or "?", "a power-of-two alignment", _show(align))
        if name is None:
            name = self._auto("smem")
        sym = Symbol(self._claim(name, "shared variable"), StateSpace.shared, type, n, a,
                     self, loc=user_loc())
        total = self._static_shared_bytes() + sym.size
        if total > MAX_STATIC_SHARED:   # past every target's limit: refused here already
            self._names.discard(sym.name)
            raise shared_limit_error(f"kernel {self.name}", total, MAX_STATIC_SHARED, sym)
        self.shared.append(sym)
        self.decl_locs[sym.name] = user_loc()
        return sym

    def _static_shared_bytes(self) -> int:
        """Bytes of this kernel's own static `.shared` arrays (no alignment padding)."""
        return sum(s.size for s in self.shared if s.count is not None)

    def extern_shared(self, name: str = "dyn_smem", *, align: IntLike = 16,
                      type: TypeLike = ScalarType.b8) -> Symbol:
        """Dynamic shared memory: `.extern .shared .align A .b8 name[];` (sized at launch)."""
        check_shared_type(".extern .shared", name, type)
        if any(s.count is None for s in self.shared):
            raise BuildError(f"kernel {self.name}: dynamic shared memory is already declared")
        a = as_int(align)
        if a is None or a < 1 or a & (a - 1):
            raise OperandError(".extern .shared", name, "a power-of-two alignment", _show(align))
        sym = Symbol(self._claim(name, "shared variable"), StateSpace.shared, scalar_type(type),
                     None, a, self, loc=user_loc())
        self.shared.append(sym)
        self.decl_locs[sym.name] = user_loc()
        return sym

    def extern_shared_symbols(self) -> list[Symbol]:
        """The `.extern .shared` arrays (dynamic shared memory) this kernel declares."""
        return [s for s in self.shared if s.count is None]

    def _auto(self, hint: str) -> str:
        n = self._counters.get("$" + hint, 0)
        while True:
            n += 1
            name = f"{hint}_{n}"
            if name not in self._names:
                self._counters["$" + hint] = n
                return name

    # -- a failed builder adds nothing ------------------------------------------------------
    def _txn_mark(self) -> tuple:
        """What `_txn_undo` needs to put the kernel back as it is now: sizes of the tables
        that only grow (cheap: taken at every outermost public builder call, see
        `errors.fail_closed`) and the few small values a builder changes in place."""
        return (len(self.body), self._n_entry, self._counters.copy(), len(self._named_regs),
                len(self._labels), len(self._placed), len(self._used_labels), len(self.shared),
                len(self.params), len(self._sreg_regs), len(self._module_syms),
                self._last_if, len(self._loops), self._guard, len(self._pending_fits),
                len(self._map_boxes))

    def _txn_undo(self, mark: tuple) -> None:
        """Discard everything added since `mark` (statements, registers, labels, shared
        variables, parameters): the kernel renders exactly as it did then. For the call that
        took the mark only: a register it made must not outlive it, since its automatic name
        is given out again."""
        (n_body, n_entry, counters, n_regs, n_labels, n_placed, n_used, n_shared, n_params,
         n_sregs, n_syms, last_if, n_loops, guard, n_fits, n_boxes) = mark
        body = self.body
        del body[n_body + self._n_entry - n_entry:]
        del body[n_entry:self._n_entry]           # special-register reads put at the top
        self._n_entry = n_entry
        self._counters = counters
        for items, keep in ((self._named_regs, n_regs), (self.shared, n_shared),
                            (self.params, n_params)):
            for item in items[keep:]:
                self._names.discard(item.name)
                self.decl_locs.pop(item.name, None)
            del items[keep:]
        for table, keep in ((self._labels, n_labels), (self._placed, n_placed),
                            (self._used_labels, n_used), (self._sreg_regs, n_sregs),
                            (self._module_syms, n_syms), (self._map_boxes, n_boxes)):
            for _ in range(len(table) - keep):
                table.popitem()   # dicts pop their newest entry first
        self._last_if, self._guard = last_if, guard
        del self._loops[n_loops:]
        del self._pending_fits[n_fits:]   # address checks put off for the discarded code
        # Caches keyed by the number of statements would take new ones for the discarded.
        self.__dict__.pop("_distinct_requires", None)
        self.__dict__.pop("_budget_checked", None)

    # -- statements --------------------------------------------------------------------------
    def emit(self, insn: _I) -> _I:
        """Append an instruction (under the active guard, if any) and record the user's line."""
        loc = user_loc()
        cls = type(insn)
        # Every register an operand holds must be this kernel's. Plain registers of this
        # kernel and values of types that never hold one pass inline; anything else (an
        # address, a vector, a foreign register) gets the full check of every field.
        for value in (_GETTERS.get(cls) or _instruction_getter(cls))(insn):
            t = type(value)
            if t is Reg:
                if value.kernel is self:
                    continue
            elif t in _NO_REGS:
                continue
            elif t is Symbol or t is Param or t is Label:
                if value.kernel is self:
                    continue
            elif not isinstance(value, _HOLDS_OWNED):
                _NO_REGS.add(t)
                continue
            self._check_owners(insn, loc)
            break
        guard = self._guard
        if guard is not None:
            for r in (guard.reg if isinstance(guard, NegPred) else guard,):
                if r.kernel is not self:
                    raise OperandError(insn.name, "guard", f"a predicate of '{self.name}'",
                                       f"%{r.name}", loc)
        if cls is Barrier or cls is BarrierRed:
            cta = cta_threads(self)
            if cta is not None:
                barrier_count_fits(insn, *cta, loc)
        if cls is Bra:
            target = cast(Bra, insn).target
            self._used_labels.setdefault(target.name, loc)
            if target.kernel is not self:
                raise OperandError(insn.name, "target", f"a label of kernel '{self.name}'",
                                   target.name, loc)
        self.body.append(_new_statement(Statement, (insn, guard, loc)))
        self._last_if = None
        if self._origin_regs:   # whatever it writes may no longer hold a known address
            forget_written(self, insn)
        return insn

    def _check_owners(self, insn: Instruction, loc: SourceLoc) -> None:
        for fname, value in _operand_values(insn):
            for r in registers_in(value):
                if r.kernel is not self:
                    owner = r.kernel.name if r.kernel is not None else "no kernel"
                    raise OperandError(insn.name, fname, f"a register of kernel '{self.name}'",
                                       f"%{r.name} of kernel '{owner}'", loc)
            for s in symbols_in(value):
                if s.kernel is self:
                    continue
                if isinstance(s, Label):
                    owner = s.kernel.name if s.kernel is not None else "no kernel"
                    raise OperandError(insn.name, fname, f"a label of kernel '{self.name}'",
                                       f"label {s.name} of kernel '{owner}'", loc)
                if s.kernel is not None:
                    what = "parameter" if isinstance(s, Param) else f"{s.space.value} variable"
                    raise OperandError(insn.name, fname, f"a symbol of kernel '{self.name}' "
                                       "or a module variable", f"{what} {s.name} of kernel "
                                       f"'{s.kernel.name}' (declare it in this kernel)", loc)
                if s.module is not None:   # the module is known at emit: checked there
                    self._module_syms.setdefault(s, (insn.name, fname, loc))

    def guard(self, pred: Reg | NegPred) -> _Guard:
        """Predicate every instruction emitted inside: `@p insn;` (or `@!p` for `~p`)."""
        return _Guard(self, pred)

    # -- labels ---------------------------------------------------------------------------------
    def label(self, name: str) -> Label:
        """A label with exactly this name (unique in the kernel); place it with `place()`.
        Names starting with `$L__` are ptxdsl's own (`fresh_label`, structured control flow)."""
        name = plain_str(name)
        if isinstance(name, str) and name.startswith("$L__"):
            # A user `$L__else_1` would collide with a label if_() makes later, and the
            # error would then name if_ rather than this line.
            raise BuildError(f"label name {name!r}: names starting with '$L__' are reserved "
                             "for ptxdsl's generated labels; choose another (or use "
                             "k.fresh_label())")
        return self._new_label(name)

    def _new_label(self, name: str) -> Label:
        name = check_identifier(name, "label")
        if name in self._labels:
            raise BuildError(f"kernel {self.name}: label {name!r} is already declared")
        lab = Label(name, self)
        self._labels[name] = lab
        return lab

    def fresh_label(self, hint: str = "L") -> Label:
        """A label with a unique generated name such as `$L__else_3`."""
        n = self._counters.get("$label", 0) + 1
        self._counters["$label"] = n
        return self._new_label(f"$L__{hint}_{n}")

    def place(self, label: Label) -> None:
        """`name:`: put the label here (once)."""
        if not isinstance(label, Label):
            raise BuildError(f"place expects a label made by k.label() or k.fresh_label(), "
                             f"got {_show(label)}")
        if label.kernel is not self:
            raise BuildError(f"label {label.name} belongs to another kernel")
        if label.name in self._placed:
            raise BuildError(f"kernel {self.name}: duplicate label {label.name!r} (first "
                             f"placed at {self._placed[label.name]})")
        if self._guard is not None:
            raise BuildError("a label cannot be placed inside a guard block")
        loc = user_loc()
        self._placed[label.name] = loc
        self._labels_placed += 1
        self.body.append(LabelDef(label, loc))
        self._last_if = None

    # -- rendering -----------------------------------------------------------------------------
    def requires(self) -> Requires:
        """The PTX ISA version and target this kernel needs (its instructions' and
        directives')."""
        r = req("6.3")
        if self.reqnctapercluster or self.explicitcluster or self.maxclusterrank:
            r = r.merge(req("7.8", 90))
        if self.declares_b128:
            r = r.merge(req("8.3"))
        # Many instructions share one requirement object: merge the distinct ones only.
        for need in set(self.distinct_requires()):
            r = r.merge(need)
        return r

    def distinct_requires(self) -> list[Requires]:
        """The requirement of every statement, each requirement object once (most
        instructions share their class's object, so this is short; equal objects built
        separately may both appear)."""
        cached = self.__dict__.get("_distinct_requires")
        if cached is not None and cached[0] == len(self.body):
            return cached[1]   # statements are immutable and only ever added
        seen: dict[int, Requires] = {}
        for item in self.body:
            if type(item) is Statement:
                need = item.insn.requires
                seen[id(need)] = need
        distinct = list(seen.values())
        self._distinct_requires = (len(self.body), distinct)
        return distinct

    @property
    def declares_b128(self) -> bool:
        """Whether a `.reg .b128` is declared (ptxas wants PTX 8.3 for the type itself)."""
        return "q" in self._counters or any(r.type is ScalarType.b128 for r in self._named_regs)

    def statements(self) -> Iterator[Statement]:
        """The instructions of the body, in order (labels left out)."""
        return (s for s in self.body if isinstance(s, Statement))

    def check(self, strict: bool = False, **context: Any) -> list[Finding]:
        """The hazard checker's findings for this kernel (`ptxdsl.checker.check_kernel`);
        `strict=True` raises `HazardError` when there is any. Context: `host_maps=`, `maps=`."""
        from .checker import check_kernel, report
        if type(strict) is not bool:   # a truthy "no" must not make the check strict
            raise OperandError("Kernel.check", "strict", "True or False", _show(strict))
        findings = check_kernel(self, **context)
        if strict:
            report(findings, strict=True)
        return findings

    def check_labels(self) -> None:
        """Refuse a branch to a label that is never placed."""
        for name, loc in self._used_labels.items():
            if name not in self._placed:
                raise BuildError(f"kernel {self.name}: label {name!r} is a branch target but "
                                 "is never placed (call k.place(label))", loc)

    def render(self) -> list[tuple[str, SourceLoc | None]]:
        """The `.entry` as lines, each with the Python location that produced it."""
        self.check_labels()
        if self._pending_fits:
            check_pending(self)
        if self._sreg_regs:
            self._check_special_reads()
        lines: list[tuple[str, SourceLoc | None]] = []
        # ptxas refuses `.extern .shared` inside a function body (a syntax error), so dynamic
        # shared memory is declared at module scope, right before the entry that uses it.
        for s in self.extern_shared_symbols():
            lines += [(f".extern .shared .align {s.align} .{decl_type(s.type)} {s.name}[];",
                       s.loc),
                      ("", None)]
        head = (".visible " if self.visible else "") + f".entry {self.name}("
        if not self.params:
            lines.append((head + ")", self.loc))
        else:
            lines.append((head, self.loc))
            for i, p in enumerate(self.params):
                sep = "," if i + 1 < len(self.params) else ""
                lines.append((f"\t{p.declaration()}{sep}", self.loc))
            lines.append((")", self.loc))
        for directive, dims in ((".maxntid", self.maxntid), (".reqntid", self.reqntid),
                                (".reqnctapercluster", self.reqnctapercluster)):
            if dims:
                lines.append((f"{directive} {', '.join(map(str, dims))}", self.loc))
        if self.explicitcluster:
            lines.append((".explicitcluster", self.loc))
        for directive, v in ((".maxclusterrank", self.maxclusterrank),
                             (".minnctapersm", self.minnctapersm), (".maxnreg", self.maxnreg)):
            if v is not None:
                lines.append((f"{directive} {v}", self.loc))
        lines.append(("{", None))
        for prefix in ("p", "rc", "rs", "h", "r", "f", "rd", "fd", "q"):
            if prefix in self._counters:
                n = self._counters[prefix] + 1
                lines.append((f"\t.reg .{AUTO_DECL[prefix]} %{prefix}<{n}>;", None))
        for r in self._named_regs:
            # PTX declares no .bf16/.bf16x2 registers (a syntax error): they are .b16/.b32.
            decl = _REG_DECL.get(r.type, r.type.value)
            lines.append((f"\t.reg .{decl} %{r.name};", None))
        for s in self.shared:
            align = f" .align {s.align}" if s.align else ""
            if s.count is not None:
                lines.append((f"\t.shared{align} .{decl_type(s.type)} {s.name}[{s.count}];",
                              s.loc))
        if len(lines) and lines[-1][0] != "{":
            lines.append(("", None))
        append = lines.append
        for item in self.body:
            if type(item) is LabelDef:
                append((f"{item.label.name}:", item.loc))
                continue
            text = item.insn.render()      # Statement.render, inline: once per instruction
            if item.guard is not None:
                text = f"@{item.guard.render()} {text}"
            if "\n" in text:  # a multi-line statement (inline asm): each line maps to its loc
                lines.extend(("\t" + part, item.loc) for part in text.split("\n"))
            else:
                append(("\t" + text, item.loc))
        append(("}", None))
        return lines
