"""Parallel-residual blocks (``ModelSpec.parallel_residual``) and the four catalogue models that use them.

The block, read from Lightning-AI/litgpt 5895df1 ``litgpt/model.py`` ``Block.forward`` (the same in lit-gpt
8641822 ``lit_gpt/model.py``), the code the memory figures ran::

    x_normed = self.norm_1(x)
    attention_output = self.attn(x_normed, ...)
    x_normed = x_normed if self.config.shared_attention_norm else self.norm_2(x)
    x = self.mlp(x_normed) + attention_output + x

Against the sequential pre-norm block (``x = x + h; x = x + self.mlp(self.norm_2(x))``) it saves, for one block
of N tokens in 16 bits with every weight trained (``torch.nn.LayerNorm`` keeps its input, its mean and 1/std in
float32; a trained linear keeps its input once, however many read it):

- with one shared norm (Falcon-7B, Phi): no second norm, so no second input (N·d·2), no second mean and 1/std
  (N·8), and the MLP reads the tensor q/k/v already keep (no second N·d·2);
- with two norms (GPT-NeoX, StableLM-alpha): ``norm_2`` reads the block input ``norm_1`` keeps already, so only
  its input (N·d·2) is gone; its mean and 1/std and its own output (the MLP's input) stay.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.catalogue import find_model
from core.dtypes import Autocast, Dtype
from core.errors import PlanError
from core.estimate import estimate
from core.hfconfig import model_from_hf_config
from core.model import ModelSpec, normalise_lora_targets
from core.plan import Hardware, Method, Plan, Preset
from core.presets import plan_for_model
from core.serving.kv import kv_bytes_per_token
from core.training.activations import layer_activations, loss_memory

B, S = 2, 512
N = B * S


def _full_bf16(model_id: str, **model_changes: object) -> Plan:
    """Full fine-tuning with the weights in bf16 and no autocast (litgpt's ``bf16-true``)."""
    plan = plan_for_model(model_id, method=Method.FULL, preset=Preset.PURE_BF16).with_workload(micro_batch=B, seq_len=S)
    return plan.with_changes(model=replace(plan.model, **model_changes)) if model_changes else plan


def _block_bytes(plan: Plan) -> float:
    return float(sum(t.bytes for t in layer_activations(plan, True).items))


def test_a_shared_norm_saves_one_norm_and_one_mlp_input_less_than_a_sequential_block() -> None:
    falcon = _full_bf16("falcon-7b")
    d = falcon.model.hidden_size  # 4,544 (tiiuae/falcon-7b config.json hidden_size)
    assert falcon.model.parallel_residual and falcon.model.norms_per_layer == 1
    sequential = _full_bf16("falcon-7b", parallel_residual=False, norms_per_layer=2)
    # The MLP norm's input (N·d·2), its mean and 1/std (N·8) and its output the MLP keeps (N·d·2).
    assert _block_bytes(sequential) - _block_bytes(falcon) == N * d * 2 + N * 8 + N * d * 2


def test_two_norms_of_the_block_input_keep_that_input_once() -> None:
    neox = _full_bf16("stablelm-base-alpha-3b")
    d = neox.model.hidden_size  # 4,096 (stabilityai/stablelm-base-alpha-3b config.json)
    assert neox.model.parallel_residual and neox.model.norms_per_layer == 2
    sequential = _full_bf16("stablelm-base-alpha-3b", parallel_residual=False)
    assert _block_bytes(sequential) - _block_bytes(neox) == N * d * 2
    labels = [t.label for t in layer_activations(neox, True).items]
    assert "MLP norm: input" not in labels and "MLP norm: mean, 1/std (float32)" in labels


def test_a_cast_copy_of_the_block_input_is_each_norms_own() -> None:
    # bf16 weights under bf16 autocast: layer_norm is on autocast's float32 list, so each norm casts the
    # block input up into a float32 tensor of its own; the second norm's copy is not the first's.
    def trainer(parallel: bool) -> Plan:
        plan = _full_bf16("stablelm-base-alpha-3b", parallel_residual=parallel)
        return plan.with_changes(preset=Preset.CUSTOM, autocast=Autocast.BF16, weight_dtype=Dtype.BF16)

    items = {t.label: t.bytes for t in layer_activations(trainer(True), True).items}
    assert items["MLP norm: input"] == N * 4096 * 4
    assert _block_bytes(trainer(False)) == _block_bytes(trainer(True))


def test_lora_on_the_mlp_of_a_shared_norm_keeps_the_one_tensor_qkv_keep() -> None:
    # LoRA with bf16 adapters on a bf16 base, no dropout: each adapter keeps its input as it is (PEFT casts
    # nothing), and with one shared norm the MLP's adapters read the tensor the q/k/v adapters keep.
    plan = _full_bf16("phi-2").with_changes(method=Method.LORA, adapter_dtype=Dtype.BF16, preset=Preset.CUSTOM)
    plan = plan.with_changes(lora=replace(plan.lora, targets=("q_proj", "v_proj", "up_proj"), dropout=0.0))
    labels = [t.label for t in layer_activations(plan, False).items]
    assert "attention norm output" in labels and "MLP input" not in labels


@pytest.mark.parametrize(
    ("model_id", "count"),
    [
        # dfalbel/gptneox 9d13fbd tests/testthat/test-gptneox.R: 3,637,321,728, "number of parameters in
        # https://huggingface.co/stabilityai/stablelm-base-alpha-3b".
        ("stablelm-base-alpha-3b", 3_637_321_728),
        # HF model-page safetensors counts: microsoft/phi-1_5 1,418,270,720 ("1.42B"), microsoft/phi-2
        # 2,779,683,840 ("2.78B"), each with the head's 51,200 biases.
        ("phi-1_5", 1_418_270_720),
        ("phi-2", 2_779_683_840),
        # tiiuae/falcon-7b: the Hub page's 7,217,189,760 stores the tied head twice; minus 65,024 × 4,544.
        ("falcon-7b", 7_217_189_760 - 65_024 * 4_544),
    ],
)
def test_each_parallel_model_has_its_published_count(model_id: str, count: int) -> None:
    assert find_model(model_id).spec.architecture_params() == count


def test_phi_head_bias_is_counted_and_is_a_tensor_of_its_own() -> None:
    phi = find_model("phi-2").spec
    assert phi.head_bias and phi.head_params() == 51_200 * 2_560 + 51_200
    assert phi.outside_tensors() == replace(phi, head_bias=False).outside_tensors() + 1
    assert sum(phi.outside_tensor_sizes()) + phi.num_layers * sum(phi.layer_tensor_sizes()) == phi.architecture_params()


def test_the_importer_reads_gpt_neox_phi_and_falcon() -> None:
    neox = model_from_hf_config(dict(find_model("stablelm-base-alpha-3b").config))
    assert (neox.family, neox.parallel_residual, neox.norms_per_layer, neox.fused_qkv) == ("gpt_neox", True, 2, True)
    assert (neox.qkv_bias, neox.mlp_bias, neox.gated_mlp, neox.tie_embeddings, neox.head_bias) == (
        True,
        True,
        False,
        False,
        False,
    )
    phi = model_from_hf_config(dict(find_model("phi-2").config))
    assert (phi.parallel_residual, phi.norms_per_layer, phi.fused_qkv, phi.head_bias) == (True, 1, False, True)
    assert (phi.activation, phi.dropout) == ("gelu_new", 0.1)  # microsoft/phi-2 config.json: resid_pdrop 0.1
    falcon = model_from_hf_config(dict(find_model("falcon-7b").config))
    assert (falcon.num_heads, falcon.num_kv_heads, falcon.head_dim) == (71, 1, 64)  # multi_query
    assert (falcon.parallel_residual, falcon.norms_per_layer, falcon.qkv_bias, falcon.tie_embeddings) == (
        True,
        1,
        False,
        True,
    )
    assert falcon.intermediate_size == 4 * 4_544  # FalconConfig.ffn_hidden_size defaults to 4 × hidden
    # A GPT-NeoX config without use_parallel_residual is parallel (GPTNeoXConfig's default); false is sequential.
    sequential = dict(find_model("stablelm-base-alpha-3b").config, use_parallel_residual=False)
    assert not model_from_hf_config(sequential).parallel_residual


def test_the_importer_refuses_what_it_cannot_model() -> None:
    with pytest.raises(PlanError, match="qk_layernorm"):
        model_from_hf_config(dict(find_model("phi-2").config, qk_layernorm=True))
    with pytest.raises(PlanError, match="alibi"):
        model_from_hf_config(dict(find_model("falcon-7b").config, alibi=True))
    with pytest.raises(PlanError, match="parallel_residual"):
        replace(find_model("phi-2").spec, post_norm=True)


def test_falcon_serves_one_kv_head_and_neox_every_head() -> None:
    # tiiuae/falcon-7b: multi_query, one KV head of 64; stablelm-base-alpha-3b: 32 heads of 128.
    assert kv_bytes_per_token(find_model("falcon-7b").spec, 2) == 2 * 32 * 1 * 64 * 2
    assert kv_bytes_per_token(find_model("stablelm-base-alpha-3b").spec, 2) == 2 * 16 * 32 * 128 * 2
    for model_id in ("falcon-7b", "phi-2", "stablelm-base-alpha-3b", "phi-1_5"):
        plan = Plan(model=find_model(model_id).spec, model_id=model_id, hardware=Hardware(gpu="h100-sxm"))
        served = estimate(plan.with_inference(engine="vllm", context=2048)).inference
        assert served.kv_cache_bytes > 0 and served.weights_bytes > 0


def test_training_estimates_and_times_run_for_every_parallel_model() -> None:
    for model_id in ("falcon-7b", "phi-2", "stablelm-base-alpha-3b", "phi-1_5"):
        plan = plan_for_model(model_id, method=Method.LORA, preset=Preset.TRAINER_BF16, checkpointing=True)
        result = estimate(plan.with_changes(hardware=Hardware(gpu="h100-sxm")))
        assert result.peak_bytes > find_model(model_id).spec.architecture_params() * 2
        assert result.compute.step_seconds > 0


def test_a_sequential_model_is_unchanged() -> None:
    llama = _full_bf16("llama-3.2-1b")
    assert not llama.model.parallel_residual
    labels = [t.label for t in layer_activations(llama, True).items]
    assert labels.count("MLP input") == 1 and "MLP norm: 1/rms (float32)" in labels


def test_a_parallel_block_is_a_pre_norm_block() -> None:
    base = find_model("llama-3.2-1b").spec
    with pytest.raises(PlanError, match="parallel_residual"):
        ModelSpec(**{**base.to_dict(), "parallel_residual": True, "norms_per_layer": 4})


def test_the_families_own_projection_names_are_lora_targets() -> None:
    # PEFT targets modules by their names in transformers: GPT-NeoX / Falcon's fused query_key_value and
    # dense_h_to_4h / dense_4h_to_h, Phi's fc1 / fc2 (models/gpt_neox, falcon and phi modeling files).
    assert normalise_lora_targets(["query_key_value"]) == ("q_proj", "k_proj", "v_proj")
    assert normalise_lora_targets(["dense_h_to_4h", "dense_4h_to_h", "dense"]) == ("o_proj", "up_proj", "down_proj")
    assert normalise_lora_targets(["fc1", "fc2"]) == ("up_proj", "down_proj")


def test_litgpt_keeps_the_previous_batchs_shared_4bit_input_once() -> None:
    # bitsandbytes < 0.43.2 keeps every 4-bit layer's input; LitGPT's loop keeps the previous micro-batch's
    # until the next forward returns (core.training.activations._litgpt_stale_inputs). Under Phi's shared
    # norm the q/k/v and MLP inputs are one tensor (litgpt 5895df1 Block.forward: self.mlp(x_normed)).
    def stale(parallel: bool) -> float:
        plan = _full_bf16("phi-1_5", parallel_residual=parallel, norms_per_layer=1 if parallel else 2)
        plan = plan.with_changes(method=Method.QLORA, litgpt=True, bnb_legacy=True)
        return sum(t.bytes for t in loss_memory(plan).forward if t.label.startswith("the previous batch's 4-bit"))

    # Phi-1.5: 24 blocks of width 2,048 (litgpt 8641822 lit_gpt/config.py phi-1_5).
    assert stale(False) - stale(True) == N * 24 * 2_048 * 2
