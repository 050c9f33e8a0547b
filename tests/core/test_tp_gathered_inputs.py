"""Tensor parallel with sequence parallelism: which copy of a column-parallel matmul's input is kept.

PyTorch's DTensor TP, as torchtitan runs it (pytorch/torchtitan 9dec370,
``torchtitan/parallelisms/parallelize_llama.py`` apply_tp): ``attention_norm`` and ``ffn_norm`` run
under ``SequenceParallel()`` on the rank's sequence shard; ``PrepareModuleInput(input_layouts=Shard(1),
desired_input_layouts=Replicate())`` all-gathers their output before ``attention`` and ``feed_forward``,
whose ``ColwiseParallel`` wq / wk / wv and w1 / w3 multiply that replicated tensor, so autograd keeps
the whole sequence for their weight gradients. The head is ``ColwiseParallel(input_layouts=Shard(1))``:
its input, the final norm's output, is gathered and kept whole as well.

Megatron-LM keeps the shard (NVIDIA/Megatron-LM 000c4ac2, megatron/core/tensor_parallel/layers.py
``LinearWithGradAccumulationAndAsyncCommunication.forward``: ``ctx.save_for_backward(input, weight)``
before the all-gather, which the backward repeats): Korthikanti et al. 2022 (arXiv:2205.05198) Table 2's
sbh/t·(34 + 5as/h), every term ÷ t (tests/core/test_parallel_layout.py).
"""

from __future__ import annotations

import pytest

from core.estimate import estimate
from core.parallel.acts import block_per_rank, keeps_gathered_inputs
from core.parallel.layout import layout
from core.plan import Plan, Preset, Stack
from core.presets import plan_for_model
from core.training.detailed import layer_activations

T = 8  # torchtitan's 70B and 405B tables: TP 8 within a host


def _bf16() -> Plan:
    return plan_for_model("llama-3.1-8b", preset=Preset.PURE_BF16).with_workload(seq_len=4096)


def _plan(stack: Stack) -> Plan:
    plan = _bf16()
    return plan.with_parallel(gpus_per_node=T, tensor_parallel=T, sequence_parallel=True).with_changes(stack=stack)


def test_the_gathered_items_are_the_inputs_of_q_k_v_and_of_the_mlp() -> None:
    block = layer_activations(_bf16(), trainable_block=True)
    labels = [block.items[i].label for i in block.gathered]
    assert labels == ["attention norm output", "MLP input"]
    assert set(block.gathered) <= set(block.replicated)


@pytest.mark.parametrize("stack", [Stack.EAGER, Stack.COMPILE])
def test_pytorch_tp_keeps_the_whole_sequence_of_each_column_parallel_input(stack: Stack) -> None:
    plan = _plan(stack)
    assert keeps_gathered_inputs(plan)
    block = layer_activations(plan, trainable_block=True)
    per_rank = block_per_rank(block, layout(plan), keeps_gathered_inputs(plan))
    for i, (whole, kept) in enumerate(zip(block.items, per_rank.items, strict=True)):
        assert kept.bytes == pytest.approx(whole.bytes if i in block.gathered else whole.bytes / T), whole.label
    # Llama 3.1 8B (hidden 4,096, meta-llama/Llama-3.1-8B config.json): 4,096 tokens × 4,096 in bf16, twice
    n_d_bf16 = 4096 * 4096 * 2
    gathered = sum(per_rank.items[i].bytes for i in block.gathered)
    assert gathered == pytest.approx(2 * n_d_bf16)
    assert per_rank.bytes == pytest.approx((block.bytes - 2 * n_d_bf16) / T + 2 * n_d_bf16)


def test_megatron_keeps_the_shard() -> None:
    plan = _plan(Stack.MEGATRON)
    assert not keeps_gathered_inputs(plan)
    block = layer_activations(plan, trainable_block=True)
    assert block_per_rank(block, layout(plan), keeps_gathered_inputs(plan)).bytes == pytest.approx(block.bytes / T)


def test_without_sequence_parallelism_both_keep_the_replicated_input() -> None:
    plan = _plan(Stack.EAGER).with_parallel(sequence_parallel=False)
    block = layer_activations(plan, trainable_block=True)
    lay = layout(plan)
    assert block_per_rank(block, lay, True).bytes == pytest.approx(block_per_rank(block, lay, False).bytes)


def _head_input(plan: Plan) -> float:
    terms = [t for b in estimate(plan).buckets for t in b.terms if t.label.startswith("final norm output (head input)")]
    assert len(terms) == 1
    return terms[0].bytes


def test_the_column_parallel_head_keeps_its_gathered_input_under_pytorch_tp() -> None:
    n_d_bf16 = 4096 * 4096 * 2  # the final norm's output, 4,096 tokens × hidden 4,096 in bf16
    assert _head_input(_plan(Stack.COMPILE)) == pytest.approx(n_d_bf16)
    assert _head_input(_plan(Stack.MEGATRON)) == pytest.approx(n_d_bf16 / T)
