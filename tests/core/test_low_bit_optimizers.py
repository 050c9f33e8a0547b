"""The optimizers issue 22 found people run and the plan could not name (branch h57opt): torchao's low-bit AdamW
(AdamW8bit / AdamW4bit / AdamWFp8), AnyPrecisionAdamW as llama-recipes builds it (and with Kahan summation),
bitsandbytes' Lion (32-bit, 8-bit, paged): their state (core.training.optimizer), their step's traffic and kernels
(core.training.speed), the importers, the exports, the plan file, the command line, an Apple GPU, and the corpus.

The per-tensor state rules were measured on CPU with the libraries' own optimizers by
tools/measure/optimizer_state_check.py (torch 2.13.0, torchao 0.18.0, bitsandbytes 0.50.2)."""

from __future__ import annotations

import json
import math

import pytest

from core.breakdown import BucketKey
from core.catalogue import find_gpu, find_model, generation
from core.cli.app import build_parser
from core.cli.plans import plan_from_args
from core.errors import PlanError, PlanFileError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.planfile import dumps, loads
from core.files.runconfig import loads_run_config
from core.inputs import OPTIMIZER_LABELS, OPTIMIZER_TOOLTIPS, input_at
from core.mac import mac_refusal
from core.parallel.layout import layout
from core.params import ParamCounts, muon_elements, param_counts
from core.plan import Float8, Method, Optimizer, OptimizerImpl, Plan, Preset, Strategy
from core.presets import default_plan
from core.roles import Dtypes, dtypes_for
from core.training.lesson import LESSON_OPTIMIZER_BYTES
from core.training.optimizer import (
    AO_LOW_BIT,
    muon_ns_flops,
    optimizer_step_temporary,
    optimizer_terms,
    paged_state_bytes,
    small_state_elements,
    trainable_tensors,
)
from core.training.speed import muon_feature, rank_trainable, step_host_kernels, step_pass_bytes

NEW = (
    Optimizer.AO_ADAMW_8BIT,
    Optimizer.AO_ADAMW_4BIT,
    Optimizer.AO_ADAMW_FP8,
    Optimizer.ANYPRECISION_ADAMW,
    Optimizer.ANYPRECISION_ADAMW_KAHAN,
    Optimizer.LION,
    Optimizer.LION_8BIT,
    Optimizer.PAGED_LION,
    Optimizer.PAGED_LION_8BIT,
    Optimizer.MUON,
)


def _plan(optimizer: Optimizer, preset: Preset = Preset.PURE_BF16, wd: float = 0.0) -> Plan:
    """Llama 2 7B full fine-tuning (the torchao README's and llama-recipes' model) on an A100 80GB."""
    plan = default_plan().with_changes(
        model=find_model("llama-2-7b").spec,
        model_id="llama-2-7b",
        method=Method.FULL,
        preset=preset,
        optimizer=optimizer,
        weight_decay=wd,
    )
    return plan.with_workload(micro_batch=1, seq_len=2048, grad_accum=1).with_hardware(gpu="a100-80gb-sxm")


def _args(plan: Plan) -> tuple[Plan, ParamCounts, Dtypes]:
    return plan, param_counts(plan), dtypes_for(plan)


def _state(plan: Plan) -> float:
    return sum(t.bytes for t in optimizer_terms(*_args(plan)))


# ---- the measured per-tensor rules ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("optimizer", "elements", "measured"),
    [
        # tools/measure/optimizer_state_check.py: exp_avg + exp_avg_sq, codes + float32 scales + float32 qmap
        (Optimizer.AO_ADAMW_8BIT, 65_536, 135_168),  # q_proj 256 x 256
        (Optimizer.AO_ADAMW_8BIT, 256_000, 522_048),  # embed 1000 x 256
        (Optimizer.AO_ADAMW_4BIT, 65_536, 69_760),
        (Optimizer.AO_ADAMW_4BIT, 176_128, 187_264),  # gate_proj 688 x 256
        (Optimizer.AO_ADAMW_FP8, 65_536, 133_120),
        (Optimizer.AO_ADAMW_FP8, 16_384, 33_280),  # k_proj 64 x 256
    ],
)
def test_torchao_state_per_tensor_is_the_measured_bytes(optimizer: Optimizer, elements: int, measured: int) -> None:
    code, block, qmap = AO_LOW_BIT[optimizer]
    assert 2 * (elements * code + elements / block * 4 + qmap * 4) == measured


