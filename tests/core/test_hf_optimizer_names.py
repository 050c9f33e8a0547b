"""transformers' optimizer names the plan could not name before branch h62optim: torch's Adagrad and RMSprop,
bitsandbytes' RMSprop (32-bit, 8-bit) and AdEMAMix (32-bit, 8-bit, paged), the reasons given for the names still not
modelled (GaLore, APOLLO, LOMO, schedule-free, GrokAdamW, StableAdamW), torch.optim.Muon's release gate, and the
gradient copy an L2 weight decay makes in torch's Adam and SGD (core.training.optimizer.L2_DECAY).

The state and step figures were measured on CPU with the libraries' own optimizers by
tools/measure/optimizer_step_check.py (torch 2.13.0, bitsandbytes 0.50.2); the rules' source lines are quoted in
core.training.optimizer."""

from __future__ import annotations

import json

import pytest

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.cli.app import build_parser
from core.cli.plans import plan_from_args
from core.errors import PlanError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.planfile import dumps, loads
from core.files.runconfig import loads_run_config
from core.inputs import OPTIMIZER_LABELS, OPTIMIZER_TOOLTIPS, TorchVersion
from core.mac import mac_refusal
from core.parallel.layout import layout
from core.params import ParamCounts, param_counts
from core.plan import Method, Offload, Optimizer, OptimizerImpl, Plan, Preset, Strategy
from core.presets import default_plan
from core.roles import Dtypes, dtypes_for
from core.training.lesson import LESSON_OPTIMIZER_BYTES
from core.training.optimizer import (
    optimizer_step_temporary,
    optimizer_terms,
    paged_state_bytes,
    small_state_elements,
    tensor_state_bytes,
    trainable_tensors,
)
from core.training.speed import step_host_kernels, step_pass_bytes

NEW = (
    Optimizer.ADAGRAD,
    Optimizer.RMSPROP,
    Optimizer.RMSPROP_BNB,
    Optimizer.RMSPROP_BNB_8BIT,
    Optimizer.ADEMAMIX,
    Optimizer.ADEMAMIX_8BIT,
    Optimizer.PAGED_ADEMAMIX,
    Optimizer.PAGED_ADEMAMIX_8BIT,
    Optimizer.SCHEDULE_FREE_ADAMW,
    Optimizer.SCHEDULE_FREE_RADAM,
    Optimizer.SCHEDULE_FREE_SGD,
)
BIG = 32_000 * 4096  # Llama 2 7B's embedding and untied head (config.json vocab_size 32000, hidden_size 4096)


def _plan(optimizer: Optimizer, preset: Preset = Preset.PURE_BF16, wd: float = 0.0, impl: str = "foreach") -> Plan:
    """Llama 2 7B full fine-tuning on an A100 80GB (as tests/core/test_low_bit_optimizers.py)."""
    plan = default_plan().with_changes(
        model=find_model("llama-2-7b").spec,
        model_id="llama-2-7b",
        method=Method.FULL,
        preset=preset,
        optimizer=optimizer,
        optimizer_impl=OptimizerImpl(impl),
        weight_decay=wd,
    )
    return plan.with_workload(micro_batch=1, seq_len=2048, grad_accum=1).with_hardware(gpu="a100-80gb-sxm")


def _args(plan: Plan) -> tuple[Plan, ParamCounts, Dtypes]:
    return plan, param_counts(plan), dtypes_for(plan)


def _state(plan: Plan) -> float:
    return sum(t.bytes for t in optimizer_terms(*_args(plan)))


def _temp(plan: Plan) -> float:
    term = optimizer_step_temporary(*_args(plan))
    return 0.0 if term is None else term.bytes


