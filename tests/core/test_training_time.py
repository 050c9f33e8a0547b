"""Training time as real runs measure it (issue 24): the modelled utilisation, float8, the
software stack, communication overlap, and calibration from a measured run.

Numbers name their source: a datasheet, a library's source at a commit, or a record of
benchmarks/realgpu/throughput_figures.json.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.catalogue import Generation, find_gpu, generation
from core.errors import PlanError
from core.estimate import UtilisationSource, estimate, keep_calibration
from core.files import planfile
from core.plan import (
    Attention,
    CheckpointPolicy,
    Float8,
    Hardware,
    Method,
    Parallelism,
    Plan,
    Stack,
    Strategy,
    Workload,
)
from core.presets import plan_for_model
from core.training import speed
from core.training.efficiency import FITTED, FIXED, PRIORS, coefficient, guide_coefficient
from core.training.speed import gemm_kind


def _h100(model: str = "llama-3.1-8b", **workload: int) -> Plan:
    shape = {"micro_batch": 2, "seq_len": 8192, "grad_accum": 1, "tokens": 10**9} | workload
    return plan_for_model(model, method=Method.FULL, workload=Workload(**shape), hardware=Hardware(gpu="h100-sxm"))


# ---- the modelled utilisation -------------------------------------------------------------
def test_the_utilisation_is_modelled_by_default_and_a_typed_one_overrides_it() -> None:
    plan = _h100()
    modelled = estimate(plan).compute
    assert plan.hardware.utilisation == 0 and modelled.utilisation_source is UtilisationSource.MODELLED
    assert 0.1 < modelled.utilisation < 0.9
    typed = estimate(plan.with_hardware(utilisation=0.4)).compute
    assert typed.utilisation == pytest.approx(0.4) and typed.utilisation_source is UtilisationSource.TYPED
    assert typed.modelled_utilisation == pytest.approx(modelled.utilisation)


def test_a_utilisation_outside_zero_to_one_is_refused_with_the_reason() -> None:
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(PlanError) as error:
            Hardware(utilisation=bad)
        assert error.value.field == "hardware.utilisation"


def test_every_catalogue_card_has_a_family_and_the_others_take_amperes_figures() -> None:
    assert generation("h100-sxm") is Generation.HOPPER
    assert generation("rtx-5000-ada") is Generation.ADA  # an Ada card, despite its "50"
    assert generation("rtx-5090") is Generation.BLACKWELL
    assert generation("rtx-a6000") is Generation.AMPERE
    assert generation("v100-sxm2-32gb") is Generation.OTHER
    assert coefficient("gemm:other/16-bit") == FITTED["gemm:ampere/16-bit"]
    assert set(FITTED) == set(PRIORS)  # every coefficient the model uses was fitted


def test_the_stack_changes_only_the_elementwise_work() -> None:
    eager = estimate(_h100()).compute
    compiled = estimate(_h100().with_changes(stack=Stack.COMPILE)).compute
    parts = {p.label: p.seconds for p in eager.compute_parts}
    other = {p.label: p.seconds for p in compiled.compute_parts}
    changed = {label for label in parts if parts[label] != pytest.approx(other[label])}
    assert changed == {"elementwise ops (norms, rotary, activation, loss)"}


def test_torch_compile_moves_the_bytes_inductor_leaves_and_its_rate_is_not_fitted() -> None:
    # torchtitan@9dec370 compiles each TransformerBlock (fullgraph); inductor fuses each chain of
    # pointwise ops and reductions between the matmuls and SDPA into one kernel
    # (pytorch/pytorch@0012d881 torch/_inductor/choices.py can_fuse_vertical). Per block and token,
    # in elements: eager's count is 2 RMSNorms x 18 + 2 residual adds x 3 passes of d, rotary 9 of
    # q + kv, SwiGLU 5 of I; inductor's is 2 norms x 2 + 2 adds x 2.5 of d, rotary 2 of q + kv,
    # SwiGLU 3 of I (core.training.speed). SDPA's flash kernel takes the heads as strided views: no
    # head transposes in either (test_head_transposes_are_copies_only_around_eager_attention).
    from core.params import param_counts
    from core.training.speed import step_work

    plan = _h100(micro_batch=1)
    d, q, kv, i = 4096, 4096, 1024, 14336  # Llama 3.1 8B's config.json
    eager_block = 2 * 18 * d + 2 * 3 * d + 9 * (q + kv) + 5 * i
    compile_block = 2 * 2 * d + 2 * 2.5 * d + 2 * (q + kv) + 3 * i
    vocab, layers = 128256, 32
    gpu = find_gpu("h100-sxm")
    bandwidth = gpu.memory_bandwidth_gb_s * 1e9
    tokens = 8192
    # Forward plus a backward of twice the forward, 2 bytes an element, and the float32 loss's
    # 40 bytes a logit on the last stage (the same for both).
    loss = tokens * vocab * 40
    for stack, block in ((Stack.EAGER, eager_block), (Stack.COMPILE, compile_block)):
        staged = plan.with_changes(stack=stack)
        seconds = step_work(staged, param_counts(staged), gpu).features[f"elementwise:{stack.value}"]
        assert seconds == pytest.approx((block * 2 * tokens * layers * 3 + loss) / bandwidth, rel=1e-9)
    # The compiled stack's rate is the pointwise prior (92 % of the bandwidth), not fitted on
    # torchtitan's, torchtune's, AI2's or IBM's compiled rows.
    assert "elementwise:compile" in FIXED
    assert FITTED["elementwise:compile"] == pytest.approx(PRIORS["elementwise:compile"], abs=1e-4)
    assert PRIORS["elementwise:compile"] == pytest.approx(1 / 0.92)


def _elementwise_seconds(plan: Plan) -> float:
    from core.params import param_counts
    from core.training.speed import step_work

    return step_work(plan, param_counts(plan), find_gpu("h100-sxm")).features[f"elementwise:{plan.stack.value}"]


def test_an_eager_layernorm_is_one_native_kernel() -> None:
    # F.layer_norm (MPT's low_precision_layernorm, mosaicml/llm-foundry@b2a43a147
    # llmfoundry/models/layers/norm.py) is aten::native_layer_norm, one kernel reading the row and
    # writing the normed row: 2 passes of d, where a Python RMSNorm (transformers' LlamaRMSNorm)
    # runs 18 op by op. The same model with either norm differs by 2 norms x 16 passes of d a block,
    # 2 bytes each, over the forward and a backward of twice it.
    rms = _h100(micro_batch=1)
    layer = rms.with_changes(model=replace(rms.model, norm="layernorm"))
    d, layers, tokens = 4096, 32, 8192
    saved = 2 * (18 - 2) * d * 2 * tokens * layers * 3 / (find_gpu("h100-sxm").memory_bandwidth_gb_s * 1e9)
    assert _elementwise_seconds(rms) - _elementwise_seconds(layer) == pytest.approx(saved, rel=1e-9)
    # Under torch.compile both norms are one fused kernel already (2 passes): no difference.
    compiled = rms.with_changes(stack=Stack.COMPILE)
    compiled_layer = layer.with_changes(stack=Stack.COMPILE)
    assert _elementwise_seconds(compiled) == pytest.approx(_elementwise_seconds(compiled_layer), rel=1e-12)


def test_head_transposes_are_copies_only_around_eager_attention() -> None:
    # Eager attention's output (a batched GEMM's) is transposed back with .contiguous(): 2 passes of
    # each of q, k, v and the output. PyTorch's SDPA wrappers hand the flash kernel
    # query.transpose(1, 2) views and copy no gradient already in its layout (pytorch/pytorch@00afd8f2
    # aten/src/ATen/native/transformers/cuda/attention_backward.cu): a fused plan moves none.
    from core.training.speed import SCORE_BYTES

    fused = _h100(micro_batch=1, seq_len=2048)
    eager = fused.with_changes(attention="eager")
    d_q, d_kv, layers, tokens, heads = 4096, 1024, 32, 2048, 32
    bandwidth = find_gpu("h100-sxm").memory_bandwidth_gb_s * 1e9
    transposes = 2 * (2 * d_q + 2 * d_kv) * 2 * tokens * layers * 3 / bandwidth
    scores = tokens * 2048 * heads * SCORE_BYTES * layers * 3 / bandwidth  # every score, not the causal half
    assert _elementwise_seconds(eager) - _elementwise_seconds(fused) == pytest.approx(transposes + scores, rel=1e-9)


def test_eager_attention_runs_every_score_and_moves_them_through_memory() -> None:
    fused = estimate(_h100(seq_len=4096)).compute
    eager = estimate(_h100(seq_len=4096).with_changes(attention="eager")).compute
    assert eager.step_seconds > fused.step_seconds
    assert eager.flops_per_token == fused.flops_per_token  # the count shown stays the causal one


def test_a_fused_attention_backward_is_timed_at_the_five_matmuls_it_runs() -> None:
    # FlashAttention's backward recomputes the scores (S = QK^T) it never stored, then runs dP, dV,
    # dQ and dK: five matmuls to the forward's two, 2.5 x the forward's FLOPs, the count its own
    # benchmark divides by (Dao-AILab/flash-attention@0469c72 benchmarks/benchmark_flash_attention.py
    # ``flops``) and so the count the attention rates of the priors are per FLOP of. The counted
    # FLOPs (the Megatron / Narayanan convention: the backward at 2 x the forward) and the MFU stay.
    from core.params import param_counts
    from core.training.speed import FUSED_BACKWARD_OVER_COUNTED, step_work

    assert FUSED_BACKWARD_OVER_COUNTED == 2.5 / 2
    gpu = find_gpu("h100-sxm")
    for checkpointing, forwards in ((False, 1), (True, 2)):  # full recompute runs the forward twice
        plan = _h100(seq_len=32768, micro_batch=1).with_changes(checkpointing=checkpointing)
        work = step_work(plan, param_counts(plan), gpu)
        model = plan.model
        forward = 4.0 * 32768 * (32768 + 1) / 2 * model.q_width * model.num_layers  # causal, one pass
        at_peak = work.features["attention:hopper/flash"] * gpu.peak_tflops("bf16") * 1e12
        assert at_peak == pytest.approx(forward * (forwards + 2.5))
    # The FLOPs per token and the MFU convention do not change with the kernel's recompute.
    fused = estimate(_h100(seq_len=32768, micro_batch=1)).compute
    flops = 4.0 * (32768 + 1) / 2 * model.q_width * model.num_layers * 3  # forward + 2 x forward
    assert fused.causal_flops_per_token - fused.model_flops_per_token == pytest.approx(
        flops - 4.0 * 32768 * model.q_width * model.num_layers * 3
    )


def test_flash_attention_1_or_triton_takes_twice_flash_attention_2s_attention_time() -> None:
    # FlashAttention-2 is "around 2x" FlashAttention (Dao 2023, arXiv:2307.08691); MPT's
    # attn_impl: triton ran the Triton kernel in llm-foundry's 2023 tables (benchmarks/realgpu/
    # throughput.py, MOSAIC_FLASH2_LARGE_SCALE): e.g. mosaic-a10080gb-amp_bf16-125m-s65536-g8-mb1.
    from core.training.attention import Kernel, sdpa_kernel
    from core.training.efficiency import FLASH1_OVER_FLASH

    assert FLASH1_OVER_FLASH == 2.0
    a100 = Hardware(gpu="a100-80gb-sxm")
    flash2 = _h100(seq_len=32768, micro_batch=1).with_changes(hardware=a100)
    flash1 = flash2.with_changes(attention="flash1")
    assert sdpa_kernel(flash1) is Kernel.FLASH  # the same memory: no scores kept
    assert estimate(flash1).peak_bytes == estimate(flash2).peak_bytes
    parts2 = {p.label: p.seconds for p in estimate(flash2).compute.compute_parts}
    parts1 = {p.label: p.seconds for p in estimate(flash1).compute.compute_parts}
    changed = {label for label in parts2 if parts2[label] != pytest.approx(parts1[label])}
    assert len(changed) == 1
    (attention,) = changed
    assert parts1[attention] / parts2[attention] == pytest.approx(
        coefficient("attention:ampere/flash1") / coefficient("attention:ampere/flash")
    )
    assert 1.5 < coefficient("attention:ampere/flash1") / coefficient("attention:ampere/flash") < 2.5  # the tie


# ---- float8 ------------------------------------------------------------------------------
def test_float8_runs_the_linears_at_the_fp8_rate_on_a_card_that_has_one() -> None:
    # H100 SXM: 1,978.9 dense FP8 TFLOP/s, twice its 989.4 bf16 (NVIDIA H100 datasheet).
    plan = _h100()
    bf16 = estimate(plan).compute
    fp8 = estimate(plan.with_changes(float8=Float8.TENSORWISE)).compute
    assert fp8.gemm_peak_tflops == 1978.9 and bf16.gemm_peak_tflops == 989.4
    assert 1.1 < fp8.tokens_per_second / bf16.tokens_per_second < 2.0  # casts and attention stay
    assert fp8.float8_problem is None


def test_float8_leaves_the_output_head_at_the_16_bit_rate() -> None:
    # torchtitan's float8 converter skips filter_fqns (default ["output"]): the head's matmuls
    # run in bf16 (torchtitan/components/quantization/float8.py). They were timed at the fp8 peak.
    parts = estimate(_h100().with_changes(float8=Float8.TENSORWISE)).compute.compute_parts
    head = [p for p in parts if p.formula.endswith("(gemm:hopper/16-bit)")]
    assert len(head) == 1 and head[0].seconds > 0


def test_transformer_engine_fp8_matmuls_run_at_the_rate_its_gemm_benchmark_measured() -> None:
    # NVIDIA/TransformerEngine@1609c890 docs/examples/gemm_profiling/gemm_profiling.rst, 5B model
    # on an H200 NVL: a layer's 12 GEMMs take 31.968 ms in BF16 and 16.785 ms in pre-quantized FP8,
    # 1.90x on a card whose fp8 peak is 2x its bf16 one: the fp8 matmuls reach ~0.97 of the share
    # of their peak that bf16 ones reach (1.03 through the model's roofline). Outside the Megatron
    # stack on Hopper (below) the fp8-te coefficient is that multiple of the fitted 16-bit one.
    ratio = coefficient("gemm:hopper/fp8-te") / coefficient("gemm:hopper/16-bit")
    assert ratio == pytest.approx(1.03, abs=1e-9)
    plan = _h100().with_changes(stack=Stack.MEGATRON, float8=Float8.TE)
    parts = {p.formula.rsplit("(", 1)[1].rstrip(")"): p for p in estimate(plan).compute.compute_parts}
    fp8 = parts["gemm:hopper/megatron-fp8-te"]
    assert f"× {coefficient('gemm:hopper/megatron-fp8-te'):.3g}" in fp8.formula
    # Its casts (4 bytes an element: a fused cast + transpose; 4.24 measured there) at the
    # pointwise rate, not the Megatron stack's elementwise share.
    assert parts["te_casts"].seconds > 0
    assert FITTED["te_casts"] == pytest.approx(PRIORS["te_casts"], abs=1e-4)


def test_megatron_on_hopper_runs_its_matmuls_at_the_te_gemm_guides_measured_rate() -> None:
    # The same guide's H200 NVL layer (hidden 4,096, MLP 16,384, M = 31 x 512; QKV, attention out,
    # MLP up and down, each as Fprop, Dgrad and Wgrad): 1.917e13 FLOPs in 31.968 ms bf16 (600 of
    # the NVL's 835.5 dense TFLOP/s) and 16.785 ms fp8 (1,670.5 dense). Through the roofline with
    # the operand bytes at 4.8 TB/s (prior 1.0, not the fit): 1.326 and 1.363 at the FLOPs as
    # counted; 1.276 and 1.312 at the FLOPs the H200 NVL's 132 SMs run in whole 256 x 128 tiles
    # and waves (core.training.gemm_shape: the Fprop of M = 15,872 by 4,096 is 1,984 tiles, 15.03
    # waves run as 16), as every other matmul is now timed.
    flops = 3 * 2 * 15872 * (4096 * 12288 + 4096 * 4096 + 2 * 4096 * 16384)
    assert flops == pytest.approx(1.917e13, rel=1e-3)
    assert guide_coefficient("16-bit") == pytest.approx(1.2761, abs=1e-4)
    assert guide_coefficient("fp8-te") == pytest.approx(1.3123, abs=1e-4)
    assert guide_coefficient("fp8-te") / guide_coefficient("16-bit") == pytest.approx(1.03, abs=0.01)
    # Fixed, not fitted: NVIDIA's rows, the corpus' only Megatron-Core runs on Hopper, never set it.
    for name in ("gemm:hopper/megatron-16-bit", "gemm:hopper/megatron-fp8-te"):
        assert name in FIXED and FITTED[name] == pytest.approx(PRIORS[name], abs=1e-4)
    megatron = _h100().with_changes(stack=Stack.MEGATRON)
    kinds = {p.formula.rsplit("(", 1)[1].rstrip(")") for p in estimate(megatron).compute.compute_parts}
    assert "gemm:hopper/megatron-16-bit" in kinds and "gemm:hopper/16-bit" not in kinds
    # Megatron on an A100 (BigScience's 2022 stack; the guide measured Hopper) and PyTorch stacks
    # on Hopper keep the fitted coefficient.
    ampere = megatron.with_hardware(gpu="a100-80gb-sxm")
    kinds = {p.formula.rsplit("(", 1)[1].rstrip(")") for p in estimate(ampere).compute.compute_parts}
    assert "gemm:ampere/16-bit" in kinds
    kinds = {p.formula.rsplit("(", 1)[1].rstrip(")") for p in estimate(_h100()).compute.compute_parts}
    assert "gemm:hopper/16-bit" in kinds
    # The fitted PyTorch coefficient is slower than the kernels' own rate: their stacks' gaps fold in.
    assert coefficient("gemm:hopper/16-bit") > coefficient("gemm:hopper/megatron-16-bit")
    assert (
        estimate(megatron).compute.tokens_per_second
        > estimate(megatron.with_changes(stack=Stack.COMPILE)).compute.tokens_per_second
    )


def test_float8_on_a_card_without_fp8_is_flagged_and_gains_nothing() -> None:
    plan = _h100().with_hardware(gpu="a100-80gb-sxm")
    bf16 = estimate(plan).compute
    fp8 = estimate(plan.with_changes(float8=Float8.TENSORWISE)).compute
    assert fp8.float8_problem is not None and "FP8 tensor cores" in fp8.float8_problem
    assert fp8.tokens_per_second == pytest.approx(bf16.tokens_per_second)


def test_torchao_float8_adds_the_largest_linears_casts_to_the_block_backward() -> None:
    # torchao Float8Linear (pytorch/ao 36027d8, torchao/float8/float8_linear.py) saves the
    # high-precision input and weight and casts in the backward the output gradient twice, the
    # weight and the input: N·in + 2·N·out + in·out bytes, largest for Llama 3.1 8B's fused
    # gate|up projection (4,096 → 2 × 14,336: its config.json).
    plan = _h100(micro_batch=1, seq_len=8192).with_changes(chunked_loss=True, checkpointing=True)
    plain = estimate(plan)
    assert plain.peak_phase == "backward"
    fp8 = estimate(plan.with_changes(float8=Float8.TENSORWISE))
    n = 8192
    assert fp8.peak_bytes - plain.peak_bytes == pytest.approx(n * 4096 + 2 * n * 28672 + 4096 * 28672)
    # Outside Megatron-Core no fp8 weight is cached between micro-batches (no is_first_microbatch): its
    # plan holds what 16-bit linears hold, and TE's own cuBLAS workspace (32 MiB + 1 KiB on Hopper:
    # NVIDIA/TransformerEngine 4329ff84 cpp_extensions/gemm.py).
    assert estimate(plan.with_changes(float8=Float8.TE)).peak_bytes == plain.peak_bytes + 32 * 2**20 + 1024


def test_megatron_core_keeps_transformer_engines_fp8_weights_through_the_step() -> None:
    # Under Megatron-Core (is_first_microbatch, NVIDIA/Megatron-LM d98e8a64 TELinear.forward) TE caches each
    # linear's fp8 weight in the module (TE v2.12 module/base.py get_weight_workspace, _fp8_workspaces):
    # a Float8Tensor of 1 B an element plus its 1 B transpose (float8_tensor.py make_empty, columnwise
    # usage in training), alive in every phase. Llama 3.1 8B's linears (config.json: 32 layers, q/o
    # 4,096², k/v 4,096 × 1,024, gate/up/down 4,096 × 14,336): 6.98e9 elements, 13.96 GB. Before: 0.
    plan = _h100(micro_batch=1, seq_len=4096, grad_accum=4).with_changes(stack=Stack.MEGATRON)
    elements = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    plain = estimate(plan)
    for recipe in (Float8.TE, Float8.TE_CURRENT):
        fp8 = estimate(plan.with_changes(float8=recipe))
        assert fp8.peak_bytes - plain.peak_bytes == pytest.approx(2 * elements, rel=1e-9)
    # MXFP8 (Blackwell): a rowwise and a columnwise copy, each with a 1-byte scale a 32-element block
    b200 = plan.with_changes(hardware=replace(plan.hardware, gpu="b200"))
    mx = estimate(b200.with_changes(float8=Float8.TE_MXFP8)).peak_bytes - estimate(b200).peak_bytes
    assert mx == pytest.approx((2 + 2 / 32) * elements, rel=1e-9)


# ---- communication --------------------------------------------------------------------------
def test_tensor_parallel_overlap_hides_part_of_the_traffic() -> None:
    plan = _h100().on_gpus(8).with_parallel(tensor_parallel=8)
    plain = estimate(plan).compute
    overlapped = estimate(plan.with_parallel(tp_overlap=True)).compute
    assert overlapped.comm_seconds_per_step == pytest.approx(plain.comm_seconds_per_step)
    assert overlapped.exposed_comm_seconds_per_step < plain.exposed_comm_seconds_per_step
    tp = next(t for t in overlapped.comm_terms if t.label.startswith("tensor-parallel"))
    assert tp.unhidden_seconds == pytest.approx(tp.seconds * FITTED["tp_overlap"])


def test_fsdp_under_pipeline_parallel_gathers_once_per_step() -> None:
    # torchtitan: fsdp_reshard_after_forward "default" = not pp_enabled (torchtitan b5bcd76,
    # torchtitan/distributed/fsdp.py); torch.distributed.pipelining syncs the gradients after
    # the last micro-batch only. Before issue 24 the gather ran every micro-batch.
    base = _h100(micro_batch=1, grad_accum=8).on_gpus(16, Strategy.FSDP).with_parallel(pipeline_parallel=2)
    for accum in (8, 16):
        plan = base.with_workload(grad_accum=accum)
        gather = next(t for t in estimate(plan).compute.comm_terms if "all-gather" in t.label)
        assert "once per step" in gather.label
        assert gather.formula.startswith("1 × all-gather")


# ---- calibration from a measured run -----------------------------------------------------
def test_a_measured_speed_is_reproduced_and_its_utilisation_solved() -> None:
    # torchtitan's Llama 3.1 8B on 8 H100s, FSDP, compile, op SAC: 6,667 tokens/s per GPU
    # (corpus record tt-202412-8b-8gpu-compile).
    plan = (
        _h100()
        .on_gpus(8, Strategy.FSDP)
        .with_changes(stack=Stack.COMPILE, checkpointing=True, checkpoint_policy=CheckpointPolicy.OP)
    )
    measured = estimate(plan.with_hardware(measured_tokens_per_s=6667.0)).compute
    assert measured.tokens_per_second_per_gpu == pytest.approx(6667.0, rel=1e-6)
    assert measured.utilisation_source is UtilisationSource.MEASURED
    modelled = estimate(plan).compute
    assert measured.calibration_factor == pytest.approx(measured.utilisation / modelled.utilisation, rel=1e-6)
    by_step = estimate(plan.with_hardware(measured_step_s=measured.step_seconds)).compute
    assert by_step.tokens_per_second_per_gpu == pytest.approx(6667.0, rel=1e-6)


def test_a_measured_speed_faster_than_the_card_is_refused_with_the_reason() -> None:
    plan = _h100()
    with pytest.raises(PlanError) as error:
        estimate(plan.with_hardware(measured_tokens_per_s=1e6))  # 5.8e16 FLOP/s: 58x an H100
    assert error.value.field == "hardware.measured_tokens_per_s"
    assert "peak" in str(error.value)
    with pytest.raises(PlanError) as error:
        estimate(plan.with_hardware(calibration=50.0))
    assert error.value.field == "hardware.calibration"


def test_an_edit_turns_the_measurement_into_a_calibration_of_the_same_card_and_stack() -> None:
    plan = _h100().with_hardware(measured_tokens_per_s=5000.0)
    before = estimate(plan)
    longer = keep_calibration(before, plan.with_workload(seq_len=16384))
    assert longer.hardware.measured_tokens_per_s == 0
    assert longer.hardware.calibration == pytest.approx(before.compute.calibration_factor)
    assert estimate(longer).compute.utilisation_source is UtilisationSource.CALIBRATED
    other_card = keep_calibration(before, plan.with_hardware(gpu="a100-80gb-sxm"))
    assert other_card.hardware.calibration == 0 and other_card.hardware.measured_tokens_per_s == 0
    retyped = plan.with_hardware(measured_tokens_per_s=5500.0)
    assert keep_calibration(before, retyped) == retyped


def test_an_edit_after_an_implausible_measurement_is_not_refused() -> None:
    # Before: a measurement whose factor no calibration can hold (1 token/s per GPU on an H100:
    # ~1/7,000 of the modelled speed, under the calibration's 0.01 floor) made keep_calibration
    # raise, so the window refused every later edit until the measurement was cleared (found by
    # the GUI monkey: seed 20240611, edit 2042). So did a factor the edited plan cannot run at
    # (over 100 % of the peak). Such a factor is dropped: the edited plan is modelled.
    slow = _h100().with_hardware(measured_tokens_per_s=1.0)
    before = estimate(slow)
    assert before.compute.calibration_factor < 0.01
    edited = keep_calibration(before, slow.with_workload(seq_len=4096))
    assert edited.hardware == replace(slow.hardware, measured_tokens_per_s=0.0)
    assert estimate(edited).compute.utilisation_source is UtilisationSource.MODELLED
    modelled = estimate(_h100()).compute
    speed = modelled.tokens_per_second_per_gpu * 0.97 / modelled.utilisation
    before = estimate(_h100().with_hardware(measured_tokens_per_s=speed))
    assert before.compute.utilisation < 1.0  # 97 % of the peak: a valid measurement
    # The 70B's larger matmuls are modelled faster (47 % against the 8B's 43 %): the same
    # factor puts it past the peak.
    edited = keep_calibration(before, _h100("llama-3.1-70b").with_hardware(measured_tokens_per_s=speed))
    assert edited.hardware.calibration == 0
    estimate(edited)  # never refused
    assert edited.hardware.measured_tokens_per_s == 0


def test_the_measurement_and_calibration_are_saved_in_the_plan_file() -> None:
    plan = (
        _h100()
        .with_hardware(measured_tokens_per_s=5000.0, calibration=1.1)
        .with_changes(stack=Stack.MEGATRON, float8=Float8.TE)
    )
    assert planfile.loads(planfile.dumps(plan)) == plan


def test_a_file_from_before_the_modelled_utilisation_reads_its_old_default_as_modelled() -> None:
    document = json.loads(planfile.dumps(_h100().with_hardware(utilisation=0.4)))
    del document["plan"]["stack"], document["plan"]["float8"]
    assert planfile.plan_from_dict(document).hardware.utilisation == 0.0
    document["plan"]["hardware"]["utilisation"] = 0.55  # typed: stays
    assert planfile.plan_from_dict(document).hardware.utilisation == 0.55
    kept = json.loads(planfile.dumps(_h100().with_hardware(utilisation=0.4)))  # written now: typed
    assert planfile.plan_from_dict(kept).hardware.utilisation == 0.4


def test_parallelism_defaults_keep_the_overlap_off() -> None:
    # Megatron-LM's --tp-comm-overlap and torchtitan's async TP are opt-in.
    assert Parallelism().tp_overlap is False


def test_attention_only_recompute_frees_the_scores_and_keeps_the_rest() -> None:
    # Megatron-LM --recompute-granularity selective: the core attention is recomputed, so eager
    # attention's B·H·S² tensors go; with a fused kernel only its log-sum-exp (Korthikanti et al.
    # 2022, §5: "selective activation recomputation").
    plan = plan_for_model("llama-3.2-1b", method=Method.FULL).with_workload(micro_batch=2, seq_len=2048)
    for attention, saves_much in (("eager", True), ("sdpa", False)):
        none = estimate(plan.with_changes(attention=attention)).peak_bytes
        selective = plan.with_changes(
            attention=attention, checkpointing=True, checkpoint_policy=CheckpointPolicy.ATTENTION
        )
        full = estimate(plan.with_changes(attention=attention, checkpointing=True)).peak_bytes
        freed = none - estimate(selective).peak_bytes
        assert full < estimate(selective).peak_bytes <= none
        assert (freed > 0.2 * none) is saves_much


def test_a_model_with_learned_positions_moves_no_rotary_embedding_traffic() -> None:
    # GPT-2 (transformers GPT2Model: a wpe position table added once at the input) and MPT with
    # learned_pos_emb (llm-foundry's benchmark configs, e.g. throughput record
    # mosaic-a10080gb-amp_bf16-125m-s2048-g8-mb32) rotate no q or k: ROPE_PASSES (9 passes of
    # q and k per block) apply to RoPE models only (learned_positions == 0).
    learned = plan_for_model("gpt2", method=Method.FULL, hardware=Hardware(gpu="h100-sxm"))
    rotary = learned.with_changes(model=replace(learned.model, learned_positions=0))
    assert _eager_seconds(rotary) - _eager_seconds(learned) == pytest.approx(_rope_seconds(learned))


def test_an_alibi_model_moves_no_rotary_embedding_traffic_and_no_memory() -> None:
    # ALiBi (Press et al. 2021, arXiv:2108.12409) biases the attention scores and rotates no q or
    # k: BLOOM (transformers BloomAttention, every BloomConfig; BLOOM-176B trained with
    # --position-embedding-type alibi, bigscience-workshop/bigscience@39ed8110482e9
    # train/tr11-176B-ml/README.md L338-341), MPT with attn_config.alibi. The slopes are no
    # parameters and FlashAttention-2's alibi_slopes keep no extra activation, so the memory
    # figures stay; the time drops by exactly ROPE_PASSES x (q + kv) per block.
    rotary = plan_for_model("llama-2-7b", method=Method.FULL, hardware=Hardware(gpu="h100-sxm"))
    alibi = rotary.with_changes(model=replace(rotary.model, alibi=True))
    assert _eager_seconds(rotary) - _eager_seconds(alibi) == pytest.approx(_rope_seconds(rotary))
    assert estimate(alibi).peak_bytes == estimate(rotary).peak_bytes
    assert estimate(alibi).compute.tokens_per_second > estimate(rotary).compute.tokens_per_second


def test_alibi_in_eager_attention_writes_and_reads_the_bias_across_every_score() -> None:
    # torch.baddbmm(alibi, q, kᵀ, beta=1) (BigScience's Megatron-DeepSpeed@541b967, transformers'
    # BloomAttention) copies the broadcast bias into the score tensor before the GEMM, which
    # reads it back as C (PyTorch LinearAlgebra.cpp common_checks_baddbmm_bmm): 4 bytes per
    # score, forward only. A flash kernel's alibi_slopes add no such traffic.
    from core.training.speed import ALIBI_SCORE_BYTES

    base = plan_for_model("gpt2", method=Method.FULL, hardware=Hardware(gpu="h100-sxm"))  # learned positions
    eager = base.with_changes(attention=Attention.EAGER)
    alibi = eager.with_changes(model=replace(eager.model, alibi=True))
    model, work = eager.model, eager.workload
    scores = work.micro_batch * work.seq_len * work.seq_len * model.num_heads * work.grad_accum
    bandwidth = find_gpu("h100-sxm").memory_bandwidth_gb_s * 1e9
    extra = scores * ALIBI_SCORE_BYTES * model.num_layers / bandwidth
    assert _eager_seconds(alibi) - _eager_seconds(eager) == pytest.approx(extra)
    flash = base.with_changes(model=replace(base.model, alibi=True))
    assert _eager_seconds(flash) == pytest.approx(_eager_seconds(base))


def test_alibi_round_trips_through_a_plan_file_and_bad_values_get_one_line() -> None:
    from core.model import model_from_dict

    spec = replace(plan_for_model("llama-2-7b").model, alibi=True)
    assert model_from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    with pytest.raises(PlanError, match="model.alibi"):
        model_from_dict({**spec.to_dict(), "alibi": "yes"})


def _eager_seconds(plan: Plan) -> float:
    """The step's element-wise traffic time on the plan's card (core.training.speed)."""
    from core.params import param_counts
    from core.training.speed import step_work

    return step_work(plan, param_counts(plan), find_gpu(plan.hardware.gpu)).features["elementwise:eager"]


def _rope_seconds(plan: Plan) -> float:
    """RoPE's ROPE_PASSES reads and writes of q and k in every block, forward and the backward's
    twice as much, at the card's bandwidth: what a model without rotary embeddings saves."""
    from core.roles import dtypes_for
    from core.training.speed import ROPE_PASSES

    model, work = plan.model, plan.workload
    tokens = work.micro_batch * work.seq_len * work.grad_accum
    passes = model.num_layers * 3
    rope = ROPE_PASSES * (model.q_width + model.kv_width) * dtypes_for(plan).compute * tokens * passes
    return rope / (find_gpu(plan.hardware.gpu).memory_bandwidth_gb_s * 1e9)


