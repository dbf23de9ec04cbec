"""ptxdsl's exceptions and the capture of the user's source location.

Every error raised while building names the user's `file:line`: the first stack frame outside
the ptxdsl package (samples and tests are user code).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, NamedTuple, NoReturn, ParamSpec, TypeVar

import attr

from ptxdsl import settings

_P = ParamSpec("_P")
_R = TypeVar("_R")

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
# The samples a wheel ships inside the package (ptxdsl/samples) are user code, as they are in a
# checkout's samples/: errors and warnings point into them, not at their caller.
_SAMPLES_DIR = os.path.join(_PKG_DIR, "samples") + os.sep


class SourceLoc(NamedTuple):
    """A Python source location: the line of user code that built something.

    A NamedTuple because one is recorded for every instruction built.
    """

    file: str
    line: int
    function: str = ""
    caller: SourceLoc | None = None   # the user's call of the helper function that built it

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def describe(self) -> str:
        """`file:line`, and `called from file:line` when built inside a helper function."""
        if self.caller is None:
            return str(self)
        if self.caller.function == ".loc":   # a PTX line and the source line its .loc names
            return f"{self} (source {self.caller})"
        return f"{self}, called from {self.caller}"


_INTERNAL: dict[str, bool] = {}
# attrs runs a field's validator from its own setters module when an attribute is assigned
# (`sym.name = ...`): those frames are ptxdsl's classes at work, not the user's code.
_ATTRS_DIR = os.path.dirname(os.path.abspath(attr.__file__)) + os.sep


def _is_internal(filename: str) -> bool:
    # Called for every instruction built: cache the answer per file name.
    hit = _INTERNAL.get(filename)
    if hit is None:
        # attrs compiles __init__ into a pseudo-file; its frames belong to ptxdsl's classes.
        # contextlib runs the tail of `with k.if_()/for_range()...` blocks: the user's line is
        # the `with` statement one frame further out.
        path = os.path.abspath(filename)
        hit = _INTERNAL[filename] = (filename.startswith("<attrs generated")
                                     or filename == contextlib.__file__
                                     or path.startswith(_ATTRS_DIR)
                                     or (path.startswith(_PKG_DIR + os.sep)
                                         and not path.startswith(_SAMPLES_DIR)))
    return hit


_LIBRARY: dict[str, bool] = {}
_LIB_DIRS = tuple({os.path.dirname(os.__file__), sys.prefix, sys.base_prefix})


def _is_library(filename: str) -> bool:
    """Code that is not the user's own: the standard library, installed packages (pytest,
    runpy, ...), frozen modules."""
    hit = _LIBRARY.get(filename)
    if hit is None:
        path = os.path.abspath(filename)
        hit = _LIBRARY[filename] = not path.startswith(_SAMPLES_DIR) and (
            filename.startswith("<") or "site-packages" in path or "dist-packages" in path
            or path.startswith(tuple(d + os.sep for d in _LIB_DIRS)))
    return hit


def user_loc(skip: int = 1) -> SourceLoc:
    """The innermost frame that is not ptxdsl's own code (cheap: walks raw frames), with the
    user's call site when that frame is a helper function called from user code."""
    frame: FrameType | None = sys._getframe(skip)
    known = _INTERNAL
    while frame is not None:
        name = frame.f_code.co_filename
        internal = known.get(name)
        if not (_is_internal(name) if internal is None else internal):
            break
        frame = frame.f_back
    if frame is None:
        return SourceLoc("<unknown>", 0)
    code = frame.f_code
    caller = None
    if code.co_name != "<module>":
        up = frame.f_back
        while up is not None and _is_internal(up.f_code.co_filename):
            up = up.f_back
        if up is not None and not _is_library(up.f_code.co_filename):
            ucode = up.f_code
            caller = _new_loc(SourceLoc, (ucode.co_filename, up.f_lineno, ucode.co_name, None))
    # tuple.__new__ directly: the NamedTuple's own __new__ is a Python frame, per instruction.
    return _new_loc(SourceLoc, (code.co_filename, frame.f_lineno, code.co_name, caller))


