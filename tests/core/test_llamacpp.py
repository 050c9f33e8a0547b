"""llama.cpp / Ollama as a serving engine (issue 23, item 3): GGUF bytes, buffers, offload."""

from __future__ import annotations

import pytest

from core.dtypes import GGML_BLOCKS, GgmlType, ggml_row_bytes
from core.errors import PlanError
from core.estimate import estimate
from core.format import gb
from core.plan import Plan
from core.presets import plan_for_model
from core.serving.llamacpp import llamacpp_buffers
from core.units import GB, MiB
from core.verdict import Mode, Verdict


def llama_plan(**changes: object) -> Plan:
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090")
    return plan.with_inference(engine="llamacpp", **changes)


def test_ggml_blocks_are_the_structs_of_ggml_common() -> None:
    # ggml/src/ggml-common.h (ggml-org/llama.cpp 01243c58), its static_asserts: block_q4_K is
    # 2·2 + 12 + 128 = 144 bytes per 256 values (4.5 bits), block_q6_K 210 (6.5625 bits),
    # block_q8_0 2 + 32 = 34 per 32, block_iq4_xs 136 per 256 (4.25 bits).
    assert GGML_BLOCKS[GgmlType.Q4_K] == (256, 144)
    assert GGML_BLOCKS[GgmlType.Q6_K] == (256, 210)
    assert GGML_BLOCKS[GgmlType.Q8_0] == (32, 34)
    assert ggml_row_bytes(GgmlType.IQ4_XS, 4096) * 8 / 4096 == 4.25
    assert ggml_row_bytes(GgmlType.Q2_K, 256) * 8 / 256 == 2.625


def test_buffers_are_the_ones_llama_cpp_printed() -> None:
    # benchmarks/realgpu/engine_logs.json "xd-4090-x1-llama3-8b-q4km-c8192" (llama.cpp build 2824,
    # Meta-Llama-3-8B Q4_K_M on an RTX 4090, -ngl 10000, n_ctx 8192, no flash attention):
    # CUDA0 buffer 4403.49 MiB, CPU 281.81 MiB (the token embeddings), KV 1024.00 MiB,
    # CUDA0 compute 560.00 MiB.
    buffers = llamacpp_buffers(llama_plan(gguf_quant="Q4_K_M", context=8192, flash_attention=False, gpu_layers=10000))
    assert buffers.layout.device_weights[0] / MiB == pytest.approx(4403.49, abs=0.01)
    assert buffers.layout.host_weights / MiB == pytest.approx(281.81, abs=0.01)
    assert buffers.device_kv[0] / MiB == 1024.0
    assert buffers.device_compute[0] / MiB == 560.0


def test_a_quantised_cache_is_its_blocks() -> None:
    # q8_0: 34 bytes per 32 values against f16's 64; q4_0: 18 (ggml-common.h).
    f16 = llamacpp_buffers(llama_plan(context=8192)).device_kv[0]
    assert llamacpp_buffers(llama_plan(context=8192, cache_type="q8_0")).device_kv[0] == f16 * 34 / 64
    assert llamacpp_buffers(llama_plan(context=8192, cache_type="q4_0")).device_kv[0] == f16 * 18 / 64


def test_partial_offload_keeps_the_first_layers_in_host_memory() -> None:
    # -ngl 20 of Llama 3.1 8B's 32 layers: the last 20 on the GPU, the first 12 and the output
    # layer (-ngl not past the layer count) on the host, beside the token embeddings.
    full = llamacpp_buffers(llama_plan(context=8192))
    part = llamacpp_buffers(llama_plan(context=8192, gpu_layers=20))
    assert part.layout.host_layers == tuple(range(12))
    assert part.layout.output_device < 0
    assert part.device_kv[0] == full.device_kv[0] * 20 / 32
    assert part.host_bytes > full.host_bytes + 12 / 32 * full.layout.device_weights[0] * 0.9


def test_host_part_past_the_host_ram_is_out_of_memory_and_says_why() -> None:
    est = estimate(llama_plan(context=8192, gpu_layers=20).with_parallel(host_ram_gb=2))
    assert est.inference.host_bytes > 2 * GB
    judged = est.judgement(Mode.INFERENCE)
    assert judged.verdict is Verdict.OOM and judged.gpu_verdict is Verdict.FITS and judged.host_limits
    assert any("host memory" in w for w in est.warnings_for(Mode.INFERENCE))
    roomy = estimate(llama_plan(context=8192, gpu_layers=20).with_parallel(host_ram_gb=64))
    assert roomy.judgement(Mode.INFERENCE).verdict is Verdict.FITS


