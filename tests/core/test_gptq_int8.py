"""8-bit GPTQ weights (WeightFormat.GPTQ_INT8): the checkpoint's bytes, what each engine's kernel keeps
of them (core.serving.gptq), AutoGPTQ's cuda-old linear under transformers, the exports and the plan file.

The shapes are Qwen2.5-7B's config.json (resources/models.json, Qwen/Qwen2.5-7B): hidden 3,584,
intermediate 18,944, 28 layers, 28 query and 4 KV heads of 128, vocabulary 152,064, untied head, biased
q / k / v projections."""

from __future__ import annotations

import json
import math

import pytest

from core.catalogue import find_model
from core.cli.app import main
from core.dtypes import WEIGHT_LABELS, WeightFormat, weight_bytes
from core.estimate import estimate
from core.files.launch.llamacpp import export_llama_server
from core.files.launch.sglang import export_sglang, read_sglang
from core.files.launch.vllm import export_vllm, read_vllm
from core.files.planfile import dumps, loads
from core.plan import Attention, Engine, Hardware, Inference, Plan, SglangVersion, TransformersVersion
from core.serving.engines import exllama_buffer_bytes, hf_peak_bytes, rank_layout
from core.serving.fit import DEFAULT_FIT
from core.serving.gptq import (
    CHECKPOINT_KEPT,
    CUDA_OLD_DEQUANT_BYTES,
    CUDA_OLD_SWITCH_ROWS,
    cuda_old_dequant_bytes,
    gptq_kept,
    hf_linear_extra_ops,
    marlin_runs,
)
from core.serving.hf_generate import DENSE_LAYER_OPS
from core.serving.sglang_weights import plan_weights, rank_tensors, sglang_weights
from core.serving.speed import hf_host_layer_seconds

QWEN7B = find_model("qwen2.5-7b")
D, INTER, LAYERS, Q, KV, VOCAB = 3584, 18944, 28, 28 * 128, 4 * 128, 152064
# (in, out, bias) of each linear of a Qwen2 block, as transformers builds it
LINEARS = [
    (D, Q, True),
    (D, KV, True),
    (D, KV, True),
    (Q, D, False),
    (D, INTER, False),
    (D, INTER, False),
    (INTER, D, False),
]
GROUP = 128


def _plan(engine: Engine, gpu: str = "a100-80gb-sxm", version: TransformersVersion = TransformersVersion.V4_46) -> Plan:
    """Qwen2.5-7B in 8-bit GPTQ, one request of 1 + 2,048 tokens (the Qwen table's shortest row)."""
    base = Plan(model=QWEN7B.spec, model_id=QWEN7B.id, attention=Attention.FLASH, hardware=Hardware(gpu=gpu))
    served = {"concurrent": 1, "context": 2049, "new_tokens": 2048, "transformers_version": version}
    return base.with_inference(engine=engine, weight_dtype=WeightFormat.GPTQ_INT8, **served)


