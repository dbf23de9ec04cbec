"""Every golden .ptx file assembles with nvJitLink for the target it declares."""

from __future__ import annotations

import pytest

from ptxdsl.testing import assemble_declared, declared_target, golden_files
from tests.conftest import GOLDEN_DIR

GOLDENS = golden_files(GOLDEN_DIR)


@pytest.mark.parametrize("path", GOLDENS, ids=[str(p.relative_to(GOLDEN_DIR)) for p in GOLDENS])
def test_golden_assembles(path):
    ptx = path.read_text()
    cubin = assemble_declared(ptx)
    assert cubin[:4] == b"\x7fELF", f"{path} did not produce an ELF cubin for " \
                                    f"{declared_target(ptx)}"


def test_there_are_goldens():
    assert len(GOLDENS) > 0
