"""Pasted launch commands, issue 23's leftovers (h87cmd): docker's ``--entrypoint`` before an image, llama.cpp's
per-program options by build.

* ``docker run --entrypoint X IMAGE ARGS``: the docker run reference (docs.docker.com, "Default ENTRYPOINT":
  ``--entrypoint`` overrides the image's ENTRYPOINT; the words after the image are its arguments). The image is docker's
  word, not the program's.
"""

from __future__ import annotations

from core.dtypes import WeightFormat
from core.files.launch.engine_flags import LLAMACPP_PER_PROGRAM_FROM
from core.files.launch.serve_command import plan_from_command, read_command
from core.plan import Engine
from core.presets import default_plan

GGUF = "/models/Qwen3-8B-Q4_K_M.gguf"


def test_an_entrypoint_program_before_the_image_runs_with_the_words_after_the_image() -> None:
    text = (
        "docker run --gpus all -v /models:/models --entrypoint /app/llama-server "
        f"ghcr.io/ggml-org/llama.cpp:server-cuda-b4500 -m {GGUF} -c 8192 -ngl 99 --port 8080"
    )
    read = read_command(text)
    assert (read.engine, read.program, read.unknown, read.stops) == (Engine.LLAMACPP, "llama-server", (), "")
    assert read.fields["inference.context"] == 8192
    assert read.fields["inference.llamacpp_build"] == 4500  # the image's tag still names the build
    assert any("--entrypoint /app/llama-server" in n for n in read.notes)
    # An image the reader does not know: the entrypoint says what runs.
    custom = read_command(f"docker run --rm --gpus all --entrypoint=llama-cli my/image:latest -m {GGUF} -c 4096")
    assert (custom.engine, custom.program, custom.unknown) == (Engine.LLAMACPP, "llama-cli", ())
    assert custom.fields["inference.context"] == 4096
    assert any("my/image:latest" in n for n in custom.notes)
    # vLLM's program as the entrypoint of another image.
    vllm = read_command("docker run --entrypoint vllm my/vllm:dev serve Qwen/Qwen3-8B --max-model-len 4096")
    assert (vllm.engine, vllm.model_ref, vllm.unknown) == (Engine.VLLM, "Qwen/Qwen3-8B", ())
    sglang = read_command("docker run --entrypoint sglang lmsysorg/sglang:v0.5.11 serve Qwen/Qwen3-8B --tp 2")
    assert (sglang.engine, sglang.model_ref, sglang.unknown) == (Engine.SGLANG, "Qwen/Qwen3-8B", ())
    assert sglang.fields["inference.sglang_version"].value == "0.5.11"  # the image's tag


# ggml-org/llama.cpp #9308 ("common : refactor arg parser") is merge commit 1b9ae5189cd279c6b45e36d43e4f9ccae628d02f
# (2024-09-07); the ggml-ci run of that commit prints "main: build = 3683 (1b9ae518)", the build number
# (`git rev-list --count`) its release tag b3683 carries. Builds before it parse every option in every program.
def test_a_build_before_the_per_program_options_takes_every_option() -> None:
    assert LLAMACPP_PER_PROGRAM_FROM == 3683
    image = "ghcr.io/ggml-org/llama.cpp:{tag}"
    old = read_command(f"docker run --gpus all {image.format(tag='light-cuda-b3600')} -m {GGUF} -c 4096 --port 8080")
    assert (old.program, old.unknown, old.stops) == ("llama-cli", (), "")
    assert old.fields["inference.llamacpp_build"] == 3600
    new = read_command(f"docker run --gpus all {image.format(tag='light-cuda-b3683')} -m {GGUF} -c 4096 --port 8080")
    assert "not an option of llama-cli" in new.unknown[0] and "--port" in new.stops
    # No build named: the current table (common/arg.cpp 145b6280), as before.
    assert "--port" in read_command(f"llama-cli -m {GGUF} --port 8080").stops
    # A variable of another program's option is read where the build predates the sets.
    env = read_command(f"docker run -e LLAMA_ARG_PORT=8080 {image.format(tag='light-b3000')} -m {GGUF}")
    assert env.unknown == () and all("never reads" not in n.why for n in env.ignored)


def test_pasted_version_output_names_the_build() -> None:
    # --version prints "version: N (COMMIT)" then "built with ...": common/arg.cpp's --version option,
    # fprintf(stderr, "version: %d (%s)\n", LLAMA_BUILD_NUMBER, LLAMA_COMMIT) (the same in common.cpp's parser before).
    text = f"version: 3500 (a1b2c3d4)\nbuilt with cc for x86_64-linux-gnu\nllama-cli -m {GGUF} --port 8080"
    read = read_command(text)
    assert read.fields["inference.llamacpp_build"] == 3500
    assert (read.unknown, read.stops) == ((), "")


# ---- found by reading real pasted commands (tests/data/launch_commands/public.json) ----------------------------
def test_a_vllm_serve_word_no_flag_takes_stops_vllm() -> None:
    # vllm-project/vllm issue #22303 (vllm 0.9.2): `--enforce_eager true`. vllm serve's one positional, model_tag
    # (nargs="?", vllm/entrypoints/openai/cli_args.py make_arg_parser), holds the model already, so argparse leaves
    # `true` over: "unrecognized arguments: true".
    read = read_command("vllm serve /models/Qwen3-30B-A3B --max-model-len 64000 --enforce_eager true")
    assert read.unknown == ("true (a word no flag takes)",)
    assert read.fields["inference.cuda_graphs"] is False  # the switch itself is read
    assert read.stops == "vLLM 0.19 would not start: 'vllm serve: error: unrecognized arguments: true'"