def _autogptq_linear(n_in: int, n_out: int, bias: bool) -> int:
    """AutoGPTQ v0.6.0 qlinear_cuda_old.QuantLinear's buffers for bits = 8, group 128: qweight int32
    [in // 32 * 8, out], qzeros int32 [ceil(in / 128), out // 32 * 8], scales fp16 [ceil(in / 128), out],
    g_idx int32 [in], bias fp16 [out]."""
    groups = math.ceil(n_in / GROUP)
    qweight = n_in // 32 * 8 * n_out * 4
    qzeros = groups * (n_out // 32 * 8) * 4
    scales = groups * n_out * 2
    return qweight + qzeros + scales + n_in * 4 + (n_out * 2 if bias else 0)


def _checkpoint_bytes() -> int:
    """Every tensor of Qwen2.5-7B-Instruct-GPTQ-Int8 as AutoGPTQ stores it: the blocks' linears quantised,
    the embedding, the head and the norms in 16 bits."""
    block = sum(_autogptq_linear(*linear) for linear in LINEARS) + 2 * D * 2
    return LAYERS * block + 2 * VOCAB * D * 2 + D * 2


def test_the_format_is_a_plan_choice_with_its_label() -> None:
    assert WeightFormat("gptq-int8") is WeightFormat.GPTQ_INT8
    assert WEIGHT_LABELS[WeightFormat.GPTQ_INT8] == "GPTQ int8 (g128)"


def test_the_checkpoint_holds_autogptqs_tensors_to_the_byte() -> None:
    spec = QWEN7B.spec
    assert weight_bytes(spec, spec.total_params(), WeightFormat.GPTQ_INT8) == _checkpoint_bytes()
    # between int4 and bf16, and above 1 byte a matrix weight
    total = spec.total_params()
    assert (
        weight_bytes(spec, total, WeightFormat.GPTQ_INT4)
        < weight_bytes(spec, total, WeightFormat.GPTQ_INT8)
        < weight_bytes(spec, total, WeightFormat.BF16)
    )


def test_transformers_46_keeps_every_buffer_and_no_exllama_buffer() -> None:
    plan = _plan(Engine.HF)
    layout = rank_layout(plan)
    assert layout.weights_bytes == pytest.approx(_checkpoint_bytes())
    assert exllama_buffer_bytes(plan, layout) == 0.0  # ExLlama takes 4 bits only
    assert not marlin_runs(plan)


def test_vllm_marlin_frees_the_zeros_and_g_idx() -> None:
    """gptq_marlin's process_weights_after_loading replaces qzeros and g_idx (no act-order) by empty
    tensors; below compute capability 8.0 vLLM's gptq kernel keeps qzeros and empties g_idx."""
    a100, t4 = _plan(Engine.VLLM), _plan(Engine.VLLM, gpu="t4")
    assert marlin_runs(a100) and not marlin_runs(t4)
    zeros = LAYERS * sum(math.ceil(n_in / GROUP) * n_out for n_in, n_out, _ in LINEARS)  # one byte each
    g_idx = LAYERS * sum(n_in * 4 for n_in, _, _ in LINEARS)
    assert rank_layout(t4).weights_bytes == pytest.approx(_checkpoint_bytes() - g_idx)
    assert rank_layout(a100).weights_bytes == pytest.approx(_checkpoint_bytes() - g_idx - zeros)
    assert rank_layout(_plan(Engine.SGLANG)).weights_bytes == rank_layout(a100).weights_bytes


def test_sglang_replays_the_checkpoints_tensors() -> None:
    tensors = rank_tensors(QWEN7B.spec, WeightFormat.GPTQ_INT8, 1, LAYERS)
    rope = QWEN7B.spec.max_position_embeddings * 128 * 4  # SGLang's float32 cos/sin table
    # SGLang fuses q/k/v and gate/up, which share their input (one g_idx of `in` rows each, where the
    # checkpoint stores three and two), and pads the vocabulary to 64 rows (152,064 already is).
    shared_g_idx = LAYERS * (2 * D + D) * 4
    assert sum(tensors) - rope == _checkpoint_bytes() - shared_g_idx


def test_sglangs_replay_frees_what_the_one_after_loading_rule_frees() -> None:
    """core.serving.gptq.gptq_kept decides for both: SGLang's own GPTQMarlinLinearMethod (0.4.10 on, the 0.5.1
    wheel's layers/quantization/gptq.py process_weights_after_loading) empties g_idx and, the checkpoint being
    symmetric, qzeros; so what the replay holds after loading is the engine's weights less the rotary table."""
    plan = _plan(Engine.SGLANG)
    replay = plan_weights(plan)
    assert replay is not None
    zeros = LAYERS * sum(math.ceil(n_in / GROUP) * n_out for n_in, n_out, _ in LINEARS)  # one byte each
    fused_g_idx = LAYERS * (D + Q + D + INTER) * 4  # one g_idx per fused linear: qkv, o, gate_up, down
    assert replay.freed == zeros + fused_g_idx
    assert replay.held == pytest.approx(rank_layout(plan).weights_bytes)
    # the freed blocks stay cached in their segments (not replayed: empty_cache returns only whole ones)
    assert replay.segments == sglang_weights(QWEN7B.spec, WeightFormat.GPTQ_INT8, 1, 1).segments


def test_sglang_before_its_own_marlin_keeps_them_on_hopper() -> None:
    # 0.4.9 imports vLLM's GPTQMarlinLinearMethod: Machete on Hopper keeps qzeros and g_idx (core.serving.gptq)
    old = _plan(Engine.SGLANG, gpu="h100-sxm").with_inference(sglang_version=SglangVersion.V0_4_9)
    assert gptq_kept(old) == CHECKPOINT_KEPT
    replay = plan_weights(old)
    assert replay is not None and replay.freed == 0 and replay.held == replay.tensors


def test_the_cuda_old_forward_dequantises_from_128_rows() -> None:
    """qlinear_cuda_old.forward: below kernel_switch_threshold (128) rows vecquant8matmul_old, from it the
    torch path that dequantises the whole matrix (int32 shift, int16 copy, float16 product)."""
    plan = _plan(Engine.HF)
    largest = D * INTER  # the MLP's matrices
    assert cuda_old_dequant_bytes(plan, CUDA_OLD_SWITCH_ROWS - 1) == 0.0
    assert cuda_old_dequant_bytes(plan, CUDA_OLD_SWITCH_ROWS) == largest * CUDA_OLD_DEQUANT_BYTES
    # one new token, so that the prefill is the peak on both sides of the switch
    short = plan.with_inference(new_tokens=1, context=129)
    layout = rank_layout(short)
    below = hf_peak_bytes(short, layout, 1, 127 + 1)[0]
    at = hf_peak_bytes(short, layout, 1, 128 + 1)[0]
    assert at - below > 0.9 * largest * CUDA_OLD_DEQUANT_BYTES
    # GPTQModel's Marlin (transformers 4.49 on) multiplies in place: no transient
    newer = _plan(Engine.HF, version=TransformersVersion.V4_51)
    assert cuda_old_dequant_bytes(newer, 4096) == 0.0
    assert marlin_runs(newer)


def test_the_quantised_linears_add_their_torch_calls_to_the_host() -> None:
    """Per decode step: cuda-old 7 calls a linear (8 with a bias) against nn.Linear's 1; GPTQModel's Marlin
    3 (4 with a bias)."""
    old = _plan(Engine.HF)
    assert hf_linear_extra_ops(old) == 3 * (8 - 1) + 4 * (7 - 1)
    assert hf_linear_extra_ops(_plan(Engine.HF, version=TransformersVersion.V4_51)) == 3 * (4 - 1) + 4 * (3 - 1)
    assert hf_linear_extra_ops(_plan(Engine.VLLM)) == 0
    bf16 = old.with_inference(weight_dtype=WeightFormat.BF16)
    ratio = hf_host_layer_seconds(old, DEFAULT_FIT)[0] / hf_host_layer_seconds(bf16, DEFAULT_FIT)[0]
    assert ratio == pytest.approx((DENSE_LAYER_OPS + 45) / DENSE_LAYER_OPS)
    # and the decode is slower than bf16's on the host, faster than bf16's on vLLM (fewer bytes read)
    assert _decode_rate(old) < _decode_rate(bf16)
    vllm = _plan(Engine.VLLM)
    assert _decode_rate(vllm) > _decode_rate(vllm.with_inference(weight_dtype=WeightFormat.BF16))


def _decode_rate(plan: Plan) -> float:
    speed = estimate(plan).inference.speed
    assert speed is not None
    return speed.per_request_tokens_per_s


def test_the_engines_commands_name_gptq_marlin_and_read_back() -> None:
    plan = _plan(Engine.VLLM)
    for export, read in ((export_vllm, read_vllm), (export_sglang, read_sglang)):
        exported = export(plan)
        assert "--quantization gptq_marlin" in exported.text and "GPTQ-Int8" in exported.text
        assert read(exported.text)[1]["inference.weight_dtype"] is WeightFormat.GPTQ_INT8
        assert not exported.cannot("inference.weight_dtype")
    # below sm80 gptq_marlin refuses to start: listed
    assert export_vllm(_plan(Engine.VLLM, gpu="t4")).cannot("inference.weight_dtype")
    # llama.cpp takes no GPTQ file: the nearest GGUF type is named and the weights listed
    gguf = export_llama_server(plan)
    assert "Q8_0" in gguf.text and gguf.cannot("inference.weight_dtype")


def test_a_plan_file_keeps_the_format() -> None:
    plan = _plan(Engine.SGLANG)
    assert loads(dumps(plan)).inference.weight_dtype is WeightFormat.GPTQ_INT8


def test_the_command_line_takes_the_format(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "qwen2.5-7b", "--gpu", "a100-80gb-sxm", "--mode", "inference"]
    args += ["--engine", "vllm", "--weights", "gptq-int8", "--context", "2049", "--json"]
    assert main(args) == 0
    served = json.loads(capsys.readouterr().out)["inference"]
    plan = _plan(Engine.VLLM).with_inference(new_tokens=Inference().new_tokens)
    assert served["kv_cache_tokens"] == estimate(plan).inference.kv_cache_tokens