# ---- the measured per-tensor rules (tools/measure/optimizer_step_check.py, bf16 parameters for bitsandbytes) -----
@pytest.mark.parametrize(
    ("optimizer", "rows", "cols", "measured"),
    [
        (Optimizer.ADAGRAD, 256, 256, 262_144),  # q_proj float32: state["sum"] = torch.full_like(p, ...)
        (Optimizer.RMSPROP, 688, 256, 704_512),  # gate_proj float32: square_avg = torch.zeros_like(p)
        (Optimizer.RMSPROP_BNB, 256, 256, 262_144),  # float32 state1 over a bf16 parameter
        (Optimizer.RMSPROP_BNB_8BIT, 256, 256, 66_560),  # uint8 state1 + float32 absmax1 per 256
        (Optimizer.RMSPROP_BNB_8BIT, 60, 50, 12_000),  # 3,000 elements, under min_8bit_size: float32
        (Optimizer.ADEMAMIX, 688, 256, 2_113_536),  # state1 (2, 688, 256) + state2, float32
        (Optimizer.ADEMAMIX_8BIT, 256, 256, 199_680),  # uint8 m1, m2, nu + absmax1 (2, blocks) + absmax2
        (Optimizer.ADEMAMIX_8BIT, 60, 50, 36_000),  # under min_8bit_size: three float32 moments
    ],
)
def test_state_per_tensor_is_the_measured_bytes(optimizer: Optimizer, rows: int, cols: int, measured: int) -> None:
    torch_dtype_bytes = 4.0  # the torch optimizers were measured over float32 parameters
    assert tensor_state_bytes(optimizer, rows, cols, torch_dtype_bytes)[0] == measured


def test_paged_ademamix_keeps_only_its_small_tensors_and_every_absmax_on_the_gpu() -> None:
    # bitsandbytes 0.50.2 optim/ademamix.py _get_state_double_buffer / get_state_buffer: paged from 1e5 elements
    assert tensor_state_bytes(Optimizer.PAGED_ADEMAMIX, 1000, 256, 2.0)[0] == 0.0
    assert tensor_state_bytes(Optimizer.PAGED_ADEMAMIX_8BIT, 1000, 256, 2.0)[0] == 3 * 256_000 * 4 / 256
    assert tensor_state_bytes(Optimizer.PAGED_ADEMAMIX, 256, 256, 2.0)[0] == 3 * 65_536 * 4  # 65,536 < 1e5
    plan = _plan(Optimizer.PAGED_ADEMAMIX)
    counts = param_counts(plan)
    small = small_state_elements(plan, 100_000)
    assert _state(plan) == 3 * small * 4
    assert paged_state_bytes(plan, counts) == (counts.trainable - small) * 12
    paged8 = _plan(Optimizer.PAGED_ADEMAMIX_8BIT)
    assert paged_state_bytes(paged8, counts) == (counts.trainable - small) * 3
    assert _state(paged8) == pytest.approx(small * 3 * (1 + 4 / 256) + (counts.trainable - small) * 3 * 4 / 256)


def test_state_of_a_7b_model_per_parameter() -> None:
    t = param_counts(_plan(Optimizer.ADAGRAD)).trainable
    assert _state(_plan(Optimizer.ADAGRAD)) == t * 2  # pure bf16: the sum follows the parameter (full_like)
    assert _state(_plan(Optimizer.RMSPROP, Preset.FP32_AUTOCAST_BF16)) == t * 4
    assert _state(_plan(Optimizer.RMSPROP_BNB)) == t * 4  # float32 whatever the parameters' dtype
    assert _state(_plan(Optimizer.RMSPROP_BNB_8BIT)) == pytest.approx(t * (1 + 4 / 256))  # no tensor under 4,096
    assert _state(_plan(Optimizer.ADEMAMIX)) == t * 12  # m1, m2, nu: AdamW's 8 B and one moment more
    assert _state(_plan(Optimizer.ADEMAMIX_8BIT)) == pytest.approx(t * 3 * (1 + 4 / 256))