def test_torchao_state_of_a_7b_model() -> None:
    plan = _plan(Optimizer.AO_ADAMW_8BIT)
    t = param_counts(plan).trainable
    # Llama 2 7B's tensors of fewer than 4,096 elements: none (its norms are 4,096 wide), and every one is a
    # multiple of 256; 291 tensors (32 blocks x 9 + embedding, head, final norm), 2 qmaps of 1 KiB each.
    assert small_state_elements(plan, 4096, 256) == 0
    assert trainable_tensors(plan) == 291
    assert _state(plan) == pytest.approx(t * 2 * (1 + 4 / 256) + 2 * 291 * 1024)
    # AdamW4bit: half a byte a code, a scale per 128, a 64-byte qmap in one 512-byte allocator block.
    assert _state(_plan(Optimizer.AO_ADAMW_4BIT)) == pytest.approx(t * 2 * (0.5 + 4 / 128) + 2 * 291 * 512)
    assert _state(_plan(Optimizer.AO_ADAMW_FP8)) == pytest.approx(t * 2 * (1 + 4 / 256))


def test_torchao_small_tensors_keep_the_parameters_dtype_where_bitsandbytes_keeps_float32() -> None:
    """Qwen2.5 0.5B's k and v biases (128 wide, under 4,096 elements): torchao zeros_like(p),
    bf16 under pure bf16; bitsandbytes' 8-bit Adam float32."""
    plan = _plan(Optimizer.AO_ADAMW_8BIT).with_changes(model=find_model("qwen2.5-0.5b").spec, model_id="qwen2.5-0.5b")
    small = small_state_elements(plan, 4096, 256)
    assert small > 0
    ao = {t.label: t.bytes for t in optimizer_terms(plan, param_counts(plan), dtypes_for(plan))}
    bnb_plan = plan.with_changes(optimizer=Optimizer.ADAMW_8BIT)
    bnb = {t.label: t.bytes for t in optimizer_terms(bnb_plan, param_counts(bnb_plan), dtypes_for(bnb_plan))}
    assert ao["Adam moments of tensors under 4,096 elements or not whole blocks"] == 2 * small * 2  # bf16
    assert sum(v for k, v in bnb.items() if k.startswith("float32")) == 2 * small_state_elements(bnb_plan) * 4


def test_lion_keeps_one_float32_momentum_whatever_the_weights() -> None:
    plan = _plan(Optimizer.LION)
    t = param_counts(plan).trainable
    assert _state(plan) == t * 4  # bitsandbytes Optimizer1State: state1 float32 at optim_bits 32
    # Lion8bit: uint8 + a float32 absmax per 256 (optimizer_state_check.py: q_proj 65,536 elements -> 66,560 B).
    assert 65_536 * (1 + 4 / 256) == 66_560
    assert _state(_plan(Optimizer.LION_8BIT)) == pytest.approx(t * (1 + 4 / 256))


def test_paged_lion_keeps_the_large_tensors_out_of_the_allocator() -> None:
    plan = _plan(Optimizer.PAGED_LION)
    counts = param_counts(plan)
    small = small_state_elements(plan, 100_000)  # bitsandbytes get_state_buffer: p.numel() < 1e5 on the GPU
    assert _state(plan) == small * 4
    assert paged_state_bytes(plan, counts) == (counts.trainable - small) * 4
    # PagedLion8bit: the codes are paged, every absmax stays on the GPU (init_state's torch.zeros on the device).
    paged8 = _plan(Optimizer.PAGED_LION_8BIT)
    assert paged_state_bytes(paged8, counts) == counts.trainable - small
    # on the GPU: tensors under 1e5 elements, 8-bit from 4,096 on (Llama 2 7B's 4,096-wide norms), and every absmax
    assert small_state_elements(paged8) == 0
    assert _state(paged8) == pytest.approx(small * (1 + 4 / 256) + (counts.trainable - small) * 4 / 256)


def test_anyprecision_keeps_bf16_moments_even_over_float32_weights() -> None:
    plan = _plan(Optimizer.ANYPRECISION_ADAMW, Preset.FP32_AUTOCAST_BF16)
    t = param_counts(plan).trainable
    assert _state(plan) == t * 2 * 2  # llama-recipes: momentum_dtype = variance_dtype = torch.bfloat16
    assert _state(_plan(Optimizer.ANYPRECISION_ADAMW_KAHAN, Preset.FP32_AUTOCAST_BF16)) == t * 3 * 2
    adamw = optimizer_terms(*_args(_plan(Optimizer.ADAMW, Preset.FP32_AUTOCAST_BF16)))
    assert adamw[0].bytes == t * 2 * 4  # torch.optim.AdamW's moments follow the float32 parameters


