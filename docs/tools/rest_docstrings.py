"""Rewrite ptxdsl's docstrings into the reST that Sphinx's autodoc reads natively.

The docstrings grew up with the README's Markdown habits, which reST reads differently:

- a block indented under a paragraph is code or a table, where reST wants `::` before it
  (without it the block is a quotation, or a definition list when no blank line precedes it);
- a list may start right under its paragraph, where reST wants a blank line (without it the
  items run into the paragraph's text);
- a bare `file:line` is a URI to docutils (scheme `file:`): it became a broken link.

This script makes those edits in the source, so the docs build needs no docstring shim:

    python docs/tools/rest_docstrings.py          # rewrite ptxdsl/ in place
    python docs/tools/rest_docstrings.py --check  # exit 1 and list what it would change

It also lists what it cannot rewrite: a code span followed by a letter (`Reg`s), which reST
does not end there; reword it (`Reg` objects, the registers). tests/test_docs.py runs
`--check`, so a docstring written in the old habits fails there, not only in the Sphinx build.
Run it again after merging branches that touched docstrings.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_PREFIX = re.compile(r"^[rRuU]?(\"\"\"|''')")
# Inline literals and interpreted text, paired left to right as docutils pairs them.
_SPAN = re.compile(r"``.+?``|`[^`]+`", re.S)
_FILE_LINE = re.compile(r"(?<![\w`/.])file:line\b")


def _is_item(line: str) -> bool:
    return line.lstrip().startswith(("- ", "* "))


def _literal_blocks_and_lists(lines: list[str]) -> list[str]:
    """`lines` dedented as autodoc dedents them (the first line stripped)."""
    out: list[str] = []
    for line in lines:
        prev = out[-1] if out else ""
        para = out[-2] if len(out) >= 2 else ""
        if (line.startswith("  ") and len(out) >= 2 and not prev.strip() and para.strip()
                and not para.startswith(" ") and not _is_item(para)
                and not para.endswith("::")):
            # "text:" + blank + indented block: "text::" reads as "text:" and a code block
            if para.endswith(":"):
                out[-2] = para + ":"
            else:
                out[-1:] = ["", "::", ""]
        elif (line.startswith("  ") and prev.endswith(":") and not prev.endswith("::")
              and not prev.startswith(" ") and not _is_item(prev)):
            out[-1:] = [prev + ":", ""]
        elif _is_item(line) and not line.startswith(" ") and prev.strip() and not (
                _is_item(prev) or prev.startswith(" ")):
            out.append("")
        out.append(line)
    return out


def _outside_spans(text: str, fix) -> str:
    """Apply `fix` to the text between code spans only."""
    parts, last = [], 0
    for m in _SPAN.finditer(text):
        parts += [fix(text[last:m.start()]), m.group(0)]
        last = m.end()
    return "".join(parts + [fix(text[last:])])


def rewrite(body: str) -> str:
    """The docstring literal's source text (between its quotes), rewritten."""
    lines = body.split("\n")
    rest = [ln for ln in lines[1:] if ln.strip()]
    margin = min((len(ln) - len(ln.lstrip()) for ln in rest), default=0)
    first = lines[0]
    lead = first[:len(first) - len(first.lstrip())]
    dedented = [first.lstrip()] + [ln[margin:] for ln in lines[1:]]
    new = _literal_blocks_and_lists(dedented)
    text = "\n".join([lead + new[0]] + [(" " * margin + ln) if ln.strip() else ln
                                        for ln in new[1:]])
    # keep the closing quotes' line as it was (indentation only)
    if lines[-1].strip() == "" and len(lines) > 1:
        text = text[:text.rfind("\n") + 1] + lines[-1]
    return _outside_spans(text, lambda s: _FILE_LINE.sub("`file:line`", s))


def unended_spans(body: str) -> list[str]:
    """Code spans followed by a letter (`Reg`s): reST does not end inline markup there."""
    return [m.group(0) for m in _SPAN.finditer(body)
            if m.end() < len(body) and body[m.end()].isalnum()]


def _docstrings(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                yield body[0].value


def process(path: Path) -> tuple[str, str, list[str]]:
    """(old source, new source, problems the script cannot fix)."""
    source = path.read_text()
    tree = ast.parse(source)
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    edits, problems = [], []
    for const in _docstrings(tree):
        assert const.end_lineno is not None and const.end_col_offset is not None
        # col offsets are in UTF-8 bytes: convert through the line's text
        def offset(lineno: int, col: int) -> int:
            line = source[starts[lineno - 1]:starts[lineno]]
            return starts[lineno - 1] + len(line.encode()[:col].decode())
        a, b = offset(const.lineno, const.col_offset), offset(const.end_lineno,
                                                               const.end_col_offset)
        m = _PREFIX.match(source[a:b])
        if not m:       # a one-line "..." docstring: nothing multi-line to fix
            continue
        start, end = a + m.end(), b - 3
        body = source[start:end]
        problems += [f"{path.relative_to(ROOT)}:{const.lineno}: {span} is followed by a letter: "
                     "reword (reST ends inline markup only before a space or punctuation)"
                     for span in unended_spans(body)]
        new = rewrite(body)
        if new != body:
            edits.append((start, end, new))
    new_source = source
    for start, end, new in sorted(edits, reverse=True):
        new_source = new_source[:start] + new + new_source[end:]
    return source, new_source, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a docstring needs rewriting")
    parser.add_argument("paths", nargs="*", type=Path, default=[ROOT / "ptxdsl"])
    args = parser.parse_args(argv)
    files = sorted(f for p in args.paths for f in ([p] if p.is_file() else p.rglob("*.py")))
    changed, problems = [], []
    for f in files:
        old, new, probs = process(f.resolve())
        problems += probs
        if new != old:
            changed.append(f)
            if not args.check:
                f.write_text(new)
    for f in changed:
        print(("needs rewriting: " if args.check else "rewrote: ") + str(f))
    for p in problems:
        print(p)
    return 1 if problems or (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
