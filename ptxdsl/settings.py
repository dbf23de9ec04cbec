"""Every environment variable ptxdsl reads, declared once (Triton's "knobs" pattern).

Each `Knob` holds the variable's name, its default, how its text is read and a one-line
description; the documentation's environment-variable page is generated from `KNOBS`, and no
other module of the package reads a `PTXDSL_*` variable from `os.environ` (a test greps for
it). Values are read when used, never cached at import: a test's `monkeypatch.setenv` or a
user's `os.environ[...] = ...` before the call takes effect.

A value that is set but cannot be read is never an error: the knob's default is used and the
reason is said once per variable and value, as a `PtxdslSettingWarning` (or through the
caller's `warn`, where a subsystem has a warning class of its own: the cubin cache's
`PtxdslCacheWarning`). An empty value counts as unset.
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

import attrs

T = TypeVar("T")

ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")


class PtxdslSettingWarning(UserWarning):
    """An environment variable of ptxdsl's holds a value it cannot read; its default is used."""


class _Unreadable(Exception):
    """A knob's parser refuses the text (the knob's `expected` says what it takes)."""


_warned: set[tuple[str, str]] = set()
_lock = threading.Lock()


@attrs.frozen
class Knob(Generic[T]):
    """One environment variable: `get()` reads it now and returns its value or the default."""

    name: str
    default: T
    parse: Callable[[str], T]      # the text (stripped, not empty) to a value, or _Unreadable
    doc: str                       # one line, for the documentation page
    expected: str                  # what a readable value looks like, for warnings and the page
    shown_default: str             # the default as the page and the warnings say it
    read_by: str                   # the module that uses it, for the page
    audience: str = "users"        # "users", or "developers" (debugging and test aids)

    def raw(self) -> str | None:
        """The variable's text, stripped; None when unset or empty."""
        text = os.environ.get(self.name, "").strip()
        return text or None

    def get(self, default: Any = None, warn: Callable[[str], None] | None = None) -> T:
        """The value now; `default` replaces the knob's own (a caller with a default of its
        own, such as a test asking for more fuzz cases). A value that cannot be read gives
        the default and one warning per value: `warn(message)` when given, else a
        `PtxdslSettingWarning`."""
        fallback = self.default if default is None else default
        text = self.raw()
        if text is None:
            return fallback
        try:
            return self.parse(text)
        except _Unreadable:
            shown = self.shown_default if default is None else str(default)
            message = (f"{self.name}={text!r} is not "
                       f"{self.expected}; using the default, {shown}")
            key = (self.name, text)
            with _lock:
                first = key not in _warned
                _warned.add(key)
            if warn is not None:
                warn(message)      # the caller's own once-per-value bookkeeping applies
            elif first:
                warnings.warn(message, PtxdslSettingWarning, stacklevel=3)
            return fallback


def _flag(text: str) -> bool:
    word = text.lower()
    if word in ON:
        return True
    if word in OFF:
        return False
    raise _Unreadable


def _path(text: str) -> Path:
    return Path(text).expanduser()


def _absolute_path(text: str) -> Path | None:
    # The XDG spec: a relative XDG_CACHE_HOME is invalid and is ignored (quietly: it is the
    # desktop's variable, set for every program, not a request made to ptxdsl).
    return Path(text) if os.path.isabs(text) else None


def _megabytes(text: str) -> int:
    """A size in MB to bytes; 0 (no cap) or from one byte up to 2^63 bytes (2^43 MB)."""
    try:
        mb = float(text)
    except ValueError:
        raise _Unreadable from None
    # float() also takes "nan", "inf" and "1e400" (inf); a negative or a fraction of a byte
    # would otherwise read as "no cap" (0 bytes), a cap of 2^63 bytes or more is no file size.
    if mb == 0:
        return 0
    if not (math.isfinite(mb) and 1 <= mb * 1024 * 1024 < 1 << 63):
        raise _Unreadable
    return int(mb * 1024 * 1024)


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise _Unreadable from None
    if n < 1:
        raise _Unreadable
    return n


def _not_zero(text: str) -> bool:
    return text != "0"


_FLAG = "one of " + ", ".join(ON) + " (on) or " + ", ".join(OFF) + " (off), in any case"

