#!/usr/bin/env bash
# Run the test suite against a sanitizer build of the C core, in a copy of the tree
# (the in-place build and any editable install are left alone).
#
#   tests/sanitize.sh asan [pytest args]   AddressSanitizer + UndefinedBehaviorSanitizer
#   tests/sanitize.sh tsan [pytest args]   ThreadSanitizer
#
# Default pytest args: the tests that exercise the C core.  Examples:
#   tests/sanitize.sh asan                          # C-relevant subset (~10 min on 2 cores)
#   tests/sanitize.sh asan tests -x -q              # everything
#   tests/sanitize.sh tsan tests/test_threads.py    # the thread-safety test under TSan
#
# Python itself is not instrumented: the sanitizer runtime is LD_PRELOADed, so only
# csrc/ (and the Cython glue) is checked.  Leak detection is off because CPython
# keeps objects alive at exit; UBSan aborts on the first error
# (-fno-sanitize-recover, see setup.py).  Any report makes the run fail.  Pass
# --capture=sys (the default here): pytest's fd capture would swallow the report of a
# process the sanitizer stops.
set -euo pipefail
mode=${1:-asan}
shift || true
src=$(cd "$(dirname "$0")/.." && pwd)
dst=${CFGMASK_SANITIZE_DIR:-/tmp/cfgmask-$mode}

case "$mode" in
asan)
    export CFGMASK_SANITIZE=1
    # libstdc++ too: C++ extensions loaded later (quicktok) throw through ASan's __cxa_throw interceptor
    runtime="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)"
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:strict_string_checks=1:check_initialization_order=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    ;;
tsan)
    export CFGMASK_TSAN=1
    runtime="$(gcc -print-file-name=libtsan.so) $(gcc -print-file-name=libstdc++.so)"
    # CPython is not built with TSan: report only races whose both sides are in instrumented code
    export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1}
    ;;
*)
    echo "usage: $0 asan|tsan [pytest args]" >&2
    exit 2
    ;;
esac

if [ $# -eq 0 ]; then
    set -- -q -x --capture=sys -p no:cacheprovider tests/test_limits.py tests/test_engine_differential.py tests/test_reference.py \
        tests/test_vocab.py tests/test_compiled_grammar.py tests/test_bitmask.py tests/test_builtin_json.py \
        tests/test_gbnf_engine.py tests/test_shipped_grammars.py tests/test_real_vocab.py tests/test_hostile.py \
        tests/test_fuzz_smoke.py tests/test_threads.py tests/test_leaks.py tests/test_compile_passes.py \
        tests/test_literal_sets.py tests/test_prefetch.py
fi

# a fresh copy of the working tree (sources only), then an in-place sanitizer build.  The copy's
# folder is emptied first, so refuse one that is not a copy made here: the tree itself, a folder
# above it, a git checkout or any other folder with files in it.
if [ -e "$dst" ]; then
    real=$(cd "$dst" && pwd -P)
    case "$(cd "$src" && pwd -P)/" in
    "$real"/*)
        echo "$0: CFGMASK_SANITIZE_DIR=$dst holds this tree; name a scratch folder" >&2
        exit 2
        ;;
    esac
    # a copy made before the marker existed: this tree's files without its .git
    old_copy=false
    [ -e "$dst/tests/sanitize.sh" ] && [ -d "$dst/csrc" ] && old_copy=true
    if [ -e "$dst/.git" ] || { [ -n "$(ls -A "$dst")" ] && [ ! -e "$dst/.cfgmask-sanitize-copy" ] && ! $old_copy; }; then
        echo "$0: $dst is not a copy made by this script (no .cfgmask-sanitize-copy); it is emptied before each run, so name a scratch folder" >&2
        exit 2
    fi
fi
rm -rf "$dst"
mkdir -p "$dst"
touch "$dst/.cfgmask-sanitize-copy"
(cd "$src" && tar cf - --exclude=./.git --exclude=./.venv --exclude=./build --exclude='*.so' \
    --exclude=./cfgmask/_core.c --exclude=./cfgmask/compile/_dag.c --exclude=./cfgmask/_ir.c --exclude=.hypothesis --exclude=__pycache__ .) | (cd "$dst" && tar xf -)
cd "$dst"
start=$(date +%s)
python setup.py -q build_clib --force build_ext --inplace --force >build.log 2>&1 || { cat build.log; exit 1; }
echo "built $mode in $(($(date +%s) - start)) s in $dst"

# make sure the copy (not an installed cfgmask) is what the tests import
export PYTHONPATH="$dst${PYTHONPATH:+:$PYTHONPATH}"
LD_PRELOAD="$runtime" python -c 'import cfgmask._core as c, sys; assert c.__file__.startswith(sys.argv[1]), c.__file__' "$dst"

start=$(date +%s)
status=0
LD_PRELOAD="$runtime" python -m pytest "$@" || status=$?
echo "$mode: pytest exit $status after $(($(date +%s) - start)) s"
exit $status
