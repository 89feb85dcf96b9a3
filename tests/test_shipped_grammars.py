"""Every grammar in grammars/ parses, opens with a comment, and accepts and rejects
what it is for (judged by the reference matcher)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import cfgmask
from cfgmask import ir
from cfgmask.frontends.gbnf import parse_gbnf

from .helpers import check

GRAMMARS = Path(__file__).parent.parent / "grammars"
SHIPPED_GBNF = sorted(GRAMMARS.glob("*.gbnf"))


def load(name: str) -> ir.Grammar:
    return parse_gbnf((GRAMMARS / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", SHIPPED_GBNF, ids=lambda p: p.name)
def test_parses_and_says_what_it_is_for(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# ")
    g = parse_gbnf(text)
    assert g.start == "root"
    assert "redefined_rules" not in g.meta


@pytest.mark.parametrize("path", SHIPPED_GBNF, ids=lambda p: p.name)
def test_compiles(path: Path) -> None:
    vocab = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)])
    cfgmask.compile(cfgmask.Grammar.from_gbnf(path.read_text(encoding="utf-8")), vocab)


def test_expected_grammars_are_shipped() -> None:
    assert {"json.gbnf", "arithmetic.gbnf", "c.gbnf", "sql.gbnf"} <= {p.name for p in SHIPPED_GBNF}


# -- json.gbnf ----------------------------------------------------------------------------


def _document(rng: random.Random, depth: int) -> Any:
    """A typical JSON value nested up to ``depth`` levels."""
    scalars: list[Any] = [0, -12, 3.25, 1e-05, -2.5e100, True, False, None, "", "text", 'q"\\/\n\t\x01é😀']
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(scalars)
    if rng.random() < 0.5:
        return [_document(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {f"k{i}": _document(rng, depth - 1) for i in range(rng.randint(0, 3))}


def _nested(depth: int) -> Any:
    doc: Any = {"leaf": [1, "two", None]}
    for i in range(depth - 1):
        doc = {"level": i, "child": doc} if i % 2 else [doc, i]
    return doc


JSON_DOCUMENTS = [_document(random.Random(seed), 4) for seed in range(6)] + [_nested(10), {}, [], "", 0]


@pytest.mark.parametrize("doc", JSON_DOCUMENTS, ids=lambda d: json.dumps(d)[:30])
def test_json_accepts_json_dumps(doc: Any) -> None:
    check(
        load("json.gbnf"),
        accepts=[
            json.dumps(doc),
            json.dumps(doc, indent=2),
            json.dumps(doc, separators=(",", ":")),
            json.dumps(doc, ensure_ascii=False),
        ],
    )


def test_json_accepts_and_rejects() -> None:
    check(
        load("json.gbnf"),
        accepts=[
            '{"a":1}',
            "[1, 2.5e+3, -0.0, true, false, null]",
            '{ "a" : [ ] , "b" : { } }',
            '"\\u00e9\\ud83d\\ude00"',
            '{\n\t\t"tabs": 1\n}',
            "[\n" + " " * 40 + "1\n]",
        ],
        rejects=[
            "",
            " {}",
            "{} ",
            "{'a': 1}",
            '{"a": 1,}',
            "[1, 2,]",
            "01",
            "1.",
            ".5",
            "+1",
            "NaN",
            "Infinity",
            '"\x01"',
            '"\\x41"',
            '"unterminated',
            "[1  ,2]",
            "[\n\n1]",
            "[\n" + " " * 41 + "1\n]",
        ],
    )


# -- arithmetic.gbnf ----------------------------------------------------------------------


def test_arithmetic_accepts_and_rejects() -> None:
    check(
        load("arithmetic.gbnf"),
        accepts=[
            "1",
            "1 + 2 * (3 - 4) / 5",
            "-x^2",
            "2^-1",
            "3.14*r^2",
            "sqrt(x) + max(a, b) % 7",
            " ( ( 1 ) ) ",
            "1e10 - .5",
            "f()",
        ],
        rejects=["", "1 +", "(1", "1)", "1 2", "* 3", "1 ++ 2", "x ^", "1\n+ 2", "a(,)"],
    )


# -- c.gbnf -------------------------------------------------------------------------------

C_PROGRAM = """\
#include <stdio.h>

