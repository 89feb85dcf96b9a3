"""The wheel, built and installed the way a user gets it: non-editable, into a fresh venv.

An editable install or the source tree on sys.path hides packaging mistakes (a subpackage
left out, a missing stub or py.typed, a C file not compiled in), so here the wheel is built
from a copy of the working tree (build isolation: the build-system requirements come from the
package index), installed into a new venv, and used from a directory outside the repository.
Needs pip to reach an index for the build requirements and numpy; about a minute on 2 cores,
started in the background once the tests are collected (conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "cfgmask"

# Not part of a clean checkout (build outputs, caches, local venvs; see .gitignore)
_NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "*.pyc",
    "*.so",
    "*.o",
    "_core.c",
    "_dag.c",
    "_ir.c",
    ".hypothesis",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "results",
)


def _clean_env() -> dict[str, str]:
    """The environment without what would point Python at the source tree or change the build
    (PYTHONPATH, the sanitizer preload, the build switches of setup.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "CFGMASK_", "VIRTUAL_ENV"))}
    env.pop("LD_PRELOAD", None)
    return env


def _run(cmd: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


# The wheel build, the venv and the install into it, one step after the other in a process of
# their own.  Run by _Build in the background from the end of the collection on (conftest.py),
# so that the suite's other tests run meanwhile on the second core; the fixtures wait for it.
_BUILD = r"""
import json, subprocess, sys
from pathlib import Path

work = Path(sys.argv[1])


def run(name, cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    result = {"cmd": cmd, "rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
    (work / f"{name}.json").write_text(json.dumps(result))
    if p.returncode:
        sys.exit(1)


dist, src = str(work / "dist"), str(work / "src")  # paths: a bare "src" is a name for pip
run("wheel", [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, src], work)
wheels = sorted((work / "dist").glob("*.whl"))
if len(wheels) != 1:
    sys.exit(1)
env = work / "venv" / "env"
env.parent.mkdir()
run("venv", [sys.executable, "-m", "venv", str(env)], env.parent)
run("install", [str(env / "bin" / "python"), "-m", "pip", "install", "-q", str(wheels[0])], env.parent)
"""

_BUILD_KEY = pytest.StashKey["_Build"]()


class _Build:
    """``_BUILD`` on a copy of the working tree, in a temporary directory of the session."""

    def __init__(self, config: pytest.Config) -> None:
        self.work = config._tmp_path_factory.mktemp("wheel")  # what the tmp_path_factory fixture is
        shutil.copytree(ROOT, self.work / "src", ignore=_NOT_SOURCE)
        cmd = [sys.executable, "-c", _BUILD, str(self.work)]
        self.log = self.work / "build.log"  # the script's own output (its steps' is in NAME.json)
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.work,
                env=_clean_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        config.add_cleanup(self.stop)

    def stop(self) -> None:
        if self.proc.poll() is None:  # the session ended before test_wheel.py ran: pip and gcc too
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def step(self, name: str) -> Path:
        """Waits for the build; asserts that step ``name`` ran and succeeded, as _run does."""
        self.proc.wait(timeout=1800)
        result = self.work / f"{name}.json"
        assert result.is_file(), (
            f"the build stopped before its {name} step ({self.proc.returncode}):\n{self.log.read_text()}"
        )
        r = json.loads(result.read_text())
        assert r["rc"] == 0, f"{' '.join(r['cmd'])} failed ({r['rc']}):\n{r['stdout']}\n{r['stderr']}"
        return self.work


def start_build(config: pytest.Config) -> _Build:
    """The build, started now unless it already was (conftest.py starts it once the tests are
    collected, when one of this file's is among them)."""
    if _BUILD_KEY not in config.stash:
        config.stash[_BUILD_KEY] = _Build(config)
    return config.stash[_BUILD_KEY]


@pytest.fixture(scope="module")
def wheel(request: pytest.FixtureRequest) -> Path:
    work = start_build(request.config).step("wheel")
    (whl,) = (work / "dist").glob(f"{PACKAGE}-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(wheel: Path, request: pytest.FixtureRequest) -> Path:
    build = start_build(request.config)
    build.step("venv")
    build.step("install")
    return build.work / "venv" / "env"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory from which the source tree cannot be imported."""
    assert ROOT not in tmp_path.parents
    return tmp_path


def _source_packages() -> set[str]:
    return {
        str(p.parent.relative_to(ROOT))
        for p in (ROOT / PACKAGE).rglob("__init__.py")
        if "__pycache__" not in p.parts
    }


def test_wheel_contents(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    packages = {str(Path(n).parent) for n in names if Path(n).name == "__init__.py"}
    assert packages == _source_packages()
    modules = {
        str(p.relative_to(ROOT))
        for pkg in _source_packages()
        for p in (ROOT / pkg).glob("*.py*")
        if p.suffix in (".py", ".pyi")
    }
    assert not modules - names, "modules of the source tree missing from the wheel"
    for required in ("py.typed", "_core.pyi", "frontends/json_schema/metaschemas.json"):
        assert f"{PACKAGE}/{required}" in names
    assert any(n.startswith(f"{PACKAGE}/_core.") and n.endswith(".so") for n in names), "no compiled _core"
    # the C that Cython generates is a build output (megabytes), not part of what is installed
    assert not [n for n in names if n.endswith(".c")], "generated C shipped in the wheel"


# Runs in the venv: the README's pipeline on a byte vocabulary plus a whole-prefix token.
_USE = r"""
import json, sys
import cfgmask, cfgmask._core

schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
          "additionalProperties": False}
tokens = [bytes([b]) for b in range(256)] + [b'{"n":', b"<eos>"]
vocab = cfgmask.Vocabulary.from_token_bytes(tokens, stop_token_ids=[257])
grammar = cfgmask.Grammar.from_json_schema(schema, whitespace="compact")
matcher = cfgmask.Matcher(cfgmask.compile(grammar, vocab))
mask = cfgmask.allocate_bitmask(1, vocab.size)
steps = []
for token in [256, *b"12}"]:
    matcher.fill_bitmask(mask, 0)
    allowed = [t for t in range(vocab.size) if mask[0, t // 32] >> (t % 32) & 1]
    steps.append(allowed)
    assert matcher.accept_token(token), token
matcher.fill_bitmask(mask, 0)
# a $ref into a meta-schema reads the package data
meta = cfgmask.Grammar.from_json_schema(
    {"$ref": "https://json-schema.org/draft/2020-12/meta/meta-data#/properties/deprecated"})
meta_matcher = cfgmask.Matcher(cfgmask.compile(meta, vocab))
meta_ok = [all(meta_matcher.accept_token(b) for b in b"true"), meta_matcher.is_accepting()]
json.dump({"files": [cfgmask.__file__, cfgmask._core.__file__], "first": steps[0], "meta": meta_ok,
           "last": matcher.allowed_tokens().tolist(), "accepting": matcher.is_accepting()}, sys.stdout)
"""


def test_installed_wheel_compiles_and_masks(venv: Path, outside: Path) -> None:
    proc = _run([str(venv / "bin" / "python"), "-c", _USE], cwd=outside)
    out = json.loads(proc.stdout)
    for f in out["files"]:
        assert Path(f).is_relative_to(venv), f"imported from {f}, not from the installed wheel"
    assert out["first"] == [ord("{"), 256]  # "{" or the '{"n":' token
    assert out["last"] == [257] and out["accepting"]  # only the stop token after '{"n":12}'
    assert out["meta"] == [True, True]  # the meta-schema's "deprecated": a boolean


def test_console_script(venv: Path, outside: Path) -> None:
    proc = _run([str(venv / "bin" / "cfgmask"), "--help"], cwd=outside)
    assert proc.stdout.startswith("usage: cfgmask")


_TYPED_USE = """
import cfgmask
from cfgmask._core import fill_masks

vocab = cfgmask.Vocabulary.from_token_bytes([b"a"])
reveal_type(fill_masks)
wrong: str = cfgmask.allocate_bitmask(1, vocab.size)
"""


def test_types_reach_users(venv: Path, outside: Path) -> None:
    """mypy, run on user code against the installed wheel, reads the package's own types
    (py.typed) and the extension's stub (a wrong assignment is caught; fill_masks has the
    stub's signature)."""
    (outside / "use.py").write_text(_TYPED_USE)
    cmd = [sys.executable, "-m", "mypy", "--python-executable", str(venv / "bin" / "python")]
    cmd += ["--cache-dir", str(outside / ".mypy_cache"), "--no-error-summary", "use.py"]
    proc = subprocess.run(cmd, cwd=outside, env=_clean_env(), capture_output=True, text=True, timeout=600)
    assert "missing library stubs or py.typed" not in proc.stdout, proc.stdout
    revealed = r'Revealed type is "def \(handles: (builtins\.)?list\[cfgmask\._core\.MatcherHandle\]'
    assert re.search(revealed, proc.stdout), proc.stdout
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "use.py:7: error: Incompatible types in assignment" in errors[0], proc.stdout