def test_a_windows_path_keeps_its_backslashes() -> None:
    # ggml-org/llama.cpp issue #9030, pasted from cmd.exe: a backslash is a path separator there, not an escape.
    text = r'llama-cli -m E:\projects\hf-repos\madlad400-10b-mt-q8_0.gguf --n-gpu-layers 1000 -p "<2sk> Hi" --temp 0'
    read = read_command(text)
    assert read.model_ref == r"E:\projects\hf-repos\madlad400-10b-mt-q8_0.gguf"
    assert read.model_name == "madlad400-10b-mt"
    exe = read_command(r"C:\llama\llama-server.exe -m C:\models\Qwen3-8B-Q4_K_M.gguf -c 4096")
    assert (exe.program, exe.model_name, exe.fields["inference.context"]) == ("llama-server", "Qwen3-8B", 4096)
    # A POSIX line keeps its escapes.
    assert read_command(r"llama-server -m /m/Qwen3-8B-Q4_K_M.gguf -a my\ model").unknown == ()


def test_sglang_s_deprecated_switches_take_no_value() -> None:
    # sglang 0.4.6 server_args.py line 850: "--enable-flashmla", action=DeprecatedAction, whose __init__ (line 1348)
    # sets nargs=0; 0.5.11 lines 5137 and 6145: --prefill-round-robin-balance and --enable-piecewise-cuda-graph the
    # same. A switch: the next flag is not its value (sgl-project/sglang PR #5190's command).
    read = read_command(
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3-0324 --tp 16 --enable-flashmla "
        "--disable-radix-cache --enable-piecewise-cuda-graph --prefill-round-robin-balance --context-length 4096"
    )
    assert read.unknown == ()
    assert read.fields["inference.context"] == 4096


def test_a_latent_attention_model_is_planned_from_the_window_s_first_plan() -> None:
    # sgl-project/sglang issue #2585 (v0.4.1 release note's command). The window's first plan trains LoRA on q_proj and
    # v_proj, which DeepSeek-V3's latent attention has not: the command's plan failed on those training targets.
    read = read_command("python3 -m sglang.launch_server --model deepseek-ai/DeepSeek-V3-Base --tp 8")
    built = plan_from_command(read, default_plan())
    assert (built.plan.model_id, built.plan.inference.tensor_parallel) == ("deepseek-v3", 8)


def test_quantised_and_dated_checkpoint_names_find_their_model() -> None:
    # sgl-project/sglang issue #4895: a folder named gemma-3-27b-it-int4-awq/ (AWQ int4, trailing slash);
    # sgl-project/sglang PR #5190: deepseek-ai/DeepSeek-V3-0324 (DeepSeek's month-day re-release, the same shapes).
    gemma = read_command("python3 -m sglang.launch_server --model-path /llm/model/google/gemma-3-27b-it-int4-awq/")
    built = plan_from_command(gemma, default_plan())
    assert (built.plan.model_id, built.plan.inference.weight_dtype) == ("gemma-3-27b", WeightFormat.AWQ_INT4)
    dated = read_command("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3-0324 --tp 8")
    assert plan_from_command(dated, default_plan()).plan.model_id == "deepseek-v3"


def test_sglang_s_dp_attention_splits_the_tp_group_instead_of_adding_replicas() -> None:
    # sgl-project/sglang PR #5190: --tp 16 --dp 16 --enable-dp-attention on two nodes of 8. sglang 0.4.6
    # server_args.py lines 290-295: with enable_dp_attention, "1 < dp-size <= tp-size" and tp_size % dp_size == 0;
    # the attention's data parallel ranks are the TP group's own GPUs (help text, line 996: "data parallelism for
    # attention and tensor parallelism for FFN"), so 16 GPUs in all, not 16 replicas of 16.
    read = read_command(
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3-0324 --tp 16 --dp 16 --enable-dp-attention"
    )
    assert (read.fields["inference.tensor_parallel"], read.fields["inference.replicas"]) == (16, 1)
    assert any(n.words == "--dp 16" and "inside the tensor-parallel group" in n.why for n in read.unexpressed)
    plain = read_command("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 2 --dp 2")
    assert plain.fields["inference.replicas"] == 2  # without it, --dp-size is replicas as before


def test_numactl_in_front_is_a_wrapper() -> None:
    # ggml-org/llama.cpp issue #14201: numactl(8) pins the CPU threads and host memory; the GPU's share is the plan's.
    text = (
        'CUDA_VISIBLE_DEVICES="0," numactl --physcpubind="8,10, 9,11" --membind=1 -N 1 /opt/llama.cpp/build/bin/'
        f"llama-server --model {GGUF} --n-gpu-layers 99 --ctx-size 32768"
    )
    read = read_command(text)
    assert (read.program, read.unknown, read.fields["inference.context"]) == ("llama-server", (), 32768)
    assert "run through numactl: no effect on memory or speed" in read.notes
    assert not any(n.startswith("before the command, not read") for n in read.notes)
