"""Structured control flow for the kernel builder: `if_`/`else_`, `for_range`, `while_`, `loop`,
`break_`/`continue_`, each lowered to labels and (guarded) branches.

A mixin of `ptxdsl.kernel.Kernel`; it relies on the core's `emit`, `place`, `fresh_label`,
`reg` and the instruction mixins' `mov`/`add`/`sub`/`setp`.

An exception raised inside a block's body propagates as itself, and the whole block is
discarded first: the kernel is left as it was before the `with` statement (registers created
inside stay declared, unused), so it can still be completed and emitted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from .errors import BuildError, OperandError, user_loc
from .instructions.base import check_pred
from .instructions.control import Bra
from .kernel_core import Statement
from .kernel_host import KernelHost
from .operands import IntLike, Label, NegPred, Reg, _show, as_int, check_owned, int_range
from .types import ScalarType, TypeLike, scalar_type


class _Undo:
    """The kernel's state at the start of a block, to discard the block if its body raises.

    Only sizes are recorded (a block is opened per `if_`/loop, so copying the label tables
    here made building quadratic): the label tables are dicts that only ever grow, in
    insertion order, so what a block added is their tail, removed with `popitem()`.
    """

    __slots__ = ("kernel", "n_body", "n_entry", "n_used", "n_placed", "last_if", "n_loops",
                 "guard", "n_fits")

    def __init__(self, k: KernelHost):
        self.kernel, self.n_body, self.n_entry = k, len(k.body), k._n_entry
        self.n_used, self.n_placed = len(k._used_labels), len(k._placed)
        self.last_if, self.n_loops, self.guard = k._last_if, len(k._loops), k._guard
        self.n_fits = len(k._pending_fits)   # the discarded code's put-off address checks

    def __call__(self, inserted_at: int | None = None) -> None:
        k = self.kernel
        shift = k._n_entry - self.n_entry   # special-register reads added at the top since
        if inserted_at is not None:         # else_()'s branch over the else body
            del k.body[inserted_at + shift]
        del k.body[self.n_body + shift:]
        for table, keep in ((k._used_labels, self.n_used), (k._placed, self.n_placed)):
            for _ in range(len(table) - keep):
                table.popitem()   # the newest entry: dicts pop in LIFO order
        last = self.last_if
        k._last_if = None if last is None else (last[0] + shift, *last[1:])
        del k._loops[self.n_loops:]
        del k._pending_fits[self.n_fits:]
        k._guard = self.guard


class StructuredFlow(KernelHost):
    """`with k.if_(p):`, `with k.else_():`, `with k.for_range(0, n) as i:`, `with
    k.while_(lambda: i < n):`, `with k.loop():` + `k.break_(when=p)`."""

    @contextlib.contextmanager
    def _block(self, inserted_at: int | None = None) -> Iterator[None]:
        """Run a block's body; if it raises, discard the block and re-raise."""
        undo = _Undo(self)
        try:
            yield
        except BaseException:
            undo(inserted_at)
            raise


    def _branch(self, target: Label, when: Reg | NegPred | None = None) -> None:
        if self._guard is not None:
            raise BuildError("structured control flow cannot be used inside a guard block")
        insn = Bra(target)
        if when is None:
            self.emit(insn)
            return
        self._guard = when
        try:
            self.emit(insn)
        finally:
            self._guard = None

    @staticmethod
    def _negate(p: Reg | NegPred) -> Reg | NegPred:
        return p.reg if isinstance(p, NegPred) else NegPred(p)

    @contextlib.contextmanager
    def if_(self, cond: Reg | NegPred) -> Iterator[None]:
        """Run the body when `cond` holds: `@!p bra ELSE; body; ELSE:`."""
        cond = check_pred("if_", "cond", cond, negatable=True)
        check_owned("if_", self, cond=cond)
        with self._block():
            else_ = self.fresh_label("else")
            self._branch(else_, self._negate(cond))
            yield
        index = len(self.body)
        self.place(else_)
        self._last_if = (index, else_, user_loc())

    @contextlib.contextmanager
    def else_(self) -> Iterator[None]:
        """The other branch of the `if_` block that ends right before this one."""
        if self._last_if is None:
            raise BuildError("else_() must directly follow an if_() block")
        index, _else_label, _ = self._last_if
        end = self.fresh_label("endif")
        loc = user_loc()
        with self._block(inserted_at=index):
            self.body.insert(index, Statement(Bra(end), None, loc))
            self._used_labels.setdefault(end.name, loc)
            self._last_if = None
            yield
        self.place(end)

    @contextlib.contextmanager
    def for_range(self, start: Reg | IntLike, stop: Reg | IntLike, step: Reg | IntLike = 1, *,
                  type: TypeLike = ScalarType.u32) -> Iterator[Reg]:
        """A counted loop; yields the induction register. `start`, `stop` and `step` may be
        registers; a register step must be positive at run time (the loop runs while
        `i < stop`), as in a grid-stride loop stepping by `k.nctaid.x * k.ntid.x`.

        `type` is the counter's: .s16/.u16/.s32/.u32 (default)/.s64/.u64. Counting down
        over an unsigned type compares signed (so that stepping past 0 ends the loop), so
        register bounds there must stay below 2^(bits-1); immediate bounds beyond that
        compare unsigned, which needs an immediate `stop >= |step| - 1`.

        The counter must not wrap past its type before the test fails (the loop would never
        end): constant bounds and step are checked here (one step past the last value must
        fit the type; with a register stop, a constant step's magnitude is at most
        2^(bits-1) and a constant start's first step must fit). What cannot be known here
        is the caller's rule: a register stop must satisfy `stop + step - 1 <= max` counting
        up (`stop - |step| + 1 >= min` of the compared type counting down), and a register
        step must stay below `max - stop + 2` (2^32 - stop + 1 for .u32)."""
        if type not in _LOOP_TYPES:
            raise OperandError("for_range", "type", "an integer type: "
                               + ", ".join(f"t.{t.value}" for t in _LOOP_TYPES), _show(type))
        t = scalar_type(type)
        check_owned("for_range", self, start=start, stop=stop, step=step)
        first = _loop_operand("start", start, t)
        last = _loop_operand("stop", stop, t)
        by = _loop_operand("step", step, t)
        cmp_type = _compare_type(first, last, by, t)
        with self._block():
            yield from self._counted(first, last, by, t, cmp_type)

    def _counted(self, start, stop, step, type: ScalarType,
                 cmp_type: ScalarType) -> Iterator[Reg]:
        i = self.reg(type)
        self.mov(start, dst=i)
        head, cont, end = (self.fresh_label(h) for h in ("loop", "next", "endloop"))
        self.place(head)
        up = isinstance(step, Reg) or step > 0
        p = self.setp("lt" if up else "gt", i, stop, type=cmp_type)
        self._branch(end, NegPred(p))
        with self._loop_targets(cont, end):
            yield i
        self.place(cont)
        if up:
            self.add(i, step, dst=i)
        else:  # an unsigned counter cannot take a negative immediate
            self.sub(i, -step, dst=i)
        self._branch(head)
        self.place(end)

    @contextlib.contextmanager
    def while_(self, cond: Callable[[], Reg | NegPred]) -> Iterator[None]:
        """`while cond(): body`; `cond` is called once to emit the test at the loop head."""
        def test(end: Label) -> None:
            if not callable(cond):
                raise OperandError("while_", "cond", "a function returning a predicate, "
                                   "called at the loop head (lambda: i < n)", repr(cond))
            p = check_pred("while_", "cond", cond(), negatable=True)
            self._branch(end, self._negate(p))
        with self._headed_loop("while", test):
            yield

    @contextlib.contextmanager
    def loop(self) -> Iterator[None]:
        """An endless loop left with `break_()`."""
        with self._headed_loop("loop"):
            yield

    @contextlib.contextmanager
    def _headed_loop(self, name: str,
                     test: Callable[[Label], None] | None = None) -> Iterator[None]:
        """`<name>:` head, `test(end label)` emitted there, the body (continue_ goes back to
        the head), the branch back, `end<name>:`."""
        with self._block():
            head, end = self.fresh_label(name), self.fresh_label(f"end{name}")
            self.place(head)
            if test is not None:
                test(end)
            with self._loop_targets(head, end):
                yield
            self._branch(head)
            self.place(end)

    @contextlib.contextmanager
    def _loop_targets(self, cont: Label, end: Label) -> Iterator[None]:
        """Inside a loop body: continue_() branches to `cont`, break_() to `end`."""
        self._loops.append((cont, end))
        try:
            yield
        finally:
            self._loops.pop()

    def break_(self, when: Reg | NegPred | None = None) -> None:
        """Leave the innermost loop (when `when`, a predicate or `~p`, holds)."""
        when = _when("break_", when)
        if not self._loops:
            raise BuildError("break_() outside a loop")
        self._branch(self._loops[-1][1], when)

    def continue_(self, when: Reg | NegPred | None = None) -> None:
        """Go to the innermost loop's next iteration (when `when`, a predicate or `~p`,
        holds)."""
        when = _when("continue_", when)
        if not self._loops:
            raise BuildError("continue_() outside a loop")
        self._branch(self._loops[-1][0], when)


