"""Reading PTX: any PTX text into ptxdsl's statements (`parse_ptx`).

::

    mod = parse_ptx(open("kernel.ptx").read(), file="kernel.ptx")
    for f in mod.check():            # the hazard checker, as on a built module
        print(f.format())
    open("again.ptx", "w").write(mod.emit())   # the same program

Instructions ptxdsl models become its typed instruction objects (validated by their own
constructors); the rest are kept as `Raw` statements with their text and the registers they
write and read. See docs/ptx_frontend.md.
"""

from .items import Braces, Bracket, Directive, PlainReg, PredPair, Raw, RawOperand, ScopedLabel
from .lexer import PtxParseError
from .module import ParsedFunction, ParsedModule, TopLevel
from .parser import parse_ptx

__all__ = ["parse_ptx", "ParsedModule", "ParsedFunction", "TopLevel", "Raw", "Directive",
           "PlainReg", "ScopedLabel", "RawOperand", "Bracket", "Braces", "PredPair",
           "PtxParseError"]
