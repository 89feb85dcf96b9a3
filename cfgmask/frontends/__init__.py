"""Front ends: grammar text -> IR (:mod:`cfgmask.ir`).

One module a syntax, each importing only the IR and its operations, never the compiler:
:mod:`.gbnf` (llama.cpp's GBNF), :mod:`.lark` (Lark grammars, with :mod:`.lark_follow` for
its terminals' follow restrictions), :mod:`.regex` (Python ``re`` syntax) and
:mod:`.json_schema` (JSON Schema, a package of its own).
"""
