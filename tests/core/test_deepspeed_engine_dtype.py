"""DeepSpeed's bf16 / fp16 engine and a LoRA plan's float32 adapters.

Sources (deepspeedai/DeepSpeed edaa7221):
- deepspeed/runtime/engine.py ``_configure_distributed_model``: with bf16 (fp16) enabled,
  ``_cast_module_mixed_precision`` casts every floating parameter to bf16 (fp16), ``p.data = p.data.to(param_dtype)``,
  unless ``is_zero_init_model`` (a ZeRO-3 model whose parameters carry ``ds_id``, as ``from_pretrained`` loads
  one under ``deepspeed.zero.Init``): PEFT's float32 adapters become bf16 under ZeRO-1/2, and stay float32
  under ZeRO-3.
- engine.py ``get_data_types`` (grad_accum_dtype defaults to the model dtype) and ``communication_data_type``
  (bf16 when bf16 is enabled); stage3.py ``__init__`` allocates ``grad_partitions_flat_buffer`` in
  ``gradient_accumulation_dtype`` and each ipg bucket in its communication dtype: bf16 under ZeRO-3 too.
- stage_1_and_2.py ``setup_buckets``: ``buf_0`` in ``self.dtype``, the (cast) parameters' dtype.
"""

from __future__ import annotations

from core.breakdown import BucketKey
from core.checks import plan_warnings
from core.dtypes import Autocast, Dtype
from core.estimate import Estimate, estimate
from core.params import param_counts
from core.plan import Method, Plan, Preset, Stack, Strategy
from core.presets import plan_for_model
from core.roles import deepspeed_cast_adapters, deepspeed_cast_weights, dtypes_for, qlora_unquantised_bytes

BUCKET = 500_000_000  # reduce_bucket_size's default (zero/config.py: pp_int(5e8))


def _plan(strategy: Strategy, autocast: Autocast = Autocast.BF16) -> Plan:
    # Llama 3.2 1B, LoRA with float32 adapters on a bf16 base (the trainer-bf16 preset's roles), 16 GPUs.
    plan = plan_for_model("llama-3.2-1b").with_changes(preset=Preset.TRAINER_BF16).with_method(Method.LORA)
    plan = plan.with_changes(preset=Preset.CUSTOM, adapter_dtype=Dtype.FP32, autocast=autocast)
    plan = plan.with_workload(micro_batch=1, seq_len=256, grad_accum=1)
    return plan.with_parallel(nodes=2, gpus_per_node=8, strategy=strategy)


def _terms(est: Estimate, key: BucketKey) -> dict[str, float]:
    return {t.label: t.bytes for ph in est.phases for t in ph.bucket(key).terms}


def _bucket(est: Estimate) -> float:
    return next(b for label, b in _terms(est, BucketKey.GRADIENTS).items() if label.startswith("ipg reduce bucket"))


def test_zero2_bf16_trains_bf16_adapters_whatever_the_plan_stores() -> None:
    plan = _plan(Strategy.ZERO2)
    assert plan.adapter_dtype is Dtype.FP32
    assert deepspeed_cast_adapters(plan) is Dtype.BF16
    dt = dtypes_for(plan)
    assert (dt.adapter, dt.grad) == (2.0, 2.0)
    est = estimate(plan)
    assert _bucket(est) == BUCKET * 2  # buf_0 in the cast parameters' dtype, 1 GB, not 2 GB
    t, dp = param_counts(plan).trainable, 16
    # The optimizer partition keeps its float32 master copy: T ÷ dp × 4 B.
    assert _terms(est, BucketKey.OPTIMIZER)["float32 master partition"] == t * 4 / dp
    assert _terms(est, BucketKey.GRADIENTS)["reduced gradient partition (grads_in_partition)"] == t * 2 / dp
    assert any("casts the whole module to bf16" in n for n in est.notes)


def test_fp16_casts_to_fp16_and_ddp_or_no_autocast_keeps_float32() -> None:
    assert deepspeed_cast_adapters(_plan(Strategy.ZERO1, Autocast.FP16)) is Dtype.FP16
    assert deepspeed_cast_adapters(_plan(Strategy.ZERO1, Autocast.NONE)) is None  # bf16.enabled false
    assert deepspeed_cast_adapters(_plan(Strategy.DDP)) is None
    assert dtypes_for(_plan(Strategy.DDP)).adapter == 4.0
    # Under the Megatron stack ZeRO-1 is Megatron's distributed optimizer, not DeepSpeed.
    assert deepspeed_cast_adapters(_plan(Strategy.ZERO1).with_changes(stack=Stack.MEGATRON)) is None


def test_zero3_keeps_float32_adapters_but_its_gradients_and_bucket_are_bf16() -> None:
    plan = _plan(Strategy.ZERO3)
    assert deepspeed_cast_adapters(plan) is None and dtypes_for(plan).adapter == 4.0
    est = estimate(plan)
    t, dp = param_counts(plan).trainable, 16
    assert _bucket(est) == BUCKET * 2  # the ipg bucket in communication_data_type (bf16)
    assert _terms(est, BucketKey.GRADIENTS)["gradient partition (grad_partitions_flat_buffer)"] == t * 2 / dp
    assert any("zero.Init" in n for n in est.notes)


def test_the_estimate_moves_by_what_the_cast_saves() -> None:
    # The same ZeRO-2 plan with bf16 adapters chosen: the same figures (the engine's cast is the choice).
    cast = estimate(_plan(Strategy.ZERO2))
    chosen = estimate(_plan(Strategy.ZERO2).with_changes(adapter_dtype=Dtype.BF16))
    assert cast.peak_bytes == chosen.peak_bytes


