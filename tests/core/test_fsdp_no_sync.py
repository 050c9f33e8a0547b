"""FSDP under accumulation with no_sync: every micro-batch but the last keeps the whole model's
trainable gradients unsharded (core.parallel.state._no_sync_accumulated, ``parallel.grad_sync``).

Sources: huggingface/accelerate v0.28.0 ``accelerator.py`` (``Accelerator.accumulate`` enters
``no_sync(m)`` unless ``sync_gradients``; ``GradientAccumulationPlugin.sync_each_batch``, default
False, forces the sync, 60bfdaa9); torch FSDP1 ``_runtime_utils.py`` ``_post_backward_hook`` (``if not
state._sync_gradients: ... return`` before the reduce-scatter) and ``FullyShardedDataParallel.no_sync``
("FSDP will accumulate the full model gradients (instead of gradient shards) until the eventual
sync"). Llama 3.1 8B: 8,030,261,248 parameters (meta-llama/Llama-3.1-8B config.json: hidden 4096,
intermediate 14336, 32 layers, 8 KV heads, vocabulary 128256, untied head)."""

from __future__ import annotations

import json

import pytest

from core.advice import remedies
from core.advice.remedies import RemedyKind
from core.breakdown import BucketKey, StepPhase
from core.catalogue import find_model
from core.dtypes import MpDtype
from core.estimate import estimate
from core.files.runconfig import loads_run_config, plan_from_run
from core.inputs import input_at
from core.parallel.comm import step_communication
from core.params import param_counts
from core.plan import GradSync, Hardware, Method, Plan, Strategy, Workload
from core.presets import default_plan

LLAMA_31_8B_PARAMS = 8_030_261_248  # meta-llama/Llama-3.1-8B config.json, counted
NO_SYNC = "unsharded gradients of all 32 blocks and the root unit, accumulated over the micro-batches"


def _full_8b(wrap: bool, accum: int = 4, sync: GradSync = GradSync.AUTO, gpus: int = 4) -> Plan:
    entry = find_model("llama-3.1-8b")
    plan = Plan(
        model=entry.spec,
        model_id=entry.id,
        method=Method.FULL,
        checkpointing=True,
        workload=Workload(micro_batch=1, seq_len=4096, grad_accum=accum),
        hardware=Hardware(gpu="a100-80gb-sxm"),
    ).on_gpus(gpus, Strategy.FSDP)
    return plan.with_parallel(fsdp1_wrap=wrap, grad_sync=sync)


def _no_sync_terms(plan: Plan) -> list[float]:
    est = estimate(plan)
    # The last micro-batch's forward holds what the earlier ones accumulated (so does its backward).
    forward = next(p for p in est.worst.phases if p.kind is StepPhase.FORWARD)
    grads = forward.bucket(BucketKey.GRADIENTS)
    return [t.bytes for t in grads.terms if "accumulated over the micro-batches" in t.label]


def test_an_fsdp1_plan_under_accumulation_holds_the_whole_gradient_unsharded_by_default() -> None:
    # Float32 parameters without a mixed-precision policy: FSDP1's flat_param.grad is float32 too.
    assert _no_sync_terms(_full_8b(wrap=True)) == [pytest.approx(LLAMA_31_8B_PARAMS * 4.0)]
    held, synced = estimate(_full_8b(wrap=True)), estimate(_full_8b(wrap=True, sync=GradSync.EACH))
    # 4 ranks: the sharded gradient (1/4) gives way to the unsharded one, 3/4 of 32.1 GB more.
    assert held.peak_bytes - synced.peak_bytes == pytest.approx(LLAMA_31_8B_PARAMS * 4.0 * 3 / 4, rel=1e-6)


def test_sync_each_batch_one_micro_batch_and_fsdp2_by_default_keep_them_sharded() -> None:
    assert _no_sync_terms(_full_8b(wrap=True, sync=GradSync.EACH)) == []
    assert _no_sync_terms(_full_8b(wrap=True, accum=1)) == []
    assert _no_sync_terms(_full_8b(wrap=False)) == []  # FSDP2: accelerate < 1.11 and torchtitan reduce each
    assert estimate(_full_8b(wrap=False)).peak_bytes == estimate(_full_8b(wrap=False, sync=GradSync.EACH)).peak_bytes
    # FSDP2 under set_requires_gradient_sync(False) (accelerate >= 1.11) holds them, in the reduce dtype.
    assert _no_sync_terms(_full_8b(wrap=False, sync=GradSync.NO_SYNC)) == [pytest.approx(LLAMA_31_8B_PARAMS * 4.0)]


