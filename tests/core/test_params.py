"""Parameter and adapter counts against published figures."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.catalogue import find_model, load_models
from core.errors import PlanError
from core.hfconfig import model_from_hf_config
from core.model import normalise_lora_targets

# Published totals, by model: the `published_params` of resources/models.json, each entry
# citing its source (safetensors index total_size ÷ bytes per parameter, or the count on
# the model card). Spot values restated here so the test fails if the catalogue drifts:
PUBLISHED = {
    "gpt2": 124_439_808,  # transformers GPT2LMHeadModel.num_parameters() (openai-community/gpt2)
    "llama-2-7b": 6_738_415_616,  # meta-llama/Llama-2-7b-hf safetensors metadata
    "llama-3.1-8b": 8_030_261_248,  # index.json total_size 16,060,522,496 B ÷ 2 (bf16)
    "mixtral-8x7b-v0.1": 46_702_792_704,  # mistralai/Mixtral-8x7B-v0.1 model card
    "phi-3-mini-4k-instruct": 3_821_079_552,  # microsoft/Phi-3-mini-4k-instruct model card
}


@pytest.mark.parametrize("entry", load_models(), ids=lambda m: m.id)
def test_every_catalogue_model_within_0_1_percent_of_its_published_count(entry) -> None:  # type: ignore[no-untyped-def]
    assert entry.published_params_source, "each published count names its source"
    # An image-text checkpoint's published count is the whole model's: language model + vision tower. A hybrid
    # recurrent model's count is core.hybrid's exact one (ModelSpec.params_override, test_catalogue_models.py).
    spec = entry.spec
    derived = (spec.total_params() if spec.hybrid is not None else spec.architecture_params()) + spec.vision_params
    assert abs(derived - entry.published_params) / entry.published_params < 1e-3


@pytest.mark.parametrize(("model_id", "count"), PUBLISHED.items())
def test_spot_counts(model_id: str, count: int) -> None:
    assert find_model(model_id).published_params == count
    assert find_model(model_id).spec.architecture_params() == count


def test_catalogue_has_the_families_the_product_promises() -> None:
    models = load_models()
    assert len(models) >= 20
    assert {m.spec.family for m in models} >= {"gpt2", "llama", "mistral", "mixtral", "qwen2", "gemma2", "phi3"}


def test_peft_count_llama2_7b_rank8_q_v() -> None:
    # PEFT's print_trainable_parameters() for Llama-2-7b-hf, LoraConfig(r=8,
    # target_modules=["q_proj", "v_proj"]): "trainable params: 4,194,304".
    spec = find_model("llama-2-7b").spec
    assert spec.lora_params(8, ("q_proj", "v_proj"), False) == 4_194_304


def test_lora_grouped_query_shapes_are_exact() -> None:
    # Llama-3.1-8B: k_proj and v_proj are 4096 → 1024 (8 KV heads × 128).
    spec = find_model("llama-3.1-8b").spec
    per_layer_q = 16 * (4096 + 4096)
    per_layer_k = 16 * (4096 + 1024)
    assert spec.lora_params(16, ("q_proj",), False) == 32 * per_layer_q
    assert spec.lora_params(16, ("k_proj",), False) == 32 * per_layer_k
    # all-linear: q, k, v, o, gate, up, down (PEFT's shorthand excludes the output head).
    all_linear = 32 * 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2 + (4096 + 14336) * 2 + (14336 + 4096))
    assert spec.lora_params(16, ("all-linear",), False) == all_linear


def test_lora_on_fused_gpt2_attention() -> None:
    # GPT-2's c_attn is one 768 → 2304 Conv1D; PEFT with target_modules=["c_attn"], r=8:
    # 12 × 8 × (768 + 2304) = 294,912 trainable parameters.
    spec = find_model("gpt2").spec
    assert spec.lora_params(8, ("c_attn",), False) == 294_912


def test_mixture_of_experts_total_and_active() -> None:
    # Mixtral 8x7B: 46.7B total, about 12.9B active with 2 of 8 experts per token
    # (Jiang et al. 2024, arXiv:2401.04088: "13B active parameters").
    spec = find_model("mixtral-8x7b-v0.1").spec
    assert spec.active_params() == pytest.approx(12.88e9, rel=0.01)


def test_unknown_architecture_is_named() -> None:
    with pytest.raises(PlanError, match="config.model_type"):
        model_from_hf_config({"model_type": "bert", "hidden_size": 768})


def test_missing_key_is_named() -> None:
    with pytest.raises(PlanError, match="config.num_hidden_layers"):
        model_from_hf_config(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "vocab_size": 100,
            }
        )


def test_bad_lora_target_is_named() -> None:
    with pytest.raises(PlanError, match=r"^lora\.targets"):
        normalise_lora_targets(["qq_proj"])


@pytest.mark.parametrize("entry", load_models(), ids=lambda m: m.id)
def test_tensor_sizes_agree_with_the_counts(entry) -> None:  # type: ignore[no-untyped-def]
    """The per-tensor sizes (what bitsandbytes' min_8bit_size is judged on) are the tensors the
    fused-Adam counter counts, and sum to the parameters counted by kind."""
    # A latent-attention model refuses attention biases (DeepSeek's attention_bias sits on q_a / kv_a / o,
    # not modelled): its MLP biases alone.
    biases = {"mlp_bias": True} if entry.spec.latent_attention else {"qkv_bias": True, "o_bias": True, "mlp_bias": True}
    for spec in (entry.spec, replace(entry.spec, **biases)):
        block = spec.layer_tensor_sizes()
        assert (len(block), sum(block)) == (spec.layer_tensors(), spec.layer_params())
        outside = spec.outside_tensor_sizes()
        assert len(outside) == spec.outside_tensors()
        assert sum(outside) == spec.embedding_params() + spec.norm_params() + spec.head_params()


def test_a_kept_count_follows_the_spec_it_was_computed_for() -> None:
    # Llama 2 7B's 6,738,415,616 (safetensors metadata, PUBLISHED above); one more layer adds
    # one layer's parameters. The count is kept on the instance after the first call, so a
    # spec derived with replace() must compute its own, and the kept count must not make two
    # otherwise-equal specs differ.
    spec = find_model("llama-2-7b").spec
    assert spec.architecture_params() == PUBLISHED["llama-2-7b"]
    deeper = replace(spec, num_layers=spec.num_layers + 1)
    assert deeper.architecture_params() == PUBLISHED["llama-2-7b"] + spec.layer_params()
    fresh = replace(spec)
    assert fresh == spec and hash(fresh) == hash(spec)


def test_lora_targets_read_alike_from_a_list_a_tuple_and_a_hostile_list() -> None:
    # PEFT's spellings (q_proj … down_proj, all-linear) in any container; an unhashable entry,
    # as a hostile file can hold, is refused with the field named, not a TypeError.
    assert normalise_lora_targets(["v_proj", "q_proj"]) == normalise_lora_targets(("q_proj", "v_proj"))
    assert normalise_lora_targets(["v_proj", "q_proj"]) == ("q_proj", "v_proj")
    with pytest.raises(PlanError, match="lora.targets"):
        normalise_lora_targets([["q_proj"]])  # type: ignore[list-item]