def test_anyprecision_steps_one_tensor_at_a_time() -> None:
    plan = _plan(Optimizer.ANYPRECISION_ADAMW)
    counts = param_counts(plan)
    big = 32_000 * 4096  # the embedding (and the untied head): Llama 2's largest tensors
    temp = optimizer_step_temporary(plan, counts, dtypes_for(plan))
    assert temp is not None and temp.bytes == 2 * big * 2  # sqrt(v) and its quotient, bf16
    kahan = _plan(Optimizer.ANYPRECISION_ADAMW_KAHAN, Preset.FP32_AUTOCAST_BF16)
    temp = optimizer_step_temporary(kahan, counts, dtypes_for(kahan))
    assert temp is not None and temp.bytes == big * (2 + 4)  # the bf16 denominator and the float32 clone of p
    stage = layout(plan).stages[0]
    # 8 ops a tensor (mul_, add_, mul_, addcmul_, sqrt, div, add_, addcdiv_), one more with weight decay.
    assert step_host_kernels(plan, counts, stage) == 8 * 291
    assert step_host_kernels(_plan(Optimizer.ANYPRECISION_ADAMW, wd=0.1), counts, stage) == 9 * 291
    elements = rank_trainable(plan, counts, stage)
    # beyond the fused count: the gradient once more (bf16) and 12 passes over bf16 moments and temporaries
    assert step_pass_bytes(plan, counts, stage) == pytest.approx(elements * (1 * 2 + 12 * 2))
    decayed = _plan(Optimizer.ANYPRECISION_ADAMW, wd=0.1)
    assert step_pass_bytes(decayed, counts, stage) - step_pass_bytes(plan, counts, stage) == pytest.approx(
        elements * 2 * 2  # p.data.mul_(1 - lr * wd): the bf16 parameter read and written, whatever the impl
    )


def test_torchao_and_lion_step_one_kernel_per_tensor_with_no_temporary() -> None:
    for optimizer in (Optimizer.AO_ADAMW_8BIT, Optimizer.AO_ADAMW_4BIT, Optimizer.LION, Optimizer.LION_8BIT):
        plan = _plan(optimizer)
        counts = param_counts(plan)
        stage = layout(plan).stages[0]
        assert step_host_kernels(plan, counts, stage) == 291
        assert step_pass_bytes(plan, counts, stage) == 0.0
        assert optimizer_step_temporary(plan, counts, dtypes_for(plan)) is None


def test_every_new_optimizer_estimates_and_names_its_bytes() -> None:
    adamw = estimate(_plan(Optimizer.ADAMW, Preset.FP32_AUTOCAST_BF16)).bucket(BucketKey.OPTIMIZER).bytes
    for optimizer in NEW:  # float32 AdamW's 8 B a parameter: each new one keeps less
        assert estimate(_plan(optimizer, Preset.FP32_AUTOCAST_BF16)).bucket(BucketKey.OPTIMIZER).bytes < adamw
        assert optimizer in OPTIMIZER_LABELS and "B" in OPTIMIZER_TOOLTIPS[optimizer]
        assert optimizer in LESSON_OPTIMIZER_BYTES
    lesson = {o: LESSON_OPTIMIZER_BYTES[o] for o in NEW}
    assert lesson[Optimizer.AO_ADAMW_4BIT] == 1.0 and lesson[Optimizer.LION] == 4.0


# ---- files, the command line, the window's words ---------------------------------------------------------------
def test_a_plan_file_with_each_new_optimizer_round_trips_and_an_unknown_one_is_refused_with_the_list() -> None:
    for optimizer in NEW:
        assert loads(dumps(_plan(optimizer))).optimizer is optimizer
    document = json.loads(dumps(_plan(Optimizer.LION)))
    document["plan"]["optimizer"] = "muon-2"
    with pytest.raises(PlanFileError) as caught:
        loads(json.dumps(document))
    assert "ao-adamw-4bit" in str(caught.value) and "paged-lion-8bit" in str(caught.value)


def test_the_command_line_takes_each_new_optimizer() -> None:
    for optimizer in NEW:
        args = build_parser().parse_args(["estimate", "--model", "llama-2-7b", "--optimizer", optimizer.value])
        assert plan_from_args(args).optimizer is optimizer