def test_the_unsharded_gradient_is_in_the_gathered_dtype_under_fsdp1_mixed_precision() -> None:
    # accelerate's MixedPrecision(param_dtype=bf16): autograd computes the flat gradient in bf16 and
    # no_sync returns before the cast to reduce_dtype, which happens only at the sync.
    plan = _full_8b(wrap=True).with_parallel(fsdp_param_dtype=MpDtype.BF16, fsdp_reduce_dtype=MpDtype.FP32)
    assert _no_sync_terms(plan) == [pytest.approx(LLAMA_31_8B_PARAMS * 2.0)]


def test_peft_fsdp_guide_qlora_row_holds_its_adapters_gradients() -> None:
    """PEFT's FSDP guide (huggingface/peft 6008f272 docs/source/accelerate/fsdp.md): Llama 2 70B QLoRA,
    rank 8 on every linear layer, gradient_accumulation_steps 2, accelerate FSDP1 with
    cpu_ram_efficient_loading. The adapters: 80 blocks × 8 × (4 × (8192 + 8192) + 2 × (8192 + 1024)
    + 3 × (8192 + 28672)) = 103,546,880 parameters, bf16 gradients (0.21 GB per rank)."""
    import sys
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "benchmarks" / "realgpu"
    sys.path.insert(0, str(folder))
    try:
        from mapping import map_figure
    finally:
        sys.path.remove(str(folder))
    figures = json.loads((folder / "memory_figures.json").read_text())["figures"]
    row = next(f for f in figures if f["id"] == "peftdocs-llama2-70b-qlora-fsdp-nooffload")
    plan = map_figure(row).plan
    assert plan is not None and plan.parallel.fsdp1_wrap and plan.workload.grad_accum == 2
    assert _no_sync_terms(plan) == [pytest.approx(103_546_880 * 2.0)]


def test_the_setting_is_one_input_for_the_cli_and_the_window() -> None:
    spec = input_at("parallel.grad_sync")
    assert spec.default is GradSync.AUTO and "--grad-sync" in spec.flags
    assert spec.matters(_full_8b(wrap=True)) and not spec.matters(_full_8b(wrap=True, accum=1))
    assert not spec.matters(_full_8b(wrap=True).with_parallel(strategy=Strategy.DDP))


def test_training_arguments_sync_each_batch_is_read() -> None:
    """transformers' AcceleratorConfig.gradient_accumulation_kwargs (PR #29589, v4.39.0)."""
    document = {
        "per_device_train_batch_size": 1,
        "gradient_accumulation_steps": 4,
        "fsdp": "full_shard auto_wrap",
        "fsdp_config": {"cpu_ram_efficient_loading": True},
        "accelerator_config": {
            "split_batches": False,
            "gradient_accumulation_kwargs": {"sync_each_batch": True},
            "not_a_key": 1,
        },
    }
    run = loads_run_config(json.dumps(document).encode(), "args.json")
    assert run.settings.grad_sync == "each"
    assert "accelerator_config.not_a_key" in run.unknown
    assert not any("split_batches" in u or "sync_each_batch" in u for u in run.unknown)
    plan = plan_from_run(run, default_plan(), None)
    assert plan.parallel.grad_sync is GradSync.EACH and plan.parallel.fsdp1_wrap
    document["accelerator_config"] = {"gradient_accumulation_kwargs": {"sync_each_batch": False}}
    assert loads_run_config(json.dumps(document).encode(), "args.json").settings.grad_sync == "no_sync"
    del document["accelerator_config"]  # accelerate's own default: no_sync (the next test)
    assert loads_run_config(json.dumps(document).encode(), "args.json").settings.grad_sync == "no_sync"


@pytest.mark.parametrize("version", [1, 2])
def test_an_hf_trainer_fsdp_config_without_the_key_takes_accelerates_default_no_sync(version: int) -> None:
    """accelerate's ``GradientAccumulationPlugin.sync_each_batch`` defaults to False, so
    ``Accelerator.accumulate`` enters no_sync for every micro-batch but the last: FSDP1's
    ``no_sync()`` whether or not the model was loaded on the CPU (v0.28.0), FSDP2's
    ``set_requires_gradient_sync(False)`` from v1.11.0 (ec92b1af)."""
    document = {
        "per_device_train_batch_size": 1,
        "gradient_accumulation_steps": 4,
        "fsdp": "full_shard auto_wrap",
        "fsdp_config": {"version": version},
    }
    run = loads_run_config(json.dumps(document).encode(), "args.json")
    assert run.settings.grad_sync == "no_sync"
    plan = plan_from_run(run, default_plan(), None)
    assert not plan.parallel.fsdp1_wrap  # no CPU-RAM-efficient loading: not the wrap from the CPU
    assert plan.parallel.grad_sync is GradSync.NO_SYNC
    # DeepSpeed and DDP have no such setting: nothing is recorded for them.
    del document["fsdp"], document["fsdp_config"]
    assert loads_run_config(json.dumps(document).encode(), "args.json").settings.grad_sync is None


