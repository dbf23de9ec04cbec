"""The package version: read by the package, the emitted PTX's header, the CLI and the build
(pyproject's `version`), from this file that imports nothing."""

__version__ = "0.1.0"
