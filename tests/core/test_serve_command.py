"""A pasted vLLM / SGLang launch command read back into the serving plan (core.files.launch.serve_command), and
``vramplan import-command``.

The real commands are those the serving evidence records (benchmarks/realgpu/engine_logs.json, each record's
``settings.command`` as its source printed it); the settings each record gives beside its command are what the read
must find. Flag tables: core.files.launch.engine_flags (vLLM 0.8.5 / 0.10.2 / 0.19.0 and SGLang 0.4.3-0.5.23 wheels).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.catalogue import find_model
from core.cli.app import main
from core.dtypes import KvDtype, WeightFormat
from core.errors import PlanFileError
from core.files.launch import Target, export
from core.files.launch.common import fraction_text
from core.files.launch.engine_flags import SGLANG_SWITCHES, SGLANG_VALUED, VLLM_SWITCHES, VLLM_VALUED
from core.files.launch.serve_command import (
    MAX_COMMAND_CHARS,
    NO_EFFECT,
    command_text,
    human_int,
    plan_from_command,
    read_command,
    shell_words,
)
from core.files.planfile import load as load_plan
from core.plan import Engine, Hardware, Inference, Plan, PrefixCaching, SglangVersion, VllmVersion
from core.presets import default_plan

ROOT = Path(__file__).resolve().parents[2]
LOGS = {log["id"]: log for log in json.loads((ROOT / "benchmarks/realgpu/engine_logs.json").read_text())["logs"]}

# The records whose ``settings.command`` is the command itself (others describe theirs in words, e.g. "./run.sh
# (vllm serve ...)", or print the non-default args instead).
RECORDS = (
    "vllm21348-qwen3-235b-fp8-h100-tp4-vllm",
    "vllm21348-qwen3-235b-fp8-h100-tp4-sglang",
    "vllm13061-r1-distill-qwen14b-2x4090-tp2",
    "myoceane-gemma4-26b-a4b-a100-0.9-eager",
    "recipes-kimi-k2-thinking-h200-tp8",
    "recipes-kimi-k2-thinking-h200-tp8-dcp8",
    "sglang18039-mimo-v2-flash-tp4-main",
    "vllm12569-llama31-70b-w8a8-v1-2048",
    "vllm27508-gpt-oss-120b-h100-gmu095-mnbt1024",
    "vllm17327-qwen3-30b-a3b-w4a16-3090-v0",
    "durand-sglang0434-qwq32b-4xl4-tp4",
    "roethig-vllm0102-qwen3-235b-fp8-8xl40s-tp8-ep",
    "roethig-vllm0102-qwen3-30b-a3b-fp8-2xl40s-tp2-ep",
    "kumaxxp-vllm0130-qwen25-14b-awq-a5000",
    "sridhar-vllm0191-phi3-mini-3090-wsl",
    "kolyangg-vllm0102-qwen3-30b-a3b-h100",
    "nnamdiodozi-vllm0221-qwen3-30b-a3b-fp8-h100",
    "shanghaoli-vllm0102-qwen25-3b-4090",
    "daisuketakai-vllm0100-qwen3-32b-8xh100-tp8-fp8kv",
    "daisuketakai-vllm0100-qwen3-235b-fp8-8xh100-tp8-ep-fp8kv",
    "lukejyk-vllm0261dev-qwen3-coder-30b-a3b-a100",
)
# A record's setting -> the plan field it is, where the record gives a number.
NUMBERS = {
    "tensor_parallel_size": "inference.tensor_parallel",
    "gpu_memory_utilization": "inference.gpu_memory_utilization",
    "max_model_len": "inference.context",
    "context_length": "inference.context",
    "max_num_seqs": "inference.max_num_seqs",
    "max_num_batched_tokens": "inference.max_num_batched_tokens",
    "mem_fraction_static": "inference.mem_fraction_static",
}


@pytest.mark.parametrize("record_id", RECORDS)
def test_each_recorded_command_reads_as_its_record_says(record_id: str) -> None:
    record = LOGS[record_id]
    settings_ = record["settings"]
    read = read_command(settings_["command"])
    assert read.engine is Engine(record["engine"])
    assert read.model_ref and read.model_ref in settings_["command"]
    checked = 0
    for setting, path in NUMBERS.items():
        value = settings_.get(setting)
        # A number the record gives as the command's (not "default (0.9)", not one printed in the log instead).
        if isinstance(value, (int, float)) and not isinstance(value, bool) and path in read.fields:
            given = [n for n in read.read if n.field == path]
            if given:
                assert read.fields[path] == pytest.approx(value), (setting, read.fields)
                checked += 1
    if settings_.get("enforce_eager") is True:
        assert read.fields["inference.cuda_graphs"] is False
    if settings_.get("kv_cache_dtype") == "fp8":
        assert read.fields["inference.kv_dtype"] is KvDtype.FP8
    assert checked or record_id.startswith(("recipes-kimi", "vllm21348-qwen3-235b-fp8-h100-tp4-vllm"))
    # Nothing is dropped unsaid: every flag of the command is read, ignored, not expressed or not understood.
    flags = [w for w in settings_["command"].split() if w.startswith("-")]
    said = " ".join([*(n.words for n in (*read.read, *read.ignored, *read.unexpressed)), *read.unknown, *read.notes])
    for flag in flags:
        assert flag.split("=")[0] in said, flag


def test_the_records_flags_land_where_the_engine_puts_them() -> None:
    # roethig-...-tp8-ep (vLLM 0.10.2): --max-model-len 32K is human_readable_int's 32,768; --enable-expert-parallel
    # and --swap-space 0 are vLLM's flags the plan cannot express.
    read = read_command(LOGS["roethig-vllm0102-qwen3-235b-fp8-8xl40s-tp8-ep"]["settings"]["command"])
    assert read.fields["inference.context"] == 32_768
    assert [n.words for n in read.unexpressed] == ["--enable-expert-parallel", "--swap-space 0"]
    assert read.unknown == ()
    # vllm21348 (SGLang, 2025-07): --tp is argparse's prefix of --tp-size; --host, --port, --trust-remote-code ignored.
    sglang = read_command(LOGS["vllm21348-qwen3-235b-fp8-h100-tp4-sglang"]["settings"]["command"])
    assert sglang.fields["inference.tensor_parallel"] == 4
    assert sglang.fields["inference.mem_fraction_static"] == 0.93
    assert sorted(n.words for n in sglang.ignored) == ["--host 0.0.0.0", "--port 8000", "--trust-remote-code"]
    assert any("--tp read as --tp-size" in note for note in sglang.notes)
    # vllm13061 (vLLM 0.7): underscores and --flag=value, the model after the flags.
    old = read_command(LOGS["vllm13061-r1-distill-qwen14b-2x4090-tp2"]["settings"]["command"])
    assert old.model_ref == "/root/autodl-tmp/deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"
    assert (old.fields["inference.tensor_parallel"], old.fields["inference.gpu_memory_utilization"]) == (2, 0.98)
    # vllm17327 (vLLM 0.8 V0): --disable-log-request is argparse's prefix of --disable-log-requests; VLLM_USE_V1=0
    # is said not to be the plan's (the plan's release line decides the engine).
    v0 = read_command(LOGS["vllm17327-qwen3-30b-a3b-w4a16-3090-v0"]["settings"]["command"])
    assert [n.words for n in v0.ignored] == ["--disable-log-request"]
    assert [n.words for n in v0.unexpressed] == ["VLLM_USE_V1=0"]


def test_a_recorded_command_plans_on_the_catalogue_model() -> None:
    # nnamdiodozi (vLLM 0.22.1, H100): --quantization fp8 over the bf16 checkpoint, --enable-prefix-caching.
    record = LOGS["nnamdiodozi-vllm0221-qwen3-30b-a3b-fp8-h100"]
    built = plan_from_command(read_command(record["settings"]["command"]), default_plan())
    inf = built.plan.inference
    assert built.plan.model_id == "qwen3-30b-a3b"  # -Instruct-2507: a re-release of the same shapes
    assert (inf.engine, inf.weight_dtype, inf.context) == (Engine.VLLM, WeightFormat.FP8, 8192)
    assert (inf.max_num_seqs, inf.max_num_batched_tokens, inf.prefix_caching) == (64, 8192, PrefixCaching.ON)
    assert built.plan.hardware == default_plan().hardware  # the card is the base plan's
    # kumaxxp (vLLM 0.13, -AWQ checkpoint, --dtype half): AWQ weights computing in fp16.
    awq = plan_from_command(
        read_command(LOGS["kumaxxp-vllm0130-qwen25-14b-awq-a5000"]["settings"]["command"]), default_plan()
    )
    assert (awq.plan.inference.weight_dtype, awq.plan.inference.kv_dtype) == (WeightFormat.AWQ_INT4, KvDtype.FP16)


def test_what_the_command_does_not_say_is_the_engines_default() -> None:
    base = default_plan().with_inference(gpu_memory_utilization=0.5, max_num_seqs=7, context=1000, new_tokens=900)
    built = plan_from_command(read_command("vllm serve Qwen/Qwen3-8B"), base)
    inf = built.plan.inference
    spec = find_model("qwen3-8b").spec
    assert inf.context == spec.max_position_embeddings  # vLLM's max_model_len: the model's own
    assert (inf.gpu_memory_utilization, inf.max_num_seqs) == (0.0, 0)  # 0: the release's default
    assert inf.new_tokens == 900  # still inside the longer context
    assert any("the model's own" in note for note in built.notes)
    # A shorter context than the plan's generated tokens: half of it is generated, and said so.
    short = plan_from_command(read_command("vllm serve Qwen/Qwen3-8B --max-model-len 512"), base)
    assert short.plan.inference.new_tokens == 256
    assert any("generated tokens" in note for note in short.notes)


def test_spellings_the_shell_and_the_engines_take() -> None:
    text = (
        "# a comment line\n"
        "CUDA_VISIBLE_DEVICES=0,1 HF_TOKEN=x \\\n"
        "  python3 -m vllm.entrypoints.openai.api_server --model 'Qwen/Qwen3-8B' \\\n"
        "  --max_model_len=16k --tensor-parallel-size 2 --limit-mm-per-prompt '{\"image\": 0}' -O3\n"
    )
    read = read_command(text)
    assert read.model_ref == "Qwen/Qwen3-8B"
    assert read.fields["inference.context"] == 16_000  # human_readable_int: 16k = 16,000
    assert read.fields["inference.tensor_parallel"] == 2
    assert read.fields["inference.text_only"] is True
    assert [n.words for n in read.unexpressed] == ["-O 3"]
    assert "GPUs visible: 2" in read.notes
    assert not any(note.startswith("before the command") for note in read.notes)  # python3 -m is the command's
    plain = read_command("/opt/venv/bin/vllm serve Qwen/Qwen3-8B")
    assert plain.notes == () and plain.model_ref == "Qwen/Qwen3-8B"
    assert [(n.words, n.why) for n in read.ignored] == [("HF_TOKEN=x", f"a token or key: {NO_EFFECT}")]
    # The shell around the command is said, not read: nohup, redirections, a background &.
    shell = read_command("nohup python3.12 -m sglang.launch_server --model-path Qwen/Qwen3-8B > log.txt 2>&1 &")
    assert (shell.model_ref, shell.unknown) == ("Qwen/Qwen3-8B", ())
    assert f"run through nohup: {NO_EFFECT}" in shell.notes  # a wrapper (serve_command._WRAPPERS), not a stray word
    assert any(note.endswith("> log.txt 2>&1") for note in shell.notes)
    # Too few GPUs visible for the layout: said.
    few = read_command("CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-8B -tp 2")
    assert any("would not start" in note for note in few.notes)


def test_docker_run_around_the_command() -> None:
    # a100notes-vllm0310 (vLLM 0.31.0 image): the image's tag is the release line; --gpus device=2 one GPU.
    text = (
        "docker run --gpus '\"device=2\"' --ipc=host -p 8000:8000 -e HF_TOKEN=x --rm "
        "vllm/vllm-openai:v0.31.0-ubuntu2404 --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192"
    )
    read = read_command(text)
    assert (read.engine, read.model_ref) == (Engine.VLLM, "meta-llama/Llama-3.1-8B-Instruct")
    assert read.fields["inference.vllm_version"] is VllmVersion.V0_31
    assert "GPUs visible: 1" in read.notes
    assert any(note.endswith(": --ipc -p --rm") for note in read.notes)  # docker's own options, named
    sglang = read_command(
        "docker run --gpus all lmsysorg/sglang:v0.4.6.post1-cu124 python3 -m sglang.launch_server "
        "--model-path Qwen/Qwen3-8B --context-length 4096"
    )
    assert sglang.engine is Engine.SGLANG
    assert sglang.fields["inference.sglang_version"] is SglangVersion.V0_4_6


def test_every_word_not_used_is_listed() -> None:
    read = read_command(
        "vllm serve Qwen/Qwen3-8B --frobnicate 3 --port 8000 --enable-lora --quantization compressed-tensors "
        "--kv-cache-dtype int8 stray && echo done"
    )
    assert read.unknown == ("--frobnicate 3", "stray (a word no flag takes)")
    assert [n.words for n in read.ignored] == ["--port 8000"]
    assert {n.words for n in read.unexpressed} == {
        "--quantization compressed-tensors",
        "--kv-cache-dtype int8",
        "--enable-lora",
    }
    assert any("echo done" in note for note in read.notes)


def test_an_unknown_model_names_the_closest_catalogue_models() -> None:
    read = read_command("vllm serve someone/Qwen3-8B-Turbo-Instruct --max-model-len 4096")
    with pytest.raises(PlanFileError, match="closest catalogue models: qwen3-8b"):
        plan_from_command(read, default_plan())


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n  ",
        "vllm serve 'Qwen/Qwen3-8B",  # unterminated quote
        "vllm serve Qwen/Qwen3-8B \\",  # a continuation at the end
        "vllm serve \x1b[31mQwen\x00",
        "x" * (MAX_COMMAND_CHARS + 1),
        "vllm serve Qwen/Qwen3-8B " + "--port 1 " * 1_000,
        "lm_eval --model vllm --model_args pretrained=Qwen/Qwen3-0.6B",
        "vllm serve",
        "python -m sglang.launch_server --tp-size",
    ],
)
def test_hostile_text_is_one_message(text: str) -> None:
    try:
        plan_from_command(read_command(text), default_plan())
    except PlanFileError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 600
    else:  # a command that reads is fine too; it must not raise anything else
        pass


def test_binary_and_huge_input_are_refused_before_reading() -> None:
    with pytest.raises(PlanFileError, match="not text"):
        command_text(bytes(range(256)) * 4)
    with pytest.raises(PlanFileError, match="at most"):
        command_text(b"vllm serve " + b"a" * 1_000_000)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.one_of(
        st.text(max_size=300),
        st.lists(
            st.sampled_from(
                [
                    "vllm",
                    "serve",
                    "-m",
                    "sglang.launch_server",
                    "--tp",
                    "--max-model-len",
                    "32K",
                    "'",
                    '"',
                    "\\\n",
                    "=",
                    "--x=1",
                    "Qwen/Qwen3-8B",
                    "docker",
                    "run",
                    "vllm/vllm-openai:v0.19.0",
                    "CUDA_VISIBLE_DEVICES=",
                    "&&",
                    "-O",
                    "--dtype",
                    "auto",
                    "-q",
                    "--gpus",
                    "all",
                    # llama.cpp's and Ollama's words (core.files.launch.gguf_command)
                    "llama-server",
                    "./main",
                    "-fa",
                    "-ngl",
                    "-ot",
                    "exps=CPU",
                    "-ts",
                    "1,0",
                    "-c",
                    "ghcr.io/ggml-org/llama.cpp:server-b5000",
                    "ollama",
                    "serve",
                    "ollama/ollama:0.6.8",
                    "OLLAMA_NUM_PARALLEL=x",
                    "OLLAMA_KV_CACHE_TYPE=q8_0",
                    "\nFROM",
                    "\nPARAMETER",
                    "num_ctx",
                    "<<EOF",
                    "\nEOF",
                    "--config",
                    "x.yaml",
                ]
            ),
            max_size=30,
        ).map(" ".join),
    )
)
def test_any_text_reads_or_is_refused_in_one_line(text: str) -> None:
    try:
        read = read_command(text)
    except PlanFileError:
        return
    assert read.engine in (Engine.VLLM, Engine.SGLANG, Engine.LLAMACPP)


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("ab -=\\'\"\t{}:,")), max_size=40))
def test_words_split_as_the_shell_splits_them(text: str) -> None:
    """shell_words agrees with Python's POSIX shlex wherever shlex splits. Left out of the alphabet where sh and
    shlex differ: '#' inside a word (a comment to shlex, not to sh), and in double quotes a backslash before $, `
    or a newline (sh drops the backslash, and the newline with it; shlex keeps them)."""
    try:
        expected = shlex.split(text)
    except ValueError:
        with pytest.raises(ValueError):
            shell_words(text)
        return
    assert shell_words(text) == expected


def test_where_sh_and_shlex_differ_the_shell_is_followed() -> None:
    # POSIX sh, "Double-Quotes": a backslash keeps its meaning before $ ` " \ and newline only.
    assert shell_words('"\\$x" "a\\\nb" "\\q"') == ["$x", "ab", "\\q"]
    assert shell_words("--url=http://h/#frag # a comment") == ["--url=http://h/#frag"]
    # "Token Recognition": an unquoted ; is an operator even against a word (shlex keeps it in the word).
    assert shell_words("export A=1; b 'x;y' c;# note") == ["export", "A=1", ";", "b", "x;y", "c", ";"]


