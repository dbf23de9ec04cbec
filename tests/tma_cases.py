"""Shared scaffolding of the TMA family tests (tensormap, fence, mbarrier): an environment
kernel with lazily made operands, the `Case` record, the pin-below helpers, and `FormChecks`,
the checks every form gets (the TMA families and the bulk-copy families)."""

from __future__ import annotations

import attrs
import pytest

from ptxdsl import Kernel, Module, VersionError, t
from ptxdsl.testing import assemble_declared
from ptxdsl.types import PtxVersion, StateSpace, Target


def unchecked_module(kernels=(), **kw) -> Module:
    """A Module whose emit() skips the hazard checker: goldens of one or a few forms are
    fragments, not runnable kernels."""
    try:
        return Module(kernels, check=False, **kw)
    except TypeError:              # a Module without the checker option
        return Module(kernels, **kw)


class Env:
    """One kernel plus its module; operands are created on first use, so a golden shows only
    what its cases need."""

    def __init__(self, name: str = "k", **pins):
        self.m = unchecked_module(name=name, **pins)
        self.k = Kernel(name)
        self._cache: dict[str, object] = {}

    def _get(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    # shared memory
    smap = property(lambda s: s._get("smap", lambda: s.k.shared_array(
        t.b8, 128, align=128, name="smap")))
    bar = property(lambda s: s._get("bar", lambda: s.k.shared_array(
        t.b64, 1, align=8, name="bar")))
    smap32 = property(lambda s: s._get("smap32", lambda: s.k.mov(s.smap)))
    smap64 = property(lambda s: s._get("smap64", lambda: s.k.mov(s.smap, type=t.u64)))
    bar32 = property(lambda s: s._get("bar32", lambda: s.k.mov(s.bar)))
    bar64 = property(lambda s: s._get("bar64", lambda: s.k.mov(s.bar, type=t.u64)))
    bar_generic = property(lambda s: s._get("barg", lambda: s.k.generic_addr(s.bar)))
    remote = property(lambda s: s._get("remote", lambda: s.k.ld_param(
        s.k.param(t.u32, "remote_bar"))))   # e.g. from mapa.shared::cluster.u32
    # global memory
    gptr_param = property(lambda s: s._get("gptr_param", lambda: s.k.param_ptr("gmap")))
    gptr = property(lambda s: s._get("gptr", lambda: s.k.ld_param(s.gptr_param)))
    gglobal = property(lambda s: s._get("gglobal", lambda: s.k.cvta(
        s.gptr, StateSpace.global_, to=True)))
    gsym = property(lambda s: s._get("gsym", lambda: s.m.global_array(
        t.b8, 128, align=128, name="gmap_sym")))
    csym = property(lambda s: s._get("csym", lambda: s.m.const_array(
        t.b8, 128, align=64, name="cmap_sym")))
    tmap_param = property(lambda s: s._get("tmap", lambda: s.k.param_tensormap("tmap")))
    # values
    v32 = property(lambda s: s._get("v32", lambda: s.k.ld_param(s.k.param(t.u32, "v32"))))
    v64 = property(lambda s: s._get("v64", lambda: s.k.ld_param(s.k.param(t.u64, "v64"))))
    state = property(lambda s: s._get("state", lambda: s.k.ld_param(
        s.k.param(t.u64, "state"))))

    def module(self) -> Module:
        self.m.add(self.k)
        return self.m


@attrs.frozen
class Case:
    id: str
    build: object
    version: str
    target: str


def build(cases, name="k", env: type[Env] = Env, **pins) -> Module:
    """The module of `cases`, built in an `env` (a family's Env subclass for its operands)."""
    e = env(name, **pins)
    for c in cases:
        c.build(e)
    return e.module()


_LOWER_TARGET = {"sm_90a": "sm_90", "sm_100a": "sm_90a", "sm_103a": "sm_100a",
                 "sm_100": "sm_90a", "sm_90": "sm_80", "sm_80": "sm_75"}


def lower_target(target: str) -> str:
    return _LOWER_TARGET[target]


def previous_version(version: str) -> str:
    v = PtxVersion.parse(version)
    last = {6: 5}.get(v.major - 1, 8)   # PTX 6.x ended at 6.5, 7.x and 8.x at .8
    return f"{v.major}.{v.minor - 1}" if v.minor else f"{v.major - 1}.{last}"


def version_cases(cases):
    """Cases whose version is above what their target needs (pinning one below is then an
    instruction error, not a target error)."""
    return [c for c in cases
            if Target.parse(c.target).introduced < PtxVersion.parse(c.version)]


class FormChecks:
    """The checks every TMA form gets, over a test module's GROUPS (golden name -> cases): each
    group's golden, built at the inferred minimum version/target and assembled; each case's
    inferred minimum; and a pin one below its target, and one below its version, refused.

    Subclass it with GROUPS; `tests/conftest.py` parametrizes `group`, `case`, `target_case` and
    `version_case` from the class."""

    GROUPS: dict[str, list[Case]] = {}
    ENV: type[Env] = Env   # the operands the cases build with

    @classmethod
    def cases(cls) -> list[Case]:
        return [c for cs in cls.GROUPS.values() for c in cs]

    @classmethod
    def below_target_cases(cls) -> list[Case]:
        return cls.cases()

    @classmethod
    def below_version_cases(cls) -> list[Case]:
        return version_cases(cls.cases())

    def build(self, cases: list[Case], **pins) -> Module:
        """The module holding `cases` (pinned by `version=`/`target=` when given)."""
        return build(cases, env=self.ENV, **pins)

    def version_for_target_pin(self, case: Case, low: str) -> str:
        """The .version to pin with a target one below the case's (the case's own by default)."""
        return case.version

    def test_golden(self, golden, group):
        cases = self.GROUPS[group]
        m = self.build(cases)
        assert (str(m.version), str(m.target)) == (cases[0].version, cases[0].target)
        assert assemble_declared(golden(m, group))[:4] == b"\x7fELF"

    def test_inferred_minimum(self, case):
        m = self.build([case])
        assert (str(m.version), str(m.target)) == (case.version, case.target)

    def test_pin_below_target(self, target_case):
        low = lower_target(target_case.target)
        m = self.build([target_case], version=self.version_for_target_pin(target_case, low),
                       target=low)
        with pytest.raises(VersionError, match=f"pinned to .target {low}"):
            m.emit()

    def test_pin_below_version(self, version_case):
        prev = previous_version(version_case.version)
        m = self.build([version_case], version=prev, target=version_case.target)
        with pytest.raises(VersionError, match=f"needs PTX ISA {version_case.version}.*pinned "
                                               f"to .version {prev}"):
            m.emit()
