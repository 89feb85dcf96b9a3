from typing import Any

QUICK_KINDS: tuple[int, ...]

def walk(root: Any, forms: dict[str, Any], types: frozenset[str], slow: Any, not_schema: Any) -> None: ...