# ---- context parallel: PyTorch's ring attention --------------------------------------------
def test_ring_attention_merges_grow_with_the_context_parallel_degree() -> None:
    # torch.distributed.tensor.experimental._attention (pytorch/pytorch@0123248a): every ring step
    # after the first merges its block output into a float32 accumulator (_SDPAMerger) and the
    # backward accumulates dQ, dK, dV in float32: bytes per local query element × width are
    # 20 + 46 (c − 1) forward and 84 + 60 (c − 1) backward (core.training.speed RING_*).
    from core.params import param_counts
    from core.training.speed import step_work

    def ring(cp: int, stack: Stack = Stack.COMPILE) -> float:
        plan = _h100(seq_len=8192 * cp, micro_batch=1).with_changes(stack=stack)
        plan = plan.on_gpus(8, Strategy.FSDP).with_parallel(context_parallel=cp)
        return step_work(plan, param_counts(plan), find_gpu("h100-sxm")).features.get("ring_merge", 0.0)

    assert ring(1) == 0.0
    assert ring(2, Stack.MEGATRON) != ring(2)  # Megatron's ring is Transformer Engine's (the next test)
    plan = _h100(seq_len=8192 * 4, micro_batch=1).with_changes(stack=Stack.COMPILE)
    plan = plan.on_gpus(8, Strategy.FSDP).with_parallel(context_parallel=4)
    model, gpu = plan.model, find_gpu("h100-sxm")
    elements = 8192 * model.q_width  # the local queries (32k ÷ CP 4) × the attention width
    recompute = model.num_layers if plan.checkpointing and plan.checkpoint_policy is CheckpointPolicy.FULL else 0
    per_layer = (20 + 46 * 3) * (model.num_layers + recompute) + (84 + 60 * 3) * model.num_layers
    expected = elements * per_layer * plan.workload.grad_accum / (gpu.memory_bandwidth_gb_s * 1e9)
    assert ring(4) == pytest.approx(expected)
    assert ring(8) / ring(4) > 1.8  # the per-step part dominates and grows with c
    assert FITTED["ring_merge"] == pytest.approx(PRIORS["ring_merge"], abs=1e-4)  # from the source, never fitted


