"""The flags each SGLang release's ``python -m sglang.launch_server`` accepts (resources/engine_flags/sglang_server.txt,
written by tools/engine_flags/sglang_server_flags.py from the released wheels: each covered release's own, 0.4.0 ...
0.5.23, and its last .postN), and a pasted command's flag that release refuses: SGLang's argparse exits with
"unrecognized arguments", said as the one line (``CommandRead.stops``) in SGLang's own words.

Every release fact below is the data file's, each checked by hand in the wheel named (``pip download sglang==X
--no-deps``, unzipped):

* ``--pp-size``: ``parser.add_argument("--pp-size", ...)`` in sglang 0.4.6.post5 ``sglang/srt/server_args.py`` line
  705; no such call in 0.4.6's (its ``--enable-flashmla`` is at line 850, post5's at 990).
* ``--enable-flashmla``: in 0.4.7, gone by 0.4.7.post1 (neither its nor 0.4.8's server_args.py has the string).
* The parser's name: 0.4.6 server_args.py line 1259 ``argparse.ArgumentParser()`` (named after sys.argv[0],
  launch_server.py under ``python -m``; launch_server.py line 11 ``prepare_server_args(sys.argv[1:])``), 0.5.9 line
  5579 the same; 0.5.10 line 6526 ``argparse.ArgumentParser(prog="sglang serve")``.
* ``--no-enable-tf32-matmul``: 0.5.23 ``sglang/srt/arg_groups/fields/exec_.py`` line 45, ``enable_tf32_matmul``
  ``Optional[bool]`` with ``action=argparse.BooleanOptionalAction``; in 0.5.22's (same line) a plain ``bool``, which
  ``add_cli_args_from_dataclass`` makes ``store_true``: ``--enable-tf32-matmul`` only.
"""

from __future__ import annotations

import pytest

from core.cli.app import main
from core.files.launch.engine_flags import SGLANG_SWITCHES, SGLANG_VALUED, sglang_prog, sglang_release_flags
from core.files.launch.serve_command import read_command
from core.inputs import SglangVersion

MODEL = "Qwen/Qwen3-8B"
LAUNCH = f"python -m sglang.launch_server --model-path {MODEL}"


def test_every_covered_release_has_its_flags_and_the_reader_s_table_is_theirs() -> None:
    for release in SglangVersion:
        flags = sglang_release_flags(release)
        assert {"--model-path", "--tp-size", "--dp-size", "--context-length", "--mem-fraction-static"} <= flags, release
    every = frozenset().union(*(sglang_release_flags(r, every_patch=True) for r in SglangVersion))
    assert every >= SGLANG_SWITCHES | SGLANG_VALUED  # the hand-made union table: every flag of it a wheel's
    assert "--pp-size" not in sglang_release_flags("0.4.6")
    assert "--pp-size" in sglang_release_flags("0.4.6.post5")
    assert "--pp-size" in sglang_release_flags(SglangVersion.V0_4_6, every_patch=True)
    assert "--enable-flashmla" in sglang_release_flags("0.4.7")
    assert "--enable-flashmla" not in sglang_release_flags("0.4.7.post1") | sglang_release_flags("0.4.8")
    assert "--no-enable-tf32-matmul" in sglang_release_flags("0.5.23")
    assert "--no-enable-tf32-matmul" not in sglang_release_flags("0.5.22")
    assert "--enable-tf32-matmul" in sglang_release_flags("0.5.22")
    assert (sglang_prog("0.4.6"), sglang_prog("0.5.9"), sglang_prog("0.5.10")) == (
        "launch_server.py",
        "launch_server.py",
        "sglang serve",
    )


def test_a_flag_no_release_has_stops_sglang_in_its_own_words() -> None:
    read = read_command(f"{LAUNCH} --context-length 8192 --frobnicate 3", sglang_version=SglangVersion.V0_5_23)
    assert read.unknown == ("--frobnicate 3",)
    assert read.fields["inference.context"] == 8192  # the rest is read as before
    assert read.stops == "SGLang 0.5.23 would not start: 'sglang serve: error: unrecognized arguments: --frobnicate'"
    old = read_command(f"{LAUNCH} --frobnicate 3", sglang_version=SglangVersion.V0_4_6)
    assert old.stops == "SGLang 0.4.6 would not start: 'launch_server.py: error: unrecognized arguments: --frobnicate'"


