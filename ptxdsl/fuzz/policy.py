"""Refused by policy: combinations ptxas accepts but ptxdsl refuses on purpose, with the reason.

The fuzzer's oracle (`oracle.check`) consults this table only when a builder refused a case
and ptxas accepted its text on some target; a case no rule covers is a disagreement (a test
failure). A rule names the refusal it covers by the builder's own words (`pattern`, searched
in the error message) and, where needed, by the family and the drawn facts (`when`), and says
why ptxas' acceptance is not the last word: the PTX ISA forbids the value although ptxas does
not check it, or the instruction assembles but faults or misbehaves at run time, or the
operand is wrong for a reason only the builder can see (what a register is known to hold).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

from .case import Case


@attrs.frozen
class Rule:
    """A refusal ptxdsl makes on purpose although ptxas would accept the text: `id`, the `reason`
    (why ptxdsl refuses it), the `pattern` the refusal's message matches, and optionally the
    families and a predicate on the case it applies to."""

    id: str
    reason: str
    pattern: str
    families: tuple[str, ...] = ()
    when: Callable[[Case], bool] | None = attrs.field(default=None, repr=False)

    def covers(self, case: Case, message: str) -> bool:
        """Whether this rule explains refusing `case` with `message`."""
        if self.families and case.family not in self.families:
            return False
        if not re.search(self.pattern, message):
            return False
        return self.when is None or bool(self.when(case))


def _f(key: str, *values):
    return lambda c: c.fact(key) in values


RULES: list[Rule] = [
    Rule("rank-api", "tensormap_replace_rank(rank=) takes the tensor's rank and writes "
         "rank-1; a register holding rank-1 goes through new_val, as in cuda::ptx (the PTX "
         "text is the same, the meaning of the Python argument is not).",
         r"pass it as new_val"),

    Rule("constant-fold", "Arithmetic whose sources are all immediates is folded to one mov "
         "at build time (ptxdsl/instructions/arith_fold.py). Where the result is not one exact "
         "value, ptxdsl refuses rather than guess what the hardware computes, although ptxas "
         "accepts the instruction: a division by zero (PTX ISA div: the result is "
         "unspecified), a signed quotient or |MIN| that overflows, a float result that needs "
         "rounding, an approximate division, a zero whose sign depends on the rounding mode, "
         "a subnormal that .ftz would flush, a non-finite source; and an instruction only "
         "some targets have (add.sat.u32: the sm_120 family), whose mov would not hold the "
         "module to them.",
         r"every source is a constant", ("arith",)),

    Rule("rcp-ftz-f64", "The PTX ISA defines rcp.rnd.f64 without .ftz (.f64 arithmetic keeps "
         "subnormals; only rcp.approx.ftz.f64 flushes); ptxas 13 also takes "
         "rcp.rnd.ftz.f64, a spelling the ISA does not give a meaning, while it refuses the "
         "same on sqrt.rnd.f64.", r"the ISA defines no rcp\.r[nzmp]\.ftz\.f64 form", ("sfu",)),

    Rule("cvta-symbol", "ptxdsl takes the address of a symbol with k.generic_addr (mov + cvta) "
         "rather than cvta on the symbol itself; both mean the same (PTX ISA cvta).",
         r"mov the symbol's address first"),
    Rule("symbol-address-width", "A symbol's address is 32 bits (shared) or 64 bits; a 16-bit "
         "mov of it is truncated by ptxas without a word.", r"mov to take a symbol's address"),
    Rule("pred-immediate", "Predicate constants are not part of ptxdsl's operand model (PTX "
         "predicates come from setp and the like); ptxas accepts `mov.pred p, 1`. Use "
         "k.setp(...) or a predicate register.", r"a predicate register, got immediate"),
    Rule("isa-grammar", "A qualifier combination outside the PTX ISA grammar that ptxas 13 "
         "accepts anyway: fence.proxy.tensormap::generic and "
         "fence.proxy.async::generic...sync_restrict take .release/.acquire only (ptxas also "
         "takes .acq_rel, in any scope).", r"expected one of 'release', 'acquire'|"
         r"expected one of 'acquire', 'release'", ("fence",), _f("sem", "acq_rel")),
    Rule("exact-cvt-rounding", "A rounding mode on a conversion that cannot round (a "
         "widening float conversion is exact): the PTX ISA gives .rnd to conversions that lose "
         "precision; ptxas 13 accepts (and ignores) one on .bf16 sources.",
         r"expected no rounding mode for this conversion", ("move",), _f("atype", "bf16")),
    Rule("red-async-s64", "red.async .add takes .u32, .s32 and .u64 in the PTX ISA grammar; "
         "ptxas 13 also takes .s64. cuda::ptx's int64_t overload emits .add.u64 (the same bits "
         "in two's complement), and so does ptxdsl for a 64-bit value.",
         r"red\.async\.add: operand 'type': expected one of 'u32', 's32', 'u64'", ("cluster",),
         _f("type", "s64")),
    Rule("negated-selector", "selp's selector c is a predicate register in the PTX ISA "
         "grammar (ptxas also takes !c): swap a and b instead.",
         r"operand 'c': expected a \.pred register, got NegPred", ("compare",)),
    Rule("state-token", "The state operand of test_wait/try_wait/pending_count is the opaque "
         ".b64 value an arrive returned (PTX ISA mbarrier); ptxas takes an immediate, which is "
         "never a valid state.", r"operand 'state': expected a \.b64 register",
         ("mbarrier",)),
    Rule("unoffered", "Forms ptxdsl does not offer (Hopper TMA kernels do not need them), "
         "which ptxas accepts: half-precision arithmetic and comparisons (.f16/.bf16 and "
         "packed types in add/mul/min/max/setp/selp...), .sat on unsigned add/sub (sm_120-class "
         "targets only), 256-bit vector accesses (.v4 of 64-bit types, sm_100+).",
         r"expected an integer, bit or \.f32/\.f64 type|operand 'type': expected one of "
         r".*got \.b?f16(x2)?\b|expected add/sub\.s32 or an \.f32 op|"
         r"at most 128 bits per vector access"),
    Rule("store-coords", "A tensor store or reduction starting at a negative coordinate "
         "assembles but faults at run time (the box must start inside the tensor for stores).",
         r"start coordinates must be non-negative"),
    Rule("raw-param-tensormap", "A tensor-map kernel parameter used by name as the map's "
         "address: it assembles, but the TMA unit then reads the param-space offset as a "
         "generic address and faults (cvta.param is needed: k.tensormap_addr).",
         r"k\.tensormap_addr|cvta\.param"),
    Rule("space-hint", "The register is known (from `mov` of a symbol or from `cvta`) to hold "
         "an address of another state space than the instruction names. ptxas sees only a "
         "64-bit register; the access would go through the wrong window (PTX does not promise "
         "that the generic, global and shared windows coincide).",
         r"which holds a \.[\w:]+ address"),
    Rule("alignment", "Bulk and tensor copies need 16-byte aligned shared and global addresses, "
         "a tensor map's global address is 16-byte aligned, and mbarrier operands need 8-byte "
         "alignment (PTX ISA cp.async.bulk, tensormap.replace, mbarrier). A symbol "
         "whose declared alignment or offset breaks that is known at build time; ptxas does not "
         "check it and the copy faults (misaligned address) at run time.",
         r"-byte aligned address"),
    Rule("symbol-bounds", "An access that a symbol's declared size and a constant offset "
         "prove to lie (partly) outside the symbol (an mbarrier is 8 bytes, a tensor map 128, "
         "a bulk copy `size` bytes, ld/st their width). ptxas does not check it; the access "
         "reads or corrupts a neighbouring variable or faults at run time.",
         r"expected an access inside \w+ \(\d+ bytes\)"),
    Rule("b128-imm", "ptxas reads a .b128 immediate as a 64-bit constant (high half 0): 2^64 "
         "assembles as 0 and -1 as 2^64-1, so a wider or negative value would silently change.",
         r"expected a \.b128 immediate in \[0, 2\^64\)"),
    Rule("generic-symbol", "A .shared/.param symbol named where a generic (or other-space) "
         "address is expected. ptxas accepts the name, but a variable's address is an address "
         "in its own state space (PTX ISA 6.4.1); ptxdsl makes the conversion explicit "
         "(k.generic_addr / k.cvta). For tensor maps: the map must be in global or param space.",
         r"expected a symbol in \.\w*|a symbol in \.generic|"
         r"expected a \.(global|generic|shared::cta) address, got symbol"),
    Rule("address-width", "Under `.address_size 64` an address is 64 bits; ptxdsl takes 32-bit "
         "registers only for shared-memory addresses (a 32-bit value is a shared-window "
         "offset). ptxas zero-extends a 32-bit register (and takes a float register) where a "
         "global, generic, local, const or param address goes, which is not the address meant.",
         r"expected a 64-bit (integer )?register holding|expected a 64-bit register holding "
         r"the map"),
    Rule("zero-membermask", "A membermask names the threads taking part and must include the "
         "executing thread (PTX ISA); 0 names none (undefined behaviour), and an immediate above "
         "32 bits is truncated by ptxas.", r"non-zero 32-bit mask"),
    Rule("imm-type-range", "An immediate that does not fit the operand's type (or a negative "
         "one for an unsigned type, or a float for an integer type). ptxas silently truncates, "
         "reinterprets or converts it; ptxdsl asks for the value that is meant (0xFFFF, not -1, "
         "for .u16).",
         r"expected an immediate in \[-?\d+, \d+\] for \.\w+|expected an integer immediate "
         r"for \.\w+|expected a value representable as"),
    Rule("isa-range", "A value outside the range the PTX ISA gives the operand, which ptxas "
         "does not check: mbarrier counts and tx-counts below 2^20; barrier thread counts "
         "32..1024 in whole warps; shfl lanes 0..31 and the clamp/segment bits; 16-bit "
         "ctaMask/byteMask/im2col values; tensor-map field values (box 1..256, rank 1..5, "
         "strides multiples of 16 below 2^40, addresses 16-byte aligned, element strides 1..8, "
         "extents 1..2^32-1); wait_group N >= 0.",
         r"expected an integer immediate in \[|\(2\^20-1\)|lane number in \[0, 31\]|"
         r"bits 0-4 \(clamp\)|immediate in \[0, 65535\]|\(\[\d+, \d+\]\)|"
         r"so ord must be 0\.\.3"),
    Rule("type-compat", "PTX ISA 6.4.2 operand types: a register must have the instruction's "
         "type, a bit type or a same-signedness integer type of the same size. ptxas is looser "
         "(it takes .f16x2/.f16/float registers where bit types go, registers wider than the "
         "type for ld/st/cvt, and any 32-bit register in tensor coordinates); ptxdsl keeps the "
         "strict rule, so a value's type is never reinterpreted silently: use cvt or a register "
         "of the exact type.",
         r"expected a register compatible with|expected a 32-bit integer register or an int|"
         r"expected a 16-bit register|expected a 64-bit register holding an L2|"
         r"expected an integer or bit register|expected a \.\w+ register, got register"),
    Rule("wgmma-a-f32", "The A fragment of an RS wgmma holds packed inputs (two 16-bit or four "
         "8-bit values, one tf32, 32 b1 bits per register) in .b32 registers. ptxas 13 refuses "
         "an .f32 register there in the dense 16-bit forms but accepts one in the sparse and "
         "b1 forms; ptxdsl refuses it in every form alike (mov.b32 moves an .f32 value in).",
         r"move \.f32 values in with mov\.b32", ("wgmma",)),
    Rule("matrix-rows", "ldmatrix/stmatrix row addresses are 16-byte aligned (PTX ISA "
         "ldmatrix: each row is 16 contiguous bytes, aligned); a symbol's declared alignment or "
         "a constant offset that breaks it is known at build time. ptxas does not check it and "
         "the access faults (misaligned address) at run time.",
         r"row addresses must be 16-byte aligned", ("matrix",)),
    Rule("mixed-vector", "Vector registers (ldmatrix/stmatrix, wgmma's A fragment and "
         "accumulators, tcgen05.ld/st) of two types besides the bit types (.u32 and .f32, say): "
         "ptxas compares only neighbouring elements, so it rejects {u32, f32} and accepts "
         "{f32, b32, u32}, the same mix in another order. ptxdsl refuses every such mix (give "
         "the registers one type, or a bit type).",
         r"registers other than \.bN ones must all have one type", ("matrix", "wgmma", "tcgen05")),
    Rule("descriptor-layout", "A MatrixDescriptor made by descriptor() knows its tile: its "
         "element width and type, its rows and K extent, and whether it is MN-major (which sets "
         "wgmma's transpose flag). In PTX the descriptor is a plain .b64, so ptxas accepts one "
         "of another width or type, of a tile smaller than the instruction reads, or a "
         "transpose immediate that contradicts the tile, and wgmma then reads the wrong layout, "
         "other numbers or past the tile.",
         r"a descriptor of a tile of (\d+-bit|\.\w+) elements|a descriptor of a tile of at "
         r"least \d+ rows|for a descriptor of a .* tile \(or leave it out\)", ("wgmma",)),
    Rule("fragment-type", "An A fragment (k.a_fragment(t), or a packed accumulator) knows the "
         "type of the values it holds; ptxas sees four .b32 registers and accepts them for "
         "any atype, and wgmma then multiplies the bits as another type.",
         r"expected A's fragment of \.\w+ values \(atype\)", ("wgmma",)),
    Rule("wgmma-distinct", "Each accumulator (and each register of an RS A operand) holds its "
         "own values; ptxas accepts one register given twice, and wgmma then writes two "
         "accumulators' results into it (one is lost) or reads one A value in two places.",
         r"expected \d+ distinct registers, got %\w+ as", ("wgmma",)),
    Rule("tcgen05-st-immediate", "tcgen05.st stores registers: cuda::ptx binds its values with "
         "\"r\", and ptxas 13.5 rejects a one-element `{5}` (Arguments mismatch) while taking "
         "an immediate among several registers; ptxdsl takes registers only (mov the constant "
         "first).", r"operand 'values\[\d+\]': expected a 32-bit register .*, got int",
         ("tcgen05",)),
    Rule("tcgen05-taddr-immediate", "A tensor-memory address is the value tcgen05.alloc writes "
         "to shared memory at run time, so a constant one is a guess; cuda::ptx binds taddr "
         "with \"r\". ptxas 13.5 takes an immediate in tcgen05.dealloc but crashes on one in "
         "tcgen05.shift and tcgen05.cp ([0]); ptxdsl takes a register everywhere.",
         r"operand 'taddr': expected a 32-bit integer register .* holding a tensor-memory "
         r"address .*, got int", ("tcgen05",)),
    Rule("tcgen05-scale-input-d", "The PTX ISA gives tcgen05.mma's scale_input_d to "
         ".kind::f16 and .kind::tf32 only (cuda::ptx has it there only); ptxas 13 refuses it "
         "with .kind::f8f6f4 but accepts any value, 16 and up included, with .kind::i8, "
         "where the ISA says nothing of what it does.",
         r"scale_input_d is for \.kind::f16 and \.kind::tf32 only", ("tcgen05_mma",),
         _f("kind", "kind::i8")),
    Rule("clc-response", "clusterlaunchcontrol.query_cancel decodes the opaque 16 bytes a "
         "try_cancel wrote; ptxas also takes an immediate there (a 64-bit constant, high half "
         "0), which is no response. ptxdsl takes the .b128 register loaded from the response "
         "buffer.", r"expected a \.b128 register holding the response",
         ("clusterlaunchcontrol",)),]


def match(case: Case, message: str) -> Rule | None:
    """The first rule covering a refusal of `case` with error `message`, or None."""
    return next((r for r in RULES if r.covers(case, message)), None)


def table() -> str:
    """The table as text (for reports and the docs)."""
    return "\n".join(f"{r.id}: {r.reason}" for r in RULES)