_new_loc = tuple.__new__


class PtxdslError(Exception):
    """Base class of every error ptxdsl raises on purpose."""

    def __init__(self, message: str, loc: SourceLoc | None = None):
        self.loc = loc if loc is not None else user_loc(2)
        self.message = message
        super().__init__(f"{self.loc}: {message}")


class BuildError(PtxdslError):
    """Invalid input found while building a kernel (bad operand, qualifier, name, ...)."""


class OperandError(BuildError):
    """An operand of an instruction does not fit: names instruction, operand, expected, given."""

    def __init__(self, instruction: str, operand: str, expected: str, given: object,
                 loc: SourceLoc | None = None):
        self.instruction = instruction
        self.operand = operand
        self.expected = expected
        self.given = given
        super().__init__(
            f"{instruction}: operand '{operand}': expected {expected}, got {given}",
            loc if loc is not None else user_loc(2))


class BuildIndexError(BuildError, IndexError):
    """An index outside a helper's range (a fragment's register, `frag[99]`): a BuildError
    naming the helper, the index and the valid range at the user's line, and an IndexError,
    so code that catches IndexError (a loop that indexes until it fails) still works."""


class VersionError(BuildError):
    """A module pinned to a PTX version or target below what an instruction needs."""


class AssemblyError(PtxdslError):
    """ptxas (through nvJitLink) rejected a module."""

    def __init__(self, message: str, log: str, ptx_line: int | None = None,
                 ptx_text: str | None = None, loc: SourceLoc | None = None):
        self.log = log
        self.ptx_line = ptx_line
        self.ptx_text = ptx_text
        super().__init__(message, loc if loc is not None else SourceLoc("<ptx>", ptx_line or 0))


class OutputError(PtxdslError, OSError):
    """Writing ptxdsl's output to a file failed (`Module.write`): names the path. Also an
    OSError carrying the cause's errno, so `except OSError` still catches it."""

    def __init__(self, message: str, cause: OSError, loc: SourceLoc | None = None):
        super().__init__(message, loc if loc is not None else user_loc(2))
        self.errno, self.strerror, self.filename = cause.errno, cause.strerror, cause.filename

    def __str__(self) -> str:   # OSError's own __str__ would show only the errno fields
        return f"{self.loc}: {self.message}"


class CudaError(PtxdslError):
    """A CUDA driver call failed."""


# Python's own exceptions that bad arguments provoke deep inside a builder (a bool where a
# type belongs, None where a tuple belongs, ...).
_RAW = (TypeError, AttributeError, ValueError, KeyError, IndexError, OverflowError,
        ZeroDivisionError)