def test_schedule_free_state_and_step_as_measured() -> None:
    """schedulefree 1.4.1: z = torch.clone(p) and exp_avg_sq = torch.zeros_like(p) (SGD: z alone), the parameter's
    dtype, measured to the byte; AdamW's foreach step one denominator list (1.000 × the parameters), SGD's none."""
    assert tensor_state_bytes(Optimizer.SCHEDULE_FREE_ADAMW, 688, 256, 4.0)[0] == 1_409_024  # gate_proj, float32
    assert tensor_state_bytes(Optimizer.SCHEDULE_FREE_SGD, 688, 256, 4.0)[0] == 704_512
    t = param_counts(_plan(Optimizer.SCHEDULE_FREE_ADAMW)).trainable
    assert _state(_plan(Optimizer.SCHEDULE_FREE_ADAMW)) == 2 * t * 2  # pure bf16: bf16 z and exp_avg_sq
    assert _state(_plan(Optimizer.SCHEDULE_FREE_SGD)) == t * 2
    assert _temp(_plan(Optimizer.SCHEDULE_FREE_ADAMW)) == t * 2
    assert _temp(_plan(Optimizer.SCHEDULE_FREE_RADAM)) == t * 2  # once rectified (rho_t > 4)
    assert _temp(_plan(Optimizer.SCHEDULE_FREE_SGD)) == 0.0


# ---- the step's temporaries ------------------------------------------------------------------------------------
def test_adagrad_and_rmsprop_step_lists_as_measured() -> None:
    t = param_counts(_plan(Optimizer.ADAGRAD)).trainable
    # foreach: Adagrad 2.000 × the parameters with and without weight decay, RMSprop 1.000 and 2.000
    assert _temp(_plan(Optimizer.ADAGRAD)) == 2 * t * 2
    assert _temp(_plan(Optimizer.ADAGRAD, wd=0.1)) == 2 * t * 2
    assert _temp(_plan(Optimizer.RMSPROP)) == t * 2
    assert _temp(_plan(Optimizer.RMSPROP, wd=0.1)) == 2 * t * 2
    # for-loop: the previous tensor's std / avg still bound as the next forms: two copies of the largest (2.000 with
    # weight decay, measured; 1.256 where a quarter-size tensor follows the largest)
    assert _temp(_plan(Optimizer.ADAGRAD, impl="forloop")) == 2 * BIG * 2
    assert _temp(_plan(Optimizer.RMSPROP, impl="forloop")) == 2 * BIG * 2
    assert _temp(_plan(Optimizer.ADAGRAD, impl="fused")) == 0.0  # torch._fused_adagrad_ (CPU and CUDA): 0 B


def test_fused_adagrad_keeps_its_step_counters_on_the_gpu() -> None:
    plan = _plan(Optimizer.ADAGRAD, impl="fused")
    terms = {t.label: t.bytes for t in optimizer_terms(*_args(plan))}
    # adagrad.py _init_group: torch.zeros((), device=p.device) when fused, one 512-byte block each
    assert terms["fused Adagrad step counters on the GPU"] == trainable_tensors(plan) * 512


def test_bitsandbytes_rmsprop_and_ademamix_step_one_kernel_per_tensor_with_no_temporary() -> None:
    for optimizer in (Optimizer.RMSPROP_BNB, Optimizer.RMSPROP_BNB_8BIT, Optimizer.ADEMAMIX, Optimizer.ADEMAMIX_8BIT):
        plan = _plan(optimizer)
        counts = param_counts(plan)
        stage = layout(plan).stages[0]
        assert step_host_kernels(plan, counts, stage) == 291  # 32 blocks × 9 + embedding, head, final norm
        assert step_pass_bytes(plan, counts, stage) == 0.0
        assert optimizer_step_temporary(*_args(plan)) is None