def test_transformer_engines_ring_copies_and_merges_beside_its_kernels_under_megatron() -> None:
    # NVIDIA/TransformerEngine@7d576ed2 (NeMo 24.07's TE_TAG) attention.py AttnFuncWithCP, causal, sbhd, on the
    # last CP rank: K/V concatenated, halved and copied, each step's output merged by an eager correction, dQ and
    # dK/dV accumulated by add_. Bytes per local query element (Q) and per element of one K / V tensor (KV):
    # forward 8 Q + 8 KV once and 6 Q + 4 KV a further step, backward 4 Q + 26 KV once and 6 Q + 14 KV a step
    # (core.training.speed TE_RING_*); none at CP 1. Llama 3.1 8B: Q width 32 heads × 128, KV width 8 × 128.
    from core.params import param_counts
    from core.training.speed import step_work

    gpu = find_gpu("h100-sxm")

    def plan_at(cp: int, tp: int = 1) -> Plan:
        plan = _h100(seq_len=8192, micro_batch=1).with_changes(stack=Stack.MEGATRON)
        return plan.on_gpus(8, Strategy.ZERO1).with_parallel(context_parallel=cp, tensor_parallel=tp)

    def ring(plan: Plan) -> float:
        return step_work(plan, param_counts(plan), gpu).features.get("ring_merge", 0.0)

    assert ring(plan_at(1)) == 0.0
    for cp, tp in ((2, 1), (4, 2)):
        plan = plan_at(cp, tp)
        model = plan.model
        tokens = 8192 / cp  # one micro-batch's local tokens
        q, kv = tokens * 4096 / tp, tokens * 1024 / tp
        forward = q * (8 + 6 * (cp - 1)) + kv * (8 + 4 * (cp - 1))
        backward = q * (4 + 6 * (cp - 1)) + kv * (26 + 14 * (cp - 1))
        recompute = model.num_layers if plan.checkpointing and plan.checkpoint_policy is CheckpointPolicy.FULL else 0
        per_step = (forward * (model.num_layers + recompute) + backward * model.num_layers) * plan.workload.grad_accum
        assert ring(plan) == pytest.approx(per_step / (gpu.memory_bandwidth_gb_s * 1e9)), (cp, tp)
    assert FITTED["ring_merge"] == pytest.approx(PRIORS["ring_merge"], abs=1e-4)  # from the source, never fitted


