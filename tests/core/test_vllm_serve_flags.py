"""The flags each vLLM release line's ``vllm serve`` accepts (resources/engine_flags/vllm_serve.txt, written by
tools/engine_flags/vllm_serve_flags.py from the released wheels, one per line: 0.6.6.post1 ... 0.34.0), and a pasted
command's flag that release refuses: vLLM's argparse exits with "unrecognized arguments", said as the one line
(``CommandRead.stops``).

Every release fact below is the data file's, each checked by hand in the wheel named (``pip download vllm==X
--no-deps``, unzipped):

* ``--swap-space``: ``cache_group.add_argument("--swap-space", ...)`` in vllm 0.17.1 ``vllm/engine/arg_utils.py``
  line 951; no such call in 0.18.1's.
* ``--use-v2-block-manager``: ``parser.add_argument('--use-v2-block-manager', ...)`` in vllm 0.9.2
  ``vllm/engine/arg_utils.py`` line 921; none in 0.10.2's.
* ``--disable-prefix-caching``: vllm 0.33.0 ``vllm/utils/argparse_utils.py`` line 179 registers
  ``EnableDisableAction`` for ``BooleanOptionalAction``, which adds ``--disable-x`` beside ``--enable-x``; 0.32.0's
  registers nothing, so ``--enable-prefix-caching`` (arg_utils.py, a ``bool`` field of CacheConfig) has only
  ``--no-enable-prefix-caching`` there.
"""

from __future__ import annotations

import json

import pytest

from core.cli.app import main
from core.files.launch.engine_flags import VLLM_SWITCHES, VLLM_VALUED, vllm_release_flags
from core.files.launch.serve_command import read_command
from core.plan import VllmVersion

MODEL = "Qwen/Qwen3-8B"


def test_every_covered_release_line_has_its_flags_and_the_reader_s_table_is_theirs() -> None:
    for line in VllmVersion:
        flags = vllm_release_flags(line)
        assert "--max-model-len" in flags and "--tensor-parallel-size" in flags and "-tp" in flags, line
    # The reader's table was read from 0.8.5, 0.10.2 and 0.19.0: every flag of it is one of those lines'.
    lines = (VllmVersion.V0_8, VllmVersion.V0_10, VllmVersion.V0_19)
    assert frozenset().union(*(vllm_release_flags(v) for v in lines)) >= VLLM_SWITCHES | VLLM_VALUED
    assert "--swap-space" in vllm_release_flags(VllmVersion.V0_17)
    assert "--swap-space" not in vllm_release_flags(VllmVersion.V0_18)
    assert "--disable-prefix-caching" in vllm_release_flags(VllmVersion.V0_33)
    assert "--disable-prefix-caching" not in vllm_release_flags(VllmVersion.V0_32)


def test_a_flag_no_release_has_stops_vllm() -> None:
    read = read_command(f"vllm serve {MODEL} --max-model-len 8192 --frobnicate 3", vllm_version=VllmVersion.V0_19)
    assert read.unknown == ("--frobnicate 3",)
    assert read.fields["inference.context"] == 8192  # the rest is read as before
    assert read.stops == "vLLM 0.19 would not start: 'vllm serve: error: unrecognized arguments: --frobnicate'"


def test_a_flag_the_release_dropped_or_has_not_yet_stops_that_release_only() -> None:
    cmd = f"vllm serve {MODEL} --swap-space 4"
    assert read_command(cmd, vllm_version=VllmVersion.V0_17).stops == ""
    assert "unrecognized arguments: --swap-space" in read_command(cmd, vllm_version=VllmVersion.V0_19).stops
    # The image's tag names the release: it wins over the plan's line.
    tagged = read_command(f"docker run --gpus all vllm/vllm-openai:v0.10.2 --model {MODEL} --use-v2-block-manager")
    assert tagged.stops == (
        "vLLM 0.10 would not start: 'vllm serve: error: unrecognized arguments: --use-v2-block-manager'"
    )
    older = read_command(f"docker run --gpus all vllm/vllm-openai:v0.9.2 --model {MODEL} --use-v2-block-manager")
    assert older.stops == ""


def test_a_newer_release_s_flag_is_its_option_not_a_word_nobody_knows() -> None:
    cmd = f"vllm serve {MODEL} --disable-prefix-caching"
    new = read_command(cmd, vllm_version=VllmVersion.V0_33)
    assert new.stops == "" and new.unknown == ()
    assert [n.words for n in new.unexpressed] == ["--disable-prefix-caching"]
    assert "vLLM 0.33" in new.unexpressed[0].why
    old = read_command(cmd, vllm_version=VllmVersion.V0_32)
    assert "unrecognized arguments: --disable-prefix-caching" in old.stops


def test_a_prefix_is_resolved_in_the_release_s_own_flags() -> None:
    # --max-model (argparse's unique prefix of --max-model-len, in every line's flags) starts.
    assert read_command(f"vllm serve {MODEL} --max-model 4096", vllm_version=VllmVersion.V0_19).stops == ""
    # The underscore spelling FlexibleArgumentParser turns into dashes.
    assert read_command(f"vllm serve {MODEL} --max_model_len 4096", vllm_version=VllmVersion.V0_6).stops == ""


def test_the_command_line_checks_the_flags_against_the_plan_s_release_line(capsys: pytest.CaptureFixture[str]) -> None:
    command = f"vllm serve {MODEL} --max-model-len 8192 --swap-space 4"
    assert main(["import-command", command, "--gpu", "a100-80gb-sxm", "--vllm-version", "0.17"]) == 0
    out = capsys.readouterr().out
    assert "would not start" not in out
    assert main(["import-command", command, "--gpu", "a100-80gb-sxm", "--json"]) == 0  # the default line, 0.19
    document = json.loads(capsys.readouterr().out)
    assert document["from_command"]["would_not_start"] == (
        "vLLM 0.19 would not start: 'vllm serve: error: unrecognized arguments: --swap-space'"
    )


def test_minus_o_is_taken_by_every_line_in_its_own_spelling() -> None:
    # FlexibleArgumentParser.parse_args rewrites -O3 before argparse sees it: vllm 0.19.1 vllm/utils/argparse_utils.py
    # lines 256-259 (-O3 -> --optimization-level 3; the data file: -O itself only to 0.11); 0.6.6.post1 vllm/utils.py
    # line 1147 keeps -O, the compilation-config option of those lines (argparse reads -O3 as -O 3).
    for line in (VllmVersion.V0_6, VllmVersion.V0_19, VllmVersion.V0_34):
        assert read_command(f"vllm serve {MODEL} -O3", vllm_version=line).stops == "", line
