"""Hybrid recurrent models on llama.cpp / Ollama (issue 23 item 3): the RS buffer, attention-only KV, the GGUF."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.realgpu.serving import qwen36_27b_recurrent
from core.catalogue import find_gpu, find_model
from core.cli.app import main
from core.dtypes import GgmlType, GgufQuant
from core.errors import PlanError
from core.estimate import estimate
from core.hfconfig import model_from_hf_config
from core.plan import Engine, Hardware, Inference, Plan
from core.presets import default_plan, plan_for_model
from core.serving.llamacpp import llamacpp_buffers, quantiser, tensor_type
from core.serving.llamacpp_fit import llamacpp_fit
from core.serving.llamacpp_hybrid import (
    RS_ELEMENT_BYTES,
    hybrid_float32_params,
    hybrid_layer_matrices,
    layer_kinds,
    rs_bytes_of_layers,
    state_bytes_per_sequence,
    state_row_elements,
)
from core.serving.speed import _state_per_request
from core.units import MiB

DATA = Path(__file__).parents[1] / "data" / "hybrid"


def on_llamacpp(model_id: str, gpu: str = "rtx-4090", **inference: object) -> Plan:
    plan = plan_for_model(model_id).with_hardware(gpu=gpu)
    return plan.with_inference(engine="llamacpp", **inference)


def n_embd(conv: int, inner: int, state: int, groups: int) -> tuple[int, int]:
    """src/llama-hparams.cpp (ggml-org/llama.cpp 01b77b57): n_embd_r = (ssm_d_conv - 1) · (ssm_d_inner +
    2 · ssm_n_group · ssm_d_state), n_embd_s = ssm_d_state · ssm_d_inner."""
    return (conv - 1) * (inner + 2 * groups * state), state * inner


@pytest.mark.parametrize(
    ("model_id", "printed"),
    [
        # LostRuins/koboldcpp issue 1781 (Granite 4.0 H Tiny GGUF): ssm_d_conv 4, ssm_d_inner 3072, ssm_d_state 128,
        # ssm_n_group 1.
        ("granite-4.0-h-tiny", (4, 3072, 128, 1)),
        # ollama/ollama issue 12982 (granite4:small-h): ssm_d_conv 4, ssm_d_inner 8192, ssm_d_state 128, ssm_n_group 1.
        ("granite-4.0-h-small", (4, 8192, 128, 1)),
        # ggml-org/llama.cpp issue 17578 (qwen3next 80B-A3B): ssm_d_conv 4, ssm_d_inner 4096, ssm_d_state 128,
        # ssm_n_group 16 (the value width and the key heads).
        ("qwen3-next-80b-a3b-instruct", (4, 4096, 128, 16)),
    ],
)
def test_the_state_rows_are_llama_cpps_of_the_printed_hparams(model_id: str, printed: tuple[int, ...]) -> None:
    assert state_row_elements(find_model(model_id).spec) == n_embd(*printed)


def test_the_rs_buffer_reproduces_printed_llama_memory_recurrent_lines() -> None:
    # ggml-org/llama.cpp PR 23792 (turns 6 and 10, a 64-layer Qwen3.5/3.6 27B GGUF, its MTP layer 64 "skipped"):
    # "size = 299.25 MiB (2 cells, 64 layers, 2 seqs), R (f32): 11.25 MiB, S (f32): 288.00 MiB" and
    # "size = 448.88 MiB (3 cells, 65 layers, 3 seqs), R (f32): 16.88 MiB, S (f32): 432.00 MiB". Its Gated DeltaNet
    # widths are the models' config.json: 48 value heads × 128, 16 key heads × 128, kernel 4, every fourth of the
    # 64 layers attention (48 recurrent), on Qwen3-Next's spec, whose mixer it is.
    model = qwen36_27b_recurrent()  # benchmarks/realgpu/serving.py scores the same two lines, held out
    every = tuple(range(model.num_layers))
    r, s = state_row_elements(model)
    assert 48 * r * 2 * RS_ELEMENT_BYTES / MiB == 11.25 and 48 * s * 2 * RS_ELEMENT_BYTES / MiB == 288.0
    assert rs_bytes_of_layers(model, every, 2) / MiB == 299.25
    assert rs_bytes_of_layers(model, every, 3) / MiB == pytest.approx(448.88, abs=0.005)


def test_the_rs_buffer_is_float32_one_cell_a_slot_whatever_the_cache_type() -> None:
    # llama_model::create_memory: recurrent_type_k / _v GGML_TYPE_F32, recurrent_kv_size max(1, n_seq_max).
    plan = on_llamacpp("granite-4.0-h-tiny", context=8192)
    one = llamacpp_buffers(plan)
    per_seq = 36 * sum(n_embd(4, 3072, 128, 1)) * 4  # 36 Mamba-2 layers (config layer_types), f32
    assert one.device_rs == (per_seq,) and state_bytes_per_sequence(plan.model) == per_seq
    four = llamacpp_buffers(plan.with_inference(concurrent=4))
    assert four.device_rs[0] == 4 * per_seq
    q8 = llamacpp_buffers(plan.with_inference(cache_type="q8_0"))
    assert q8.device_rs == one.device_rs and q8.device_kv[0] == one.device_kv[0] * 34 / 64


def test_the_kv_buffer_holds_the_attention_layers_only() -> None:
    # Granite 4.0-H Tiny: 4 attention layers of 4 KV heads × 128 (config.json), K and V in f16, n_ctx cells.
    plan = on_llamacpp("granite-4.0-h-tiny", context=8192)
    buffers = llamacpp_buffers(plan)
    assert buffers.device_kv[0] == 8192 * 4 * 2 * 4 * 128 * 2
    assert estimate(plan).inference.kv_bytes_per_token == 4 * 2 * 4 * 128 * 2
    # A dense Nemotron-H's MLP layers hold neither (filter_attn / filter_recr: n_ff(il) == 0).
    nemotron = llamacpp_buffers(on_llamacpp("nemotron-nano-9b-v2", context=8192))
    assert nemotron.device_kv[0] == 8192 * 4 * 2 * 8 * 128 * 2
    assert nemotron.device_rs[0] == 27 * sum(n_embd(4, 10240, 128, 8)) * 4


def test_a_partial_offload_leaves_the_first_layers_states_in_host_memory() -> None:
    plan = on_llamacpp("granite-4.0-h-tiny", context=8192)
    whole = llamacpp_buffers(plan)
    part = llamacpp_buffers(plan.with_inference(gpu_layers=20))
    assert part.layout.host_layers == tuple(range(20))
    kinds = layer_kinds(plan.model)
    on_gpu = sum(1 for i in range(20, 40) if kinds[i] == kinds[0])  # recurrent layers among the last 20
    assert part.device_rs[0] == whole.device_rs[0] * on_gpu / 36
    assert part.device_rs[0] + part.host_rs == whole.device_rs[0]
    assert part.host_bytes > whole.host_bytes + part.host_rs


@pytest.mark.parametrize(
    "model_id",
    [
        "granite-4.0-h-tiny",
        "granite-4.0-h-small",
        "nemotron-nano-9b-v2",
        "qwen3-next-80b-a3b-instruct",
        "qwen3.5-9b",
        "qwen3.5-35b-a3b",
    ],
)
def test_the_gguf_tensors_hold_transformers_exact_count(model_id: str) -> None:
    # tests/data/hybrid/meta_counts.json: the spec's params are transformers 5.25.0's own count; the GGUF's matrices,
    # its float32 remainder, the embeddings and output_norm add back to it (the remainder is spread in whole values).
    model = find_model(model_id).spec
    d, n = model.hidden_size, model.num_layers
    matrices = sum(row * rows for i in range(n) for _, row, rows in hybrid_layer_matrices(model, i))
    embeddings = model.vocab_size * d * (1 if model.tie_embeddings else 2)
    left = model.total_params() - matrices - embeddings - d
    assert 0 <= left - hybrid_float32_params(model) * n < n
    assert hybrid_float32_params(model) * n < 0.002 * model.total_params()  # norms, conv1d, router: small


def test_a_dense_nemotron_h_keeps_its_mlp_width() -> None:
    # Nemotron Nano 9B v2's config.json: intermediate_size 15,680 (up and down, relu²), no experts in its
    # hybrid_override_pattern, though it lists the class default n_routed_experts 8.
    model = find_model("nemotron-nano-9b-v2").spec
    kinds = layer_kinds(model)
    mlp = next(i for i, kind in enumerate(kinds) if kind == "mlp")
    assert hybrid_layer_matrices(model, mlp) == (("ffn_up", 4480, 15680), ("ffn_down", 15680, 4480))


def test_the_ssm_matrices_take_the_files_default_type_and_attn_v_counts_attention_layers() -> None:
    # src/llama-quant.cpp 007dbbf3: ssm_in / ssm_out are tensor_category::OTHER (Q4_K in Q4_K_M); attn_v's
    # use_more_bits(i_attention_wv, n_attention_wv) runs over Granite Tiny's 4 attention layers: Q6_K for the
    # third and fourth (i = 2: (2 - 0) % 3 == 2; i = 3 >= 7·4/8).
    model = find_model("granite-4.0-h-tiny").spec
    q = quantiser(model, GgufQuant.Q4_K_M)
    kinds = layer_kinds(model)
    attention = [i for i, kind in enumerate(kinds) if kind == "full_attention"]
    recurrent = kinds.index("linear_attention")
    assert tensor_type(q, "ssm_in", recurrent, 1536) is GgmlType.Q4_K
    assert tensor_type(q, "ssm_out", recurrent, 3072) is GgmlType.Q4_K
    types = [tensor_type(q, "attn_v", i, 1536) for i in attention]
    assert types == [GgmlType.Q4_K, GgmlType.Q4_K, GgmlType.Q6_K, GgmlType.Q6_K]


def test_a_decode_step_reads_and_writes_the_float32_state() -> None:
    plan = on_llamacpp("granite-4.0-h-tiny", context=8192)
    assert _state_per_request(plan) == 36 * sum(n_embd(4, 3072, 128, 1)) * 4
    vllm = plan_for_model("granite-4.0-h-tiny")  # vLLM keeps it in bf16 (core.serving.vllm_hybrid)
    assert _state_per_request(vllm) == _state_per_request(plan) / 2


def test_llama_cpps_fit_counts_the_states() -> None:
    # A dense hybrid on a small card: the fit's layers leave --fit-target free with the RS buffer counted. At
    # 65,536 cells: since llama-server reserves one row of logits a slot (b9460, core.serving.llamacpp
    # output_rows), 32,768 cells fit whole.
    plan = on_llamacpp("nemotron-nano-9b-v2", gpu="rtx-4060", context=65536, gpu_layers=-1)
    fit = llamacpp_fit(plan, find_gpu("rtx-4060"))
    assert not fit.whole and 0 < fit.gpu_layers < plan.model.num_layers + 1
    ran = llamacpp_buffers(plan.with_inference(gpu_layers=fit.gpu_layers))
    assert max(ran.device_totals) <= fit.target
    assert ran.device_rs[0] > 0


def test_builds_and_ollama_lines_not_read_are_refused() -> None:
    plan = on_llamacpp("granite-4.0-h-tiny")
    with pytest.raises(PlanError) as info:
        plan.with_inference(llamacpp_build=6500)
    assert info.value.field == "inference.llamacpp_build" and "not read" in str(info.value)
    with pytest.raises(PlanError) as info:
        plan.with_inference(ollama_version="0.15.5")
    assert info.value.field == "inference.ollama_version" and "own estimate" in str(info.value)
    with pytest.raises(PlanError) as info:
        on_llamacpp("qwen3-next-80b-a3b-instruct", gpu_layers=10).with_inference(ollama_version="0.30")
    assert "Qwen3-Next" in str(info.value)
    ollama = on_llamacpp("granite-4.0-h-tiny", gpu_layers=40).with_inference(ollama_version="0.30")
    assert estimate(ollama).inference.fits


def test_choosing_a_hybrid_keeps_llama_cpp() -> None:
    plan = default_plan().with_inference(engine=Engine.LLAMACPP)
    entry = find_model("granite-4.0-h-tiny")
    assert plan.on_model(entry.spec, entry.id).inference.engine is Engine.LLAMACPP
    # An old build moves to vLLM, as before.
    old = plan.with_inference(llamacpp_build=6500).on_model(entry.spec, entry.id)
    assert old.inference.engine is Engine.VLLM


def test_the_command_line_plans_a_hybrid_on_llama_cpp(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--mode", "inference", "--model", "granite-4.0-h-tiny", "--engine", "llamacpp"]
    assert main([*args, "--gpu", "rtx-4090", "--context", "8192"]) == 0
    out = capsys.readouterr().out
    assert "KV 64.00 MiB (8,192 cells, 4 attention layers)" in out  # 8,192 × 4 × 2 × 4 × 128 × 2 B
    assert f"RS {36 * sum(n_embd(4, 3072, 128, 1)) * 4 / MiB:,.2f} MiB (1 cell × 36 recurrent layers, f32)" in out
    assert main([*args, "--gpu", "rtx-4090", "--llamacpp-build", "6500"]) != 0
    assert "llamacpp_build" in capsys.readouterr().err


def test_falcon_h1_keeps_a_kv_cache_and_a_state_in_every_layer() -> None:
    # llama_model::create_memory: LLM_ARCH_FALCON_H1's filter_attn and filter_recr both keep every layer.
    # tests/data/hybrid/meta_counts.json "falcon-h1-1.5b-dims": 24 layers of attention (its KV heads × head_dim)
    # beside a Mamba-2 mixer of inner 3,072 (mamba_d_ssm), a 256-wide state, 1 group, kernel 4.
    config = json.loads((DATA / "meta_counts.json").read_text("utf-8"))["cases"]["falcon-h1-1.5b-dims"]["config"]
    model = model_from_hf_config(config)
    plan = Plan(model=model, hardware=Hardware(gpu="rtx-4090"), inference=Inference(engine=Engine.LLAMACPP))
    buffers = llamacpp_buffers(plan.with_inference(context=4096))
    row = model.num_kv_heads * model.head_dim
    assert buffers.device_kv[0] == 4096 * 24 * 2 * row * 2
    assert buffers.device_rs[0] == 24 * sum(n_embd(4, 3072, 256, 1)) * 4
    assert set(layer_kinds(model)) == {"parallel"}
