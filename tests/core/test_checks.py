"""Plan warnings: valid plans that a user should still hear about (issue 13, item 8)."""

from __future__ import annotations

from core.checks import plan_warnings
from core.estimate import estimate
from core.inputs import Method, Quant
from core.presets import plan_for_model
from core.verdict import Mode


def test_a_sequence_past_the_context_window_is_warned_about() -> None:
    # Llama 3.1 8B's config.json: "max_position_embeddings": 131072 (resources/models.json).
    plan = plan_for_model("llama-3.1-8b").with_workload(seq_len=1_000_000)
    assert plan.model.max_position_embeddings == 131_072
    warnings = plan_warnings(plan)
    assert len(warnings) == 1 and warnings[0].mode is Mode.TRAINING
    text = warnings[0].text
    assert "1,000,000" in text and "131,072" in text and "Llama 3.1 8B" in text
    assert estimate(plan).warnings == warnings
    assert estimate(plan).warnings_for(Mode.TRAINING) == (text,) and not estimate(plan).warnings_for(Mode.INFERENCE)


def test_a_sequence_at_the_context_window_is_fine() -> None:
    plan = plan_for_model("llama-3.1-8b").with_workload(seq_len=131_072)
    assert plan_warnings(plan) == ()
    assert estimate(plan).warnings == ()


def test_a_serving_context_past_the_window_is_warned_about() -> None:
    plan = plan_for_model("llama-3.1-8b").with_inference(context=200_000)
    (warning,) = plan_warnings(plan)
    assert warning.mode is Mode.INFERENCE and "200,000" in warning.text and "serving" in warning.text


def test_tensor_parallel_over_a_bitsandbytes_base_is_warned_about() -> None:
    # The more-GPUs remedy and fewest-gpus may shard a QLoRA plan by tensor parallel; no trainer people run does
    # (huggingface/transformers#38122: tp_plan fails on bitsandbytes 4-bit weights), so the plan says so.
    plan = plan_for_model("llama-3.1-8b").with_method(Method.QLORA, quant=Quant.NF4)
    assert not any("bitsandbytes" in w.text for w in plan_warnings(plan))
    sharded = plan.with_parallel(gpus_per_node=2, tensor_parallel=2)
    (warning,) = [w for w in plan_warnings(sharded) if "bitsandbytes" in w.text]
    assert warning.mode is Mode.TRAINING and "Tensor parallel 2" in warning.text and "nf4" in warning.text
    # A 16-bit LoRA base under tensor parallel (Megatron-Bridge's PEFT recipes run it) is not warned about.
    lora = plan_for_model("llama-3.1-8b").with_method(Method.LORA).with_parallel(gpus_per_node=2, tensor_parallel=2)
    assert not any("bitsandbytes" in w.text for w in plan_warnings(lora))


def test_tensor_parallel_across_nodes_is_warned_about() -> None:
    # Issue 26, item 15: TP 8 over nodes of 4 GPUs was accepted without a word; Megatron-LM and
    # torchtitan keep tensor parallel within a node (its all-reduces run per layer).
    plan = plan_for_model("llama-3.1-70b").with_parallel(nodes=2, gpus_per_node=4, tensor_parallel=8)
    (warning,) = plan_warnings(plan)
    assert warning.mode is Mode.TRAINING and "spans nodes of 4 GPUs" in warning.text
    assert plan_warnings(plan.with_parallel(nodes=1, gpus_per_node=8)) == ()