def test_float8_rowwise_linears_too_small_for_it_run_slower_than_bf16() -> None:
    # pytorch/ao#2410 (the RCA of torchtitan#1207): Llama 3 8B's small linears under TP ran
    # "approx 40%" slower in float8 rowwise than in bf16; torchao's _auto_filter_for_rowwise
    # (pytorch/ao 36027d8 float8_linear_utils.py) names the shapes: N <= 2048, K <= 1024, or
    # N <= 4096 and K <= 2048 (N out, K in features).
    from core.training.speed import ROWWISE_SMALL_SLOWDOWN, rowwise_too_small

    assert ROWWISE_SMALL_SLOWDOWN == 1.4
    assert rowwise_too_small(4096, 1024 / 8)  # 8B's wk under TP 8
    assert rowwise_too_small(4096, 14336 / 8)  # 8B's w1 under TP 8 (1,792 out)
    assert not rowwise_too_small(8192, 28672 / 8)  # 70B's w1 under TP 8 (3,584 out, 8,192 in)
    assert not rowwise_too_small(4096, 14336)  # 8B's w1 unsharded

    def parts(recipe: Float8, tp: int) -> dict[str, float]:
        plan = _h100().on_gpus(8, Strategy.FSDP).with_parallel(tensor_parallel=tp).with_changes(float8=recipe)
        return {p.formula.split("(")[-1]: p.seconds for p in estimate(plan).compute.compute_parts}

    sharded = parts(Float8.ROWWISE, 8)  # every linear of the 8B is below the thresholds at TP 8
    assert not any("fp8-rowwise" in name and seconds > 0 for name, seconds in sharded.items())
    bf16 = parts(Float8.NONE, 8)["gemm:hopper/16-bit)"]
    head = parts(Float8.TENSORWISE, 8)["gemm:hopper/16-bit)"]  # the output head stays in bf16 (filter_fqns)
    assert 0 < head < bf16
    assert sharded["gemm:hopper/16-bit)"] == pytest.approx(ROWWISE_SMALL_SLOWDOWN * (bf16 - head) + head)
    whole = parts(Float8.ROWWISE, 1)  # unsharded, only wk / wv (1,024 out) stay slow
    assert whole["gemm:hopper/fp8-rowwise)"] > whole["gemm:hopper/16-bit)"] > 0


