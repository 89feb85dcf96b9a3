"""Documents replayed through each grammar: realistic text of the kind a model would be asked
to write, every one accepted by the grammar (``bench_gbnf`` checks that with every engine and
reports any that an engine rejects)."""

from __future__ import annotations

import json

# ---- JSON: json.dumps of varied documents, compact (", " / ": ", and "," / ":") and indented

_JSON_VALUES: list[object] = [
    {
        "id": 48213,
        "name": "Ada Lovelace",
        "email": "ada@example.org",
        "active": True,
        "roles": ["admin", "editor"],
        "score": 97.25,
        "manager": None,
    },
    {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "geometry": {"type": "Point", "coordinates": [-122.4194, 37.7749]},
                "properties": {"name": "San Francisco", "population": 808437, "elevation_m": 16},
            },
            {
                "type": "Feature",
                "geometry": {"type": "Point", "coordinates": [2.3522, 48.8566]},
                "properties": {"name": "Paris", "population": 2102650, "elevation_m": 35},
            },
        ],
    },
    {
        "order_id": "ORD-2024-00917",
        "created_at": "2024-11-03T14:22:05Z",
        "customer": {"id": 77, "name": "José Álvarez", "tier": "gold"},
        "items": [
            {"sku": "KB-104", "description": "Mechanical keyboard", "qty": 1, "unit_price": 129.99},
            {"sku": "MS-22", "description": "Wireless mouse", "qty": 2, "unit_price": 24.5},
            {"sku": "CB-USB-C", "description": "USB-C cable, 2 m", "qty": 3, "unit_price": 9.0},
        ],
        "shipping": {"method": "express", "cost": 12.0, "address": "Calle Mayor 5, 28013 Madrid"},
        "total": 225.49,
        "paid": False,
    },
    {
        "model": "llama-3-8b-instruct",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant.\nAnswer briefly."},
            {"role": "user", "content": 'What\'s the capital of Japan? Reply in "JSON".'},
            {"role": "assistant", "content": '{"capital": "Tokyo"}'},
        ],
        "temperature": 0.7,
        "top_p": 0.95,
        "max_tokens": 256,
        "stop": ["<|eot_id|>"],
        "stream": False,
    },
    {
        "name": "cfgmask-demo",
        "version": "1.4.0-rc.2",
        "dependencies": {"numpy": ">=1.24", "lark": ">=1.1"},
        "scripts": {"test": "pytest -q tests/", "bench": "python -m benchmarks.bench_gbnf"},
        "keywords": [],
        "private": True,
        "config": {},
    },
    {
        "matrix": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0.5, -0.25, 1e-05, 1]],
        "eigenvalues": [1.0, 1.0, 1.0, 1.0],
        "determinant": 1,
        "tolerance": 1.5e-12,
        "labels": ["x", "y", "z", "w"],
    },
    {
        "title": "Über die Elektrodynamik bewegter Körper",
        "author": "A. Einstein",
        "year": 1905,
        "journal": "Annalen der Physik",
        "translations": {
            "ja": "動いている物体の電気力学",
            "ru": "К электродинамике движущихся тел",
            "el": "Περί",
        },
        "tags": ["physics", "relativity", "😀 emoji"],
        "pages": [891, 921],
    },
    {
        "log": [
            {"ts": 1718035200123, "level": "INFO", "msg": "server started on :8080", "pid": 4121},
            {
                "ts": 1718035201877,
                "level": "WARN",
                "msg": "slow query (812 ms): SELECT * FROM t",
                "pid": 4121,
            },
            {
                "ts": 1718035203002,
                "level": "ERROR",
                "msg": "path C:\\temp\\x.txt not found\ttab",
                "pid": 4122,
            },
        ],
        "count": 3,
        "truncated": False,
    },
    {
        "weather": {
            "location": {"lat": 51.5072, "lon": -0.1276, "city": "London"},
            "current": {"temp_c": 14.3, "humidity": 0.82, "wind_kph": 19, "condition": "Light rain"},
            "forecast": [
                {"day": "Mon", "min": 9, "max": 15, "rain_mm": 2.4},
                {"day": "Tue", "min": 8, "max": 13, "rain_mm": 0},
                {"day": "Wed", "min": 10, "max": 17, "rain_mm": 0.6},
            ],
        }
    },
    [
        {"q": "2+2", "a": 4},
        {"q": "sqrt(2)", "a": 1.4142135623730951},
        {"q": "pi", "a": 3.141592653589793},
        {"q": "-e", "a": -2.718281828459045},
        {"q": "big", "a": 12345678901234567890},
    ],
]


def json_documents() -> list[str]:
    """Twelve documents: compact with the default separators, compact with "," / ":",
    indented by 2 and by 4, some with non-ASCII text kept as UTF-8."""
    out: list[str] = []
    for i, v in enumerate(_JSON_VALUES):
        style = i % 4
        if style == 0:
            out.append(json.dumps(v))
        elif style == 1:
            out.append(json.dumps(v, indent=2, ensure_ascii=False))
        elif style == 2:
            out.append(json.dumps(v, separators=(",", ":"), ensure_ascii=False))
        else:
            out.append(json.dumps(v, indent=4))
    out.append(json.dumps(_JSON_VALUES[6], indent=2))  # the same text \u-escaped
    out.append(json.dumps(_JSON_VALUES[2]))
    return out


