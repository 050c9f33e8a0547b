"""The reserve's logits by build: llama-server from b9460 (ggml-org/llama.cpp PR #23861) reserves one row of
logits a slot, where older builds (and llama-bench, llama-completion) reserve the whole micro-batch
(core.serving.llamacpp: SERVER_OUTPUTS_FROM_BUILD, output_rows).

The source's arithmetic (llama-cpp-python 0.3.36's vendored llama.cpp): sched_reserve reserves the prompt graph with
``min(n_ubatch, n_outputs_max)`` outputs, and llama-server sets n_outputs_max to ``min(n_batch, n_parallel)``
without speculative decoding (server_output_limits -> common_speculative_get_output_limits).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.inputs import OllamaVersion
from core.plan import Plan
from core.serving.llamacpp import (
    FA_MASK_F16_FROM_BUILD,
    OLLAMA_SERVER_OUTPUTS,
    SERVER_OUTPUTS_FROM_BUILD,
    compute_buffer_bytes,
    context_cells,
    host_input_bytes,
    llamacpp_buffers,
    output_rows,
)
from core.units import MiB
from tests.core.test_llamacpp_long_context import served


def test_llama_server_reserves_one_row_a_slot_from_b9460() -> None:
    plan = served("llama-3.1-8b", gguf_quant="Q4_K_M", context=8_192, concurrent=3)
    # -ub 512 (the plan's), -np 3: a current build and b9460 reserve 3 rows, b9459 the micro-batch's 512.
    assert output_rows(plan, 512) == 3
    assert output_rows(plan, 512, build=SERVER_OUTPUTS_FROM_BUILD) == 3
    assert output_rows(plan, 512, build=SERVER_OUTPUTS_FROM_BUILD - 1) == 512
    # n_outputs_max is at most the micro-batch (sched_reserve's min(n_tokens, n_outputs_max)).
    crowded = served("llama-3.1-8b", gguf_quant="Q4_K_M", context=1_024, concurrent=64, ubatch=32)
    assert output_rows(crowded, 32) == 32


def test_ollama_keeps_every_row_before_its_llama_server_line() -> None:
    # Ollama 0.30.1 - 0.32.15 start llama-server at b9479 - b10488 (LLAMA_CPP_VERSION at their tags); the lines
    # before v0.30 run Ollama's own runners on older builds: every row, whatever the plan's build field says.
    assert {OllamaVersion.V0_30} == OLLAMA_SERVER_OUTPUTS
    base = served("llama-3.1-8b", gguf_quant="Q4_K_M", context=8_192, concurrent=2)
    for version in OllamaVersion:
        plan = replace(base, inference=replace(base.inference, ollama_version=version))
        expected = 512 if version not in OLLAMA_SERVER_OUTPUTS and version is not OllamaVersion.NONE else 2
        assert output_rows(plan, 512) == expected, version


def test_llama_31_8b_at_8k_drops_to_its_ffn_moment() -> None:
    # One slot, -ub 512, flash attention. Before b9460 the logits decide: 128,256 x 512 x 4 B = 250.5 MiB and one
    # 8 MiB hidden state. From b9460 one row (0.49 MiB), and the FFN moment decides: the float16 mask
    # 8,192 x 512 x 2 B = 8 MiB, gate and up 2 x 512 x 14,336 x 4 B = 56 MiB and two hidden states, 16 MiB.
    old = served("llama-3.1-8b", gguf_quant="Q4_K_M", context=8_192, llamacpp_build=SERVER_OUTPUTS_FROM_BUILD - 1)
    new = served("llama-3.1-8b", gguf_quant="Q4_K_M", context=8_192)
    assert llamacpp_buffers(old).device_compute[0] / MiB == pytest.approx(128_256 * 512 * 4 / MiB + 8)
    assert llamacpp_buffers(new).device_compute[0] / MiB == 8 + 56 + 16


def test_qwen35_27b_at_131k_cells_is_no_longer_its_logits() -> None:
    # tests/core/test_llamacpp_long_context.py's Qwen3.6-27B log (4 slots, 131,072 cells, q8_0, flash attention)
    # printed 495.00 MiB at a build before b9272: the reserve's logits, 248,320 x 512 x 4 B, and a hidden state.
    plan = served("qwen3.5-27b", gguf_quant="Q4_K_M", cache_type="q8_0", context=32_768, concurrent=4)
    cells = context_cells(plan)
    before = compute_buffer_bytes(plan, cells, output=True, split=False, build=SERVER_OUTPUTS_FROM_BUILD - 1)
    now = compute_buffer_bytes(plan, cells, output=True, split=False)
    assert before / MiB == pytest.approx(495.00, rel=0.03)
    # Four rows of logits (3.8 MiB) from b9460: the FFN moment decides, the float16 mask 131,072 x 512 x 2 B =
    # 128 MiB, gate and up 2 x 512 x 17,408 x 4 B = 68 MiB and two 10 MiB hidden states.
    assert now / MiB == 128 + 68 + 20
    assert now == compute_buffer_bytes(plan, cells, output=False, split=False)


# ggml-org/llama.cpp issue #23527, drauh's comment of 2026-05-28 (benchmarks/realgpu/engine_logs.json
# "llamacpp23527-..."): Qwen3.6-35B-A3B (the catalogue's Qwen3.5-35B-A3B widths), -c 150000 -ub 4096 -fa on q8_0
# -np 1 --cpu-moe on an RTX 3080, four runs of one master: CUDA0 / CUDA_Host compute buffers of 3976 / 2408 MiB
# (baseline), 3892 / 2408 (the logits cap only), 3976 / 1236 (PR #23764 only), 1982 / 1236 (both).
def drauh_plan() -> Plan:
    return served("qwen3.5-35b-a3b", gguf_quant="Q4_K_M", cache_type="q8_0", context=150_000, concurrent=1, ubatch=4096)


def test_drauh_runs_where_the_logits_decide() -> None:
    plan = drauh_plan()
    cells = context_cells(plan)
    assert cells == 150_016
    for build in (FA_MASK_F16_FROM_BUILD - 1, FA_MASK_F16_FROM_BUILD):  # baseline, PR #23764 only
        gpu = compute_buffer_bytes(plan, cells, output=True, split=False, build=build) / MiB
        # 248,320 x 4,096 x 4 B = 3,880 MiB of logits and a 32 MiB hidden state, above the mask's moments.
        assert gpu == 3_880 + 32
        assert gpu == pytest.approx(3976, rel=0.03)
    # The host's inputs: the mask (float32 before b9410, 150,016 x 4,096 x 4 B = 2,344 MiB; float16 after) and the
    # two 32 MiB embedding inputs.
    assert host_input_bytes(plan, cells, build=FA_MASK_F16_FROM_BUILD - 1) / MiB == pytest.approx(2408, abs=0.01)
    assert host_input_bytes(plan, cells, build=SERVER_OUTPUTS_FROM_BUILD) / MiB == pytest.approx(1236, abs=0.01)


def test_drauh_runs_with_the_cap_are_below_the_logits() -> None:
    # With the cap the reserve holds one row (0.95 MiB): the printed buffers fall to another moment, which the
    # plan puts below the old logits too. Both runs are listed as not comparable in benchmarks/realgpu/serving.py
    # (a patched build; --cpu-moe's expert copies), so only the direction is checked here.
    plan = drauh_plan()
    cells = context_cells(plan)
    assert output_rows(plan, 4096) == 1
    old = compute_buffer_bytes(plan, cells, output=True, split=False, build=FA_MASK_F16_FROM_BUILD)
    capped = compute_buffer_bytes(plan, cells, output=True, split=False)
    assert capped < old