def test_transformer_engine_mxfp8_runs_its_own_gemm_and_casts_on_blackwell() -> None:
    # NVIDIA/TransformerEngine@1609c890 docs/examples/gemm_profiling/gemm_profiling.rst, the 5B
    # model on a B300 (12 GEMMs a layer, 24 layers, M = 15,872): pre-quantized, MXFP8 171.869 ms
    # against FP8 CurrentScaling 163.493 ms (the GEMM 1.051 x); through te.Linear MXFP8 takes
    # 215.608 ms, 43.739 ms of casts for 24 x 2.482e9 elements at 8 TB/s: 5.87 bytes each.
    # Before, the MXFP8 recipe had no setting of its own: Transformer Engine's per-tensor time.
    assert coefficient("gemm:blackwell/fp8-te-mxfp8") / coefficient("gemm:blackwell/fp8-te") == pytest.approx(
        171.869 / 163.493, abs=1e-9
    )
    b200 = _h100().with_changes(stack=Stack.MEGATRON)
    b200 = replace(b200, hardware=replace(b200.hardware, gpu="b200"))
    te = estimate(b200.with_changes(float8=Float8.TE)).compute
    mx = estimate(b200.with_changes(float8=Float8.TE_MXFP8)).compute

    def part(result, name: str) -> float:  # type: ignore[no-untyped-def]
        return sum(p.seconds for p in result.compute_parts if p.formula.endswith(f"({name})"))

    assert part(mx, "gemm:blackwell/fp8-te-mxfp8") > 0 and part(mx, "gemm:blackwell/fp8-te") == 0
    assert part(mx, "te_casts") == pytest.approx(part(te, "te_casts") * 5.8728 / 4.0, rel=1e-3)
    assert mx.step_seconds > te.step_seconds and mx.float8_problem is None
    # Hopper has no block-scaled fp8 GEMM (TE's MXFP8BlockScaling needs SM100+): timed as the
    # per-tensor recipe, and the plan says why.
    hopper = estimate(_h100().with_changes(stack=Stack.MEGATRON, float8=Float8.TE_MXFP8)).compute
    per_tensor = estimate(_h100().with_changes(stack=Stack.MEGATRON, float8=Float8.TE)).compute
    assert hopper.step_seconds == pytest.approx(per_tensor.step_seconds)
    assert hopper.float8_problem is not None and "MXFP8" in hopper.float8_problem