# ---- C: small programs of the kind the grammar's subset covers -------------------------------

C_DOCUMENTS: list[str] = [
    """#include <stdio.h>

int main(void) {
    printf("Hello, world!\\n");
    return 0;
}
""",
    """#include <stdlib.h>
#include <string.h>

/* Reverse a string in place. */
void reverse(char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n / 2; i++) {
        char t = s[i];
        s[i] = s[n - 1 - i];
        s[n - 1 - i] = t;
    }
}
""",
    """struct point {
    int x;
    int y;
};

typedef struct point point_t;

static int dist2(const point_t *a, const point_t *b) {
    int dx = a->x - b->x, dy = a->y - b->y;
    return dx * dx + dy * dy;
}

int closest(const point_t *pts, int n, point_t q) {
    int best = -1;
    long best_d = 0x7fffffffL;
    for (int i = 0; i < n; ++i) {
        int d = dist2(&pts[i], &q);
        if (best < 0 || d < best_d) {
            best = i;
            best_d = d;
        }
    }
    return best;
}
""",
    """enum color { RED, GREEN = 4, BLUE };

const char *color_name(enum color c) {
    switch (c) {
    case RED:
        return "red";
    case GREEN:
        return "green";
    default:
        break;
    }
    return "blue";
}
""",
    """#define MAX 100

unsigned long fib(unsigned int n) {
    unsigned long a = 0, b = 1;
    while (n-- > 0) {
        unsigned long t = a + b;
        a = b;
        b = t;
    }
    return a;
}

int table[MAX];

void fill(void) {
    int i = 0;
    do {
        table[i] = (int)(fib(i) % 1000u);
        i += 1;
    } while (i < MAX && table[i - 1] >= 0);
}
""",
    """double mean(const double *xs, int n) {
    double s = 0.0;
    int i;
    if (n <= 0) return 0.0;
    for (i = 0; i < n; i++) s += xs[i];
    return s / (double)n; // not n - 1
}

int is_prime(int n) {
    if (n < 2) return 0;
    for (int d = 2; d * d <= n; d++)
        if (n % d == 0)
            return 0;
    return 1;
}

int count_bits(unsigned int x) { int c = 0; while (x) { c += x & 1; x >>= 1; } return c; }
""",
]

# ---- arithmetic: one-line expressions ---------------------------------------------------------

ARITHMETIC_DOCUMENTS: list[str] = [
    "1 + 2 * 3",
    "(a + b) * (c - d) / 2",
    "-x ^ 2 + 3 * x - 7.5",
    "sqrt(b ^ 2 - 4 * a * c) / (2 * a)",
    "max(1, min(x, 10)) % 3",
    "3.14159 * r ^ 2",
    "1.5e-3 * velocity + .25 * accel * t ^ 2",
    "f(g(h(1), 2), 3) - -4",
    "((((1 + 2) * 3) - 4) / 5) ^ 0.5",
    "total_cost / (1 + tax_rate) * 100",
    "exp(-(x - mu) ^ 2 / (2 * sigma ^ 2)) / (sigma * sqrt(2 * pi))",
    "a*b+c*d-e/f%g^h",
]

# ---- SQL: queries of the kind the grammar's subset covers -------------------------------------

SQL_DOCUMENTS: list[str] = [
    "SELECT id, name FROM users WHERE active = 1 ORDER BY name LIMIT 10;",
    "SELECT a FROM b WHERE a = 1",
    "select count(*) as n, country from customers group by country having count(*) > 5 order by n desc",
    """SELECT o.id, c.name, SUM(i.qty * i.price) AS total
FROM orders o
JOIN customers c ON c.id = o.customer_id
LEFT JOIN order_items i ON i.order_id = o.id
WHERE o.created_at BETWEEN '2024-01-01' AND '2024-12-31'
  AND c.country IN ('ES', 'FR', 'DE')
GROUP BY o.id, c.name
ORDER BY total DESC
LIMIT 20 OFFSET 40;""",
    "INSERT INTO products (sku, name, price) "
    "VALUES ('KB-104', 'Keyboard', 129.99), ('MS-22', 'Mouse', 24.5);",
    "UPDATE accounts SET balance = balance - 100, updated_at = '2024-06-01' "
    "WHERE id = 42 AND balance >= 100;",
    "DELETE FROM sessions WHERE last_seen < '2024-01-01' OR user_id IS NULL;",
    """SELECT name FROM employees e
WHERE salary > (SELECT AVG(salary) FROM employees WHERE dept_id = e.dept_id)
  AND NOT EXISTS (SELECT 1 FROM terminations t WHERE t.emp_id = e.id)
UNION
SELECT name FROM contractors WHERE name LIKE 'A%'""",
    "SELECT CASE WHEN score >= 90 THEN 'A' WHEN score >= 80 THEN 'B' ELSE 'C' END AS grade, "
    "COUNT(DISTINCT student_id) FROM results GROUP BY 1",
]

DOCUMENTS = {
    "json": json_documents,
    "c": lambda: list(C_DOCUMENTS),
    "arithmetic": lambda: list(ARITHMETIC_DOCUMENTS),
    "sql": lambda: list(SQL_DOCUMENTS),
}