def test_torch_adagrad_and_rmsprop_step_passes_and_kernels() -> None:
    plan = _plan(Optimizer.RMSPROP)
    counts = param_counts(plan)
    stage = layout(plan).stages[0]
    t = counts.trainable
    # beyond the fused count: the gradient once more and 7 passes over state-sized tensors, bf16
    assert step_pass_bytes(plan, counts, stage) == pytest.approx(t * (1 + 7) * 2)
    # weight decay folded into the gradient as Adam's L2: the parameter read, the gradient read and written
    decayed = _plan(Optimizer.RMSPROP, wd=0.1)
    assert step_pass_bytes(decayed, counts, stage) - step_pass_bytes(plan, counts, stage) == pytest.approx(t * 3 * 2)
    assert step_host_kernels(_plan(Optimizer.RMSPROP, impl="forloop"), counts, stage) == 5 * 291


# ---- Adam's and SGD's L2 weight decay: a new gradient (torch 2.13.0 adam.py, sgd.py) ----------------------------
def test_sgd_with_l2_weight_decay_keeps_a_new_gradient_during_the_step() -> None:
    """Fails before h62optim: SGD's step had no temporary whatever the weight decay."""
    t = param_counts(_plan(Optimizer.SGD)).trainable
    assert _temp(_plan(Optimizer.SGD, wd=0.1)) == t * 2  # foreach: 0 -> 1.000 × the parameters (measured)
    assert _temp(_plan(Optimizer.SGD_MOMENTUM, wd=0.1)) == t * 2  # with momentum: 1.000 (measured)
    assert _temp(_plan(Optimizer.SGD, wd=0.1, impl="forloop")) == BIG * 2  # 1.000 × the largest (measured)
    assert _temp(_plan(Optimizer.SGD)) == 0.0
    assert _temp(_plan(Optimizer.SGD, wd=0.1, impl="fused")) == 0.0


def test_adam_l2_for_loop_holds_three_copies_and_its_foreach_frees_the_gradient_first() -> None:
    """Fails before h62optim: the for-loop counted 2 copies with an L2 decay (measured 3.000 × the largest)."""
    assert _temp(_plan(Optimizer.ADAM, wd=0.1, impl="forloop")) == 3 * BIG * 2
    assert _temp(_plan(Optimizer.ADAMW, wd=0.1, impl="forloop")) == 2 * BIG * 2  # decoupled: mul_ in place
    # foreach: ``del device_grads`` before the sqrt (adam.py line 725): 1.000 × the parameters either way
    assert _temp(_plan(Optimizer.ADAM, wd=0.1)) == _temp(_plan(Optimizer.ADAM))


# ---- refusals -----------------------------------------------------------------------------------------------------
def test_rmsprop_has_no_fused_implementation() -> None:
    with pytest.raises(PlanError) as caught:
        _plan(Optimizer.RMSPROP, impl="fused")
    assert caught.value.field == "optimizer_impl" and "no fused" in str(caught.value)


# Adagrad left the list on branch h63stack: DeepSpeed builds DeepSpeedCPUAdagrad for it (core.optimizer_stacks)
@pytest.mark.parametrize("optimizer", [Optimizer.RMSPROP, Optimizer.ADEMAMIX_8BIT, Optimizer.RMSPROP_BNB])
def test_zero_offload_with_a_new_optimizer_is_refused_with_the_reason(optimizer: Optimizer) -> None:
    with pytest.raises(PlanError) as caught:
        _plan(optimizer).with_parallel(gpus_per_node=8, strategy=Strategy.ZERO3, offload=Offload.OPTIMIZER)
    assert caught.value.field == "parallel.offload" and "DeepSpeedCPUAdam" in str(caught.value)


def test_fsdp_cpu_offload_steps_the_new_optimizers_on_the_host() -> None:
    """FSDP2's CPUOffloadPolicy runs the plan's own optimizer on the CPU (core.parallel.state): not refused."""
    plan = _plan(Optimizer.ADAGRAD).with_parallel(gpus_per_node=8, strategy=Strategy.FSDP, offload=Offload.OPTIMIZER)
    assert estimate(plan).bucket(BucketKey.OPTIMIZER).bytes < _state(_plan(Optimizer.ADAGRAD)) / 8


