"""The cross-entropy of vocabulary-sharded logits under PyTorch's ``loss_parallel()``.

torchtitan enters ``torch.distributed.tensor.parallel.loss_parallel()`` whenever TP > 1
(pytorch/torchtitan 9dec370, ``train.py`` ``get_train_context(parallel_dims.loss_parallel_enabled)``;
``parallel_dims.py``: ``self.tp > 1 and self.enable_loss_parallel``). Its handlers
(pytorch/pytorch 3be1238, ``torch/distributed/tensor/parallel/loss.py``) decompose the log-softmax
(``shifted = x - x_max``, ``torch.exp(shifted)``, ``result = shifted - shifted_logsumexp``) and fuse
the nll and log-softmax backwards into ``(torch.zeros_like(x) [scattered with -1] + torch.exp(x)) *
grad_output``: four float32 N·V/t tensors at the backward's start (the kept log-softmax, the zeros,
their sum with exp, the product) where aten's kernels hold three, and two beside the float32 input in
the forward where aten's ``_log_softmax`` writes one. Megatron-LM's own vocabulary-parallel
cross-entropy works in place instead (one float32 tensor).
"""

from __future__ import annotations

import pytest

from core.breakdown import BucketKey, StepPhase
from core.estimate import estimate
from core.parallel.acts import loss_parallel
from core.parallel.layout import layout
from core.plan import Plan, Preset, Stack
from core.presets import plan_for_model

T = 8  # torchtitan's 70B table: TP 8 within a host
# Llama 3.1 8B: vocabulary 128,256 (meta-llama/Llama-3.1-8B config.json); 1 × 4,096 tokens
NV = 4096 * 128_256


def _plan(tp: int, stack: Stack = Stack.EAGER) -> Plan:
    plan = plan_for_model("llama-3.1-8b", preset=Preset.PURE_BF16).with_workload(micro_batch=1, seq_len=4096)
    return plan.with_parallel(gpus_per_node=tp, tensor_parallel=tp, sequence_parallel=tp > 1).with_changes(stack=stack)


def _loss_terms(plan: Plan, kind: StepPhase) -> list[tuple[str, float]]:
    phase = next(p for p in estimate(plan).phases if p.kind is kind)
    return [
        (t.label, t.bytes)
        for t in phase.bucket(BucketKey.ACTIVATIONS).terms
        if "softmax" in t.label or "logits" in t.label or "loss parallel" in t.label
    ]


def test_torchtitans_tp_computes_the_loss_under_loss_parallel() -> None:
    assert loss_parallel(_plan(T), layout(_plan(T)))
    assert loss_parallel(_plan(T, Stack.COMPILE), layout(_plan(T, Stack.COMPILE)))
    assert not loss_parallel(_plan(T, Stack.MEGATRON), layout(_plan(T, Stack.MEGATRON)))
    assert not loss_parallel(_plan(1), layout(_plan(1)))


def test_the_backward_starts_with_four_float32_shards_of_the_logits() -> None:
    terms = _loss_terms(_plan(T), StepPhase.BACKWARD_START)
    assert len(terms) == 4, terms
    assert sum(b for _, b in terms) == pytest.approx(4 * NV * 4 / T)


def test_the_forward_holds_the_decomposed_log_softmax_beside_its_float32_input() -> None:
    # the bf16 logits (2 B), their float32 copy, then x - max and exp(x - max) (or the result)
    terms = _loss_terms(_plan(T), StepPhase.FORWARD)
    assert sum(b for _, b in terms) == pytest.approx(NV * (2 + 4 + 2 * 4) / T)


def test_without_it_aten_kernels_hold_three() -> None:
    terms = _loss_terms(_plan(1), StepPhase.BACKWARD_START)
    assert len(terms) == 3, terms
    assert sum(b for _, b in terms) == pytest.approx(3 * NV * 4)


@pytest.mark.parametrize("tp", [1, T])
def test_megatrons_cross_entropy_works_in_place(tp: int) -> None:
    # NVIDIA/Megatron-LM 000c4ac2 megatron/core/tensor_parallel/cross_entropy.py: the forward's
    # .float() copy becomes the softmax in place and is saved; the backward turns it into the
    # gradient in place, which autograd casts to the bf16 logits' dtype. Forward: the bf16 logits
    # and the float32 copy; backward: the float32 gradient and its bf16 cast (÷ TP: vocabulary-parallel).
    plan = _plan(tp, Stack.MEGATRON)
    assert sum(b for _, b in _loss_terms(plan, StepPhase.FORWARD)) == pytest.approx(NV * (2 + 4) / tp)
    backward = _loss_terms(plan, StepPhase.BACKWARD_START)
    assert len(backward) == 2, backward
    assert sum(b for _, b in backward) == pytest.approx(NV * (4 + 2) / tp)
