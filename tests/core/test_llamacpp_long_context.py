"""llama.cpp's compute buffers at long context: the attention mask, a graph input that grows with n_ctx.

The mask (``attn_inp_kq_mask``, n_kv x n_ubatch) is an input: ggml_backend_sched keeps it in the host's compute
buffer and copies it to each GPU. Before b9410 (ggml-org/llama.cpp PR #23764) it was float32 and cast to float16
for flash attention on the GPU; from b9410 it is float16 (core.serving.llamacpp, FA_MASK_F16_FROM_BUILD).
The logs below are stored in the code index without a resolvable repository, so they are cited here by the
index's file id and kept out of benchmarks/realgpu/engine_logs.json (which records a URL for each log).
"""

from __future__ import annotations

import pytest

from core.catalogue import find_model
from core.plan import Engine, Hardware, Inference, Plan
from core.serving.llamacpp import (
    EMBD_INPUT_FROM_BUILD,
    FA_MASK_F16_FROM_BUILD,
    compute_buffer_bytes,
    context_cells,
    host_input_bytes,
    llamacpp_buffers,
)
from core.units import MiB
from tests.core.test_qwen3_5 import m4_plan


def served(model_id: str, **inference: object) -> Plan:
    return Plan(
        model=find_model(model_id).spec,
        hardware=Hardware(gpu="h100-sxm"),
        inference=Inference(engine=Engine.LLAMACPP, **inference),  # type: ignore[arg-type]
    )


# Code index file 61338146820 (a Russian write-up of llama-server on a MacBook Pro M4 Pro): "build_info:
# b8999-b97ebdc98", unsloth Qwen3.5-9B Q4_K_S, -c 262144, -b 512 (n_ubatch 512), --flash-attn on, -ctk/-ctv
# q8_0, --parallel 1: "MTL0 compute buffer size = 832.60 MiB", "CPU compute buffer size = 528.29 MiB".
M4_METAL_MIB, M4_CPU_MIB, M4_BUILD = 832.60, 528.29, 8999


# m4_plan: the log's plan (tests/core/test_qwen3_5.py). A hybrid is planned at a current build only (core.plan):
# the build of the log is passed to the rule.


def test_qwen35_9b_at_262k_cells_on_b8999_within_3_percent() -> None:
    plan = m4_plan()
    cells = context_cells(plan)
    assert cells == 262_144
    metal = compute_buffer_bytes(plan, cells, output=True, split=False, build=M4_BUILD) / MiB
    assert metal == pytest.approx(M4_METAL_MIB, rel=0.03)
    # The source's arithmetic: the float32 mask copy 262,144 x 512 x 4 B = 512 MiB and its float16 cast 256 MiB,
    # above the FFN moment of the recurrent layers before the first attention layer: 2 x 512 x 12,288 x 4 B
    # (gate and up) + 2 x 512 x 4,096 x 4 B = 64 MiB.
    assert metal == 512 + 256 + 64
    host = host_input_bytes(plan, cells, build=M4_BUILD) / MiB
    assert host == pytest.approx(M4_CPU_MIB, rel=0.03)
    assert host == 512 + 2 * 8  # the float32 mask, the embedding rows and the unused embeddings input


def test_a_current_build_keeps_a_float16_mask_and_no_cast() -> None:
    plan = m4_plan()  # llamacpp_build 0: a current build, past b9410
    cells = context_cells(plan)
    old = compute_buffer_bytes(plan, cells, output=True, split=False, build=FA_MASK_F16_FROM_BUILD - 1)
    new = compute_buffer_bytes(plan, cells, output=True, split=False)
    assert new < old
    # The float16 mask input: 262,144 x 512 x 2 B = 256 MiB on the host, beside the two embedding inputs.
    assert host_input_bytes(plan, cells) / MiB == 256 + 2 * 8
    buffers = llamacpp_buffers(plan)
    assert buffers.host_compute == host_input_bytes(plan, cells)


# Code index file 56678392724 (a llama-server log of 2026-05-14, before b9272, which issue #23527 ran on
# 2026-05-22): unsloth Qwen3.6-27B (64 layers and an MTP layer; the catalogue's Qwen3.5 27B has its widths),
# -c 131072 with 4 slots in a unified cache, q8_0, flash attention: "CUDA0 compute buffer size = 495.00 MiB",
# "CUDA_Host compute buffer size = 276.29 MiB".
def test_qwen36_27b_at_131k_cells_is_its_logits_and_its_inputs() -> None:
    plan = served("qwen3.5-27b", gguf_quant="Q4_K_M", cache_type="q8_0", context=32_768, concurrent=4)
    cells = context_cells(plan)
    assert cells == 131_072
    gpu = compute_buffer_bytes(plan, cells, output=True, split=False, build=9000) / MiB
    # The reserve's logits, 248,320 x 512 x 4 B = 485 MiB, and a hidden state of 10 MiB exceed the mask's
    # moment (192 MiB + the FFN moment).
    assert gpu == pytest.approx(495.00, rel=0.03)
    assert host_input_bytes(plan, cells, build=9000) / MiB == pytest.approx(276.29, rel=0.03)


