from typing import Any

from .. import ir

KINDS: tuple[int, ...]

class Deep(Exception): ...
class TooBig(Exception): ...

def intern(sess: Any, root: ir.Expr) -> int: ...
def intern_all(sess: Any, rules: dict[str, ir.Expr]) -> dict[str, int]: ...
def utf8_code(ranges: tuple[tuple[int, int], ...]) -> tuple[int, ...]: ...

class Emitting:
    def __init__(self, sess: Any) -> None: ...
    def emit(self, root: int) -> int: ...

def plan(
    sess: Any,
    graph: dict[str, frozenset[str]],
    cids: dict[str, int],
    uses: dict[str, int],
    start: str,
    outlined: set[str],
    shared: int,
    single: int,
    lim: Any,
) -> list[tuple[list[str], int, tuple[Any, ...]]]: ...
def collect(
    plan: list[tuple[list[str], int, tuple[Any, ...]]],
    args: list[tuple[Any, ...]],
    built: list[Any],
    ordered: list[str],
    cache: Any,
    dfa_type: Any,
) -> dict[str, tuple[Any, Any]]: ...
def call_graph(
    sess: Any, rules: dict[str, ir.Expr]
) -> tuple[dict[str, int], dict[str, frozenset[str]], dict[str, int]]: ...
def finish_args(built: dict[str, tuple[Any, Any]], sess: Any) -> tuple[list[Any], bytes, int]: ...
def root_facts(interner: Any, roots: Any) -> tuple[int, int, int]: ...
