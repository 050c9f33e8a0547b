"""Megatron-Core's gradient buffer dtype, ``grad_reduce_in_fp32`` (issue 24; parallel.grad_reduce_in_fp32).

What each part does is Megatron-Core's (NVIDIA/Megatron-LM d98e8a64):
megatron/core/distributed/param_and_grad_buffer.py: ``grad_dtype = torch.float if
grad_reduce_in_fp32 else param.dtype``, the buffer reduce-scattered (distributed optimizer) or
all-reduced (DDP) in place; megatron/core/optimizer/distrib_optimizer.py
``_copy_model_grads_to_main_grads``: ``shard_main_param.grad = shard_model_grad.float()``;
megatron/core/optimizer/optimizer.py: ``main_param.grad = model_param.main_grad.float()``.
Megatron-Bridge's (NVIDIA-NeMo/Megatron-Bridge 067f987d): training/mixed_precision.py
``bf16_mixed`` grad_reduce_in_fp32 True, ``fp16_mixed`` False, copied over ``ddp``'s at setup
(training/config.py). The model is Llama 3.1 8B (the catalogue's, Meta's config.json).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.dtypes import Dtype
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.runconfig import loads_run_config, plan_from_run
from core.parallel.comm import step_communication
from core.params import param_counts
from core.plan import Parallelism, Plan, Preset, Stack, Strategy, Workload
from tests.core.planfile_compat import reload_and_without
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
LLAMA_8B = find_model("llama-3.1-8b")


def _plan(strategy: Strategy = Strategy.ZERO1, fp32: bool = True, stack: Stack = Stack.MEGATRON) -> Plan:
    # Mixed precision (float32 trainable weights under bf16): the gradients are 4 B as stored.
    return Plan(
        model=LLAMA_8B.spec,
        model_id=LLAMA_8B.id,
        preset=Preset.FP32_AUTOCAST_BF16,
        parallel=Parallelism(nodes=2, gpus_per_node=8, strategy=strategy, grad_reduce_in_fp32=fp32),
        workload=Workload(micro_batch=1, seq_len=4096, grad_accum=4),
        stack=stack,
    )


def _dp_terms(plan: Plan) -> dict[str, float]:
    comm = step_communication(plan, param_counts(plan), 10.0, 1 / 3)
    return {t.label: t.bytes for t in comm.terms if t.data_parallel}


def _bucket(plan: Plan, key: BucketKey) -> float:
    return next(b.bytes for b in estimate(plan).buckets if b.key is key)


def test_the_distributed_optimizer_reduce_scatters_bf16_gradients_when_off() -> None:
    # 16 ranks: a ring reduce-scatter moves (n - 1) / n of the buffer, 4 B a gradient in float32, 2 B in bf16.
    trainable = param_counts(_plan()).trainable
    on, off = _dp_terms(_plan()), _dp_terms(_plan(fp32=False))
    assert on["ZeRO-1 gradient reduce-scatter"] == pytest.approx(trainable * 4 * 15 / 16, rel=1e-9)
    assert off["ZeRO-1 gradient reduce-scatter"] == pytest.approx(trainable * 2 * 15 / 16, rel=1e-9)
    # The bf16 parameters' all-gather does not change.
    assert on["ZeRO updated-parameter all-gather"] == off["ZeRO updated-parameter all-gather"]


def test_megatron_ddp_all_reduces_bf16_gradients_when_off() -> None:
    on, off = _dp_terms(_plan(Strategy.DDP)), _dp_terms(_plan(Strategy.DDP, fp32=False))
    assert off["DDP gradient all-reduce"] == pytest.approx(on["DDP gradient all-reduce"] / 2, rel=1e-9)


def test_the_distributed_optimizers_whole_buffer_is_16_bit_and_its_shard_is_copied_to_float32() -> None:
    # The buffer the backward accumulates into holds every gradient, 2 B instead of 4 B; the step's
    # float32 shard (T / 16 x 4 B: .float() of the rank's part) is what the float32 buffer's view was.
    plan = _plan()
    trainable = param_counts(plan).trainable
    saved = _bucket(plan, BucketKey.GRADIENTS) - _bucket(_plan(fp32=False), BucketKey.GRADIENTS)
    assert saved == pytest.approx(trainable * 2, rel=1e-9)


def test_megatron_ddp_keeps_a_16_bit_buffer_beside_the_steps_float32_copy() -> None:
    # DDP: at the peak (the forward / backward) the buffer alone, 4 B a gradient on, 2 B off; the
    # float32 main_param.grad the step reads off is made at the step (tests/core/test_megatron_state.py).
    plan = _plan(Strategy.DDP)
    trainable = param_counts(plan).trainable
    saved = _bucket(plan, BucketKey.GRADIENTS) - _bucket(_plan(Strategy.DDP, fp32=False), BucketKey.GRADIENTS)
    assert saved == pytest.approx(trainable * 2, rel=1e-9)
    terms = [t for b in estimate(_plan(Strategy.DDP, fp32=False)).buckets for t in b.terms]
    assert any(t.label.startswith("Megatron gradient buffer (16-bit main_grad") for t in terms)


def test_other_stacks_and_16_bit_gradients_are_untouched() -> None:
    # The setting is Megatron-Core's: an eager PyTorch plan, or FSDP (its own reduce dtype), ignores it.
    for strategy, stack in ((Strategy.ZERO1, Stack.EAGER), (Strategy.FSDP, Stack.MEGATRON)):
        on, off = _plan(strategy, stack=stack), _plan(strategy, False, stack)
        assert estimate(on).total_bytes == estimate(off).total_bytes
        assert _dp_terms(on) == _dp_terms(off)


def test_a_16_bit_models_buffer_is_float32_when_on() -> None:
    # A bf16 model (a --bf16 run's Float16Module, as the Megatron-Bridge importer plans it): the
    # buffer is ``torch.float if grad_reduce_in_fp32 else param.dtype`` (param_and_grad_buffer.py),
    # so on it reduce-scatters 4 B a gradient, off 2 B. (It read the parameters' 2 B either way.)
    bf16 = _plan(fp32=False).with_changes(preset=Preset.PURE_BF16)
    assert bf16.weight_dtype is Dtype.BF16
    trainable = param_counts(bf16).trainable
    on, off = _dp_terms(bf16.with_parallel(grad_reduce_in_fp32=True)), _dp_terms(bf16)
    assert on["ZeRO-1 gradient reduce-scatter"] == pytest.approx(trainable * 4 * 15 / 16, rel=1e-9)
    assert off["ZeRO-1 gradient reduce-scatter"] == pytest.approx(trainable * 2 * 15 / 16, rel=1e-9)


def test_plan_files_keep_it_and_older_files_reduce_in_float32(tmp_path: Path) -> None:
    loaded, older = reload_and_without(_plan(fp32=False), tmp_path, "parallel", "grad_reduce_in_fp32")
    assert loaded.parallel.grad_reduce_in_fp32 is False
    assert older.parallel.grad_reduce_in_fp32 is True


def _read(document: Mapping[str, object]) -> bool | None:
    return loads_run_config(yaml.safe_dump(document).encode(), "run_config.yaml").settings.grad_reduce_in_fp32


def test_the_importer_reads_the_buffer_dtype_the_run_ends_up_with() -> None:
    train = {"train": {"micro_batch_size": 1}}
    assert _read({**train, "ddp": {"grad_reduce_in_fp32": False}}) is False
    assert _read({**train, "ddp": {"grad_reduce_in_fp32": True}}) is True
    # A named precision recipe copies its own value over ddp's at setup.
    assert _read({**train, "mixed_precision": "bf16_mixed", "ddp": {"grad_reduce_in_fp32": False}}) is True
    assert _read({**train, "mixed_precision": "fp16_mixed"}) is False
    # A mixed_precision section's own key wins too (NVIDIA's performance scripts set both).
    section = {"bf16": True, "grad_reduce_in_fp32": False}
    assert _read({**train, "mixed_precision": section, "ddp": {"grad_reduce_in_fp32": True}}) is False
    assert _read(train) is None  # the recipe's: an override file that does not say keeps the plan's


def test_the_megatron_bridge_export_writes_it_and_says_when_the_recipe_overrides_it() -> None:
    for fp32 in (True, False):
        plan = _plan(fp32=fp32)
        out = export(plan, Target.MEGATRON_BRIDGE)
        document = yaml.safe_load(out.text)
        assert document["ddp"]["grad_reduce_in_fp32"] is fp32
        assert document["mixed_precision"] == "bf16_mixed"
        listed = {u.field: u.why for u in out.unexpressed}
        # bf16_mixed holds True: off needs the recipe script's cfg.mixed_precision too.
        assert ("parallel.grad_reduce_in_fp32" in listed) is (not fp32)
        if not fp32:
            assert "cfg.mixed_precision.grad_reduce_in_fp32 = False" in listed["parallel.grad_reduce_in_fp32"]
        run = loads_run_config(
            yaml.safe_dump({k: v for k, v in document.items() if k != "mixed_precision"}).encode(), "run_config.yaml"
        )
        assert plan_from_run(run, _plan(fp32=not fp32)).parallel.grad_reduce_in_fp32 is fp32


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "realgpu" / "throughput.py", "throughput_benchmark_grad_reduce")


def test_nvidias_performance_recipes_reduce_in_bf16_and_nemo_24_07_as_before(bench: ModuleType) -> None:
    # Megatron-Bridge's performance configs at every archived release's tag and Megatron-LM's Llama
    # example (--grad-reduce-in-bf16) set it off; NeMo 24.07's NeMo 1 configs are not read: float32.
    report = bench.build(bench.load())
    by_source: dict[str, set[bool]] = {}
    for r in report.scored:
        if r.case.family == "NVIDIA":
            by_source.setdefault(r.case.record["source_id"], set()).add(r.case.plan.parallel.grad_reduce_in_fp32)
    assert by_source == {
        "nvidia-megatron-bridge": {False},
        "nvidia-megatron-lm-llama-example": {False},
        "nvidia-nemo-24.07": {True},
    }
