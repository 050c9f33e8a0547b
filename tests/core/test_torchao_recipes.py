"""torchao's other low-precision training recipes (h78ao): "rowwise_with_gw_hp" (torchao 0.13.0
torchao/float8/config.py ``Float8LinearConfig.from_recipe_name``) and the MX linears of
torchao/prototype/mx_formats (``MXLinearConfig.from_recipe_name`` "mxfp8_cublas" / "mxfp8_cublas_rceil",
``mx_linear.mx_mm``), as the plan's float8 "rowwise-gw-hp" and "mxfp8"."""

from __future__ import annotations

import json

import pytest

from core.catalogue import find_gpu
from core.cli.app import main
from core.errors import PlanError
from core.estimate import estimate
from core.files import planfile
from core.params import param_counts
from core.plan import Float8, Hardware, Method, MpDtype, Parallelism, Plan, Strategy, Workload
from core.presets import plan_for_model
from core.training.speed import gemm_kind, step_work

# Llama 3.1 8B (its config.json): hidden 4,096, intermediate 14,336; a block's largest linear is the fused
# gate|up projection, 4,096 -> 2 x 14,336.
HIDDEN, GATE_UP = 4096, 2 * 14336
TOKENS = 8192


def _plan(gpu: str = "h100-sxm") -> Plan:
    # Chunked loss and checkpointing: the block's backward, not the loss, sets the peak (as in
    # tests/core/test_training_time.py's float8 casts test).
    workload = Workload(micro_batch=1, seq_len=TOKENS, grad_accum=1, tokens=10**9)
    plan = plan_for_model("llama-3.1-8b", method=Method.FULL, workload=workload, hardware=Hardware(gpu=gpu))
    return plan.with_changes(chunked_loss=True, checkpointing=True)


def test_rowwise_with_gw_hp_casts_only_the_output_gradient_and_the_weight_in_the_backward() -> None:
    # from_recipe_name(ROWWISE_WITH_GW_HP): cast_config_input_for_grad_weight and
    # cast_config_grad_output_for_grad_weight are ScalingType.DISABLED, so matmul_with_hp_or_float8_args's
    # backward casts the output gradient (rowwise, for the input gradient) and the weight (tensorwise):
    # N·out + in·out bytes for the largest linear, where rowwise casts N·in + 2·N·out + in·out.
    plan = _plan()
    plain = estimate(plan)
    assert plain.peak_phase == "backward"
    gw_hp = estimate(plan.with_changes(float8=Float8.ROWWISE_GW_HP)).peak_bytes - plain.peak_bytes
    rowwise = estimate(plan.with_changes(float8=Float8.ROWWISE)).peak_bytes - plain.peak_bytes
    assert gw_hp == pytest.approx(TOKENS * GATE_UP + HIDDEN * GATE_UP)
    assert rowwise - gw_hp == pytest.approx(TOKENS * HIDDEN + TOKENS * GATE_UP)


def test_mx_linears_cast_what_tensorwise_casts_with_a_scale_byte_per_32() -> None:
    # mx_mm's backward holds the output gradient cast along dim 0 and dim 1, the weight's and the input's
    # dim-1 casts until it returns: the tensorwise recipe's tensors, each with one E8M0 byte per block of 32
    # (MXLinearConfig.block_size = 32). The memory rule is the card's alike (a B200 here).
    plan = _plan("b200")
    plain = estimate(plan).peak_bytes
    tensorwise = estimate(plan.with_changes(float8=Float8.TENSORWISE)).peak_bytes - plain
    mx = estimate(plan.with_changes(float8=Float8.MXFP8)).peak_bytes - plain
    assert tensorwise == pytest.approx(TOKENS * HIDDEN + 2 * TOKENS * GATE_UP + HIDDEN * GATE_UP)
    assert mx == pytest.approx(tensorwise * 33 / 32, abs=1024)  # the peak's allocator rounding aside


