"""GaLore AdamW (galore-torch 1.0 galore_torch/adamw.py, galore_projector.py; transformers 5.25 trainer_optimizer.py
_get_galore_optimizer / _setup_low_rank_optimizer): the blocks' Linear weights keep Adam's moments on their gradient
projected to rank r and the projector; every other parameter plain AdamW; the layer-wise name is the same optimizer
stepped per parameter in the backward.

The CPU figures are tools/measure/galore_step_check.py's (torch 2.13.0, galore-torch 1.0, transformers 5.25: a
LlamaForCausalLM of vocab 1,000, hidden 256, intermediate 688, 2 blocks, 4 heads, 2 KV heads, untied, rank 32,
optim_target_modules ["attn", "mlp"]): every parameter's state to the byte, and the second step's peak under a
TorchDispatchMode, 2,113,536 B at float32 and 1,056,768 B at bf16."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.catalogue import find_gpu, find_model
from core.dtypes import Autocast, Dtype
from core.errors import PlanError, PlanFileError
from core.files.launch import Target, export
from core.files.runconfig import apply_settings, loads_run_config
from core.model import ModelSpec
from core.parallel.layout import layout
from core.params import galore_state_elements, param_counts
from core.plan import Method, Offload, Optimizer, Plan, Preset, Strategy
from core.presets import default_plan
from core.roles import dtypes_for
from core.training.optimizer import optimizer_step_temporary, optimizer_terms
from core.training.speed import galore_feature

# tools/measure/galore_step_check.py's model (LlamaConfig there) and rank
TOY = ModelSpec(
    name="galore-toy",
    family="llama",
    vocab_size=1_000,
    hidden_size=256,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=64,
    intermediate_size=688,
)
TOY_RANK = 32


def _toy(dtype: Dtype, **changes: object) -> Plan:
    plan = default_plan().with_changes(
        model=TOY,
        model_id="",
        method=Method.FULL,
        preset=Preset.CUSTOM,
        weight_dtype=dtype,
        base_dtype=dtype,
        autocast=Autocast.NONE,
        optimizer=Optimizer.GALORE_ADAMW,
        galore_rank=TOY_RANK,
    )
    return plan.with_workload(grad_accum=1).with_changes(**changes)


def _llama8b(**changes: object) -> Plan:
    """Llama 3.1 8B, full fine-tuning, Trainer(bf16=True) on the bf16 model (the default preset), no accumulation."""
    plan = default_plan().with_changes(
        model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", method=Method.FULL
    )
    return plan.with_workload(grad_accum=1).with_changes(optimizer=Optimizer.GALORE_ADAMW, **changes)


def _state(plan: Plan) -> float:
    return sum(t.bytes for t in optimizer_terms(plan, param_counts(plan), dtypes_for(plan)) if "GaLore" in t.label
               or "rest" in t.label)  # fmt: skip


@pytest.mark.parametrize(
    ("dtype", "measured"),
    [
        # galore_step_check.py: the 21 parameters' state summed (each equal to the rule): float32 8,570,880 B (the
        # projectors views of the SVD's whole factor), bf16 3,040,256 B
        (Dtype.FP32, 8_570_880),
        (Dtype.BF16, 3_040_256),
    ],
)
def test_state_equals_the_measured_bytes(dtype: Dtype, measured: int) -> None:
    assert _state(_toy(dtype)) == measured


def test_step_temporary_against_the_measured_steps() -> None:
    """The plan's step temporaries are the largest of any step's, the projector refresh's included (every
    update_proj_gap steps and the first). galore_step_check.py: at float32 the refresh (no float32 copy) stays under
    the plain group's: lm_head's denom and norm_grad held while the first q_proj forms its projection and denominator,
    the second step's peak to the byte, 2,113,536 B. At bf16 the refresh leads: measured 2,068,480 B beyond the state
    in the first step; the rule counts the previous weight's update and projection beside the SVD whole, 2,160,640 B
    (+4.5 %), an upper bound; the second step (no refresh) peaks at 1,056,768 B, under both."""
    fp32 = _toy(Dtype.FP32)
    term = optimizer_step_temporary(fp32, param_counts(fp32), dtypes_for(fp32))
    assert term is not None and term.bytes == 2_113_536
    bf16 = _toy(Dtype.BF16)
    term = optimizer_step_temporary(bf16, param_counts(bf16), dtypes_for(bf16))
    assert term is not None and "SVD" in term.label
    assert 2_068_480 <= term.bytes <= 2_068_480 * 1.05


def test_llama_8b_state_from_the_shapes() -> None:
    """Llama 3.1 8B (config.json: hidden 4,096, 1,024-wide k / v, intermediate 14,336, 32 blocks), rank 128
    (transformers' default), bf16 gradients (Trainer(bf16=True) on a bf16 model): per block the projections are
    128 × (4 × 4,096 + 3 × 14,336) and the projectors 128 × (2 × 4,096 + 2 × 1,024 + 3 × 4,096) elements."""
    plan = _llama8b()
    assert plan.galore_rank == 128  # transformers 5.25 _get_galore_optimizer: optim_args rank default
    assert galore_state_elements(plan, float32_grads=False) == (32 * 128 * 59_392, 32 * 128 * 22_528)
    # float32 gradients: each projector views its SVD's min(m, n)² factor (galore_step_check.py: the storages)
    squares = 2 * 4_096**2 + 2 * 1_024**2 + 3 * 4_096**2
    assert galore_state_elements(plan, float32_grads=True)[1] == 32 * squares
    rest = 8_030_261_248 - 32 * (2 * 4_096**2 + 2 * 4_096 * 1_024 + 3 * 4_096 * 14_336)  # embedding, head, norms
    assert _state(plan) == 2 * (2 * 32 * 128 * 59_392 + 32 * 128 * 22_528 + 2 * rest)


def test_rank_above_the_smaller_side_keeps_that_side() -> None:
    """``U[:, :rank]`` of a thin SVD holds at most min(m, n) vectors: rank 2,048 on k_proj (1,024 × 4,096) is 1,024."""
    low, _ = galore_state_elements(_llama8b(galore_rank=2_048), float32_grads=False)
    assert low == 32 * (2 * 4_096 * 2_048 + 2 * 4_096 * 1_024 + 3 * 14_336 * 2_048)


def test_galore_saves_against_adamw_and_the_layerwise_step_holds_one_block() -> None:
    from core.estimate import estimate

    adamw = estimate(_llama8b().with_changes(optimizer=Optimizer.ADAMW))
    galore = estimate(_llama8b())
    layerwise = estimate(_llama8b(optimizer_in_backward=True))
    assert galore.peak_bytes < adamw.peak_bytes
    assert layerwise.peak_bytes < galore.peak_bytes


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"method": Method.LORA}, "method"),  # PEFT freezes the Linear weights GaLore would project
        ({"method": Method.QLORA}, "method"),
    ],
)
def test_refused_on_adapters(changes: dict[str, object], field: str) -> None:
    with pytest.raises(PlanError) as caught:
        _llama8b(**changes)
    assert caught.value.field == field
    assert "GaLore" in str(caught.value)


def test_refused_sharded_and_layerwise_under_ddp() -> None:
    plan = _llama8b()
    with pytest.raises(PlanError, match="sharded"):
        plan.with_parallel(gpus_per_node=8, strategy=Strategy.FSDP)
    with pytest.raises(PlanError, match="sharded"):
        plan.with_parallel(gpus_per_node=8, strategy=Strategy.ZERO2)
    assert plan.with_parallel(gpus_per_node=8, strategy=Strategy.DDP).optimizer is Optimizer.GALORE_ADAMW
    # transformers 5.25 _setup_low_rank_optimizer: "Layer-wise ... does not support DDP at this time"
    with pytest.raises(PlanError, match="DDP"):
        _llama8b(optimizer_in_backward=True).with_parallel(gpus_per_node=8, strategy=Strategy.DDP)


def test_zero_offload_refuses_it_with_the_stacks_rule() -> None:
    """DeepSpeed ZeRO-Offload steps DeepSpeed's own CPU optimizers only (core.optimizer_stacks), and ZeRO hands any
    optimizer flat partitions (GaLore's projector needs each 2-D gradient): refused, the reason named."""
    with pytest.raises(PlanError, match="offloaded matrices"):
        _llama8b().with_parallel(gpus_per_node=8, strategy=Strategy.ZERO2, offload=Offload.OPTIMIZER)


def test_svd_time_is_spread_over_the_gap() -> None:
    """galore_feature: one refresh's R-SVD FLOPs (6·m·n² + 20·n³ a weight, Golub & Van Loan Figure 8.6.1) over
    update_proj_gap steps at the card's float32 peak: Llama 3.1 8B's 32 blocks (q, o 4,096²; k, v 4,096 × 1,024; gate,
    up, down 14,336 × 4,096), 100 steps twice 200's time."""
    gpu = find_gpu("a100-80gb-sxm")
    plan = _llama8b().with_changes(hardware=replace(default_plan().hardware, gpu=gpu.id))
    (stage,) = layout(plan).stages

    def svd(big: int, small: int) -> float:
        return 6 * big * small**2 + 20 * small**3

    per_block = 2 * svd(4_096, 4_096) + 2 * svd(4_096, 1_024) + 3 * svd(14_336, 4_096)
    at_200 = galore_feature(plan, stage, gpu)["optimizer_svd"]
    assert at_200 * gpu.peak_tflops("fp32") * 1e12 * 200 == pytest.approx(32 * per_block)
    at_100 = galore_feature(plan.with_changes(galore_update_proj_gap=100), stage, gpu)["optimizer_svd"]
    assert at_100 == pytest.approx(2 * at_200)
    assert galore_feature(plan.with_changes(optimizer=Optimizer.ADAMW), stage, gpu) == {}


GALORE_YAML = b"""per_device_train_batch_size: 1
optim: galore_adamw_layerwise
optim_target_modules: ["attn", "mlp"]
optim_args: "rank=64, update_proj_gap=100, scale=0.25, proj_type=std"
"""


def test_training_arguments_import() -> None:
    run = loads_run_config(GALORE_YAML, "galore.yaml")
    assert run.unknown == ()
    plan = apply_settings(_llama8b().with_changes(optimizer=Optimizer.ADAMW), run.settings)
    assert plan.optimizer is Optimizer.GALORE_ADAMW
    assert (plan.galore_rank, plan.galore_update_proj_gap, plan.optimizer_in_backward) == (64, 100, True)


def test_import_refuses_or_lists_what_it_cannot_plan() -> None:
    with pytest.raises(PlanFileError, match="optim_target_modules"):  # transformers raises without it
        loads_run_config(b"optim: galore_adamw\n", "g.yaml")
    run = loads_run_config(b"optim: galore_adamw\noptim_target_modules: [q_proj]\n", "g.yaml")
    assert run.unknown[0].startswith("optim_target_modules = ['q_proj']")
    run = loads_run_config(b"optim: galore_adamw\noptim_target_modules: all-linear\n", "g.yaml")  # the head too
    assert run.unknown[0].startswith("optim_target_modules = 'all-linear'")
    run = loads_run_config(b"optim: galore_adamw_8bit\n", "g.yaml")
    assert "AdamW8bit" in run.unknown[0]


def test_trainer_export_writes_optim_args_and_targets() -> None:
    plan = _llama8b(galore_rank=64, galore_update_proj_gap=100, optimizer_in_backward=True)
    out = export(plan, Target.TRL)
    assert "galore_adamw_layerwise" in out.text
    assert "rank=64,update_proj_gap=100" in out.text
    assert "optim_target_modules" in out.text
    assert not [u for u in out.unexpressed if u.field.startswith("method.galore") or "in_backward" in u.field]


def test_command_line_flags_and_their_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    """--optimizer galore-adamw with --galore-rank / --galore-update-proj-gap; a rank of 0 refused (core.inputs: 1 to
    MAX_RANK)."""
    from core.cli.app import main

    args = ["estimate", "--model", "llama-3.1-8b", "--method", "full", "--optimizer", "galore-adamw", "--json"]
    totals = []
    for rank in ("64", "256"):
        assert main([*args, "--galore-rank", rank, "--galore-update-proj-gap", "500"]) == 0
        out, _ = capsys.readouterr()
        totals.append(json.loads(out)["total_bytes"])
    assert totals[0] < totals[1]  # the moments on a wider projection
    assert main([*args, "--galore-rank", "0"]) != 0
    _, err = capsys.readouterr()
    assert "galore_rank: 0 is not allowed" in err