def test_human_readable_lengths() -> None:
    # vLLM 0.19.0 arg_utils.py human_readable_int's docstring: '1k' -> 1,000, '1K' -> 1,024, '25.6k' -> 25,600.
    assert (human_int("1k"), human_int("1K"), human_int("25.6k"), human_int("32768")) == (1000, 1024, 25_600, 32_768)
    assert human_int("auto") == human_int("-1") == 0


def test_the_exports_flags_are_the_engines() -> None:
    """Every flag the exports write is one the flag tables know: the tables are not missing one (a flag of the
    exports read as not understood would show here)."""
    plan = Plan(
        model=find_model("llama-3.1-8b").spec,
        model_id="llama-3.1-8b",
        hardware=Hardware(gpu="h100-sxm"),
        inference=Inference(
            engine=Engine.VLLM,
            cuda_graphs=False,
            prefix_caching=PrefixCaching.OFF,
            replicas=2,
            pipeline_parallel=2,
            max_num_seqs=8,
            max_num_batched_tokens=4096,
            gpu_memory_utilization=0.8,
        ),
    )
    vllm_words = [w for w in export(plan, Target.VLLM).text.split() if w.startswith("-")]
    assert set(vllm_words) <= VLLM_SWITCHES | VLLM_VALUED
    sglang = plan.with_inference(engine=Engine.SGLANG, mem_fraction_static=0.85)
    sglang_words = [w for w in export(sglang, Target.SGLANG).text.split() if w.startswith("--")]
    assert set(sglang_words) <= SGLANG_SWITCHES | SGLANG_VALUED
    read = read_command(export(sglang, Target.SGLANG).text)
    assert (read.unknown, read.unexpressed, read.ignored) == ((), (), ())


