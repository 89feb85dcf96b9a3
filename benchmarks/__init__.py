"""cfgmask's benchmarks beside xgrammar and llguidance (see README.md here).

Importing the package sets every thread knob we know of to one thread, before any benchmark
module imports numpy: OpenBLAS reads its knob when it loads, and an idle pool thread spinning
after a matrix product would steal a core from the timed engine on a 2-core machine.
"""

import os

THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "RAYON_NUM_THREADS",
    "TVM_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)

for _var in THREAD_VARS:
    os.environ[_var] = "1"
