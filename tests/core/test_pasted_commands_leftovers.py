"""Pasted launch commands, issue 23's leftovers (h87cmd): docker's ``--entrypoint`` before an image, llama.cpp's
per-program options by build.

* ``docker run --entrypoint X IMAGE ARGS``: the docker run reference (docs.docker.com, "Default ENTRYPOINT":
  ``--entrypoint`` overrides the image's ENTRYPOINT; the words after the image are its arguments). The image is docker's
  word, not the program's.
"""

from __future__ import annotations

from core.files.launch.engine_flags import LLAMACPP_PER_PROGRAM_FROM
from core.files.launch.serve_command import read_command
from core.plan import Engine

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
