"""Hypothesis profiles: "ci" (small, reproducible) when CI is set, "dev" otherwise.

Select another with ``--hypothesis-profile=NAME``; "thorough" runs many more examples.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

_BASE = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

settings.register_profile("ci", _BASE, max_examples=25, derandomize=True, print_blob=True)
settings.register_profile("dev", _BASE, max_examples=40)
settings.register_profile("thorough", _BASE, max_examples=1000)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


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