def test_sglang_fraction_is_written_as_sglang_writes_fractions() -> None:
    # 0.88 - 0.03 in floating point (the 0.4.x multimodal reduction): written as 0.85, read back as 0.85.
    assert fraction_text(0.88 - 0.03) == "0.85"
    assert fraction_text(0.7) == "0.7"
    assert fraction_text(0.835) == "0.835"
    assert fraction_text(0.123456) == "0.123456"  # more digits than three: kept, so it reads back
    plan = default_plan().with_inference(engine=Engine.SGLANG, mem_fraction_static=0.88 - 0.03)
    assert "--mem-fraction-static 0.85\n" in export(plan, Target.SGLANG).text


def test_vllm_utilisation_is_written_with_the_same_decimals() -> None:
    # A GUI spin box stepping 0.90 by 0.01 twice holds 0.9200000000000002 in floating point; vLLM's own
    # default is written 0.9 / 0.92 as vLLM's docs write it (core/files/launch/vllm.py's docstring: 0.9, later 0.92).
    plan = default_plan().with_inference(engine=Engine.VLLM, gpu_memory_utilization=0.9 + 0.01 + 0.01)
    text = export(plan, Target.VLLM).text
    assert "--gpu-memory-utilization 0.92" in text and "0.9200000000000002" not in text
    assert read_command(text).read and not read_command(text).unknown