def test_llama_cpp_refuses_what_it_refuses() -> None:
    # src/llama-context.cpp: "V cache quantization requires flash_attn".
    with pytest.raises(PlanError, match="flash_attn"):
        llama_plan(cache_type="q8_0", flash_attention=False)
    # llama.cpp splits layers across GPUs (-sm layer): tensor parallelism is refused with why.
    with pytest.raises(PlanError, match=r"inference\.tensor_parallel: 2 .*pipeline stages"):
        llama_plan(tensor_parallel=2)
    # ggml/include/ggml-cuda.h GGML_CUDA_MAX_DEVICES 16: no more GPUs than ggml's CUDA backend holds
    # (a 1,024-stage Ollama plan was accepted and its layout search took minutes).
    assert llama_plan(pipeline_parallel=16).inference.pipeline_parallel == 16
    with pytest.raises(PlanError, match=r"inference\.pipeline_parallel: 17 .*GGML_CUDA_MAX_DEVICES"):
        llama_plan(pipeline_parallel=17)


def test_a_mac_holds_no_cuda_context_beside_the_buffers() -> None:
    # llama.cpp build 4467 on an Apple M4 (ggml-org/ci llama.cpp/12/44cdcf14.../ggml-100-mac-m4/README.md):
    # "using device Metal (Apple M4) - 10922 MiB free" before the model loads, against
    # recommendedMaxWorkingSetSize = 11453.25 MB (10,922.67 MiB): Metal's device holds under 1 MiB, not
    # the 512 MiB CUDA context an NVIDIA card carries beside the same buffers.
    mac = llama_plan(context=8192).with_hardware(gpu="apple-m2-max-96gb")
    nvidia = llama_plan(context=8192)
    on_mac, on_nvidia = estimate(mac).inference, estimate(nvidia).inference
    buffers = on_mac.weights_bytes + on_mac.kv_cache_bytes + on_mac.activation_bytes
    assert on_mac.total_bytes - buffers == 1 * MiB
    assert on_nvidia.total_bytes - on_mac.total_bytes == pytest.approx(512 * MiB - 1 * MiB)
    overhead = next(b for b in on_mac.buckets if b.key.name == "OVERHEAD")
    assert [t.label for t in overhead.terms] == ["Metal device"]
    assert "CUDA" not in on_mac.formula and "Metal device" in on_mac.formula


def test_the_memory_sentence_adds_up_in_one_unit() -> None:
    """h55ux: "model 6,507.48 MiB + KV 89.00 MiB + compute 64.25 MiB + CUDA context = 7.52 GB" summed MiB
    into GB with the context's figure left out, so the sum could not be checked. Every term now carries
    its MiB (llama.cpp's own log unit) and the total is given in MiB, then in the window's GB."""
    plan = llama_plan(context=8192, gpu_layers=20)
    memory = estimate(plan).inference
    f = memory.formula
    terms = (memory.weights_bytes, memory.kv_cache_bytes, memory.activation_bytes, memory.overhead_bytes)
    for value in terms:
        assert f"{value / MiB:,.2f} MiB" in f
    assert f"= {memory.total_bytes / MiB:,.2f} MiB ({gb(memory.total_bytes)} GB)" in f
    # The host part in both units too, and the RAM it would be judged against said by name.
    assert f"host memory {memory.host_bytes / MiB:,.2f} MiB ({gb(memory.host_bytes)} GB: " in f
    assert f.endswith("host RAM not given")


def test_the_step_formula_says_the_cpu_layers_time() -> None:
    """h55ux: with layers left on the CPU the step read "max(bytes read ÷ (… GB/s × 90%), FLOPs ÷ compute)",
    as if every byte came at the card's bandwidth; the host memory's part (core.serving.speed
    HOST_BANDWIDTH_GB_S, JEDEC dual-channel DDR4-3200) is now a term of its own with its milliseconds."""
    part = estimate(llama_plan(context=8192, gpu_layers=20)).inference.speed
    assert part is not None
    assert "GPU bytes read ÷ (" in part.formula and " GB/s of host memory (" in part.formula
    whole = estimate(llama_plan(context=8192)).inference.speed  # every layer on the 4090
    assert whole is not None and "host memory" not in whole.formula and "max(bytes read ÷ (" in whole.formula
