"""What pyproject.toml cannot say about the build (everything else is there).

- The optional C launch module (`ptxdsl/_launch_c.c`) uses only the limited API of Python 3.11,
  so it is built once as an abi3 extension and the wheel is tagged `cp311-abi3-<platform>`:
  one wheel for every supported Python.
- Without a compiler the install goes on without it (launches then use cuda.bindings), and the
  wheel is then pure Python, `py3-none-any`: its tag follows what the build made, which
  `bdist_wheel` decides before building.
- The samples ship inside the package as `ptxdsl.samples` (the `demo` command runs them from an
  installed wheel), read from `samples/`, where checkout users find them.
"""

from __future__ import annotations

import os

from setuptools import Extension, find_namespace_packages, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext

# The oldest Python the abi3 module runs on: pyproject's requires-python.
LIMITED_API_HEX = "0x030B0000"
LIMITED_API_TAG = "cp311"


class BuildExt(build_ext):
    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except BaseException:
            # setuptools skips an optional module that fails to compile; a copy left by an
            # earlier build would otherwise ship (and tag the wheel abi3) as if built from
            # this source.
            stale = self.get_ext_fullpath(ext.name)
            if os.path.exists(stale):
                os.remove(stale)
            raise

    def built(self) -> bool:
        """Whether the build folder holds every extension (after `run`)."""
        return all(os.path.exists(self.get_ext_fullpath(e.name)) for e in self.extensions)


class BdistWheel(bdist_wheel):
    def run(self):
        # The parent picks the tag from root_is_pure, set before anything is built, and
        # `install` the lib folder (purelib or platlib) from whether the distribution has
        # extensions: build first, and without the module say neither.
        if not self.skip_build:
            self.run_command("build")
        ext = self.get_finalized_command("build_ext")
        assert isinstance(ext, BuildExt)
        if not ext.built():
            self.distribution.ext_modules = []
            self.root_is_pure = True
        super().run()


setup(
    # Namespace packages too: ptxdsl/instructions and ptxdsl/builders have no __init__.py.
    packages=[*find_namespace_packages(include=["ptxdsl", "ptxdsl.*"],
                                       exclude=["*.__pycache__"]), "ptxdsl.samples"],
    package_dir={"ptxdsl.samples": "samples"},
    ext_modules=[Extension(
        "ptxdsl._launch_c", ["ptxdsl/_launch_c.c"], optional=True, py_limited_api=True,
        define_macros=[("Py_LIMITED_API", LIMITED_API_HEX)])],
    cmdclass={"build_ext": BuildExt, "bdist_wheel": BdistWheel},
    options={"bdist_wheel": {"py_limited_api": LIMITED_API_TAG}},
)