CACHE_MAX_MB_DEFAULT = 1024
FUZZ_EXAMPLES_DEFAULT = 300

CACHE = Knob(
    "PTXDSL_CACHE", True, _flag,
    "The on-disk cache of assembled cubins (`Module.load`); off assembles on every load, as "
    "`load(cache=False)` does.", _FLAG, "on", "ptxdsl.runtime.cache")
CACHE_DIR = Knob[Path | None](
    "PTXDSL_CACHE_DIR", None, _path,
    "The cubin cache's folder (`~` expanded), unless `load(cache_dir=...)` names one; it must "
    "be the user's own and writable by no one else, or the cache is not used.",
    "a folder", "`$XDG_CACHE_HOME/ptxdsl`, else `~/.cache/ptxdsl`", "ptxdsl.runtime.cache")
CACHE_MAX_MB = Knob(
    "PTXDSL_CACHE_MAX_MB", CACHE_MAX_MB_DEFAULT * 1024 * 1024, _megabytes,
    "The cubin cache's size cap in MB (fractions allowed; 0 for no cap); past it the least "
    "recently used entries go.",
    "a size in MB (0 for no cap, else from one byte to 2^43 MB)",
    f"{CACHE_MAX_MB_DEFAULT} MB", "ptxdsl.runtime.cache")
C_LAUNCH = Knob(
    "PTXDSL_C_LAUNCH", True, _flag,
    "`Function.launch` makes its driver call from the C module `ptxdsl._launch_c` where it is "
    "built; off uses cuda.bindings' `cuLaunchKernelEx` (same result, more host time). Read at "
    "the first launch of the process.", _FLAG, "on", "ptxdsl.runtime.launch")
STRICT = Knob(
    "PTXDSL_STRICT", False, _flag,
    "Hazard findings at `Module.emit()` raise `HazardError` instead of warning, for modules "
    "made without `strict=`.", _FLAG, "off", "ptxdsl.checker")
NO_NET = Knob(
    "PTXDSL_NO_NET", False, _flag,
    "A builder's raw Python exception from bad input passes through instead of becoming a "
    "`BuildError`: a debugging aid to find the builders whose own checks miss a case.",
    _FLAG, "off", "ptxdsl.errors", audience="developers")
FUZZ_EXAMPLES = Knob(
    "PTXDSL_FUZZ_EXAMPLES", FUZZ_EXAMPLES_DEFAULT, _count,
    "Cases per family drawn by the test suite's seeded fuzz tests (`ptxdsl.fuzz.examples`); "
    "`python -m ptxdsl fuzz` takes `--examples` instead.", "a whole number >= 1",
    f"{FUZZ_EXAMPLES_DEFAULT} (some tests ask for more)", "ptxdsl.fuzz",
    audience="developers")
# Not ptxdsl's own, but read by it: declared here so the page lists everything that counts.
XDG_CACHE_HOME = Knob[Path | None](
    "XDG_CACHE_HOME", None, _absolute_path,
    "The base of the cubin cache's default folder (`$XDG_CACHE_HOME/ptxdsl`) when "
    "PTXDSL_CACHE_DIR is unset.", "an absolute path (a relative one is ignored, per the XDG "
    "spec)", "`~/.cache`", "ptxdsl.runtime.cache")
PER_THREAD_STREAM = Knob(
    "CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", False, _not_zero,
    "cuda.bindings' switch to the per-thread default stream; the C launch path follows it, "
    "as cuda.bindings' own call does.", "0 (off) or anything else (on)", "off",
    "ptxdsl.runtime.launch")

KNOBS: tuple[Knob[Any], ...] = (CACHE, CACHE_DIR, CACHE_MAX_MB, C_LAUNCH, STRICT, NO_NET,
                                 FUZZ_EXAMPLES, XDG_CACHE_HOME, PER_THREAD_STREAM)


def knob(name: str) -> Knob[Any]:
    """The knob of the variable `name`."""
    for k in KNOBS:
        if k.name == name:
            return k
    raise KeyError(f"{name} is not a variable ptxdsl reads; it reads "
                   + ", ".join(k.name for k in KNOBS))
