"""nvJitLink assembly: cubins, and ptxas errors mapped to PTX and Python lines."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, Module, t
from ptxdsl.errors import AssemblyError, SourceLoc
from ptxdsl.toolchain import assemble, toolchain_version

BAD_SYNTAX = (".version 8.0\n.target sm_90\n.address_size 64\n"
              ".visible .entry k()\n{\n\tfoo bar baz;\n}\n")


def test_assemble_returns_an_elf_cubin():
    k = Kernel("k")
    k.add(k.reg(t.u32), 1)
    k.ret()
    cubin = Module([k]).assemble("sm_90")
    assert cubin[:4] == b"\x7fELF"


def test_parse_error_names_ptx_line_and_python_line():
    loc = SourceLoc("user.py", 42)
    with pytest.raises(AssemblyError) as ei:
        assemble(BAD_SYNTAX, "sm_90", locate=lambda n: loc if n == 6 else None)
    err = ei.value
    assert err.ptx_line == 6 and err.ptx_text == "foo bar baz;"
    assert err.loc == loc and "user.py:42" in str(err) and "syntax error" in str(err)


def test_sm90a_ptx_refused_for_plain_sm90():
    text = BAD_SYNTAX.replace("sm_90\n", "sm_90a\n").replace("\tfoo bar baz;\n", "\tret;\n")
    with pytest.raises(AssemblyError, match="sm_90a"):
        assemble(text, "sm_90")


def test_toolchain_version_is_major_minor():
    major, minor = toolchain_version().split(".")
    assert int(major) >= 12 and int(minor) >= 0