def fail_closed(name: str, fn: Callable[_P, _R],
                pre: Callable[[dict[str, Any]], None] | None = None) -> Callable[_P, _R]:
    """`fn` with every raw Python exception it raises turned into a BuildError that names
    `name` and the user's line (the original chained as its cause). `pre(kwargs)`, when
    given, checks keyword arguments first (for the precise message). With the environment
    variable PTXDSL_NO_NET=1 the raw exceptions pass through: a debugging aid to find the
    builders whose own checks miss a case (run tests/test_hardening_junk.py with it).

    The safety net under the builders' own checks, which give the precise message where they
    know the rule: no public builder answers bad input with a raw exception.

    And a failed builder adds nothing to its kernel: a call that raises (any exception) after
    emitting part of its work (a `cvta` before the instruction that then refuses an operand,
    the registers and labels it made) leaves the kernel as it was before the call. The kernel
    is the call's first argument, or the `k` of a helper object passed first (a pipeline
    view), or the second argument (a helper's constructor: `MbarrierRing(k, ...)`). Only the
    outermost wrapped call on a kernel takes the snapshot (a builder calls others).
    """
    import functools

    def net(e: BaseException) -> BuildError:
        return BuildError(f"{name}: invalid argument ({type(e).__name__}: {e})")

    @functools.wraps(fn)
    def builder(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        # Inline for the common case, a kernel first (this runs for every builder call,
        # nested ones included: they see a depth of 1 and take no snapshot).
        k: Any = args[0] if args else None
        try:
            depth = getattr(k, "_txn_depth", None)
        except Exception:  # noqa: BLE001 - a hostile first argument: the builder refuses it
            depth = None
        if type(depth) is not int:      # not a kernel (an int only on a kernel)
            k = _kernel_of(args)
        elif depth:
            k = None
        mark = None
        if k is not None:
            k._txn_depth = 1
            mark = k._txn_mark()
        try:
            if kwargs and pre is not None:
                pre(kwargs)
            return fn(*args, **kwargs)
        except BaseException as e:
            if k is not None:
                k._txn_undo(mark)
            if isinstance(e, _RAW) and not isinstance(e, PtxdslError) \
                    and not settings.NO_NET.get():
                raise net(e) from e
            raise
        finally:
            if k is not None:
                k._txn_depth = 0
    # A marker for the tests; a function type has no declared attributes to put it in.
    builder.__ptxdsl_fail_closed__ = True  # type: ignore[attr-defined]
    return builder


class Sealed:
    """A helper object (a fragment, a ring and its views, an epilogue) whose fields were
    checked together and built into the kernel when it was made: assigning one later
    (`ring.stages = 4` on a 2-stage ring, `acc.n = 128`) would build from values nothing
    checked, so it is refused. `_seal()` ends the constructor."""

    _sealed = False

    def _seal(self) -> None:
        object.__setattr__(self, "_sealed", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if self._sealed:
            raise BuildError(f"{type(self).__name__}: .{name} cannot be assigned once it is "
                             "made (its registers and declarations were built from it); "
                             "make another")
        object.__setattr__(self, name, value)


def refuse_assignment(cls: type, why: str) -> type:
    """A frozen attrs class whose assignments (`lab.name = ...`, `layout.k = 128`) raise a
    BuildError at the user's line saying `why`, not attrs' FrozenInstanceError (a raw
    AttributeError). attrs' own constructor writes through object.__setattr__: unaffected."""
    def refuse(self: Any, name: str, *_: Any) -> NoReturn:
        raise BuildError(f"{type(self).__name__}: .{name} cannot be assigned or deleted "
                         f"({why})")
    for dunder in ("__setattr__", "__delattr__"):
        setattr(cls, dunder, refuse)
    return cls


def fail_closed_methods(cls: type, name: str) -> type:
    """`fail_closed` on the constructor and every public method of a helper class (static and
    class methods too), named `name.method`: the helpers above the builders (fragments,
    matrix descriptors, the epilogue) keep the builders' promise of no raw exception."""
    for field, member in list(vars(cls).items()):
        if field.startswith("_") and field != "__init__":
            continue
        label = name if field == "__init__" else f"{name}.{field}"
        if isinstance(member, staticmethod | classmethod):
            setattr(cls, field, type(member)(fail_closed(label, member.__func__)))
        elif callable(member) and not isinstance(member, type):
            setattr(cls, field, fail_closed(label, member))
    return cls


def _kernel_of(args: tuple) -> Any:
    """The kernel of a call whose first argument is not one: the `k` (a pipeline view) or
    `kernel` (a fragment) of a helper object, or the second argument; None when there is
    none or a wrapped call on it is in progress (a kernel's `_txn_depth` is 0 when idle)."""
    try:
        first = (getattr(args[0], "k", None), getattr(args[0], "kernel", None)) if args else ()
        for a in (*first, args[1]) if len(args) > 1 else first:
            depth = getattr(a, "_txn_depth", None)
            if type(depth) is int:
                return a if depth == 0 else None
    except Exception:  # noqa: BLE001 - a hostile argument's attributes: the builder refuses it
        pass
    return None