def test_a_flag_the_release_has_not_yet_or_dropped_stops_that_release_only() -> None:
    # --pp-size came in 0.4.6.post5: 0.4.5 has no wheel that takes it, 0.4.6 has one (a command naming no .postN).
    cmd = f"{LAUNCH} --pp-size 2"
    assert "unrecognized arguments: --pp-size" in read_command(cmd, sglang_version=SglangVersion.V0_4_5).stops
    assert read_command(cmd, sglang_version=SglangVersion.V0_4_6).stops == ""
    # The image's tag names the wheel: v0.4.6 exactly refuses it, v0.4.6.post5 takes it.
    image = "docker run --gpus all lmsysorg/sglang:{} python3 -m sglang.launch_server --model-path {} --pp-size 2"
    assert read_command(image.format("v0.4.6-cu124", MODEL)).stops == (
        "SGLang 0.4.6 would not start: 'launch_server.py: error: unrecognized arguments: --pp-size'"
    )
    assert read_command(image.format("v0.4.6.post5-cu124", MODEL)).stops == ""
    # sglang/sglang#5190's DeepEP command (tests/data/launch_commands/public.json) on today's default release: SGLang
    # removed --enable-deepep-moe after 0.5.4 and --enable-flashmla after 0.4.7.
    deepep = f"{LAUNCH} --tp 16 --enable-deepep-moe --deepep-mode normal --enable-flashmla"
    assert read_command(deepep, sglang_version=SglangVersion.V0_5_23).stops == (
        "SGLang 0.5.23 would not start: 'sglang serve: error: unrecognized arguments: --enable-deepep-moe "
        "--enable-flashmla'"
    )
    assert read_command(deepep, sglang_version=SglangVersion.V0_4_6).stops == ""


def test_a_newer_release_s_flag_is_its_option_not_a_word_nobody_knows() -> None:
    cmd = f"{LAUNCH} --no-enable-tf32-matmul"
    new = read_command(cmd, sglang_version=SglangVersion.V0_5_23)
    assert new.stops == "" and new.unknown == ()
    assert [n.words for n in new.unexpressed] == ["--no-enable-tf32-matmul"]
    assert "SGLang 0.5.23" in new.unexpressed[0].why
    old = read_command(cmd, sglang_version=SglangVersion.V0_5_22)
    assert "unrecognized arguments: --no-enable-tf32-matmul" in old.stops


def test_a_flag_a_release_split_in_two_is_ambiguous_there() -> None:
    # --cuda-graph-max-bs: an option to 0.5.19 (sglang_server.txt); 0.5.20's wheel has only --cuda-graph-max-bs-decode
    # and --cuda-graph-max-bs-prefill (both from 0.5.14), so argparse's prefix matching finds two.
    cmd = f"{LAUNCH} --cuda-graph-max-bs 8"
    assert read_command(cmd, sglang_version=SglangVersion.V0_5_19).stops == ""
    assert read_command(cmd, sglang_version=SglangVersion.V0_5_20).stops == (
        "SGLang 0.5.20 would not start: 'sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill'"
    )


def test_an_export_s_header_names_the_release_checked() -> None:
    text = f"# pip install sglang==0.4.5  (the release whose rules the estimate followed)\n{LAUNCH} --pp-size 2\n"
    assert "SGLang 0.4.5 would not start" in read_command(text, sglang_version=SglangVersion.V0_5_23).stops


@pytest.mark.parametrize(
    ("command", "option", "said"),
    [
        (
            f"docker run --gpus all vllm/vllm-openai:v0.10.2 --model {MODEL}",
            ["--vllm-version", "0.9"],
            "vLLM 0.10, the release the command names, is the one its flags were checked against; the plan follows "
            "--vllm-version 0.9",
        ),
        (
            f"docker run --gpus all lmsysorg/sglang:v0.4.6-cu124 python3 -m sglang.launch_server --model-path {MODEL}",
            ["--sglang-version", "0.5.23"],
            "SGLang 0.4.6, the release the command names, is the one its flags were checked against; the plan follows "
            "--sglang-version 0.5.23",
        ),
    ],
)
def test_the_command_line_says_which_release_checked_the_flags_when_tag_and_option_differ(
    command: str, option: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["import-command", command, "--gpu", "a100-80gb-sxm", *option]) == 0
    assert f"note: {said}" in capsys.readouterr().out
    assert main(["import-command", command, "--gpu", "a100-80gb-sxm"]) == 0  # no option: no conflict, no note
    assert "checked against" not in capsys.readouterr().out


def test_the_command_line_checks_sglang_flags_against_the_plan_s_release(capsys: pytest.CaptureFixture[str]) -> None:
    command = f"{LAUNCH} --pp-size 2"
    assert main(["import-command", command, "--gpu", "a100-80gb-sxm", "--sglang-version", "0.4.5"]) == 0
    assert "SGLang 0.4.5 would not start" in capsys.readouterr().out
    assert main(["import-command", command, "--gpu", "a100-80gb-sxm", "--sglang-version", "0.4.7"]) == 0
    assert "would not start" not in capsys.readouterr().out