# ---- vramplan import-command -------------------------------------------------------------------------
def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_prints_the_plan_and_what_was_not_used(capsys: pytest.CaptureFixture[str]) -> None:
    command = "vllm serve Qwen/Qwen3-8B --max-model-len 8192 --port 8000 --frobnicate 3 --enable-expert-parallel"
    code, out, err = run(capsys, "import-command", command, "--gpu", "a100-80gb-sxm")
    assert code == 0, err
    assert "From the vLLM launch command" in out
    assert "--max-model-len 8192" in out and "Context = 8,192 tokens" in out  # the Serving form's label
    assert "ignored, no effect on memory or speed (1):\n    --port 8000\n" in out
    assert "not understood (1): --frobnicate 3" in out
    assert "--enable-expert-parallel — experts placed whole" in out
    assert "Qwen3 8B served by vLLM" in out and "NVIDIA A100" in out


def test_cli_json_and_save(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "serve.sh"
    source.write_text("python -m sglang.launch_server --model-path Qwen/Qwen3-8B \\\n  --context-length 4096 --tp 2\n")
    target = tmp_path / "plan.json"
    code, out, err = run(capsys, "import-command", "--file", str(source), "--json", "--save", str(target))
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    assert document["from_command"]["engine"] == "sglang"
    assert document["from_command"]["not_understood"] == []
    saved = load_plan(str(target))
    assert (saved.inference.engine, saved.inference.context, saved.inference.tensor_parallel) == (
        Engine.SGLANG,
        4096,
        2,
    )
    # An existing file is never replaced without --force.
    code, _, err = run(capsys, "import-command", "--file", str(source), "--save", str(target))
    assert code == 2 and "--force" in err
    code, _, err = run(capsys, "import-command", "--file", str(source), "--save", str(target), "--force")
    assert code == 0, err


def test_cli_refuses_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for args in (("import-command",), ("import-command", "vllm serve 'x"), ("import-command", "vllm serve nope/x-1b")):
        code, out, err = run(capsys, *args)
        assert code == 2 and out == "" and err.count("\n") == 1, (args, err)
    binary = tmp_path / "bin"
    binary.write_bytes(bytes(range(256)))
    code, _, err = run(capsys, "import-command", "--file", str(binary))
    assert code == 2 and "not text" in err


def test_cli_model_option_replaces_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "import-command", "vllm serve /models/my-finetune --max-model-len 4096", "--model", "qwen3-8b", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["from_command"]["model_found"].startswith("Qwen3 8B, given beside the command")


def test_read_settings_say_a_count_of_one_in_the_singular() -> None:
    # The read list printed "Concurrent = 1 requests" for llama-server's -np 1; a word unit takes its number
    # (core.format.counted), a symbol unit does not change.
    from core.files.launch.serve_command import shown_setting

    assert shown_setting("inference.concurrent", 1) == "Concurrent = 1 request"
    assert shown_setting("inference.concurrent", 8) == "Concurrent = 8 requests"
    assert shown_setting("inference.context", 32_768) == "Context = 32,768 tokens"


def test_the_ignored_flags_come_in_the_commands_word_order() -> None:
    # The flags are vLLM's own (VLLM_IGNORED): switches and valued flags interleaved, listed as written, every run.
    text = "vllm serve m --port 8000 --trust-remote-code --host 0.0.0.0 --disable-log-stats --seed 3"
    expected = ["--port 8000", "--trust-remote-code", "--host 0.0.0.0", "--disable-log-stats", "--seed 3"]
    assert [n.words for n in read_command(text).ignored] == expected
    llama = read_command("llama-server -m x-Q4_K_M.gguf --port 8080 --jinja --host 0.0.0.0 --mlock")
    assert [n.words for n in llama.ignored] == ["--port 8080", "--jinja", "--host 0.0.0.0", "--mlock"]


def test_cli_says_why_each_word_is_ignored_in_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    # HF_HOME's reason is serve_command.ENV_IGNORED's group (where models are downloaded); --port has none beyond the
    # heading's "no effect on memory or speed". The text gives each entry on its line as the Paste dialog does; the
    # JSON keeps "ignored" as it was (the words) and adds "ignored_reasons", one per entry, "" where none.
    command = "HF_HOME=/data/hf vllm serve Qwen/Qwen3-8B --port 8000 --max-model-len 8192"
    code, out, err = run(capsys, "import-command", command, "--gpu", "l4")
    assert code == 0, err
    assert (
        "  ignored, no effect on memory or speed (2):\n    HF_HOME=/data/hf — where models are downloaded and cached\n"
        "    --port 8000\n" in out
    )
    code, out, err = run(capsys, "import-command", command, "--gpu", "l4", "--json")
    assert code == 0, err
    report = json.loads(out)["from_command"]
    assert report["ignored"] == ["HF_HOME=/data/hf", "--port 8000"]
    assert report["ignored_reasons"] == ["where models are downloaded and cached", ""]


# ---- which entry point takes the positional model ---------------------------------------------------------------
def test_the_api_server_entry_point_reads_the_model_only_from_model() -> None:
    # vllm 0.19.0 wheel: cli_args.py make_arg_parser adds the positional model_tag (nargs="?"), but api_server.py's
    # __main__ hands parse_args() to run_server as it is; only `vllm serve` copies model_tag to --model
    # (entrypoints/cli/serve.py ServeSubcommand.cmd). With no --model, ModelConfig.model's default is served
    # (config/model.py: model: str = "Qwen/Qwen3-0.6B").
    api = "python -m vllm.entrypoints.openai.api_server"
    read = read_command(f"{api} Qwen/Qwen3-8B --max-model-len 8192")
    assert read.model_ref == ""
    assert len(read.unknown) == 1 and read.unknown[0].startswith("Qwen/Qwen3-8B (")
    assert "only from --model" in read.unknown[0] and "Qwen/Qwen3-0.6B" in read.unknown[0]
    both = read_command(f"{api} Qwen/Qwen3-8B --model Qwen/Qwen3-14B")
    assert both.model_ref == "Qwen/Qwen3-14B" and not both.unexpressed  # --model is what it serves
    assert [u.partition(" (")[0] for u in both.unknown] == ["Qwen/Qwen3-8B"]
    assert "Qwen/Qwen3-0.6B" not in both.unknown[0]  # --model given: no default served
    # vllm serve reads the same word as its model (unchanged).
    assert read_command("vllm serve Qwen/Qwen3-8B").model_ref == "Qwen/Qwen3-8B"


def test_the_vllm_openai_image_runs_vllm_serve() -> None:
    # vllm-project/vllm docker/Dockerfile, the vllm-openai stage's last line: ENTRYPOINT ["vllm", "serve"] (at
    # dead20baf70df70580ecb093f82b0b7b8676e4f5, CUDA 12.9.1, the 0.11 era; still so at v0.27.1). The words after the
    # image follow `vllm serve`: a positional word is the model, --model is moved in front as its positional.
    read = read_command("docker run --gpus all vllm/vllm-openai:v0.19.0 Qwen/Qwen3-8B --max-model-len 8192")
    assert (read.model_ref, read.unknown) == ("Qwen/Qwen3-8B", ())
    moved = read_command("docker run --gpus all vllm/vllm-openai:v0.19.0 --model Qwen/Qwen3-8B")
    assert (moved.model_ref, moved.unknown) == ("Qwen/Qwen3-8B", ())


def test_a_command_after_the_vllm_openai_image_runs_after_its_vllm_serve() -> None:
    # The image's ENTRYPOINT is `vllm serve` (above): `IMAGE vllm serve MODEL` runs `vllm serve vllm serve MODEL`,
    # whose parser takes "vllm" as the model and stops on the rest ('unrecognized arguments'), the error third-party
    # compose files report. docker run --entrypoint X replaces it (docker run reference: the words after the image are
    # X's arguments), so `--entrypoint vllm IMAGE serve MODEL` is `vllm serve MODEL`.
    after = read_command("docker run --gpus all vllm/vllm-openai:v0.19.0 vllm serve Qwen/Qwen3-8B --max-model-len 8192")
    assert after.model_ref == "Qwen/Qwen3-8B" and after.fields["inference.context"] == 8192  # read as written
    assert after.stops.startswith("vLLM would not start: the vllm/vllm-openai image runs `vllm serve` already")
    module = read_command("docker run vllm/vllm-openai python3 -m vllm.entrypoints.openai.api_server --model M")
    assert module.stops.startswith("vLLM would not start")
    replaced = read_command("docker run --gpus all --entrypoint vllm vllm/vllm-openai:v0.19.0 serve Qwen/Qwen3-8B")
    assert (replaced.model_ref, replaced.unknown, replaced.stops) == ("Qwen/Qwen3-8B", (), "")
    python = read_command(
        "docker run --entrypoint python3 vllm/vllm-openai -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B"
    )
    assert (python.model_ref, python.unknown, python.stops) == ("Qwen/Qwen3-8B", (), "")
    assert any(note.startswith("docker --entrypoint python3") for note in python.notes)