def test_a_warning_says_the_engine_overrides_float32_adapters() -> None:
    texts = [w.text for w in plan_warnings(_plan(Strategy.ZERO2))]
    assert any("casts the whole model to bf16" in t for t in texts)
    assert not any("casts the whole model" in w.text for w in plan_warnings(_plan(Strategy.ZERO3)))
    bf16 = _plan(Strategy.ZERO2).with_changes(adapter_dtype=Dtype.BF16)
    assert not any("casts the whole model" in w.text for w in plan_warnings(bf16))


# Full fine-tuning and LoRA's base with float32 weights under DeepSpeed bf16 / fp16 (branch h38ds).
# microsoft/DeepSpeed v0.11.1 e9503fe4 and v0.14.0 ce78a632, deepspeed/runtime/engine.py
# ``_configure_distributed_model``: ``self.module.bfloat16()`` / ``half()`` at every stage;
# deepspeedai/DeepSpeed edaa7221 the same function: ``_cast_module_mixed_precision`` (every floating
# parameter) unless a zero.Init model, which partition_parameters.py ``Init._set_dtype`` /
# ``_add_tensor_creation_wrappers`` created in bf16 already. So the weights are 16-bit at every stage.


def _full(strategy: Strategy, preset: Preset = Preset.FP32_AUTOCAST_BF16) -> Plan:
    # Llama 3.2 1B full fine-tuning, float32 weights under bf16 autocast (the fp32-autocast-bf16 preset), 8 GPUs.
    plan = plan_for_model("llama-3.2-1b").with_method(Method.FULL).with_changes(preset=preset)
    plan = plan.with_workload(micro_batch=1, seq_len=1024, grad_accum=1)
    return plan.with_parallel(nodes=1, gpus_per_node=8, strategy=strategy)


def test_full_fine_tuning_float32_weights_train_in_bf16_at_every_zero_stage() -> None:
    for strategy in (Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3):
        plan = _full(strategy)
        assert plan.weight_dtype is Dtype.FP32 and plan.autocast is Autocast.BF16
        assert deepspeed_cast_weights(plan) is Dtype.BF16
        dt = dtypes_for(plan)
        # 16-bit weights and gradients, the model runs in bf16 (no autocast copies of float32 weights).
        assert (dt.param, dt.grad, dt.residual, dt.mixed) == (2.0, 2.0, 2.0, False), strategy
        # The engine's cast is the choice: the same figures as the plan that chose bf16 weights.
        chosen = _full(strategy, Preset.TRAINER_BF16)
        assert chosen.weight_dtype is Dtype.BF16
        assert estimate(plan).peak_bytes == estimate(chosen).peak_bytes, strategy


def test_the_float32_master_partition_stays_and_the_16bit_weights_are_whole_below_stage_3() -> None:
    plan = _full(Strategy.ZERO2)
    est = estimate(plan)
    n, dp = param_counts(plan).trainable, 8
    assert _terms(est, BucketKey.OPTIMIZER)["float32 master partition"] == n * 4 / dp
    weights = sum(_terms(est, BucketKey.WEIGHTS).values())
    assert weights == n * 2  # bit16_groups: the whole model in bf16, not n × 4 B
    assert any("weights are bf16 on the GPU at every ZeRO stage" in note for note in est.notes)


def test_lora_float32_base_is_cast_ddp_and_no_autocast_are_not() -> None:
    lora = _full(Strategy.ZERO3).with_method(Method.LORA)
    assert lora.base_dtype is Dtype.FP32
    assert deepspeed_cast_weights(lora) is Dtype.BF16 and dtypes_for(lora).base == 2.0
    assert deepspeed_cast_weights(_full(Strategy.ZERO1, Preset.FP16_AMP)) is Dtype.FP16
    assert deepspeed_cast_weights(_full(Strategy.DDP)) is None and dtypes_for(_full(Strategy.DDP)).param == 4.0
    assert deepspeed_cast_weights(_full(Strategy.ZERO2).with_changes(autocast=Autocast.NONE)) is None
    assert deepspeed_cast_weights(_full(Strategy.ZERO2, Preset.TRAINER_BF16)) is None  # nothing to override


def test_qlora_kbit_upcast_does_not_survive_the_engine() -> None:
    # prepare_model_for_kbit_training makes the unquantised remainder float32; ZeRO-1/2's engine casts it back,
    # and ZeRO-3 gathers each weight in its partition's dtype (partition_parameters.py all_gather_coalesced:
    # dtype=get_only_unique_item(p.ds_tensor.dtype ...), DeepSpeed v0.11.1 and edaa7221): the model runs in bf16.
    for strategy in (Strategy.ZERO2, Strategy.ZERO3):
        plan = _full(strategy).with_method(Method.QLORA).with_changes(kbit_upcast=True)
        assert deepspeed_cast_weights(plan) is Dtype.BF16, strategy
        assert (qlora_unquantised_bytes(plan), dtypes_for(plan).residual) == (2.0, 2.0), strategy
    ddp = _full(Strategy.DDP).with_method(Method.QLORA).with_changes(kbit_upcast=True)
    assert deepspeed_cast_weights(ddp) is None and qlora_unquantised_bytes(ddp) == 4.0


def test_a_warning_says_the_engine_overrides_float32_weights() -> None:
    texts = [w.text for w in plan_warnings(_full(Strategy.ZERO3))]
    assert any("keeps the model's weights in bf16, not fp32" in t for t in texts)
    assert not any("keeps the model's" in w.text for w in plan_warnings(_full(Strategy.ZERO3, Preset.TRAINER_BF16)))
    assert not any("keeps the model's" in w.text for w in plan_warnings(_full(Strategy.FSDP)))
