"""llama.cpp and Ollama launch commands read back into the serving plan (core.files.launch.gguf_command through
core.files.launch.serve_command.read_command), and ``vramplan import-command`` with them.

The recorded commands are the llama.cpp records of benchmarks/realgpu/engine_logs.json whose ``settings.command`` is
the command itself; the settings each record gives beside it are what the read must find. Flag names: ggml-org/llama.cpp
common/arg.cpp at 145b6280 (core.files.launch.engine_flags). Ollama's records (benchmarks/realgpu/ollama_logs.json)
give the server's settings but no command: each is written as the environment and Modelfile that set them and read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.cli.app import main
from core.dtypes import CacheType, GgufQuant
from core.errors import PlanFileError
from core.files.launch.engine_flags import LLAMACPP_SWITCHES, LLAMACPP_VALUED
from core.files.launch.gguf_command import LLAMACPP_IGNORED, LLAMACPP_WHY, gguf_name, ollama_tag
from core.files.launch.serve_command import NO_EFFECT, plan_from_command, read_command
from core.plan import Engine, OllamaVersion
from core.presets import default_plan

ROOT = Path(__file__).resolve().parents[2]
LOGS = {log["id"]: log for log in json.loads((ROOT / "benchmarks/realgpu/engine_logs.json").read_text())["logs"]}
OLLAMA = json.loads((ROOT / "benchmarks/realgpu/ollama_logs.json").read_text())["logs"]
# Every llama.cpp record whose settings.command is a llama.cpp program's line (the xd-* records: ./main at build
# 2797 in a notebook cell; llamacpp23527-*: llama-server of 2026). logdetective106-* run python -m llama_cpp.server,
# llama-cpp-python's own server, which is not read (see test_llama_cpp_python_is_not_taken_for_llama_cpp).
RECORDS = sorted(
    i for i, log in LOGS.items() if log["engine"] == "llama.cpp" and "main " in log["settings"].get("command", "")
) + sorted(i for i, log in LOGS.items() if log["settings"].get("command", "").startswith("llama-server"))


def test_the_records_are_there() -> None:
    assert len(RECORDS) == 39  # 35 ./main records and 4 llama-server ones on 2026-12-07


@pytest.mark.parametrize("record_id", RECORDS)
def test_each_recorded_llama_cpp_command_reads_as_its_record_says(record_id: str) -> None:
    settings = LOGS[record_id]["settings"]
    read = read_command(settings["command"])
    fields = read.fields
    assert read.engine is Engine.LLAMACPP and fields["inference.ollama_version"] is OllamaVersion.NONE
    assert fields["inference.gguf_quant"] is GgufQuant.Q4_K_M  # gguf_quant: Q4_K_M, or UD-Q4_K_XL (its M mix)
    assert fields["inference.cache_type"] is CacheType(settings["type_k"]) is CacheType(settings["type_v"])
    assert fields["inference.ubatch"] == settings["n_ubatch"]
    if isinstance(settings.get("ctx_size"), int):  # "0 -> n_ctx_train 8192": the model's own, left to the plan
        assert fields["inference.context"] == settings["ctx_size"] // settings.get("n_parallel", 1)
    else:
        assert not read.context_given
    if "n_parallel" in settings:
        assert fields["inference.concurrent"] == settings["n_parallel"]
    if settings.get("n_gpu_layers", "").startswith("10000"):  # "10000 (all)": past the layers, all of them
        assert fields["inference.gpu_layers"] == 10000
    flash = settings["flash_attn"]
    assert fields["inference.flash_attention"] is (flash == "on" or flash == 1)
    if settings.get("cpu_moe"):
        assert fields["inference.cpu_moe_layers"] == 999  # --cpu-moe: every layer's experts
    # Nothing dropped unsaid: every flag is read, ignored, not expressed or not understood.
    said = " ".join([*(n.words for n in (*read.read, *read.ignored, *read.unexpressed)), *read.unknown, *read.notes])
    for flag in (w for w in settings["command"].split() if w.startswith("-")):
        assert flag in said, flag
    assert read.unknown == ()


def test_the_recorded_main_line_builds_its_plan() -> None:
    # xd-4090-x1-...: ./main -ngl 10000 -m ./models/8B-v3/ggml-model-Q4_K_M.gguf ... -c 0 -n 1024; the folder names
    # no catalogue model (Llama 3 8B): the closest are offered, and the model chosen takes the rest.
    read = read_command(LOGS["xd-4090-x1-llama3-8b-q4km-c8192"]["settings"]["command"])
    assert read.model_name == "8B-v3" and read.program == "main"
    assert {n.words for n in read.ignored} == {
        "-e",
        "--color",
        "--temp 1.1",
        "--repeat_penalty 1.1",
        "-s 0",
        "-p <Shakespeare prompt>",
    }
    assert any("before the June 2024 rename" in note for note in read.notes)  # ./main's flash attention: off
    from core.files.runconfig import choice_from_catalogue

    built = plan_from_command(read, default_plan(), model=choice_from_catalogue("llama-3.1-8b"))
    inf = built.plan.inference
    # -c 0: the model's own length, Llama 3.1 8B's max_position_embeddings (meta-llama/Llama-3.1-8B config.json).
    assert (inf.engine, inf.context, inf.new_tokens, inf.gpu_layers) == (Engine.LLAMACPP, 131_072, 1024, 10000)


def test_a_llama_server_line_with_every_kind_of_word() -> None:
    read = read_command(
        "CUDA_VISIBLE_DEVICES=0,1 ./build/bin/llama-server -hf unsloth/Qwen3-8B-GGUF:q5_k_m -c 32768 -np 4 "
        "--n_gpu_layers all -fa auto -ctk q8_0 -ctv q4_0 -ub 1024 -b 256 -sm layer -ts 3,1 -t 8 --host 0.0.0.0 "
        "--port 8080 --jinja --no-mmap --mlock -mg 0 -nkvo --frobnicate 3 stray"
    )
    fields = read.fields
    assert read.model_ref == "unsloth/Qwen3-8B-GGUF" and read.model_name == "Qwen3-8B"
    assert fields["inference.gguf_quant"] is GgufQuant.Q5_K_M
    assert fields["inference.context"] == 8192  # -c is every slot's together: 32,768 / 4
    assert (fields["inference.concurrent"], fields["inference.gpu_layers"]) == (4, 999)
    assert fields["inference.flash_attention"] is True  # auto: on where the GPU runs it
    assert fields["inference.cache_type"] is CacheType.Q8_0  # K's; V's q4_0 is listed
    assert fields["inference.ubatch"] == 256  # llama_context: n_ubatch = min(n_batch, n_ubatch)
    assert fields["inference.pipeline_parallel"] == 2
    assert {n.words for n in read.ignored} == {
        "-t 8",
        "--host 0.0.0.0",
        "--port 8080",
        "--jinja",
        "--no-mmap",
        "--mlock",
        "-mg 0",
    }
    assert {n.words for n in read.unexpressed} == {"-ctv q4_0", "-ts 3,1", "-nkvo"}
    assert read.unknown == ("--frobnicate 3", "stray (a word no flag takes)")


def test_flash_attention_across_builds() -> None:
    # A bare -fa (builds before on|off|auto) is on; -fa off / 0 / false off; none: llama-server's auto, ./main's off.
    on = [read_command(f"llama-server -m q-Q8_0.gguf {fa} -c 4096").fields for fa in ("-fa", "-fa on", "-fa 1")]
    assert all(f["inference.flash_attention"] is True for f in on)
    off = [read_command(f"llama-cli -m q-Q8_0.gguf -fa {v} -c 4096").fields for v in ("off", "0", "false")]
    assert all(f["inference.flash_attention"] is False for f in off)
    assert read_command("llama-server -m q-Q8_0.gguf").fields["inference.flash_attention"] is True
    assert read_command("./main -m q-Q8_0.gguf").fields["inference.flash_attention"] is False


def test_experts_and_overrides() -> None:
    read = read_command(r"llama-server -m m-Q4_0.gguf -ot 'blk\.([0-9]|1[0-1])\.ffn_.*_exps\.=CPU' -ngl 99")
    assert read.fields["inference.cpu_moe_layers"] == 12
    odd = read_command("llama-server -m m-Q4_0.gguf -ot 'attn_q=CUDA0' --n-cpu-moe 3")
    assert odd.fields["inference.cpu_moe_layers"] == 3
    assert [n.words for n in odd.unexpressed] == ["-ot attn_q=CUDA0"]


def test_gguf_and_ollama_names() -> None:
    # Hugging Face GGUF repositories' file names (bartowski's, unsloth's, TheBloke's) and Ollama library tags.
    assert gguf_name("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf") == ("Meta-Llama-3.1-8B-Instruct", "Q4_K_M")
    assert gguf_name("/m/mistral-7b-instruct-v0.2.Q4_K_S.gguf") == ("mistral-7b-instruct-v0.2", "Q4_K_S")
    assert gguf_name("Qwen3-235B-A22B-UD-Q2_K_XL-00001-of-00002.gguf") == ("Qwen3-235B-A22B", "UD-Q2_K_XL")
    assert gguf_name("unsloth/gpt-oss-20b-GGUF") == ("gpt-oss-20b", "")
    assert ollama_tag("llama3.1:8b-instruct-q4_K_M") == ("llama3.1-8b", "q4_K_M")
    assert ollama_tag("qwen3:30b-a3b") == ("qwen3-30b", "")
    assert ollama_tag("gemma2:9b-instruct-fp16") == ("gemma2-9b", "fp16")
    assert ollama_tag("hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q6_K") == ("Llama-3.2-3B-Instruct", "Q6_K")


def test_the_tables_split_every_flag_once() -> None:
    assert not LLAMACPP_SWITCHES & LLAMACPP_VALUED
    assert LLAMACPP_IGNORED <= LLAMACPP_SWITCHES | LLAMACPP_VALUED
    assert set(LLAMACPP_WHY) <= LLAMACPP_SWITCHES | LLAMACPP_VALUED | {"--lora-scaled"}
    assert not LLAMACPP_IGNORED & set(LLAMACPP_WHY)


def test_llama_cpp_python_is_not_taken_for_llama_cpp() -> None:
    # logdetective106-*: llama-cpp-python's server has its own flags (--n_gpu_layers as a pydantic field).
    with pytest.raises(PlanFileError, match="llama-server -m FILE.gguf"):
        read_command(LOGS["logdetective106-mistral7b-v0.2-q4ks-ctx2048"]["settings"]["command"])


# ---- Ollama ---------------------------------------------------------------------------------------------
def _ollama_text(settings: dict[str, object], model: str) -> str:
    """The server's environment and a Modelfile that set a record's settings, as a user would write them."""
    env = [
        f"OLLAMA_NUM_PARALLEL={settings['parallel']}",
        f"OLLAMA_FLASH_ATTENTION={int(bool(settings['flash_attention']))}",
        f"OLLAMA_KV_CACHE_TYPE={settings['kv_cache_type']}",
    ]
    params = [f"PARAMETER num_ctx {settings['ctx_size']}", f"PARAMETER num_batch {settings['num_batch']}"]
    params += [f"PARAMETER num_gpu {settings['num_gpu']}"]
    return " ".join(env) + " ollama serve &\n" + f"FROM {model}\n" + "\n".join(params) + "\n"


@pytest.mark.parametrize("log", OLLAMA, ids=[log["id"] for log in OLLAMA])
def test_each_ollama_records_settings_read_back(log: dict[str, object]) -> None:
    settings = log["settings"]
    assert isinstance(settings, dict)
    read = read_command(_ollama_text(settings, f"./{log['catalogue_id']}-{log['gguf_quant']}.gguf"))
    fields = read.fields
    assert read.program == "ollama" and read.engine is Engine.LLAMACPP
    assert fields["inference.concurrent"] == settings["parallel"]
    assert fields["inference.flash_attention"] is settings["flash_attention"]
    assert fields["inference.cache_type"] is CacheType(settings["kv_cache_type"])
    assert fields["inference.context"] == settings["ctx_size"]
    assert fields["inference.ubatch"] == settings["num_batch"]
    assert fields["inference.gpu_layers"] == 999  # num_gpu -1: Ollama's own choice
    assert fields["inference.gguf_quant"] is GgufQuant(str(log["gguf_quant"]))
    assert (read.ignored, read.unexpressed, read.unknown) == ((), (), ())
    built = plan_from_command(read, default_plan())
    assert built.plan.model_id == log["catalogue_id"]


def test_ollama_run_with_its_environment() -> None:
    read = read_command(
        "export OLLAMA_HOST=0.0.0.0:11434\n"
        "OLLAMA_FLASH_ATTENTION=true OLLAMA_KV_CACHE_TYPE=q4_0 OLLAMA_CONTEXT_LENGTH=16384 "
        "OLLAMA_GPU_OVERHEAD=536870912 OLLAMA_MAX_LOADED_MODELS=2 OLLAMA_FOO=1 ollama serve &\n"
        "ollama run --verbose llama3.1:8b-instruct-q8_0 'Why is the sky blue?'"
    )
    fields = read.fields
    assert (fields["inference.flash_attention"], fields["inference.cache_type"]) == (True, CacheType.Q4_0)
    assert fields["inference.context"] == 16384 and fields["inference.gguf_quant"] is GgufQuant.Q8_0
    assert read.model_name == "llama3.1-8b"
    assert {n.words for n in read.ignored} == {"OLLAMA_HOST=0.0.0.0:11434", "--verbose", "Why is the sky blue?"}
    assert [n.words for n in read.unexpressed] == [
        "OLLAMA_GPU_OVERHEAD=536870912",
        "OLLAMA_MAX_LOADED_MODELS=2",
        "OLLAMA_FOO=1",
    ]
    built = plan_from_command(read, default_plan())
    inf = built.plan.inference
    assert built.plan.model_id == "llama-3.1-8b" and inf.ollama_version is not OllamaVersion.NONE
    assert inf.concurrent >= 1  # OLLAMA_NUM_PARALLEL unset: the line's scheduler picks (core.serving.ollama)


def test_a_quantised_cache_without_flash_attention_is_f16() -> None:
    # llm/server.go passes OLLAMA_KV_CACHE_TYPE to the runner only with flash attention.
    read = read_command("OLLAMA_KV_CACHE_TYPE=q8_0 ollama run qwen3:8b")
    assert "inference.cache_type" not in [n.field for n in read.read]
    assert read.fields["inference.cache_type"] is CacheType.F16
    assert "only with OLLAMA_FLASH_ATTENTION=1" in read.unexpressed[0].why


@pytest.mark.parametrize(
    "text",
    [
        "llama-server -m 'x.gguf",  # an unterminated quote
        "llama-server -m x.gguf \x1b[31m",  # control characters
        "ollama run 'qwen3",
        "llama-server " + "-c 1 " * 1500,  # more words than a launch line has
    ],
)
def test_hostile_commands_are_one_line_refusals(text: str) -> None:
    with pytest.raises(PlanFileError) as error:
        read_command(text)
    assert "\n" not in str(error.value)


def test_bad_values_are_listed_not_raised() -> None:
    read = read_command("llama-server -m x-Q4_0.gguf -c lots -ngl many -ctk q3_0 -sm diagonal -np")
    assert set(read.unknown) == {
        "-c lots (not a context length)",
        "-ngl many (not a layer count, auto or all)",
        "-ctk q3_0 (not a cache type llama.cpp takes)",
        "-sm diagonal (not none, layer or row)",
        "-np (no value given)",
    }


def test_import_command_prints_the_lists_for_llama_server(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["import-command", "llama-server -m Qwen3-8B-Q4_K_M.gguf -c 8192 --port 8080 -nkvo", "--gpu", "rtx-4090"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "From the llama.cpp launch command" in out
    assert "-c 8192" in out and "Context = 8,192 tokens" in out
    assert "ignored, no effect on memory or speed (1):\n    --port 8080\n" in out
    assert "-nkvo — the KV cache kept in host RAM" in out


def test_the_docker_images() -> None:
    # llama.cpp's README "Docker": ghcr.io/ggml-org/llama.cpp:server (entrypoint llama-server), :light (llama-cli),
    # :full (tools.sh --server / --run); a tag's bN is the build the plan's speed rules follow.
    server = read_command(
        "docker run --gpus all -p 8080:8080 -v /models:/models ghcr.io/ggml-org/llama.cpp:server-cuda-b6123 "
        "-m /models/Qwen3-8B-Q8_0.gguf -c 8192 --host 0.0.0.0 --port 8080 -ngl 99"
    )
    assert (server.program, server.fields["inference.llamacpp_build"]) == ("llama-server", 6123)
    assert server.fields["inference.gpu_layers"] == 99 and server.unknown == ()
    full = read_command("docker run -v /m:/m ghcr.io/ggml-org/llama.cpp:full --run -m /m/x-Q4_0.gguf -n 64")
    assert full.program == "llama-cli" and "inference.llamacpp_build" not in full.fields and full.unknown == ()
    # Ollama's image runs ollama serve; its tag names the release (0.6.8: the 0.6.7 line, v0.6.7 - v0.6.8).
    ollama = read_command(
        "docker run -d --gpus=all -e OLLAMA_FLASH_ATTENTION=1 -e OLLAMA_NUM_PARALLEL=2 -v ollama:/root/.ollama "
        "-p 11434:11434 --name ollama ollama/ollama:0.6.8\n"
        "docker exec -it ollama ollama run llama3.2:3b"
    )
    assert ollama.fields["inference.ollama_version"] is OllamaVersion.V0_6_7
    assert (ollama.fields["inference.concurrent"], ollama.model_name) == (2, "llama3.2-3b")
    assert (ollama.ignored, ollama.unexpressed, ollama.unknown) == ((), (), ())


# The recorded llama-server line (llamacpp23527-*, benchmarks/realgpu/engine_logs.json) given by its variables instead:
# each flag's variable is its .set_env(...) in common/arg.cpp at 145b6280 (core.files.launch.engine_flags.LLAMACPP_ENV):
# -m LLAMA_ARG_MODEL, -c LLAMA_ARG_CTX_SIZE, -b LLAMA_ARG_BATCH, -ub LLAMA_ARG_UBATCH, -fa LLAMA_ARG_FLASH_ATTN,
# -ctk / -ctv LLAMA_ARG_CACHE_TYPE_K / _V, --kv-unified LLAMA_ARG_KV_UNIFIED, --cpu-moe LLAMA_ARG_CPU_MOE,
# -np LLAMA_ARG_N_PARALLEL.
RECORDED_ENV = {
    "LLAMA_ARG_MODEL": "Qwen3.6-35B-A3B-UD-Q4_K_XL.gguf",
    "LLAMA_ARG_CTX_SIZE": "150000",
    "LLAMA_ARG_BATCH": "4096",
    "LLAMA_ARG_UBATCH": "4096",
    "LLAMA_ARG_FLASH_ATTN": "on",
    "LLAMA_ARG_CACHE_TYPE_K": "q8_0",
    "LLAMA_ARG_CACHE_TYPE_V": "q8_0",
    "LLAMA_ARG_KV_UNIFIED": "1",
    "LLAMA_ARG_CPU_MOE": "true",
    "LLAMA_ARG_N_PARALLEL": "1",
}


@pytest.mark.parametrize(
    "text",
    [
        " ".join(f"{k}={v}" for k, v in RECORDED_ENV.items()) + " llama-server",
        "".join(f"export {k}={v}\n" for k, v in RECORDED_ENV.items()) + "llama-server",
        " && ".join(f"export {k}={v}" for k, v in RECORDED_ENV.items()) + " && llama-server",
        "".join(f"export {k}={v}; " for k, v in RECORDED_ENV.items()) + "llama-server",
        "docker run --gpus all "
        + " ".join(f"-e {k}={v}" for k, v in RECORDED_ENV.items())
        + " ghcr.io/ggml-org/llama.cpp:server-cuda",
    ],
    ids=["in-front", "export-lines", "export-and", "export-semicolon", "docker-e"],
)
def test_llama_arg_variables_read_as_their_flags(text: str) -> None:
    flags = read_command(LOGS["llamacpp23527-qwen36-35b-a3b-150k-ub4096-baseline"]["settings"]["command"])
    read = read_command(text)
    assert read.fields == flags.fields and read.model_ref == flags.model_ref
    assert (read.unexpressed, read.unknown) == (flags.unexpressed, flags.unknown)
    assert not any("not read" in note for note in read.notes)
    shown = {n.words.partition("=")[0] for n in read.read if n.field}
    assert {"LLAMA_ARG_CTX_SIZE", "LLAMA_ARG_UBATCH", "LLAMA_ARG_FLASH_ATTN"} <= shown  # named as written


def test_the_flag_wins_over_its_variable() -> None:
    # arg.cpp 145b6280 common_params_parse_ex: the environment first, then the command line ("warn: %s environment
    # variable is set, but will be overwritten by command line argument %s"); any spelling of the option counts.
    read = read_command(
        "LLAMA_ARG_CTX_SIZE=4096 LLAMA_ARG_N_GPU_LAYERS=20 llama-server -m x-Q4_K_M.gguf --ctx_size 8192"
    )
    assert read.fields["inference.context"] == 8192 and read.fields["inference.gpu_layers"] == 20
    assert [(n.words, "--ctx_size wins" in n.why) for n in read.ignored] == [("LLAMA_ARG_CTX_SIZE=4096", True)]


def test_llama_arg_values_as_llama_cpp_takes_them() -> None:
    # get_value_from_env / common_params_parse_ex (arg.cpp 145b6280): a switch's variable sets it only when is_truthy;
    # a bool option's takes is_truthy / is_falsey, anything else stops llama.cpp; LLAMA_ARG_NO_<NAME> set turns it off.
    read = read_command(
        "LLAMA_ARG_KV_UNIFIED=0 LLAMA_ARG_NO_KV_OFFLOAD=1 LLAMA_ARG_MMAP=maybe LLAMA_ARG_FROBNICATE=3 "
        "LLAMA_ARG_N_GPU_LAYERS=lots llama-server -m x-Q4_K_M.gguf"
    )
    assert [n.words for n in read.ignored] == ["LLAMA_ARG_KV_UNIFIED=0"]  # a switch not on: left off
    assert any(n.words == "LLAMA_ARG_NO_KV_OFFLOAD=1" for n in (*read.read, *read.unexpressed))  # -nkvo
    assert read.unknown[0].startswith("LLAMA_ARG_MMAP=maybe (llama.cpp takes on/off")
    assert read.unknown[1].startswith("LLAMA_ARG_FROBNICATE=3 (no llama.cpp option reads it")
    assert any(u.startswith("LLAMA_ARG_N_GPU_LAYERS=lots") for u in read.unknown)
    # Variables are llama.cpp's only: a vLLM line keeps them in the list of what was not understood.
    assert read_command("LLAMA_ARG_CTX_SIZE=4096 vllm serve m").unknown == ("LLAMA_ARG_CTX_SIZE=4096",)
    # LLAMA_CACHE is no flag's variable: the folder -hf downloads into (common/common.cpp fs_get_cache_directory).
    cache = read_command("LLAMA_CACHE=/models llama-server -hf unsloth/Qwen3-8B-GGUF:Q4_K_M")
    assert cache.unknown == () and [(n.words, n.why) for n in cache.ignored] == [
        ("LLAMA_CACHE=/models", f"where models are downloaded and cached: {NO_EFFECT}")
    ]
