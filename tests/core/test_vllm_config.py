"""vLLM's ``--config FILE.yaml`` read with the command (core.files.launch.serve_command.config_words), and
``vramplan import-command --file X.yaml --engine vllm`` reading one alone.

How vLLM turns the file into flags: the vllm 0.19.0 wheel's vllm/utils/argparse_utils.py,
``FlexibleArgumentParser.load_config_file`` (``key: v`` -> ``--key v``, true -> ``--key``, false -> nothing, a mapping
-> its JSON; ``--no-key`` for a false came after the 0.19 line, vllm-project/vllm PR #51573, and not for
``vllm serve``: PR #58102) and ``_pull_args_from_config`` (the file's flags after ``serve MODEL``, before the command's
own: the command line wins).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.cli.app import main
from core.errors import PlanFileError
from core.files.launch.serve_command import config_words, read_command
from core.plan import Engine, PrefixCaching

# The example of load_config_file's docstring (vllm/utils/argparse_utils.py 00da11e3), with the flags the plan reads.
CONFIG = b"""\
model: Qwen/Qwen3-8B
max_model_len: 16384
gpu-memory-utilization: 0.85
enforce_eager: true
enable-prefix-caching: false
port: 12323
tensor-parallel-size: 1
compilation-config:
  pass_config:
    fuse_allreduce_rms: true
"""


def _load(name: str) -> bytes:
    assert name == "cfg.yaml"
    return CONFIG


def test_the_files_options_are_read_as_the_flags_they_stand_for() -> None:
    words, notes = config_words(CONFIG, "cfg.yaml")
    assert words[:4] == ["--model", "Qwen/Qwen3-8B", "--max_model_len", "16384"]
    assert "--enforce_eager" in words and not any("prefix-caching" in w for w in words)
    assert words[-2:] == ["--compilation-config", '{"pass_config": {"fuse_allreduce_rms": true}}']
    assert notes == ["cfg.yaml: enable-prefix-caching: false, which vLLM passes as nothing (the default)"]
    read = read_command("vllm serve --config cfg.yaml --max-model-len 4096", load_config=_load)
    fields = read.fields
    assert read.model_ref == "Qwen/Qwen3-8B"
    assert fields["inference.context"] == 4096  # the command line's own wins over the file's 16384
    assert fields["inference.gpu_memory_utilization"] == 0.85
    assert fields["inference.cuda_graphs"] is False
    assert fields["inference.prefix_caching"] is PrefixCaching.DEFAULT  # 0.19.0 drops the false (it was OFF)
    assert read.read[0].words == "--config cfg.yaml"
    assert [n.words for n in read.ignored] == ["--port 12323"]
    assert [n.words for n in read.unexpressed] == ['--compilation-config {"pass_config": {"fuse_allreduce_rms": true}}']
    assert any("--max_model_len 16384 given again" in note for note in read.notes)


def test_the_positional_model_wins_over_the_files() -> None:
    # vllm/entrypoints/cli/serve.py ServeSubcommand.cmd: args.model = args.model_tag when the positional is given.
    read = read_command("vllm serve Qwen/Qwen3-4B --config cfg.yaml", load_config=_load)
    assert read.model_ref == "Qwen/Qwen3-4B"
    assert read.unexpressed[0].words == "--model Qwen/Qwen3-8B"


def test_without_the_file_the_flag_is_listed() -> None:
    read = read_command("vllm serve Qwen/Qwen3-8B --config cfg.yaml")
    assert [n.words for n in read.unexpressed] == ["--config cfg.yaml"]
    assert "Load YAML" in read.unexpressed[0].why


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (b"- a\n- b\n", "is a list, not a mapping"),
        (b"\x00\x01binary", "NUL bytes"),
        (bytes(range(128, 256)) * 4, "not UTF-8"),
        (
            b"a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
            b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
            b"e: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n",
            "YAML aliases expanding",
        ),
        (b"x: !!python/object/apply:os.system ['true']\n", "Python object"),
        (b"key: [unclosed\n", "not valid YAML"),
        (b"big: " + b"x" * 70_000 + b"\n", "more than 64,000 characters"),
    ],
)
@pytest.mark.parametrize("engine", [Engine.VLLM, Engine.SGLANG])  # SGLang's --config: the same reader
def test_hostile_yaml_is_one_line(raw: bytes, said: str, engine: Engine) -> None:
    with pytest.raises(PlanFileError, match=said) as error:
        config_words(raw, "x.yaml", engine)
    assert "\n" not in str(error.value) and "training" not in str(error.value)


def test_a_config_that_is_not_yaml_is_refused_as_vllm_does() -> None:
    with pytest.raises(PlanFileError, match="not a .yaml / .yml file"):
        read_command("vllm serve M --config cfg.json", load_config=_load)


def test_import_command_reads_the_file_beside_the_command_and_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cfg.yaml").write_bytes(CONFIG)
    (tmp_path / "serve.sh").write_text("vllm serve --config cfg.yaml --port 9\n")
    assert main(["import-command", "--file", str(tmp_path / "serve.sh"), "--gpu", "l4"]) == 0
    out = capsys.readouterr().out
    assert "--config cfg.yaml" in out and "Context = 16,384 tokens" in out and "--port 9" in out
    assert main(["import-command", "--file", str(tmp_path / "cfg.yaml"), "--engine", "vllm", "--gpu", "l4"]) == 0
    assert "GPU memory use = 85 %" in capsys.readouterr().out
    assert main(["import-command", "--file", str(tmp_path / "cfg.yaml"), "--gpu", "l4"]) == 2
    assert "add --engine vllm" in capsys.readouterr().err
    (tmp_path / "bomb.yaml").write_bytes(b"a: &a [1,1,1,1,1,1,1,1,1,1]\n" + b"b: [" + b"*a," * 3000 + b"]\n")
    assert main(["import-command", "--file", str(tmp_path / "bomb.yaml"), "--engine", "vllm"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "entries" in err