def test_weight_decay_matters_for_anyprecision_whatever_the_implementation() -> None:
    spec = input_at("weight_decay")
    assert spec.matters is not None
    assert spec.matters(_plan(Optimizer.ANYPRECISION_ADAMW).with_changes(optimizer_impl=OptimizerImpl.FUSED))
    assert not spec.matters(_plan(Optimizer.LION))


def test_an_apple_gpu_refuses_bitsandbytes_8bit_and_paged_lion_but_keeps_the_rest() -> None:
    mac = "apple-m2-max-96gb"
    for optimizer in (Optimizer.LION_8BIT, Optimizer.PAGED_LION, Optimizer.PAGED_LION_8BIT):
        with pytest.raises(PlanError) as caught:  # the Plan refuses it (core.mac.mac_refusal)
            _plan(optimizer).with_hardware(gpu=mac)
        assert caught.value.field == "optimizer"
    # Lion 32-bit: bitsandbytes 95f9af30 backends/default/ops.py registers optimizer_update_32bit for any device
    for optimizer in (Optimizer.LION, Optimizer.AO_ADAMW_8BIT, Optimizer.ANYPRECISION_ADAMW):
        assert mac_refusal(_plan(optimizer).with_hardware(gpu=mac)) is None


# ---- importers and exports --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("optim", "expected"),
    [
        # transformers OptimizerNames: adamw_torch_8bit / adamw_torch_4bit build torchao's AdamW8bit / AdamW4bit
        ("adamw_torch_8bit", "ao-adamw-8bit"),
        ("adamw_torch_4bit", "ao-adamw-4bit"),
        ("lion_32bit", "lion"),
        ("lion_8bit", "lion-8bit"),
        ("paged_lion_32bit", "paged-lion"),
        ("paged_lion_8bit", "paged-lion-8bit"),
    ],
)
def test_hf_optim_names_of_the_new_optimizers(optim: str, expected: str) -> None:
    run = loads_run_config(json.dumps({"per_device_train_batch_size": 2, "optim": optim}).encode())
    assert run.settings.optimizer == expected


def test_hf_adamw_anyprecision_is_listed_with_why() -> None:
    """transformers passes float32 moments to AnyPrecisionAdamW unless optim_args say otherwise: not llama-recipes'."""
    run = loads_run_config(b"per_device_train_batch_size: 2\noptim: adamw_anyprecision\n", "ap.yaml")
    assert run.settings.optimizer is None
    assert len(run.unknown) == 1 and "float32 moments" in run.unknown[0]


@pytest.mark.parametrize(
    ("component", "expected"),
    [
        ("torchao.optim.AdamW8bit", "ao-adamw-8bit"),  # was read as bitsandbytes' 8-bit AdamW before h57opt
        ("torchao.optim.AdamW4bit", "ao-adamw-4bit"),
        ("torchao.prototype.low_bit_optim.AdamWFp8", "ao-adamw-fp8"),
        ("bitsandbytes.optim.Lion8bit", "lion-8bit"),
        ("bitsandbytes.optim.PagedLion", "paged-lion"),
    ],
)
def test_torchtune_optimizer_components(component: str, expected: str) -> None:
    text = (
        "model:\n  _component_: torchtune.models.llama2.llama2_7b\nbatch_size: 2\n"
        f"optimizer:\n  _component_: {component}\n  lr: 1e-5\n"
    )
    run = loads_run_config(text.encode(), "tune.yaml")
    assert run.settings.optimizer == expected


@pytest.mark.parametrize(
    ("optimizer", "optim"),
    [
        (Optimizer.AO_ADAMW_8BIT, "adamw_torch_8bit"),
        (Optimizer.AO_ADAMW_4BIT, "adamw_torch_4bit"),
        (Optimizer.LION, "lion_32bit"),
        (Optimizer.PAGED_LION_8BIT, "paged_lion_8bit"),
    ],
)
def test_hf_exports_write_the_trainers_name_and_read_it_back(optimizer: Optimizer, optim: str) -> None:
    exported = export(_plan(optimizer), Target.TRL)
    assert json.loads(exported.text)["optim"] == optim
    assert "method.optimizer" not in [u.field for u in exported.unexpressed]
    run = loads_run_config(exported.text.encode(), "trl.json")
    assert run.settings.optimizer == optimizer.value


def test_an_optimizer_transformers_cannot_name_is_said_not_dropped() -> None:
    for optimizer in (Optimizer.AO_ADAMW_FP8, Optimizer.ANYPRECISION_ADAMW):
        exported = export(_plan(optimizer), Target.TRL)
        assert "method.optimizer" in [u.field for u in exported.unexpressed]


