"""DeepSpeed's bf16 / fp16 engine runs no torch.autocast: the cast module computes in its own dtype.

Sources (core.roles.runs_autocast):
- microsoft/DeepSpeed v0.11.1 e9503fe4, v0.14.0 ce78a632, v0.16.4 e2dc3eeb deepspeed/runtime/engine.py:
  ``DeepSpeedEngine.forward`` calls ``self.module(*inputs, **kwargs)``; the file never names autocast.
  deepspeedai/DeepSpeed ed5f7375 (v0.17.2, #6993) and 66bf2a64 (v0.17.6, #7543): ``forward`` opens
  torch.autocast only with a ``torch_autocast`` config section, and refuses (v0.17.2) or switches off
  (v0.17.6, ``autocast_if_enabled``) one opened outside.
- huggingface/accelerate v0.28.0 src/accelerate/accelerator.py ``Accelerator.__init__``: ``native_amp``
  stays False under ``DistributedType.DEEPSPEED``, so ``Accelerator.autocast`` is a nullcontext.
- transformers 4.38.2 src/transformers/trainer.py ``Trainer.__init__`` ("deepspeed ... manage their own
  half precision") and ``autocast_smart_context_manager`` (a nullcontext off CPU AMP).
"""

from __future__ import annotations

from core.breakdown import BucketKey
from core.dtypes import Autocast, Dtype
from core.estimate import Estimate, estimate
from core.plan import Method, Plan, Preset, Stack, Strategy
from core.presets import plan_for_model
from core.roles import dtypes_for, runs_autocast, runs_grad_scaler


def _gpt2(strategy: Strategy, preset: Preset = Preset.TRAINER_BF16) -> Plan:
    # GPT-2 full fine-tuning, bf16 weights under bf16 autocast (the trainer-bf16 preset), 8 GPUs. GPT-2's
    # LayerNorm (on autocast's float32 list) and its tanh-form GELU keep float32 tensors under autocast.
    plan = plan_for_model("gpt2").with_method(Method.FULL).with_changes(preset=preset)
    plan = plan.with_workload(micro_batch=1, seq_len=1024, grad_accum=1)
    return plan.with_parallel(nodes=1, gpus_per_node=8, strategy=strategy)


def _activations(est: Estimate) -> float:
    return max(sum(t.bytes for t in ph.bucket(BucketKey.ACTIVATIONS).terms) for ph in est.phases)


def test_no_autocast_runs_under_the_deepspeed_engine_at_any_zero_stage() -> None:
    for strategy in (Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3):
        plan = _gpt2(strategy)
        assert plan.autocast is Autocast.BF16  # what the DeepSpeed export writes as bf16.enabled
        assert not runs_autocast(plan), strategy
        assert dtypes_for(plan).mode == "pure", strategy
    fp16 = _gpt2(Strategy.ZERO2).with_changes(preset=Preset.CUSTOM, autocast=Autocast.FP16)
    assert not runs_autocast(fp16) and dtypes_for(fp16).mode == "pure"


def test_ddp_and_the_megatron_stack_keep_their_autocast() -> None:
    assert runs_autocast(_gpt2(Strategy.DDP)) and dtypes_for(_gpt2(Strategy.DDP)).mode == "autocast16"
    megatron = _gpt2(Strategy.ZERO1).with_changes(stack=Stack.MEGATRON)
    assert runs_autocast(megatron)  # Megatron's distributed optimizer, not DeepSpeed's engine


def test_the_engine_plans_the_activations_of_a_pure_bf16_model() -> None:
    engine = estimate(_gpt2(Strategy.ZERO2))
    # The same ZeRO-2 plan that chose pure bf16 (no autocast): the same activations to the byte.
    pure = estimate(_gpt2(Strategy.ZERO2, Preset.PURE_BF16))
    assert _activations(engine) == _activations(pure)
    # Under DDP autocast runs, and its float32 LayerNorm inputs and GELU intermediates cost more.
    assert _activations(engine) < _activations(estimate(_gpt2(Strategy.DDP)))
    assert any("no torch.autocast runs" in note for note in engine.notes)


def _scaler_terms(est: Estimate) -> list[str]:
    return [t.label for ph in est.phases for b in ph.buckets for t in b.terms if "GradScaler" in t.label]


def test_deepspeed_fp16_scales_the_loss_itself_no_grad_scaler() -> None:
    # DeepSpeed's ZeRO optimizers scale the loss with CreateLossScaler (microsoft/DeepSpeed v0.14.0 ce78a632
    # runtime/zero/stage_1_and_2.py, runtime/fp16/loss_scaler.py: a Python-float scale) and take fp16 weights.
    fp16 = _gpt2(Strategy.ZERO2).with_changes(preset=Preset.CUSTOM, weight_dtype=Dtype.FP16, autocast=Autocast.FP16)
    assert fp16.grad_scaler and not runs_grad_scaler(fp16)
    est = estimate(fp16)
    assert not _scaler_terms(est)
    assert not any("GradScaler" in note for note in est.notes)
    # fp16 AMP under DDP runs torch's GradScaler (its three one-element tensors, torch/amp/grad_scaler.py).
    ddp = _gpt2(Strategy.DDP, Preset.FP16_AMP)
    assert runs_grad_scaler(ddp) and _scaler_terms(estimate(ddp))
