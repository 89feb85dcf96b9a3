"""Hypothesis profiles: "ci" (small, reproducible) when CI is set, "dev" otherwise.

Select another with ``--hypothesis-profile=NAME``; "thorough" runs many more examples.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}

settings.register_profile("ci", max_examples=25, derandomize=True, print_blob=True, **_COMMON)
settings.register_profile("dev", max_examples=40, **_COMMON)
settings.register_profile("thorough", max_examples=1000, **_COMMON)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