def test_torchtune_export_names_torchaos_component() -> None:
    import yaml

    tune = yaml.safe_load(export(_plan(Optimizer.AO_ADAMW_4BIT), Target.TORCHTUNE).text)
    assert tune["optimizer"]["_component_"] == "torchao.optim.AdamW4bit"
    unnamed = export(_plan(Optimizer.ANYPRECISION_ADAMW), Target.TORCHTUNE)
    assert "method.optimizer" in [u.field for u in unnamed.unexpressed]


def test_the_torchao_readmes_differences_between_optimizers() -> None:
    """pytorch/ao 072500ab torchao/optim/README.md, 'Fine-tune Llama2-7B on Alpaca' (torchtune 52d1b838, full BF16,
    one A100; peak_memory_alloc in GiB): PyTorch fused 51.6, bnb 8-bit 39.3, ao 8-bit 39.1, ao 4-bit 33.2. The batch
    and lengths are unknown (benchmarks/realgpu: not comparable), but one run differs from the next only by its
    optimizer: the differences are the state's. Held out, nothing fitted; each reading rounded to 0.1 GiB."""
    gib = 2**30

    def peak(optimizer: Optimizer) -> float:
        return estimate(_plan(optimizer).with_changes(optimizer_impl=OptimizerImpl.FUSED)).peak_bytes

    adamw, ao8, ao4 = peak(Optimizer.ADAMW), peak(Optimizer.AO_ADAMW_8BIT), peak(Optimizer.AO_ADAMW_4BIT)
    assert adamw - ao8 == pytest.approx((51.6 - 39.1) * gib, rel=0.02)  # 13.27 GB against 13.42 GB: -1.2 %
    assert ao8 - ao4 == pytest.approx((39.1 - 33.2) * gib, rel=0.04)  # 6.53 GB against 6.34 GB: +3.0 %


# ---- Muon (torch 2.13.0 torch/optim/_muon.py) ----------------------------------------------------------------------
def test_muon_keeps_one_momentum_on_the_block_matrices_and_adamw_moments_on_the_rest() -> None:
    plan = _plan(Optimizer.MUON, Preset.FP32_AUTOCAST_BF16)
    t = param_counts(plan).trainable
    # Llama 2 7B's block matrices: q, k, v, o 4,096 x 4,096 and gate, up, down 4,096 x 11,008, 32 blocks; the rest
    # (embedding and head 32,000 x 4,096, 65 norms of 4,096) goes to AdamW, as Muon's docstring says.
    muon = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    assert muon_elements(plan) == muon and t - muon == 2 * 32_000 * 4096 + 65 * 4096
    # tools/measure/optimizer_state_check.py: Muon's momentum_buffer is zeros_like(grad), 1,038,096 B over the tiny
    # set's 2-D bf16 tensors (embed, q, k, gate, odd); 4 B an element at float32
    assert (256_000 + 65_536 + 16_384 + 176_128 + 5_000) * 2 == 1_038_096
    state = optimizer_terms(*_args(plan))
    assert state[0].bytes == muon * 4 and state[1].bytes == 2 * (t - muon) * 4


def test_muons_newton_schulz_products_and_flops() -> None:
    plan = _plan(Optimizer.MUON, Preset.FP32_AUTOCAST_BF16).with_changes(optimizer_impl=OptimizerImpl.FUSED)
    temp = optimizer_step_temporary(*_args(plan))
    # the largest matrix, 4,096 x 11,008 (m = 4,096): the float32 update, two bf16 iterates, gram and gram_update
    assert temp is not None and temp.bytes == 4096 * 11008 * (4 + 2 * 2) + 2 * 4096**2 * 2
    # five rounds of X @ X.T (2·m²·n), gram @ gram (2·m³), gram_update @ X (2·m²·n) per matrix, 32 blocks
    per_block = 5 * (4 * (4 * 4096**2 * 4096 + 2 * 4096**3) + 3 * (4 * 4096**2 * 11008 + 2 * 4096**3))
    assert muon_ns_flops(plan) == pytest.approx(32 * per_block)
    counts = param_counts(plan)
    stage = layout(plan).stages[0]
    # 23 ops a matrix (22 and the bf16 cast of a float32 update), 224 matrices; the fused AdamW group's 2 ops over
    # its 67 tensors' 266 M elements: 4,100 chunks of 65,536, two launches of 2,240 blocks (speed.MTA_*)
    assert step_host_kernels(plan, counts, stage) == 23 * 224 + 2 * 2
    bf16 = _plan(Optimizer.MUON)  # pure bf16: the update is the first iterate, no cast
    assert step_host_kernels(bf16, counts, layout(bf16).stages[0]) == 22 * 224 + 2 * 2