def _when(name: str, when) -> Reg | NegPred | None:
    """The condition of a break_/continue_: it becomes the branch's guard, so it must be a
    predicate (a Python bool is not a run-time condition: use `if`, or no `when`)."""
    if when is None or isinstance(when, NegPred) or isinstance(when, Reg) \
            and when.type is ScalarType.pred:
        return when
    raise OperandError(name, "when", "a predicate register or its negation (p or ~p)",
                       _show(when) if not isinstance(when, Reg)
                       else f"register %{when.name} of type .{when.type.value}")



_LOOP_TYPES = (ScalarType.s16, ScalarType.u16, ScalarType.s32, ScalarType.u32, ScalarType.s64,
               ScalarType.u64)
_SIGNED = {16: ScalarType.s16, 32: ScalarType.s32, 64: ScalarType.s64}


def _loop_operand(what: str, value, type: ScalarType) -> Reg | int:
    """A for_range bound or step: an integer register of the counter's size, or an integer
    in the counter type's range (checked here, so the error names for_range rather than the
    mov/setp/add it is lowered to)."""
    kind = "a non-zero integer" if what == "step" else "an integer"
    if isinstance(value, Reg):
        if value.type.bits != type.bits or not (value.type.is_int or value.type.kind == "b"):
            raise OperandError("for_range", what, f"{kind} or an integer register (of "
                               f"{type.bits} bits: the counter is .{type.value})",
                               f"register %{value.name} of type .{value.type.value}")
        return value
    n = as_int(value)
    lo, hi = int_range(type)
    if what == "step":   # added (up) or subtracted (down): its magnitude must be an immediate
        lo = -hi
    if what == "step" and not n:   # None or 0
        raise OperandError("for_range", "step", "a non-zero integer or an integer register",
                           repr(value))
    if n is None or not lo <= n <= hi:
        raise OperandError("for_range", what, f"{kind} or an integer register (in [{lo}, "
                           f"{hi}]: the counter is .{type.value})", _show(value))
    return n