def test_an_axolotl_fsdp_config_takes_accelerates_default_no_sync() -> None:
    # axolotl trains through the HF Trainer and accelerate (axolotl >= 0.10 fsdp_config table).
    document = {
        "base_model": "meta-llama/Llama-3.1-8B",
        "micro_batch_size": 1,
        "gradient_accumulation_steps": 4,
        "sequence_len": 4096,
        "fsdp_version": 2,
        "fsdp_config": {"reshard_after_forward": True},
    }
    run = loads_run_config(json.dumps(document).encode(), "axolotl.json")
    assert run.settings.grad_sync == "no_sync"


def test_the_diagnosis_offers_sync_each_batch_where_no_sync_holds_the_gradients() -> None:
    plan = _full_8b(wrap=True).with_hardware(gpu="l40s")
    assert not estimate(plan).fits
    found = {r.kind: r for r in remedies.remedies_for(plan)}
    sync = found[RemedyKind.SYNC_EACH_BATCH]
    assert sync.plan.parallel.grad_sync is GradSync.EACH
    assert estimate(plan).total_bytes - sync.total_bytes > 20e9  # 3/4 of 32.1 GB of float32 gradients
    assert remedies._sync_each_batch(_full_8b(wrap=True, sync=GradSync.EACH)) is None
    assert remedies._sync_each_batch(_full_8b(wrap=False)) is None


def test_the_trainer_exports_say_it_and_read_it_back() -> None:
    """Both accelerate defaults exist (FSDP1: no_sync; FSDP2: each before v1.11, no_sync from it), so
    the TrainingArguments export writes sync_each_batch either way; a target without the setting
    lists it when the plan differs from what that target does."""
    from core.files.launch import Target, export

    for wrap, sync, each in ((True, GradSync.AUTO, False), (True, GradSync.EACH, True), (False, GradSync.AUTO, True)):
        text = export(_full_8b(wrap=wrap, sync=sync), Target.TRL).text
        document = json.loads(text)
        assert document["accelerator_config"] == {"gradient_accumulation_kwargs": {"sync_each_batch": each}}
        back = loads_run_config(text.encode(), "trl.json")
        assert back.settings.grad_sync == ("each" if each else "no_sync")
    one_step = json.loads(export(_full_8b(wrap=True, accum=1), Target.TRL).text)
    assert "accelerator_config" not in one_step
    titan = export(_full_8b(wrap=False, sync=GradSync.NO_SYNC), Target.TORCHTITAN)
    assert "parallel.grad_sync" in {u.field for u in titan.unexpressed}


# ---- the time: one reduce-scatter per step under no_sync --------------------------------------
def _reduce_scatter(plan: Plan) -> tuple[float, float]:
    comm = step_communication(plan, param_counts(plan), 10.0, 1 / 3)
    (term,) = [t for t in comm.terms if t.label.endswith("gradient reduce-scatter")]
    return term.bytes, term.seconds


def test_under_no_sync_the_gradients_are_reduce_scattered_once_per_step_not_per_micro_batch() -> None:
    # FSDP1's _post_backward_hook returns before the reduce-scatter while no_sync() is on
    # (``if not state._sync_gradients``), so of the 4 micro-batches only the last one reduces.
    held_bytes, held_s = _reduce_scatter(_full_8b(wrap=True, accum=4))
    each_bytes, each_s = _reduce_scatter(_full_8b(wrap=True, accum=4, sync=GradSync.EACH))
    assert held_bytes == pytest.approx(each_bytes / 4)
    assert held_s == pytest.approx(each_s / 4)
    # Without accumulation there is nothing to skip: the same one reduce-scatter either way.
    assert _reduce_scatter(_full_8b(wrap=True, accum=1)) == _reduce_scatter(
        _full_8b(wrap=True, accum=1, sync=GradSync.EACH)
    )


def test_under_no_sync_hsdp_all_reduces_its_shard_once_per_step() -> None:
    # FSDP1's HYBRID_SHARD all-reduces each unit's reduced shard after its reduce-scatter, so
    # skipping the reduce-scatter skips it too.
    def hsdp(sync: GradSync) -> float:
        plan = _full_8b(wrap=True, accum=4, sync=sync, gpus=16).with_parallel(dp_replicate=2)
        comm = step_communication(plan, param_counts(plan), 10.0, 1 / 3)
        (term,) = [t for t in comm.terms if t.label.startswith("HSDP gradient-shard all-reduce")]
        return term.bytes

    assert hsdp(GradSync.NO_SYNC) == pytest.approx(hsdp(GradSync.EACH) / 4)