def _te_casts(plan: Plan) -> float:
    parts = {p.formula.rsplit("(", 1)[1].rstrip(")"): p.seconds for p in estimate(plan).compute.compute_parts}
    return parts["te_casts"]


def test_transformer_engines_current_scaling_pays_its_amax_pass() -> None:
    # NVIDIA/TransformerEngine@1609c890 docs/examples/gemm_profiling/gemm_profiling.rst, "Worked
    # Example: 5B Model on H200": te.Linear under FP8 CurrentScaling 20.285 ms a layer against 16.785 ms
    # pre-quantized, 3.500 ms for 2.482e9 cast elements at 4.8 TB/s: 6.77 bytes each; DelayedScaling
    # is charged 4. The same fp8 GEMM (one coefficient). Before, "te" was one recipe at 4 bytes.
    assert pytest.approx(6.769, abs=1e-3) == speed.TE_CURRENT_CAST_BYTES
    plan = _h100().with_changes(stack=Stack.EAGER, float8=Float8.TE)
    current = plan.with_changes(float8=Float8.TE_CURRENT)
    assert gemm_kind(current, find_gpu(plan.hardware.gpu)) == gemm_kind(plan, find_gpu(plan.hardware.gpu))
    assert _te_casts(current) / _te_casts(plan) == pytest.approx(speed.TE_CURRENT_CAST_BYTES / speed.TE_CAST_BYTES)


def test_megatron_core_casts_each_weight_once_a_step() -> None:
    # Megatron-Core passes is_first_microbatch (NVIDIA/Megatron-LM d98e8a64 megatron/core/extensions/
    # transformer_engine.py TELinear.forward) and TE caches the fp8 weight for the step's other
    # micro-batches (NVIDIA/TransformerEngine v2.12 module/linear.py: update_workspace = is_first_microbatch
    # is None or is_first_microbatch). Before, every micro-batch cast every weight.
    for recipe in (Float8.TE, Float8.TE_CURRENT):
        one = _h100().with_changes(stack=Stack.MEGATRON, float8=recipe)
        eight = one.with_changes(workload=replace(one.workload, grad_accum=8))
        assert speed.te_weight_casts_per_micro(eight) == 1 / 8
        # eight micro-batches cast the inputs and output gradients eight times, the weights once
        assert 1.0 < _te_casts(eight) / _te_casts(one) < 7.99
        eager = eight.with_changes(stack=Stack.EAGER)
        assert speed.te_weight_casts_per_micro(eager) == 1.0
        assert _te_casts(eager) / _te_casts(one.with_changes(stack=Stack.EAGER)) == pytest.approx(8.0)