def _compare_type(start, stop, step, type: ScalarType) -> ScalarType:
    """The type of the loop test `i < stop` / `i > stop`, after refusing immediate bounds
    with which the counter would wrap around its type before the test fails (a loop that
    never ends, or ends at once)."""
    if isinstance(step, Reg):
        return type
    cmp_type = type
    if step < 0 and type.kind == "u":
        # Counting down past zero (range(10, 0, -3) ends at 1, then 1 - 3) wraps an unsigned
        # counter to a huge value that still compares greater: compare signed instead. That
        # reads an immediate bound of 2^(bits-1) or more as negative (the loop would run zero
        # times), so such bounds compare unsigned, which is exact when the counter cannot
        # step below 0: when stop >= |step| - 1.
        cmp_type = _SIGNED[type.bits]
        big = int_range(cmp_type)[1]
        if any(isinstance(v, int) and v > big for v in (start, stop)):
            if not isinstance(stop, int) or stop < -step - 1:
                raise BuildError(
                    f"for_range: counting down over .{type.value} with a bound of 2^"
                    f"{type.bits - 1} or more needs an immediate stop >= |step| - 1 = "
                    f"{-step - 1} (the test then compares unsigned, and a smaller stop would "
                    f"let the counter step past 0 and wrap); got stop {stop!r}. Or use a wider "
                    "signed type (type=t.s64)")
            cmp_type = type
    lo, hi = int_range(cmp_type)
    if isinstance(stop, int):
        last = stop - 1 + step if step > 0 else stop + 1 + step   # one step past the end
        if not lo <= last <= hi:
            raise BuildError(
                f"for_range: with stop {stop} and step {step} the .{type.value} counter can "
                f"step past the end of its range ({'above' if step > 0 else 'below'} "
                f"{hi if step > 0 else lo}) and wrap around, so the loop might never end; "
                "use a wider type or a smaller step")
        return cmp_type
    # A register stop: only its run-time value decides whether the counter wraps, but a
    # constant step longer than half the counter's range wraps it for most stops, and a
    # constant start whose first step leaves the range wraps it whenever the body runs.
    if abs(step) > 1 << (type.bits - 1):
        raise OperandError("for_range", "step", f"a step of magnitude at most 2^{type.bits - 1} "
                           f"with a register stop (a larger one wraps the .{type.value} "
                           "counter past the stop for most stops); or a wider type",
                           repr(step))
    if isinstance(start, int) and not lo <= start + step <= hi:
        raise OperandError("for_range", "start", f"a start from which one step ({step}) stays "
                           f"in [{lo}, {hi}] (the .{cmp_type.value} test; the counter would "
                           "wrap on its first step); or a wider type", repr(start))
    return cmp_type