def test_muons_matmuls_make_a_small_batch_step_slow() -> None:
    """At 2,048 tokens a step, Llama 2 7B's Newton-Schulz FLOPs (about 7e14) are several times the step's own
    6·P·tokens (8.3e13): the step time grows by about their ratio (Muon's cost falls as the batch grows)."""
    small = estimate(_plan(Optimizer.MUON)).compute
    adamw = estimate(_plan(Optimizer.ADAMW)).compute
    assert small.step_seconds > 4 * adamw.step_seconds
    big = _plan(Optimizer.MUON).with_workload(micro_batch=64, seq_len=2048, grad_accum=1)
    big_adamw = big.with_changes(optimizer=Optimizer.ADAMW)
    assert estimate(big).compute.step_seconds < 1.3 * estimate(big_adamw).compute.step_seconds


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"method": Method.LORA}, "method"),
        ({"model": find_model("mixtral-8x7b-v0.1").spec, "model_id": "mixtral-8x7b-v0.1"}, "model"),
    ],
)
def test_muon_refuses_what_it_cannot_run_as_modelled(changes: dict[str, object], field: str) -> None:
    with pytest.raises(PlanError) as caught:
        _plan(Optimizer.MUON).with_changes(**changes)
    assert caught.value.field == field and "Muon" in str(caught.value)


def test_muon_refuses_sharded_matrices() -> None:
    with pytest.raises(PlanError) as caught:
        _plan(Optimizer.MUON).with_parallel(gpus_per_node=8, strategy=Strategy.FSDP)
    assert caught.value.field == "parallel.strategy"


@pytest.mark.parametrize("target", [Target.AXOLOTL, Target.LLAMA_FACTORY, Target.TORCHTUNE])
@pytest.mark.parametrize("optimizer", [Optimizer.LION_8BIT, Optimizer.AO_ADAMW_4BIT, Optimizer.MUON])
def test_axolotl_llamafactory_and_torchtune_exports_read_back(target: Target, optimizer: Optimizer) -> None:
    """What each target names comes back as the plan's optimizer; Muon, which none can name, is said and written as
    AdamW."""
    exported = export(_plan(optimizer), target)
    run = loads_run_config(exported.text.encode(), "exported.yaml")
    said = "method.optimizer" in [u.field for u in exported.unexpressed]
    if optimizer is Optimizer.MUON:
        assert said and run.settings.optimizer == "adamw"
    else:
        assert not said and run.settings.optimizer == optimizer.value


def test_muons_matmuls_are_said_as_part_of_the_optimizer_step() -> None:
    """The Compute & time arithmetic counts Muon's Newton-Schulz matmuls in the optimizer step (once a step, whatever
    the batch) and names them, so a user sees why a small-batch Muon step is slow; the step time itself is the same
    sum as before (the matmuls keep the matmul coefficient, core.training.efficiency.derived)."""
    muon = estimate(_plan(Optimizer.MUON)).compute
    assert "Newton-Schulz" in muon.fixed_step
    # At 2,048 tokens a step the matmuls (about 7e14 FLOPs) are most of the step (the test above: > 4 x AdamW's).
    assert muon.optimizer_seconds_per_step > 0.75 * muon.step_seconds
    assert "Newton-Schulz" not in estimate(_plan(Optimizer.ADAMW)).compute.fixed_step


def test_the_optimizer_fields_tooltip_gives_8bit_adamws_absmax_bytes_as_the_estimate_counts_them() -> None:
    """The Optimizer field's tooltip said bitsandbytes' 8-bit AdamW keeps "two bytes + 4 B per 256": each of its two
    moments has its own float32 absmax per block of 256 (bitsandbytes 95f9af30 bitsandbytes/optim/optimizer.py
    Optimizer2State.init_state: absmax1 and absmax2), 8 B per 256, as the estimate charges it and as the
    8-bit AdamW entry of the Optimizer list (OPTIMIZER_TOOLTIPS) says."""
    plan = _plan(Optimizer.ADAMW_8BIT)
    quantised = param_counts(plan).trainable - small_state_elements(plan)
    term = next(t for t in optimizer_terms(*_args(plan)) if t.label.startswith("8-bit Adam moments"))
    absmax_per_256 = (term.bytes / quantised - 2) * 256  # two uint8 codes an element, the rest the blocks' absmax
    assert absmax_per_256 == pytest.approx(8)  # 2 moments x 4 B (float32 absmax) per block of 256
    tooltip = input_at("optimizer").tooltip
    assert f"8-bit AdamW (bitsandbytes) two bytes + {absmax_per_256:.0f} B per 256" in tooltip
    assert f"2 B + {absmax_per_256:.0f} B per 256" in OPTIMIZER_TOOLTIPS[Optimizer.ADAMW_8BIT]


