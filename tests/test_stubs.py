"""cfgmask/_core.pyi names exactly what the compiled extension defines.

Both sides are read at test time (the module with dir() and inspect, the stub with ast), so a
function, class, method or property added to or removed from _core.pyx without the same change
in the stub fails here, whatever the API looks like by then.  Offline.
"""

from __future__ import annotations

import ast
import inspect
import types
from pathlib import Path

import pytest

import cfgmask
from cfgmask import _core

# beside the package's modules (an editable install may keep the compiled module elsewhere)
STUB = Path(cfgmask.__file__).with_name("_core.pyi")

# What Cython or Python put on every extension class or module: not API
_MACHINERY = {
    "__new__",
    "__init__",
    "__doc__",
    "__module__",
    "__dict__",
    "__weakref__",
    "__qualname__",
    "__annotations__",
    "__reduce__",
    "__setstate__",
    "__reduce_cython__",
    "__setstate_cython__",
    "__pyx_vtable__",
    "__test__",
}


def _public(name: str) -> bool:
    return not name.startswith("_")


def _api_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and name not in _MACHINERY


# ---- the stub ----------------------------------------------------------------------------


def _stub_defs(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """The names a stub body defines (functions, classes, annotated or assigned names)."""
    out: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, ast.Assign):
            out.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
    return out


@pytest.fixture(scope="module")
def stub() -> dict[str, ast.AST]:
    assert STUB.is_file(), f"no stub in the package: {STUB}"
    return _stub_defs(ast.parse(STUB.read_text(), filename=str(STUB)).body)


def _stub_module_names(stub: dict[str, ast.AST]) -> set[str]:
    return {n for n in stub if _public(n)}


def _stub_class_names(node: ast.ClassDef) -> set[str]:
    return {n for n in _stub_defs(node.body) if _public(n) or _api_dunder(n)}


def _stub_params(node: ast.FunctionDef) -> list[str]:
    a = node.args
    names = [p.arg for p in a.posonlyargs + a.args]
    names += [f"*{a.vararg.arg}"] if a.vararg else []
    names += [p.arg for p in a.kwonlyargs]
    names += [f"**{a.kwarg.arg}"] if a.kwarg else []
    return names


# ---- the compiled module -------------------------------------------------------------------


def _defined_here(obj: object) -> bool:
    """Defined by _core itself: not a module, nor a class or function imported from elsewhere
    (the error classes _core raises live in cfgmask.errors)."""
    if isinstance(obj, types.ModuleType):
        return False
    if isinstance(obj, type) or callable(obj):
        return getattr(obj, "__module__", None) == _core.__name__
    return True  # a constant


def _module_names() -> set[str]:
    return {n for n in dir(_core) if _public(n) and _defined_here(getattr(_core, n))}


def _classes() -> list[str]:
    return sorted(n for n in _module_names() if isinstance(getattr(_core, n), type))


def _class_names(cls: type) -> set[str]:
    """Public attributes (methods, properties, readonly fields, inherited from another
    _core class too) and the protocol dunders the class itself defines (__len__, ...)."""
    names = {n for n in dir(cls) if _public(n)}
    for klass in cls.__mro__:
        if klass.__module__ == _core.__name__:
            names |= {n for n in vars(klass) if _api_dunder(n)}
    return names


def _runtime_params(obj: object) -> list[str] | None:
    try:
        sig = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # not introspectable (slot wrappers, __cinit__)
        return None
    prefix = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    return [prefix.get(p.kind, "") + p.name for p in sig.parameters.values()]


# ---- the tests -----------------------------------------------------------------------------


def test_module_names(stub: dict[str, ast.AST]) -> None:
    runtime, stubbed = _module_names(), _stub_module_names(stub)
    assert runtime, "found nothing in cfgmask._core"
    assert not runtime - stubbed, f"defined by _core but missing from {STUB.name}"
    assert not stubbed - runtime, f"in {STUB.name} but not defined by _core"


def test_classes_are_classes(stub: dict[str, ast.AST]) -> None:
    for name in _module_names():
        is_class = isinstance(getattr(_core, name), type)
        assert isinstance(stub.get(name), ast.ClassDef) == is_class, name


@pytest.mark.parametrize("name", _classes())
def test_class_members(stub: dict[str, ast.AST], name: str) -> None:
    node = stub.get(name)
    assert isinstance(node, ast.ClassDef), f"{name}: no class in {STUB.name}"
    runtime, stubbed = _class_names(getattr(_core, name)), _stub_class_names(node)
    assert not runtime - stubbed, f"{name}: members missing from {STUB.name}"
    assert not stubbed - runtime, f"{name}: members in {STUB.name} that _core lacks"


def _callables(stub: dict[str, ast.AST]) -> list[tuple[str, object, ast.FunctionDef]]:
    """(qualified name, runtime object, stub def) of every function and method both name."""
    out = []
    for name, node in stub.items():
        obj = getattr(_core, name, None)
        if isinstance(node, ast.FunctionDef) and obj is not None:
            out.append((name, obj, node))
        elif isinstance(node, ast.ClassDef) and isinstance(obj, type):
            for mname, mnode in _stub_defs(node.body).items():
                is_property = isinstance(mnode, ast.FunctionDef) and any(
                    isinstance(d, ast.Name) and d.id == "property" for d in mnode.decorator_list
                )
                # constructors: __cinit__'s parameters cannot be read at run time
                constructor = mname in ("__init__", "__new__")
                if (
                    isinstance(mnode, ast.FunctionDef)
                    and not (is_property or constructor)
                    and hasattr(obj, mname)
                ):
                    out.append((f"{name}.{mname}", getattr(obj, mname), mnode))
    return out


def test_parameters(stub: dict[str, ast.AST]) -> None:
    """Where the runtime signature can be read (Cython's binding functions), the stub's
    parameter names are the same, in the same order."""
    checked = 0
    for qualname, obj, node in _callables(stub):
        runtime = _runtime_params(obj)
        if runtime is None:
            continue
        stubbed = _stub_params(node)
        if "." in qualname and stubbed[:1] == ["self"] and runtime[:1] != ["self"]:
            stubbed = stubbed[1:]
        assert stubbed == runtime, qualname
        checked += 1
    assert checked, "no signature could be read: the check compares nothing"
