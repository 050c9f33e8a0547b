"""`Plan.on_model` / `Plan.with_method`: the one home of "this plan on another model / method"."""

from __future__ import annotations

from dataclasses import replace

from core.catalogue import find_model
from core.plan import Method, Plan


def _frozen(layers: int) -> Plan:
    entry = find_model("llama-3.1-8b")  # 32 blocks (its config.json)
    return Plan(model=entry.spec, model_id=entry.id, method=Method.FROZEN, frozen_layers=layers)


def test_on_model_clamps_frozen_layers_to_the_new_depth() -> None:
    small = find_model("llama-3.2-1b")  # 16 blocks
    moved = _frozen(24).on_model(small.spec, small.id)
    assert (moved.model_id, moved.frozen_layers, moved.method) == ("llama-3.2-1b", 16, Method.FROZEN)
    assert _frozen(4).on_model(small.spec, small.id).frozen_layers == 4  # within depth: kept


def test_with_method_keeps_the_plan_valid() -> None:
    entry = find_model("llama-3.2-1b")
    full = Plan(model=entry.spec, model_id=entry.id)
    frozen = full.with_method(Method.FROZEN)
    assert frozen.method is Method.FROZEN and frozen.frozen_layers == 8  # half of 16 blocks
    assert frozen.with_method(Method.LORA).with_method(Method.FROZEN).frozen_layers == 8  # restored
    assert full.with_method(Method.FROZEN, frozen_layers=3).frozen_layers == 3


def test_a_plan_that_left_the_frozen_method_counts_every_layer() -> None:
    """Plan.with_method keeps frozen_layers when leaving the method (to restore it on the way
    back); no estimate may read it then. Adafactor's factored state did, for full fine-tuning."""
    from core.estimate import estimate
    from core.plan import Optimizer

    entry = find_model("llama-3.2-1b")
    for optimizer in Optimizer:
        if optimizer is Optimizer.LORA_FA:  # LoRA / QLoRA only (Plan._check_lora_fa, branch h60opt)
            continue
        plain = Plan(model=entry.spec, model_id=entry.id)
        # RMSprop has no fused kernel: the implementation a switch to it keeps (Plan.follow_optimizer)
        full = replace(plain, optimizer=optimizer, optimizer_impl=plain.follow_optimizer(optimizer))
        left = full.with_method(Method.FROZEN).with_method(Method.FULL)
        assert left.frozen_layers == 8
        assert estimate(left).total_bytes == estimate(full).total_bytes, optimizer
