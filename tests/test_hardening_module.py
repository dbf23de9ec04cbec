"""Junk handed to the public `Module` methods gets a ptxdsl error, never a raw exception
(issue 13: every public entry point answers bad input with a PtxdslError)."""

from __future__ import annotations

import numpy as np
import pytest

from ptxdsl import Kernel, Module, t
from ptxdsl.errors import PtxdslError

JUNK = [None, -1, 2**70, 1.5, float("nan"), "", "a\nb", b"x", [], {}, object(), t.u32,
        np.int64(3), True]


def _calls(j):
    yield "Module(kernels)", lambda: Module(j)
    yield "Module(version)", lambda: Module(version=j)
    yield "Module(target)", lambda: Module(target=j)
    yield "add", lambda: Module().add(j)
    for meth in ("global_array", "const_array", "shared_array"):
        yield f"{meth}(type)", lambda m=meth: getattr(Module(), m)(j, 4, name="g")
        yield f"{meth}(count)", lambda m=meth: getattr(Module(), m)(t.u32, j, name="g")
        yield f"{meth}(name)", lambda m=meth: getattr(Module(), m)(t.u32, 4, name=j)
    for meth in ("global_array", "const_array"):
        yield f"{meth}(init)", lambda m=meth: getattr(Module(), m)(t.u32, 1, name="g", init=j)
    yield "write", lambda: Module([Kernel("k")]).write(j)
    yield "assemble", lambda: Module([Kernel("k")]).assemble(j)
    yield "locate", lambda: Module([Kernel("k")]).locate(j)


@pytest.mark.parametrize("junk", JUNK, ids=repr)
def test_module_methods_refuse_junk_with_ptxdsl_errors(junk, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a junk string can still be a valid file name ("a\nb")
    raw = []
    for what, call in _calls(junk):
        try:
            call()
        except PtxdslError:
            pass
        except Exception as e:   # noqa: BLE001 - the point: no raw exception gets out
            raw.append(f"{what}: {type(e).__name__}: {e}")
    assert not raw, "\n".join(raw)


def test_write_refuses_a_directory(tmp_path):
    with pytest.raises(PtxdslError, match="Module.write: expected the path of a file"):
        Module([Kernel("k")]).write(tmp_path)