def test_the_fsdp_float8_all_gather_is_refused_with_rowwise_with_gw_hp() -> None:
    # Float8LinearConfig.__post_init__ asserts enable_fsdp_float8_all_gather needs tensorwise weight scaling;
    # rowwise_with_gw_hp scales the weight axiswise for the forward (torchao 0.13.0 torchao/float8/config.py).
    with pytest.raises(PlanError) as caught:
        _plan().with_changes(
            float8=Float8.ROWWISE_GW_HP,
            parallel=Parallelism(gpus_per_node=8, strategy=Strategy.FSDP, fsdp_param_dtype=MpDtype.BF16,
                                 fsdp_float8_all_gather=True),
        )
    assert caught.value.field == "parallel.fsdp_float8_all_gather" and "rowwise-gw-hp" in str(caught.value)


def test_rowwise_with_gw_hp_runs_the_weight_gradient_matmul_at_the_16_bit_rate() -> None:
    # The weight gradient's operands stay 16-bit (grad_weight = input_t_hp @ grad_output_hp): its matmul
    # moves from the fp8 rowwise feature to the 16-bit one, the same padded FLOPs at the other peak.
    gpu = find_gpu("h100-sxm")
    plan = _plan()
    rowwise, gw_hp = (
        step_work(p, param_counts(p), gpu)
        for p in (plan.with_changes(float8=Float8.ROWWISE), plan.with_changes(float8=Float8.ROWWISE_GW_HP))
    )
    assert gemm_kind(plan.with_changes(float8=Float8.ROWWISE_GW_HP), gpu) == "fp8-rowwise"
    fp8, wide = "gemm:hopper/fp8-rowwise", "gemm:hopper/16-bit"
    moved_fp8 = (rowwise.features[fp8] - gw_hp.features[fp8]) * gpu.peak_tflops("fp8")
    moved_wide = (gw_hp.features[wide] - rowwise.features[wide]) * gpu.peak_tflops("bf16")
    assert moved_fp8 > 0 and moved_wide == pytest.approx(moved_fp8)
    assert estimate(plan.with_changes(float8=Float8.ROWWISE_GW_HP)).compute.float8_problem is None


def test_mx_linears_run_at_blackwells_block_scaled_rate_and_are_refused_elsewhere() -> None:
    # torchao's MX matmuls are torch._scaled_mm with E8M0 scales (cuBLASLt's block-scaled GEMM): Blackwell only;
    # torchtitan's MX converter asserts has_cuda_capability(10, 0) (pytorch/torchtitan 6fc499f6 mx.py).
    b200 = _plan("b200").with_changes(float8=Float8.MXFP8)
    assert gemm_kind(b200, find_gpu("b200")) == "fp8-mxfp8"
    on_b200 = estimate(b200).compute
    assert on_b200.float8_problem is None and on_b200.gemm_peak_tflops == find_gpu("b200").peak_tflops("fp8")
    assert on_b200.tokens_per_second > estimate(_plan("b200")).compute.tokens_per_second
    for gpu in ("h100-sxm", "a100-80gb-sxm"):
        plain = estimate(_plan(gpu)).compute
        mx = estimate(_plan(gpu).with_changes(float8=Float8.MXFP8)).compute
        assert mx.float8_problem is not None and "Blackwell" in mx.float8_problem
        assert mx.tokens_per_second == pytest.approx(plain.tokens_per_second)


def test_the_command_line_and_plan_files_carry_the_new_recipes(capsys: pytest.CaptureFixture[str]) -> None:
    # --float8 takes the enum's values; --json carries the reason MX is refused off Blackwell (this module's
    # test above); a plan file keeps the value and loads it back.
    code = main(["estimate", "--model", "llama-3.1-8b", "--method", "full", "--gpu", "h100-sxm", "--float8", "mxfp8",
                 "--json"])
    out, _ = capsys.readouterr()
    assert code == 0 and "Blackwell" in json.loads(out)["compute"]["float8_problem"]
    for recipe in (Float8.ROWWISE_GW_HP, Float8.MXFP8):
        plan = _plan("b200").with_changes(float8=recipe)
        assert planfile.loads(planfile.dumps(plan)).float8 is recipe