# Code index file 28957180799 (a llama-server log: "Flash Attention was auto, set to enabled", "n_ctx_seq",
# one float32 embedding input: a build of late 2025, taken as b7000): Qwen3-30B-A3B (48 layers, vocabulary
# 151,936) in Q8_0, -c 65536 with 4 slots unified, f16 cache: "CUDA0 compute buffer size = 300.75 MiB",
# "CUDA_Host compute buffer size = 132.01 MiB".
def test_qwen3_30b_a3b_at_65k_cells_before_the_second_embedding_input() -> None:
    plan = served("qwen3-30b-a3b", gguf_quant="Q8_0", context=16_384, concurrent=4, llamacpp_build=7000)
    assert EMBD_INPUT_FROM_BUILD > 7000
    buffers = llamacpp_buffers(plan)
    assert buffers.cells == 65_536
    assert buffers.device_compute[0] / MiB == pytest.approx(300.75, rel=0.03)
    # 65,536 x 512 x 4 B of float32 mask and one 512 x 2,048 x 4 B embedding input: 132 MiB.
    assert buffers.host_compute / MiB == pytest.approx(132.01, rel=0.03)


def test_the_cast_moment_grows_with_the_context_before_b9410() -> None:
    # Llama 3.1 8B with flash attention at b9000: the float32 copy and its float16 cast are 6 B a cell and token.
    short = served("llama-3.1-8b", gguf_quant="Q4_K_M", context=8_192, llamacpp_build=9000)
    long = served("llama-3.1-8b", gguf_quant="Q4_K_M", context=131_072, llamacpp_build=9000)
    current = served("llama-3.1-8b", gguf_quant="Q4_K_M", context=131_072)
    at_long = llamacpp_buffers(long).device_compute[0]
    # At 131,072 cells: 131,072 x 512 x 6 B = 384 MiB and four 8 MiB hidden states, above the logits'
    # 128,256 x 512 x 4 B + 8 MiB = 258.5 MiB.
    assert at_long / MiB == 384 + 4 * 8
    assert llamacpp_buffers(short).device_compute[0] / MiB == pytest.approx(128_256 * 512 * 4 / MiB + 8)
    assert llamacpp_buffers(current).device_compute[0] < at_long
    # The host holds the float32 mask in both: 256 MiB and the two embedding inputs.
    assert llamacpp_buffers(long).host_compute / MiB == 256 + 2 * 8


def test_without_flash_attention_nothing_is_cast() -> None:
    # benchmarks/realgpu/engine_logs.json "logdetective106-mistral7b-v0.2-q4ks-ctx32768" (llama-cpp-python of
    # January 2025, no flash attention): "CUDA_Host compute buffer size = 72.01 MiB", 32,768 x 512 x 4 B of
    # float32 mask and one 8 MiB embedding input. Llama 3.1 8B has Mistral 7B's width (4,096).
    plan = served("llama-3.1-8b", context=32_768, flash_attention=False, llamacpp_build=4500)
    assert llamacpp_buffers(plan).host_compute / MiB == pytest.approx(72.01, rel=0.001)
    cells = context_cells(plan)
    with_cast = compute_buffer_bytes(plan, cells, output=True, split=False)
    without = compute_buffer_bytes(plan, cells, output=True, split=False, casts=False)
    assert with_cast == without


def test_pipeline_parallelism_keeps_four_copies_of_the_inputs() -> None:
    # benchmarks/realgpu/engine_logs.json "xd-4090-x2-llama3-8b-q4km-c8192" (build 2837, two GPUs, n_copies=4, no
    # flash attention): "CUDA_Host compute buffer size = 72.02 MiB": four 8,192 x 512 x 4 B masks and one 8 MiB
    # row of embeddings; one GPU ("xd-4090-x1-...") prints 24.01 MiB.
    two = served("llama-3.1-8b", context=8_192, flash_attention=False, pipeline_parallel=2, llamacpp_build=2837)
    one = served("llama-3.1-8b", context=8_192, flash_attention=False, llamacpp_build=2824)
    assert llamacpp_buffers(two).host_compute / MiB == pytest.approx(72.02, rel=0.001)
    assert llamacpp_buffers(one).host_compute / MiB == pytest.approx(24.01, rel=0.001)