struct point { int x; int y; };
static const char *names[3] = {"a", "b", "c"};
typedef unsigned long size_t;

int add(int a, int b);

/* sum the first n squares */
long squares(unsigned int n) {
    long total = 0, i;
    for (i = 0; i < n; i++) {
        total += i * i;  // square
    }
    return total;
}

int main(int argc, char **argv) {
    struct point p = {1, 2};
    int *q = &p.x;
    if (argc > 1 && argv[1][0] == '-') return -1;
    else if (!q) { return 1; } else p.y = (int) sizeof(struct point);
    while (--argc) { printf("%s\\n", argv[argc]); }
    do { p.x <<= 1; } while (p.x < 100);
    switch (p.x) { case 1: break; default: p.x = p.x > 3 ? 3 : p.x; }
    return 0;
}
"""


def test_c_accepts_and_rejects() -> None:
    check(
        load("c.gbnf"),
        accepts=[
            "void f(int a ) {}",
            "void f( int a ){ }",
            "int main(void) { return 0; }",
            "int x;",
            "int*p;",
            "char *s = \"hi\", c = 'x';",
            "double f(double x) { return x * 2.5e-3; }",
            "int g(int n) { if (n) return g(n - 1); else return 0; }",
            "int f(int n) { for (int i = 0; i < n; ++i) { n -= i; } return(n)*2; }",
            "void g(void) { x->y.z[3] = f(a, b)[1]; }",
            "enum color { RED, GREEN = 2, };",
            "",
            C_PROGRAM,
            "void f() {" + "\n" * 100 + "}",
        ],
        rejects=[
            "void f(int a {}",
            "intx;",
            "int x",
            "int main() { return 0 }",
            "void f() { if x { } }",
            "int 1x;",
            "int f() { x = ; }",
            "void f() { /* unclosed }",
            "int main() { return 0; } }",
        ],
    )


# -- sql.gbnf -----------------------------------------------------------------------------


def test_sql_accepts_and_rejects() -> None:
    check(
        load("sql.gbnf"),
        accepts=[
            "SELECT a FROM b WHERE a = 1",
            "select * from t;",
            (
                "SELECT DISTINCT name, COUNT(*) AS n FROM users u JOIN orders o ON u.id = o.user_id "
                "GROUP BY name HAVING COUNT(*) > 2 ORDER BY n DESC LIMIT 10 OFFSET 5"
            ),
            "SELECT a FROM t WHERE b IN (SELECT b FROM s) AND c LIKE 'x%' OR d IS NOT NULL",
            "SELECT a FROM t WHERE x BETWEEN 1 AND 10 UNION ALL SELECT a FROM s",
            "SELECT CASE WHEN a > 0 THEN 'pos' ELSE 'neg' END AS sign FROM t",
            "INSERT INTO t (a, b) VALUES (1, 'it''s'), (2, NULL)",
            "INSERT INTO t SELECT * FROM s",
            "UPDATE t SET a = a + 1, b = 'x' WHERE id = 3",
            "DELETE FROM t WHERE id = 3;",
            (
                "SELECT T1.name FROM head AS T1 JOIN management AS T2 ON T1.head_id = T2.head_id "
                "WHERE T2.temporary_acting = 'Yes'"
            ),
            "SELECT a FROM t WHERE a NOT IN (1, 2, 3) AND EXISTS (SELECT 1 FROM s)",
            "SELECT\n  a,\n  b\nFROM\n  t\nWHERE\n  a <> 2",
        ],
        rejects=[
            "",
            "SELECT",
            "SELECT FROM b",
            "SELECT a FROM b WHERE a =",
            "SELECTa FROM b",
            "SELECT a FROMb",
            "SELECT a b FROM t",
            "INSERT INTO t VALUES",
            "UPDATE t a = 1",
            "DELETE t",
            "DROP TABLE t",
            "SELECT a FROM b; SELECT c FROM d",
        ],
    )
