"""Hypothesis profiles: "ci" (small, reproducible) when CI is set, "dev" otherwise.

Select another with ``--hypothesis-profile=NAME``; "thorough" runs many more examples.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_BASE = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

settings.register_profile("ci", _BASE, max_examples=25, derandomize=True, print_blob=True)
settings.register_profile("dev", _BASE, max_examples=40)
settings.register_profile("thorough", _BASE, max_examples=1000)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