def test_ademamix_8bit_under_zero_quantises_every_partition() -> None:
    plan = _plan(Optimizer.ADEMAMIX_8BIT).with_parallel(gpus_per_node=8, strategy=Strategy.ZERO2)
    assert not any(t.label.startswith("float32") for t in optimizer_terms(*_args(plan)))


@pytest.mark.parametrize("release", [TorchVersion.V2_0, TorchVersion.V2_4, TorchVersion.V2_5_TO_2_7])
def test_muon_is_refused_under_a_torch_release_without_it(release: TorchVersion) -> None:
    """Fails before h62optim: torch.optim.Muon (first in 2.9.0) was planned under any release."""
    with pytest.raises(PlanError) as caught:
        _plan(Optimizer.MUON, impl="fused").with_hardware(torch_version=release)
    assert caught.value.field == "hardware.torch_version" and "2.9" in str(caught.value)
    assert (
        _plan(Optimizer.MUON, impl="fused").with_hardware(torch_version=TorchVersion.V2_8).optimizer is Optimizer.MUON
    )


def test_hf_adafactor_is_unaffected_by_the_torch_release() -> None:
    """The plan's adafactor is transformers' own (transformers/optimization.py), not torch.optim.Adafactor (2.5+)."""
    plan = _plan(Optimizer.ADAFACTOR).with_hardware(torch_version=TorchVersion.V2_0)
    assert plan.optimizer is Optimizer.ADAFACTOR


def test_an_apple_gpu_refuses_the_8bit_and_paged_ones_and_keeps_the_rest() -> None:
    mac = "apple-m2-max-96gb"
    for optimizer in (Optimizer.RMSPROP_BNB_8BIT, Optimizer.ADEMAMIX_8BIT, Optimizer.PAGED_ADEMAMIX):
        with pytest.raises(PlanError) as caught:
            _plan(optimizer).with_hardware(gpu=mac)
        assert caught.value.field == "optimizer"
    # bitsandbytes 0.50.2 backends/default/ops.py name2optimizer_id: rmsprop and ademamix at 32 bits on any device
    for optimizer in (Optimizer.RMSPROP_BNB, Optimizer.ADEMAMIX, Optimizer.ADAGRAD, Optimizer.RMSPROP):
        assert mac_refusal(_plan(optimizer).with_hardware(gpu=mac)) is None


# ---- names, files, the command line -----------------------------------------------------------------------------
def test_every_new_optimizer_estimates_and_names_its_bytes() -> None:
    fused_adamw = _plan(Optimizer.ADAMW, Preset.FP32_AUTOCAST_BF16, impl="fused")
    adamw = estimate(fused_adamw).bucket(BucketKey.OPTIMIZER).bytes
    ademamix = estimate(_plan(Optimizer.ADEMAMIX, Preset.FP32_AUTOCAST_BF16)).bucket(BucketKey.OPTIMIZER).bytes
    assert ademamix > adamw  # 12 B a parameter against fused float32 AdamW's 8 (foreach AdamW's sqrt list: 12 too)
    for optimizer in NEW:
        assert optimizer in OPTIMIZER_LABELS and " B" in OPTIMIZER_TOOLTIPS[optimizer]
        assert optimizer in LESSON_OPTIMIZER_BYTES
        assert loads(dumps(_plan(optimizer))).optimizer is optimizer
        args = build_parser().parse_args(
            ["estimate", "--model", "llama-2-7b", "--optimizer", optimizer.value, "--optimizer-impl", "foreach"]
        )
        assert plan_from_args(args).optimizer is optimizer


