"""Build switches for the C core and the Cython layer.

CFGMASK_DEBUG=1     -O0 -g, Cython bounds checks on
CFGMASK_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer (run Python with
                    LD_PRELOAD=$(gcc -print-file-name=libasan.so))
CFGMASK_TSAN=1      ThreadSanitizer
"""

import os
from glob import glob

from Cython.Build import cythonize
from setuptools import Extension, setup

debug = os.environ.get("CFGMASK_DEBUG") == "1"
sanitize = os.environ.get("CFGMASK_SANITIZE") == "1"
tsan = os.environ.get("CFGMASK_TSAN") == "1"

cflags = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pthread", "-fno-strict-aliasing"]
cflags += ["-O0", "-g"] if debug else ["-O3", "-g0"]
ldflags = ["-pthread"]
if sanitize:
    cflags += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"]
    ldflags += ["-fsanitize=address,undefined"]
if tsan:
    cflags += ["-fsanitize=thread", "-O1", "-g"]
    ldflags += ["-fsanitize=thread"]

# The C core is built as its own static library so that -Werror applies to it
# and not to the C that Cython generates.
c_core = (
    "cfgmask_core",
    {
        "sources": sorted(glob("csrc/*.c")),
        "include_dirs": ["csrc"],
        "cflags": cflags + ["-fPIC"],
        # every object depends on every header: without it an edit to a header alone left the
        # objects built from the old one in place (build_clib compares each .o with its .c only)
        "obj_deps": {"": sorted(glob("csrc/*.h"))},
    },
)

core = Extension(
    "cfgmask._core",
    sources=["cfgmask/_core.pyx"],
    include_dirs=["csrc"],
    libraries=["cfgmask_core"],
    extra_compile_args=[f for f in cflags if f != "-Werror"],
    extra_link_args=ldflags,
)

# The compiler's loops over the IR (cfgmask/compile/encode.py): Python objects only, no C core
dag = Extension(
    "cfgmask.compile._dag",
    sources=["cfgmask/compile/_dag.pyx"],
    extra_compile_args=[f for f in cflags if f != "-Werror"],
    extra_link_args=ldflags,
)

# The IR's node types (cfgmask/ir.py re-exports them): Python objects only, no C core
ir_nodes = Extension(
    "cfgmask._ir",
    sources=["cfgmask/_ir.pyx"],
    extra_compile_args=[f for f in cflags if f != "-Werror"],
    extra_link_args=ldflags,
)

# The walk of the JSON Schema front end's well-formedness check (wellformed.py): Python objects only
wellformed = Extension(
    "cfgmask.frontends.json_schema._wellformed",
    sources=["cfgmask/frontends/json_schema/_wellformed.pyx"],
    extra_compile_args=[f for f in cflags if f != "-Werror"],
    extra_link_args=ldflags,
)

setup(
    libraries=[c_core],
    ext_modules=cythonize(
        [core, dag, ir_nodes, wellformed],
        compiler_directives={
            "language_level": 3,
            "boundscheck": debug,
            "wraparound": False,
            "initializedcheck": debug,
        },
    ),
)