def test_a_muon_pipeline_stage_holds_its_blocks_momentum_and_its_embeddings_adamw_moments() -> None:
    """Under pipeline parallel a stage's optimizer state was its share of the whole state at the model's average bytes
    an element; Muon's groups hold 4 B (one float32 momentum) and 8 B (AdamW's two float32 moments) an element, so
    the first stage of Llama 3.2 1B, 8 blocks and the tied 128,256 x 2,048 embedding, was counted 3.63 GB for its
    4.05 GB."""
    plan = (
        _plan(Optimizer.MUON, Preset.FP32_AUTOCAST_BF16)
        .with_changes(model=find_model("llama-3.2-1b").spec, model_id="llama-3.2-1b")
        .with_parallel(gpus_per_node=2, pipeline_parallel=2)
    )
    # Llama 3.2 1B (hf config.json): hidden 2,048, 512-wide k and v, intermediate 8,192, 16 blocks, vocabulary
    # 128,256, two RMSNorm vectors a block. Stage 1 of 2: blocks 0-7 and the embedding.
    d = 2048
    block_matrices = 2 * d * d + 2 * d * 512 + 3 * d * 8192  # q, o; k, v; gate, up, down
    momentum = 8 * block_matrices * 4  # torch/optim/_muon.py: momentum_buffer = zeros_like(grad), float32 grads
    adamw = (128_256 * d + 8 * 2 * d) * 2 * 4  # exp_avg, exp_avg_sq of the embedding and the 16 norms, float32
    assert estimate(plan).bucket(BucketKey.OPTIMIZER).bytes == pytest.approx(momentum + adamw)


def test_muons_matmuls_on_a_pipeline_stage_are_its_own_trained_blocks() -> None:
    """Frozen-layer training under two pipeline stages: the Newton-Schulz matmuls of a stage are those of the blocks
    that train on it (none of the frozen ones), not the whole model's trained blocks spread evenly over its blocks."""
    plan = (
        _plan(Optimizer.MUON, Preset.FP32_AUTOCAST_BF16)
        .with_changes(model=find_model("llama-3.2-1b").spec, model_id="llama-3.2-1b")
        .with_changes(method=Method.FROZEN, frozen_layers=4)
        .with_parallel(gpus_per_node=2, pipeline_parallel=2)
    )
    first, last = layout(plan).stages  # blocks 0-7 (0-3 frozen) and 8-15
    # Llama 3.2 1B's block (hf config.json: hidden 2,048, k and v 512 wide, intermediate 8,192); per matrix, m <= n,
    # five rounds of 4·m²·n + 2·m³ (torch/optim/_muon.py _zeropower_via_newtonschulz)
    def ns(m: int, n: int) -> float:
        return 5 * (4 * m * m * n + 2 * m**3)

    per_block = 2 * ns(2048, 2048) + 2 * ns(512, 2048) + 3 * ns(2048, 8192)  # q, o; k, v; gate, up, down
    gpu = find_gpu("a100-80gb-sxm")
    for stage, trained in ((first, 4), (last, 8)):
        (seconds,) = muon_feature(plan, stage, generation(gpu.id), gpu).values()
        assert seconds * gpu.peak_tflops("bf16") * 1e12 == pytest.approx(trained * per_block)