@pytest.mark.parametrize(
    ("optim", "expected", "impl"),
    [
        # transformers 5.25 OptimizerNames and trainer_optimizer.py
        ("adagrad", "adagrad", "foreach"),
        ("rmsprop", "rmsprop", "foreach"),
        ("rmsprop_bnb", "rmsprop-bnb", None),
        ("rmsprop_bnb_32bit", "rmsprop-bnb", None),
        ("rmsprop_bnb_8bit", "rmsprop-bnb-8bit", None),
        ("ademamix", "ademamix", None),
        ("ademamix_8bit", "ademamix-8bit", None),
        ("paged_ademamix_32bit", "paged-ademamix", None),
        ("paged_ademamix_8bit", "paged-ademamix-8bit", None),
        ("schedule_free_adamw", "schedule-free-adamw", None),
        ("schedule_free_radam", "schedule-free-radam", None),
        ("schedule_free_sgd", "schedule-free-sgd", None),
    ],
)
def test_hf_optim_names(optim: str, expected: str, impl: str | None) -> None:
    run = loads_run_config(json.dumps({"per_device_train_batch_size": 2, "optim": optim}).encode())
    assert run.settings.optimizer == expected and run.settings.optimizer_impl == impl


@pytest.mark.parametrize(
    ("optim", "why"),
    [
        ("galore_adamw_8bit", "AdamW8bit"),  # galore_adamw planned from branch h64galore (tests/core/test_galore.py)
        ("galore_adamw_8bit_layerwise", "layer-wise"),
        ("galore_adafactor", "Adafactor"),
        ("apollo_adamw", "APOLLO"),
        ("lomo", "no gradients"),
        ("adalomo", "factored"),
        ("grokadamw", "GrokAdamW"),
        ("stable_adamw", "StableAdamW"),
    ],
)
def test_hf_names_still_not_modelled_are_listed_with_the_reason(optim: str, why: str) -> None:
    run = loads_run_config(json.dumps({"per_device_train_batch_size": 2, "optim": optim}).encode())
    assert run.settings.optimizer is None
    assert len(run.unknown) == 1 and why in run.unknown[0] and "not modelled" in run.unknown[0]


@pytest.mark.parametrize("optimizer", [Optimizer.ADEMAMIX_8BIT, Optimizer.RMSPROP_BNB, Optimizer.ADAGRAD])
@pytest.mark.parametrize("target", [Target.TRL, Target.AXOLOTL, Target.LLAMA_FACTORY, Target.TORCHTUNE])
def test_exports_write_the_name_and_read_it_back(target: Target, optimizer: Optimizer) -> None:
    exported = export(_plan(optimizer), target)
    run = loads_run_config(exported.text.encode(), "exported.json" if target is Target.TRL else "exported.yaml")
    assert "method.optimizer" not in [u.field for u in exported.unexpressed]
    assert run.settings.optimizer == optimizer.value


def test_an_hf_export_of_a_for_loop_rmsprop_says_the_trainer_runs_foreach() -> None:
    exported = export(_plan(Optimizer.RMSPROP, impl="forloop"), Target.TRL)
    assert json.loads(exported.text)["optim"] == "rmsprop"
    assert "method.optimizer_impl" in [u.field for u in exported.unexpressed]


def test_a_switch_to_rmsprop_under_the_fused_default_follows_torchs_foreach() -> None:
    """Merge review of h62optim: `vramplan estimate --optimizer rmsprop` failed on the fused default (the HF
    Trainer's adamw_torch_fused) though torch builds RMSprop foreach when nothing is asked (torch 2.13.0
    torch/optim/rmsprop.py; transformers' rmsprop passes neither foreach nor fused). A form edit and the CLI
    now follow that; a typed fused is still refused."""
    from core.cli.app import main as cli_main

    plan = default_plan()
    assert plan.optimizer_impl is OptimizerImpl.FUSED
    switched = plan.with_input("optimizer", "rmsprop")
    assert switched.optimizer is Optimizer.RMSPROP and switched.optimizer_impl is OptimizerImpl.FOREACH
    assert plan.with_input("optimizer", "adagrad").optimizer_impl is OptimizerImpl.FUSED  # Adagrad has fused
    assert cli_main(["estimate", "--model", "gpt2", "--optimizer", "rmsprop", "--json"]) == 0
    assert cli_main(["estimate", "--model", "gpt2", "--optimizer", "rmsprop", "--optimizer-impl", "fused"]) != 0
