"""`.version`/`.target` inference picks the minimum ptxas accepts, and pins below an
instruction's need raise VersionError naming that instruction and the line that built it."""

from __future__ import annotations

import re
import sys

import pytest

from ptxdsl import AssemblyError, Kernel, Module, VersionError, t
from ptxdsl.testing import golden_files
from ptxdsl.toolchain import assemble
from ptxdsl.types import TARGET_INTRODUCED, PtxVersion
from tests.conftest import GOLDEN_DIR

CORE = golden_files(GOLDEN_DIR / "core")
# Every PTX ISA version from the floor up to the newest a golden needs (there was no 6.6-6.9
# or 7.9); a golden at a version not listed here fails loudly rather than skipping the check.
VERSIONS = ["6.3", "6.4", "6.5", "7.0", "7.1", "7.2", "7.3", "7.4", "7.5", "7.6", "7.7", "7.8",
            "8.0", "8.1", "8.2", "8.3", "8.4", "8.5", "8.6", "8.7", "8.8", "9.0", "9.1", "9.2"]


def _header(ptx: str) -> tuple[str, str]:
    return (re.search(r"^\.version (\S+)$", ptx, re.M).group(1),
            re.search(r"^\.target (\S+)$", ptx, re.M).group(1))


def _with(ptx: str, version: str, target: str) -> str:
    ptx = re.sub(r"^\.version \S+$", f".version {version}", ptx, flags=re.M)
    return re.sub(r"^\.target \S+$", f".target {target}", ptx, flags=re.M)


@pytest.mark.parametrize("path", CORE, ids=[p.name for p in CORE])
def test_golden_header_is_the_minimum_ptxas_accepts(path):
    """One PTX version lower (same target) and the next lower target (same version) must both
    be refused by ptxas, unless the target itself forces the version or we are at the floor."""
    ptx = path.read_text()
    version, target = _header(ptx)
    sm = int(target[3:].rstrip("af"))
    assemble(ptx, target)
    lower_v = VERSIONS[VERSIONS.index(version) - 1] if version != VERSIONS[0] else None
    if lower_v and PtxVersion.parse(lower_v) >= TARGET_INTRODUCED[sm]:
        with pytest.raises(AssemblyError):
            assemble(_with(ptx, lower_v, target), target)
    lower_sm = max((s for s in TARGET_INTRODUCED if s < sm), default=None)
    if lower_sm is not None:
        with pytest.raises(AssemblyError):
            assemble(_with(ptx, version, f"sm_{lower_sm}"), f"sm_{lower_sm}")


def test_core_goldens_exist():
    assert len(CORE) >= 20


def test_plain_arithmetic_infers_the_floor():
    k = Kernel("k")
    k.add(k.ld_param(k.param(t.u32, "n")), 1)
    m = Module([k])
    assert (str(m.version), str(m.target)) == ("6.3", "sm_75")
    text = m.emit()
    assert ".version 6.3\n.target sm_75\n.address_size 64\n" in text
    with pytest.raises(AssemblyError, match="does not support .target sm_75"):
        assemble(_with(text, "6.2", "sm_75"), "sm_75")


def test_inference_takes_the_largest_need_of_all_kernels():
    a, b = Kernel("a"), Kernel("b")
    a.tensormap_addr(a.param_tensormap("tm"))          # cvta.param: 7.7
    b.elect_sync()                                     # elect.sync: 8.0, sm_90
    assert (str(Module([a]).version), str(Module([a]).target)) == ("7.7", "sm_75")
    m = Module([a, b])
    assert (str(m.version), str(m.target)) == ("8.0", "sm_90")
    m.assemble()


def test_pinning_at_or_above_the_need_is_kept():
    k = Kernel("k")
    k.elect_sync()
    m = Module([k], version="8.5", target="sm_90a")
    assert ".version 8.5\n.target sm_90a\n" in m.emit()
    m.assemble()


def test_pin_below_names_the_instruction_and_line():
    k = Kernel("k")
    k.add(k.reg(t.u32), 1)
    line = sys._getframe().f_lineno + 1
    k.elect_sync()
    with pytest.raises(VersionError) as e:
        Module([k], version="7.8", target="sm_90").emit()
    assert e.value.message == ("elect.sync needs PTX ISA 8.0, sm_90+, but the module is pinned "
                               "to .version 7.8")
    assert (e.value.loc.file, e.value.loc.line) == (__file__, line)
    assert str(e.value).startswith(f"{__file__}:{line}: ")


def test_pin_below_b128_registers_raises():
    k = Kernel("k")
    k.reg(t.b128)
    assert str(Module([k]).version) == "8.3"
    with pytest.raises(VersionError, match=r"kernel k: \.b128 registers need PTX ISA 8\.3; "
                       r"module is pinned to \.version 8\.2"):
        Module([k], version="8.2").emit()


def test_version_below_the_target_is_refused():
    k = Kernel("k")
    k.ret()
    with pytest.raises(VersionError, match=r"module pinned to \.version 7\.7 but \.target sm_90 "
                       r"needs PTX ISA 7\.8 or later"):
        Module([k], version="7.7", target="sm_90").emit()
