"""How many parameters a plan stores and trains."""

from __future__ import annotations

from dataclasses import dataclass

from core.memo import last_answer
from core.plan import Accounting, Method, Plan


@dataclass(frozen=True)
class ParamCounts:
    total: int  # every parameter of the base model
    active: int  # parameters one token passes through (differs for mixture-of-experts)
    trainable: int  # parameters that get gradients and optimizer state
    adapter: int  # LoRA (and DoRA magnitude) parameters, 0 without adapters; part of ``trainable``
    frozen_base: int  # base parameters without gradients


def frozen_params(plan: Plan) -> int:
    """Embeddings plus the bottom ``frozen_layers`` blocks (the head stays trainable unless tied)."""
    model = plan.model
    return model.embedding_params() + plan.frozen_layers * model.layer_params()


def quantised_block_params(plan: Plan) -> int:
    """The blocks' parameters a QLoRA base stores quantised: their projection matrices
    (bitsandbytes replaces the ``nn.Linear`` modules, and transformers' ``BitsAndBytesConfig`` keeps
    ``lm_head`` out; the norms and the embedding are no linear layers). 0 for other methods. LitGPT
    quantises its head as well (core.training.storage.litgpt_quantised_head): a root parameter, not
    a block's."""
    return plan.model.stored_matmul_params() if plan.method is Method.QLORA else 0


@last_answer
def param_counts(plan: Plan) -> ParamCounts:
    model = plan.model
    total = model.total_params()
    active = model.active_params()
    if plan.adapter_based:
        if plan.method is Method.IA3:
            adapter = model.ia3_params(plan.lora.targets, plan.lora.ia3_feedforward)
        else:
            adapter = model.lora_params(plan.lora.rank, plan.lora.targets)
        if plan.method is Method.DORA:
            adapter += model.dora_magnitude_params(plan.lora.targets)
        if plan.accounting is Accounting.LESSON and plan.lesson.trainable_override:
            adapter = plan.lesson.trainable_override
        return ParamCounts(total=total, active=active, trainable=adapter, adapter=adapter, frozen_base=total)
    if plan.method is Method.FROZEN:
        frozen = min(total, frozen_params(plan))
        trainable = total - frozen
        if plan.accounting is Accounting.LESSON and plan.lesson.trainable_override:
            trainable = min(total, plan.lesson.trainable_override)
        return ParamCounts(total=total, active=active, trainable=trainable, adapter=0, frozen_base=total - trainable)
    return ParamCounts(total=total, active=active, trainable=total, adapter=0, frozen_base=0)
