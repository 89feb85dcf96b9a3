"""cfgmask/_core.pxd declares what csrc/cfgmask.h declares: the same cm_* functions, enum
constants, types and struct fields.

Both files are parsed at test time, so the check follows whatever the header holds: a
function added to (or dropped from) one side only fails here, not at a confusing link or
Cython error later.  The header may #include other headers of csrc/ (they are read too).
Offline; needs no compiler.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "csrc" / "cfgmask.h"
PXD = ROOT / "cfgmask" / "_core.pxd"


@dataclass
class Decls:
    functions: set[str] = field(default_factory=set)
    enumerators: set[str] = field(default_factory=set)  # enum members, named enums or not
    macros: set[str] = field(default_factory=set)  # object-like #defines (C only)
    types: set[str] = field(default_factory=set)  # typedef names, struct and enum tags
    fields: dict[str, list[str]] = field(default_factory=dict)  # struct -> its fields, in order


def _public(name: str) -> bool:
    return name.lower().startswith("cm_")


def _declarator_names(decl: str) -> list[str]:
    """`const uint8_t *lo, *hi` -> [lo, hi]; `uint16_t class_lo[257]` -> [class_lo];
    `int (*fn)(void *)` -> [fn]."""
    decl = re.sub(r"\[[^\]]*\]", "", decl).strip()
    pointer = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)
    if pointer:
        return [pointer.group(1)]
    names = []
    for part in decl.split(","):
        idents = re.findall(r"[A-Za-z_]\w*", part)
        if idents:
            names.append(idents[-1])
    return names


def _call_name(decl: str) -> str | None:
    """The name a declaration declares when it is a function: the identifier before its
    parameter list (`cm_dfa_out *cm_x(...)` -> cm_x)."""
    m = re.match(r"[^(]*?\b([A-Za-z_]\w*)\s*\(", decl)
    return m.group(1) if m and not re.match(r"[^(]*\(\s*\*", decl) else None


# ---- C ----------------------------------------------------------------------------------


def _strip_c_comments(text: str) -> str:
    """Comments become a space (string literals in a header are only #include names)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _preprocess(text: str, path: Path, out: Decls, seen: set[Path]) -> str:
    """Drop directives (after reading #define names and following local #includes) and the
    C++-only blocks (`extern "C" {` ... `}`)."""
    lines = text.replace("\\\n", " ").split("\n")
    kept: list[str] = []
    skip: list[bool] = []  # one per open #if: whether its current branch is C++-only
    for line in lines:
        d = re.match(r"\s*#\s*(\w+)\s*(.*)", line)
        if not d:
            if not any(skip):
                kept.append(line)
            continue
        word, rest = d.group(1), d.group(2).strip()
        if word in ("if", "ifdef", "ifndef"):
            skip.append(word == "ifdef" and rest == "__cplusplus" or rest == "defined(__cplusplus)")
        elif word in ("else", "elif") and skip:
            skip[-1] = False
        elif word == "endif" and skip:
            skip.pop()
        elif any(skip):
            continue
        elif word == "define":
            m = re.match(r"([A-Za-z_]\w*)\b(?!\()", rest)  # not a function-like macro
            if m and _public(m.group(1)):
                out.macros.add(m.group(1))
        elif word == "include":
            m = re.match(r'"([^"]+)"', rest)
            if m and (path.parent / m.group(1)).is_file():
                _read_c(path.parent / m.group(1), out, seen)
    return "\n".join(kept)


def _top_level(text: str) -> list[str]:
    """Top-level declarations: split at `;` outside braces, and after a function body."""
    stmts, start, depth = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            head = text[start : text.find("{", start)]
            if depth == 0 and head.rstrip().endswith(")"):  # a function defined in the header
                stmts.append(text[start : i + 1])
                start = i + 1
        elif ch == ";" and depth == 0:
            stmts.append(text[start:i])
            start = i + 1
    return [" ".join(s.split()) for s in stmts if s.strip()]


def _c_declaration(stmt: str, out: Decls) -> None:
    body = re.search(r"\{(.*)\}", stmt)
    head = stmt[: body.start()] if body else stmt
    tags = re.findall(r"\b(?:struct|enum|union)\s+([A-Za-z_]\w*)", head)
    if re.match(r"(typedef\s+)?enum\b", stmt):
        out.types.update(t for t in tags if _public(t))
        if body:
            for item in body.group(1).split(","):
                m = re.match(r"\s*([A-Za-z_]\w*)", item)
                if m:
                    out.enumerators.add(m.group(1))
        return
    if re.match(r"(typedef\s+)?(struct|union)\b", stmt):
        # `typedef struct tag {...} name` or `typedef struct tag name` (opaque)
        rest = stmt[body.end() :] if body else re.sub(r"^typedef\s+(struct|union)\s+\w+", "", stmt)
        names = tags + (_declarator_names(rest) if stmt.startswith("typedef") else [])
        for name in filter(_public, names):
            out.types.add(name)
            if body:
                members = [m for f in body.group(1).split(";") for m in _declarator_names(f)]
                out.fields[name] = members
        return
    if stmt.startswith("typedef"):
        out.types.update(n for n in _declarator_names(stmt[len("typedef") :]) if _public(n))
        return
    name = _call_name(head)
    if name and _public(name):
        out.functions.add(name)


def _read_c(path: Path, out: Decls, seen: set[Path]) -> Decls:
    if path in seen:
        return out
    seen.add(path)
    text = _preprocess(_strip_c_comments(path.read_text()), path, out, seen)
    for stmt in _top_level(text):
        _c_declaration(stmt, out)
    return out


def parse_header(path: Path) -> Decls:
    return _read_c(path, Decls(), set())


# ---- Cython -------------------------------------------------------------------------------


def _extern_blocks(text: str, header: str) -> list[list[str]]:
    """The bodies (lines, comments stripped, dedented) of `cdef extern from "<header>"` blocks."""
    lines = [re.sub(r"#.*", "", line).rstrip() for line in text.split("\n")]
    blocks = []
    for i, line in enumerate(lines):
        m = re.match(r"(\s*)cdef\s+extern\s+from\s+[\"']([^\"']+)[\"']", line)
        if not m or Path(m.group(2)).name != header:
            continue
        indent, body = len(m.group(1)), []
        for inner in lines[i + 1 :]:
            if inner.strip() and len(inner) - len(inner.lstrip()) <= indent:
                break
            body.append(inner)
        width = min((len(x) - len(x.lstrip()) for x in body if x.strip()), default=0)
        blocks.append([x[width:] for x in body])
    return blocks


def _logical_lines(lines: list[str]) -> list[tuple[int, str]]:
    """(indent, text) with declarations that span lines (open parentheses) joined."""
    out: list[tuple[int, str]] = []
    pending = ""
    for line in lines:
        if not line.strip():
            continue
        if pending:
            pending += " " + line.strip()
        else:
            out.append((len(line) - len(line.lstrip()), ""))
            pending = line.strip()
        if pending.count("(") <= pending.count(")"):
            out[-1] = (out[-1][0], pending)
            pending = ""
    return out


def _pxd_block(lines: list[str], out: Decls) -> None:
    logical = _logical_lines(lines)
    i = 0
    while i < len(logical):
        indent, text = logical[i]
        members = []
        j = i + 1
        while j < len(logical) and logical[j][0] > indent:
            members.append(logical[j][1])
            j += 1
        enum = re.match(r"(?:cpdef\s+|ctypedef\s+)?enum\b\s*(\w*)\s*:\s*(.*)", text)
        struct = re.match(r"(?:ctypedef\s+|cdef\s+)?(?:packed\s+)?(struct|union)\s+(\w+)\s*:\s*(.*)", text)
        if enum:
            if _public(enum.group(1)):
                out.types.add(enum.group(1))
            items = [enum.group(2)] + members if enum.group(2) else members
            out.enumerators.update(re.match(r"\w+", x).group(0) for x in items if re.match(r"\w+", x))
        elif struct:
            out.types.add(struct.group(2))
            body = [x for x in [struct.group(3)] + members if x and x != "pass"]
            if body:
                out.fields[struct.group(2)] = [n for x in body for n in _declarator_names(x)]
        elif text.startswith("ctypedef"):
            out.types.update(n for n in _declarator_names(text[len("ctypedef") :]) if _public(n))
        else:
            name = _call_name(text)
            if name and _public(name):
                out.functions.add(name)
            elif name is None:  # a constant: `const uint32_t CM_IR_INF`
                out.enumerators.update(n for n in _declarator_names(text) if _public(n))
        i = j


def parse_pxd(path: Path, header: str) -> Decls:
    out = Decls()
    for block in _extern_blocks(path.read_text(), header):
        _pxd_block(block, out)
    return out


# ---- the tests ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def c() -> Decls:
    return parse_header(HEADER)


@pytest.fixture(scope="module")
def pxd() -> Decls:
    return parse_pxd(PXD, HEADER.name)


def test_parsers_find_something(c: Decls, pxd: Decls) -> None:
    """Guard against a parser that silently finds nothing (both sides empty compare equal)."""
    for side in (c, pxd):
        assert len(side.functions) >= 5 and "CM_OK" in side.enumerators and side.fields


def test_functions(c: Decls, pxd: Decls) -> None:
    assert not c.functions - pxd.functions, f"declared in {HEADER.name}, missing from {PXD.name}"
    assert not pxd.functions - c.functions, f"declared in {PXD.name}, not in {HEADER.name}"


def test_enum_constants(c: Decls, pxd: Decls) -> None:
    """Every enum member of the header is in the pxd; every constant of the pxd is an enum
    member or a #define of the header (macros need no mirror until Cython code uses them)."""
    c_enum = {e for e in c.enumerators if _public(e)}
    px_enum = {e for e in pxd.enumerators if _public(e)}
    assert not c_enum - px_enum, f"enum members missing from {PXD.name}"
    assert not px_enum - c_enum - c.macros, f"constants of {PXD.name} not in {HEADER.name}"


def test_types(c: Decls, pxd: Decls) -> None:
    assert not c.types - pxd.types, f"types missing from {PXD.name}"
    assert not pxd.types - c.types, f"types in {PXD.name}, not in {HEADER.name}"


def test_struct_fields(c: Decls, pxd: Decls) -> None:
    """Structs the pxd spells out have the header's fields, in the header's order (an opaque
    `pass` in the pxd is fine)."""
    for name, fields in pxd.fields.items():
        assert name in c.fields, f"{name}: a struct with fields in {PXD.name}, opaque or absent in C"
        assert fields == c.fields[name], name


# ---- the parsers on what they must survive --------------------------------------------------


def test_header_parser_edge_cases(tmp_path: Path) -> None:
    (tmp_path / "sub.h").write_text("int cm_sub_fn(void);\n#define CM_SUB_MAX 4\n")
    (tmp_path / "main.h").write_text(
        """/* int cm_commented_out(void); */
#ifndef MAIN_H
#define MAIN_H
#include <stdint.h>
#include "sub.h"
#ifdef __cplusplus
extern "C" {
int cm_cplusplus_only(void);
#endif
enum cm_e { CM_A = 0, CM_B = -1, /* CM_C */
            CM_D = 1 << 2 };
enum { CM_X = 1 };  // int cm_line_comment(void);
typedef struct cm_s { uint32_t a, b; const uint8_t *lo, *hi; uint16_t t[257];
                      int (*cb)(void *); } cm_s;
typedef struct cm_opaque cm_opaque;
typedef int (*cm_callback)(void *ctx, size_t n);
cm_s *cm_multi_line(const cm_s *s,
                    size_t n,
                    int (*f)(int));
static inline int cm_inline(int x) { if (x) { return 1; } return 0; }
void cm_after_inline(void);
#ifdef __cplusplus
}
#endif
#endif
"""
    )
    d = parse_header(tmp_path / "main.h")
    assert d.functions == {"cm_sub_fn", "cm_multi_line", "cm_inline", "cm_after_inline"}
    assert d.enumerators == {"CM_A", "CM_B", "CM_D", "CM_X"}
    assert d.macros == {"CM_SUB_MAX"}
    assert d.types == {"cm_e", "cm_s", "cm_opaque", "cm_callback"}
    assert d.fields == {"cm_s": ["a", "b", "lo", "hi", "t", "cb"]}


def test_pxd_parser_edge_cases(tmp_path: Path) -> None:
    (tmp_path / "x.pxd").write_text(
        """from libc.stdint cimport uint32_t

cdef extern from "other.h":
    int cm_not_this_header()

cdef extern from "main.h" nogil:
    enum cm_e:
        CM_A
        CM_B  # a comment
    enum: CM_X
    const uint32_t CM_SUB_MAX
    ctypedef struct cm_opaque:
        pass
    ctypedef struct cm_s:
        uint32_t a, b
        const uint8_t *lo, *hi
        uint16_t t[257]
    ctypedef int (*cm_callback)(void *ctx, size_t n)
    # int cm_commented_out()
    cm_s *cm_multi_line(const cm_s *s,
                        size_t n) except -1
    int cm_after(int x) noexcept

cdef int not_extern()
"""
    )
    d = parse_pxd(tmp_path / "x.pxd", "main.h")
    assert d.functions == {"cm_multi_line", "cm_after"}
    assert d.enumerators == {"CM_A", "CM_B", "CM_X", "CM_SUB_MAX"}
    assert d.types == {"cm_e", "cm_opaque", "cm_s", "cm_callback"}
    assert d.fields == {"cm_s": ["a", "b", "lo", "hi", "t"]}
