"""The compile pipeline: IR -> automaton tables -> a grammar bound to a vocabulary.

One pass a module, in the order :func:`compile` runs them (docs/design.md, section 2):

* :mod:`.limits`      ``CompileLimits`` and the exact IR size checks
* :mod:`.encode`      the IR as a hash-consed DAG and its encoding for C (``Session``)
* :mod:`.prepare`     the checks that run first, over the DAG; the table-cache key
* :mod:`.repeats`     big counted repetitions as logarithmic helper rules
* :mod:`.graph`       strongly connected components, tail position, use counts
* :mod:`.components`  the rule components planned, built in C in one call, regular rules
                      inlined; then trimmed and laid out flat in a second call
* :mod:`.cache`       automata of components kept across compiles
* :mod:`.flat`        every runtime rule's states in one numbering
* :mod:`.follow`      nullable rules and FOLLOW bytes
* :mod:`.tables`      byte classes, call/token/lookahead tables: ``Tables``
* :mod:`.compiled`    ``compile()``, ``CompiledGrammar``, the table cache
* :mod:`.automaton`   ``DFA``, the handle on an automaton C built
* :mod:`.strategy`    how the C core builds masks (private; same masks whatever it says)
"""

from .compiled import CompiledGrammar, MatcherLimits, clear_caches, compile
from .limits import CompileLimits
from .tables import Tables, build_tables

__all__ = [
    "CompileLimits",
    "CompiledGrammar",
    "MatcherLimits",
    "Tables",
    "build_tables",
    "clear_caches",
    "compile",
]
