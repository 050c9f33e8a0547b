"""SGLang's ``sglang serve`` entry point and its ``--config FILE.yaml`` read with the command
(core.files.launch.serve_command), and ``vramplan import-command --file X.yaml --engine sglang``.

How SGLang reads them, from the sglang 0.5.23 wheel on PyPI (``pip download --no-deps sglang==0.5.23``):
* ``[project.scripts]`` / entry_points.txt: ``sglang = sglang.cli.main:main``; ``sglang/cli/serve.py`` ``serve``: a
  first word that is no flag becomes ``--model-path WORD`` (``_normalize_positional_model_path``), ``--model-type X``
  is taken out (``_extract_model_type_override``), the rest goes to ``prepare_server_args`` as
  ``python -m sglang.launch_server``'s arguments do.
* ``sglang/srt/server_args.py`` ``prepare_server_args``: the file is merged only when the word ``--config`` is in argv;
  ``sglang/srt/utils/server_args_config_parser.py`` ``ConfigArgumentMerger``: the file's flags first, then the
  command's words (``config_args + before_config + after_config``: the command line wins), one file only, .yaml /
  .yml only, a store_true flag's ``true`` -> ``--key``, ``false`` -> nothing, a list -> ``--key`` and its items, a
  mapping -> its JSON.
The commands are the SGLang records of benchmarks/realgpu/engine_logs.json whose ``settings.command`` is the command.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.cli.app import main
from core.errors import PlanFileError
from core.files.launch.serve_command import config_words, read_command
from core.plan import Engine

ROOT = Path(__file__).resolve().parents[2]
LOGS = {log["id"]: log for log in json.loads((ROOT / "benchmarks/realgpu/engine_logs.json").read_text())["logs"]}
RECORDS = ("vllm21348-qwen3-235b-fp8-h100-tp4-sglang", "sglang18039-mimo-v2-flash-tp4-main")
# sglang18039-mimo-v2-flash-tp4-main's command as the file SGLang's docs show (dash keys, the flags' own names).
CONFIG = b"""\
model-path: XiaomiMiMo/MiMo-V2-Flash
tp-size: 4
trust-remote-code: true
mem-fraction-static: 0.7
model-loader-extra-config:
  enable_multithread_load: "true"
  num_threads: 64
page-size: 64
enable-metrics: false
"""


def _load(name: str) -> bytes:
    assert name == "mimo.yaml"
    return CONFIG


@pytest.mark.parametrize("record_id", RECORDS)
def test_sglang_serve_reads_as_launch_server(record_id: str) -> None:
    command = LOGS[record_id]["settings"]["command"]
    recorded = read_command(command)
    served = read_command(command.replace("python3 -m sglang.launch_server", "sglang serve"))
    assert served.engine is Engine.SGLANG and served.fields == recorded.fields
    assert (served.read, served.ignored, served.unexpressed, served.unknown) == (
        recorded.read,
        recorded.ignored,
        recorded.unexpressed,
        recorded.unknown,
    )


def test_sglang_serve_takes_the_model_as_its_first_word() -> None:
    command = LOGS["sglang18039-mimo-v2-flash-tp4-main"]["settings"]["command"]
    recorded = read_command(command)
    served = read_command(
        "/opt/venv/bin/sglang serve XiaomiMiMo/MiMo-V2-Flash --model-type llm"
        + command.partition("--model-path XiaomiMiMo/MiMo-V2-Flash")[2]
    )
    assert served.fields == recorded.fields and served.model_ref == "XiaomiMiMo/MiMo-V2-Flash"
    assert served.read[0].words == "XiaomiMiMo/MiMo-V2-Flash" and served.unknown == ()
    assert any("--model-type llm" in note for note in served.notes)
    assert not any("not read" in note for note in served.notes)


def test_the_files_options_are_the_flags_they_stand_for() -> None:
    words, notes = config_words(CONFIG, "mimo.yaml", Engine.SGLANG)
    assert words[:5] == ["--model-path", "XiaomiMiMo/MiMo-V2-Flash", "--tp-size", "4", "--trust-remote-code"]
    assert words[-2:] == ["--page-size", "64"] and notes == [
        "mimo.yaml: enable-metrics: false, which SGLang passes as nothing (the default)"
    ]
    recorded = read_command(LOGS["sglang18039-mimo-v2-flash-tp4-main"]["settings"]["command"])
    for text in ("sglang serve --config mimo.yaml", "python3 -m sglang.launch_server --config mimo.yaml"):
        read = read_command(text, load_config=_load)
        assert read.fields == recorded.fields and read.model_ref == recorded.model_ref
        assert read.read[0].words == "--config mimo.yaml"
        assert [n.words for n in read.unexpressed] == [n.words for n in recorded.unexpressed] == ["--page-size 64"]


def test_the_command_line_wins_over_the_file() -> None:
    read = read_command(
        "sglang serve Qwen/Qwen3-8B --config mimo.yaml --tp 2 --mem-fraction-static 0.8", load_config=_load
    )
    assert read.model_ref == "Qwen/Qwen3-8B"  # the positional model, made --model-path after the file's
    assert (read.fields["inference.tensor_parallel"], read.fields["inference.mem_fraction_static"]) == (2, 0.8)
    assert any("--mem-fraction-static 0.7 given again" in note for note in read.notes)


def test_what_sglang_does_not_read_of_a_config() -> None:
    equals = read_command("sglang serve m --config=mimo.yaml", load_config=_load)  # "--config" in argv: False
    assert [n.words for n in equals.unexpressed] == ["--config mimo.yaml"]
    assert any("two words" in note for note in equals.notes)
    assert [n.words for n in read_command("sglang serve m --config mimo.yaml").unexpressed] == ["--config mimo.yaml"]
    with pytest.raises(PlanFileError, match="twice") as twice:
        read_command("sglang serve m --config mimo.yaml --config mimo.yaml", load_config=_load)
    with pytest.raises(PlanFileError, match="SGLang's --config refuses") as json_file:
        read_command("sglang serve m --config mimo.json", load_config=_load)
    assert "\n" not in str(twice.value) + str(json_file.value)


def test_import_command_reads_an_sglang_yaml_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mimo.yaml").write_bytes(CONFIG.replace(b"XiaomiMiMo/MiMo-V2-Flash", b"Qwen/Qwen3-8B"))
    assert main(["import-command", "--file", str(tmp_path / "mimo.yaml"), "--engine", "sglang", "--gpu", "l4"]) == 0
    out = capsys.readouterr().out
    assert "From the SGLang launch command" in out and "--config mimo.yaml" in out and "--tp-size 4" in out