def test_muons_extra_passes_on_a_pipeline_stage_are_over_its_own_blocks_matrices() -> None:
    """The first of two stages of Llama 3.2 1B holds 8 blocks' matrices and the tied embedding: Muon's passes beyond
    the fused count run over those 8 blocks' 486.5 M elements, not over the stage's share of all of Muon's (590 M)."""
    plan = (
        _plan(Optimizer.MUON, Preset.FP32_AUTOCAST_BF16)
        .with_changes(model=find_model("llama-3.2-1b").spec, model_id="llama-3.2-1b", grad_clip=False)
        .with_changes(optimizer_impl=OptimizerImpl.FUSED)
        .with_parallel(gpus_per_node=2, pipeline_parallel=2)
    )
    first = layout(plan).stages[0]
    d = 2048  # Llama 3.2 1B (hf config.json): hidden 2,048, k and v 512 wide, intermediate 8,192
    muon = 8 * (2 * d * d + 2 * d * 512 + 3 * d * 8192)
    # speed._muon_pass_bytes at a float32 gradient and parameter: lerp's gradient read, the update written and read
    # by the cast, the buffer's read (4 x 4 B); the bf16 iterate's cast, norm, div_ read and write, add_'s read
    # (5 x 2 B); param.mul_'s read and write (2 x 4 B); the fused AdamW group over the embedding: nothing more.
    assert step_pass_bytes(plan, param_counts(plan), first) == pytest.approx(muon * (4 * 4 + 5 * 2 + 2 * 4))


@pytest.mark.parametrize(
    ("gpu", "said"),
    [
        ("a100-80gb-sxm", True),  # Ampere, compute capability 8.0: no fp8
        ("apple-m2-max-96gb", True),  # an Apple GPU: torchao's optimizers are tested on CPU and CUDA only
        ("h100-sxm", False),  # Hopper, 9.0
        ("rtx-4090", False),  # Ada, 8.9
    ],
)
def test_torchaos_fp8_adamw_on_a_card_without_fp8_is_said(gpu: str, said: bool) -> None:
    """pytorch/ao 36027d82 torchao/optim/README.md: "For FP8 optimizers on CUDA, PyTorch >= 2.4 and CUDA compute
    capability >= 8.9 are required". An A100 plan with ao-adamw-fp8 was estimated with no word."""
    plan = _plan(Optimizer.AO_ADAMW_FP8).with_hardware(gpu=gpu)
    problem = estimate(plan).compute.float8_problem
    assert (problem is not None and "AdamWFp8" in problem) is said
    if said and not gpu.startswith("apple"):  # float8 linears asked too (an Apple GPU refuses them): both are said
        both = estimate(plan.with_changes(float8=Float8.ROWWISE)).compute.float8_problem
        assert both is not None and "FP8 tensor cores" in both and "AdamWFp8" in both


@pytest.mark.parametrize("stages", [1, 2])
def test_muon_with_every_block_frozen_steps_only_the_rest(stages: int) -> None:
    """The fuzz (tests/core/test_fuzz.py, seed 4436429887283131) drew Muon with every block frozen: the per-stage
    shares divided by the number of trained blocks, 0, and the estimate raised ZeroDivisionError. With no block
    training, Muon steps nothing (no momentum, no Newton-Schulz matmuls) and AdamW steps what still trains."""
    base = _plan(Optimizer.MUON)
    plan = base.with_method(Method.FROZEN, frozen_layers=base.model.num_layers)
    if stages > 1:
        plan = plan.with_parallel(gpus_per_node=stages, pipeline_parallel=stages)
    result = estimate(plan)
    assert result.compute.step_seconds > 0 and math.isfinite(result.compute.step_seconds)
    assert "Newton-Schulz" not in result.compute.fixed_step


@pytest.mark.parametrize("strategy", [Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3])
@pytest.mark.parametrize("optimizer", [Optimizer.AO_ADAMW_8BIT, Optimizer.AO_ADAMW_4BIT, Optimizer.AO_ADAMW_FP8])
def test_torchao_low_bit_adamw_under_zero_is_refused_with_the_reason(strategy: Strategy, optimizer: Optimizer) -> None:
    """ZeRO hands the optimizer flat float32 partitions (deepspeedai/DeepSpeed edaa7221 stage_1_and_2.py lines 391-393:
    a group padded to 2 × DP; stage3.py: per sub-group), and torchao quantises a tensor only when its block divides it
    (pytorch/ao 36027d82 torchao/optim/adam.py _new_buffer): the state is 8 B or ~2 B an element by the param groups'
    sizes alone. The estimate before this refusal priced it per model tensor, as on one GPU (AdamW8bit, ZeRO-1:
    35.0 GB)."""
    with pytest.raises(PlanError, match="ZeRO's flat float32 partitions") as refused:
        _plan(optimizer).on_gpus(8, strategy)
    assert refused.value.field == "optimizer"


def test_torchao_low_bit_adamw_under_fsdp_still_runs() -> None:
    """FSDP2 steps DTensor shards of the model's own tensors: torchao's per-tensor rule is the plan's."""
    assert estimate(_plan(Optimizer.AO_ADAMW_8BIT).on_gpus(8, Strategy.FSDP)).peak_bytes > 0
