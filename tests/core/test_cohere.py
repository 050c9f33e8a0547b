"""Command R (``cohere``) and Command R7B / A (``cohere2``) read from config.json.

Every count is transformers 5.25.0's own, the model built on the meta device (tests/data/arch/meta_counts.json,
its "source" says how). The norm's saved bytes are torch 2.13.0's (CPU): CohereLayerNorm run on a bf16 input of
1,024 × 512 under ``torch.autograd.graph.saved_tensors_hooks``, the distinct storages it keeps summed: two float32
tensors of the input's shape (8 bytes an element) and 1/std (4 bytes a row) with the weight
frozen, a third float32 tensor (the normalised value, 12 bytes an element) when the weight trains. Compiled
(torch.compile, inductor, the same count): the bf16 input itself and two float32 row statistics (mean, 1/std).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.catalogue import find_model
from core.errors import PlanError
from core.estimate import estimate
from core.files.measurement import load_measurement, plan_for_case
from core.hfconfig import model_from_hf_config
from core.inputs import Stack
from core.model import ModelSpec, model_from_dict
from core.parallel.layout import block_params_per_rank
from core.plan import Method
from core.presets import default_plan
from core.serving.kv import cached_positions, kv_bytes_per_token, kv_cache_bytes
from core.serving.vllm_rules import KvGroups, vllm_blocks_per_request, vllm_kv_groups
from core.training.activations import layer_activations, outside_blocks

_COUNTS = Path(__file__).parents[1] / "data" / "arch" / "meta_counts.json"
META: dict[str, Any] = json.loads(_COUNTS.read_text("utf-8"))["cases"]
COHERE_CASES = ("cohere-default", "cohere-qk-norm", "cohere2-default", "cohere2-command-r7b")


def _r7b(**overrides: Any) -> ModelSpec:
    """The catalogue's Command R7B (resources/models.json: config.json's sliding_window_pattern 4, no layer_types)."""
    entry = find_model("command-r7b")
    assert entry is not None
    return model_from_hf_config({**entry.config, **overrides})


@pytest.mark.parametrize("case", COHERE_CASES)
def test_every_parameter_and_tensor_is_the_library_count(case: str) -> None:
    entry = META[case]
    spec = model_from_hf_config(entry["config"])
    assert spec.architecture_params() == entry["whole"]
    # tensors: weights and norms apart, the tied head none (CohereForCausalLM.lm_head shares embed_tokens.weight).
    assert spec.num_layers * len(spec.layer_tensor_sizes()) + len(spec.outside_tensor_sizes()) == entry["tensors"]


def test_command_r7b_is_a_parallel_block_with_one_weight_only_layernorm_and_a_tied_head() -> None:
    spec = _r7b()
    # meta_counts case cohere2-command-r7b (its config written by transformers with layer_types): 8,028,033,024,
    # the Hub's 8.03B; the catalogue's config.json (sliding_window_pattern) builds the same spec.
    assert spec.architecture_params() == META["cohere2-command-r7b"]["whole"] == 8_028_033_024
    assert model_from_hf_config(META["cohere2-command-r7b"]["config"]) == replace(spec, name="cohere2")
    assert (spec.norm, spec.norms_per_layer, spec.parallel_residual) == ("layernorm_nobias", 1, True)
    assert spec.tie_embeddings and spec.head_params() == 0
    # Each CohereLayerNorm: one weight of hidden_size (4,096), no bias: 32 blocks + the final norm.
    assert spec.norm_params() == 4_096
    assert (spec.qkv_bias, spec.o_bias, spec.mlp_bias, spec.gated_mlp) == (False, False, False, True)


def test_command_r7b_windows_three_layers_in_four() -> None:
    # config.json: sliding_window 4,096, sliding_window_pattern 4 (Cohere2Config: layer i is full when (i + 1) % 4
    # is 0): 8 full layers, 24 windowed.
    spec = _r7b()
    assert (spec.sliding_window, spec.sliding_window_layers) == (4_096, 24)
    # K and V, 8 KV heads × 128, bf16: 2 × 8 × 128 × 2 = 4,096 B a layer-position; 32 layers: 131,072 B a token.
    assert kv_bytes_per_token(spec, 2) == 32 * 4_096
    # 16,384 tokens: 24 × 4,096 + 8 × 16,384 = 229,376 positions; × 4,096 B = 939,524,096 B (896 MiB).
    assert cached_positions(spec, 16_384) == 229_376
    assert kv_cache_bytes(spec, 16_384, 1, 2) == 939_524_096


def test_vllm_groups_command_r7b_as_it_groups_gemma_windows() -> None:
    # 8 full, 24 windowed layers: groups of 8 (core.serving.vllm_rules.vllm_kv_groups), one full and three windowed.
    groups = vllm_kv_groups(_r7b(), 32)
    assert groups == KvGroups(size=8, full=1, windowed=3, window=4_096)
    # A 16,384-token request, 2,048 tokens a step, 16-token blocks: the full group cdiv(16,384, 16) = 1,024; each
    # windowed group cdiv(min(16,384, 4,095 + 2,048), 16) + 1 = 384 + 1 = 385: 1,024 + 3 × 385 = 2,179 blocks.
    assert vllm_blocks_per_request(groups, 16_384, 2_048, 16) == 2_179


def test_layer_types_and_a_null_window_decide_as_transformers_does() -> None:
    # layer_types overrides the pattern (Cohere2Config.__post_init__ builds it only when absent).
    listed = ["sliding_attention", "full_attention"] * 16
    assert _r7b(layer_types=listed).sliding_window_layers == 16
    assert _r7b(layer_types=["full_attention"] * 32).sliding_window is None
    # Cohere2Attention.sliding_window = config.sliding_window: null leaves every layer full.
    assert _r7b(sliding_window=None).sliding_window is None
    # sliding_window_pattern 1: (i + 1) % 1 is 0 for every layer, every layer full.
    assert _r7b(sliding_window_pattern=1).sliding_window is None
    # Command R (cohere) has no window at all.
    assert model_from_hf_config(META["cohere-default"]["config"]).sliding_window is None


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"sliding_window_pattern": "LLLG"}, "config.sliding_window_pattern"),  # (i + 1) % "LLLG" fails in transformers
        ({"sliding_window_pattern": 0}, "config.sliding_window_pattern"),
        ({"layer_types": ["sliding_attention"] * 3}, "config.layer_types"),  # 3 entries for 32 layers
    ],
)
def test_a_window_layout_transformers_cannot_build_is_refused(overrides: dict[str, Any], key: str) -> None:
    with pytest.raises(PlanError, match=key):
        _r7b(**overrides)


def test_command_r_plus_qk_norms_have_a_weight_for_every_head() -> None:
    # CohereAttention.q_norm = CohereLayerNorm((num_heads, head_dim)), k_norm over (num_key_value_heads, head_dim) when
    # use_qk_norm: CohereConfig's defaults, 64 heads and 64 KV heads of 128, 40 layers: 40 × (8,192 + 8,192) = 655,360
    # parameters more than without (meta_counts cohere-qk-norm 34,981,486,592 − cohere-default 34,980,831,232).
    spec = model_from_hf_config(META["cohere-qk-norm"]["config"])
    assert spec.qk_norm == "per_head" and spec.qk_norm_params() == 2 * 64 * 128
    without = model_from_hf_config(META["cohere-default"]["config"])
    assert spec.architecture_params() - without.architecture_params() == 40 * 16_384
    # vLLM shards them with the heads: CohereAttention builds LayerNorm(param_shape=(self.num_heads, head_dim)) with the
    # rank's heads (vllm-project/vllm 1f7c5555 vllm/model_executor/models/commandr.py); only the block's one norm
    # (8,192) stays whole on each of 2 tensor-parallel ranks.
    assert block_params_per_rank(spec, 2) == 8_192 + (spec.layer_params() - 8_192) / 2
    # Each head normalised over its 128 values, as CohereLayerNorm does (rows N·H): full fine-tuning, 4 × 2,048 tokens.
    plan = default_plan().with_changes(model=spec, method=Method.FULL)
    kept = {t.label: t.bytes for t in layer_activations(plan, trainable_block=True).items}
    n = 4 * 2_048
    assert kept["q norm: input minus its mean, twice (float32)"] == 2 * n * 64 * 128 * 4
    assert kept["q norm: 1/std (float32)"] == n * 64 * 4
    assert kept["q norm: normalised (float32)"] == n * 64 * 128 * 4


def _plan(method: Method) -> Any:
    return default_plan().with_changes(model=_r7b(), method=method)  # micro-batch 4 × 2,048 tokens, bf16


N, D = 4 * 2_048, 4_096  # the default plan's micro-batch × sequence, Command R7B's width


def test_the_norm_keeps_two_float32_centred_copies_and_the_normalised_value_when_its_weight_trains() -> None:
    full = {t.label: t.bytes for t in layer_activations(_plan(Method.FULL), trainable_block=True).items}
    # torch 2.13 saved_tensors_hooks (this module's docstring): 12 B an element with the weight trained, 4 B a row.
    assert full["attention norm: input minus its mean, twice (float32)"] == 2 * N * D * 4
    assert full["attention norm: normalised (float32)"] == N * D * 4
    assert full["attention norm: 1/std (float32)"] == N * 4
    lora = {t.label: t.bytes for t in layer_activations(_plan(Method.LORA), trainable_block=False).items}
    # The weight frozen: 8 B an element, no normalised copy.
    assert lora["attention norm: input minus its mean, twice (float32)"] == 2 * N * D * 4
    assert "attention norm: normalised (float32)" not in lora
    # The final norm (CohereModel.norm) keeps the same; its weight trains only in full fine-tuning.
    outside = {t.label: t.bytes for t in outside_blocks(_plan(Method.FULL)).items}
    assert outside["final norm: input minus its mean, twice (float32)"] == 2 * N * D * 4
    assert outside["final norm: normalised (float32)"] == N * D * 4


def test_compiled_the_norm_keeps_its_input_and_two_row_statistics() -> None:
    plan = _plan(Method.FULL).with_changes(stack=Stack.COMPILE)
    kept = {t.label: t.bytes for t in layer_activations(plan, trainable_block=True).items}
    norm = {label: b for label, b in kept.items() if label.startswith("attention norm:")}
    # torch 2.13 inductor (this module's docstring): the bf16 input, N·d × 2, and mean and 1/std, 2 × N × 4.
    assert sorted(norm.values()) == [2 * N * 4, N * D * 2]


def test_the_norm_kind_travels_in_plan_files_and_refuses_the_lplayernorm_flag() -> None:
    spec = _r7b()
    assert model_from_dict(spec.to_dict()) == spec
    with pytest.raises(PlanError, match="model.low_precision_layernorm"):
        replace(spec, low_precision_layernorm=True)
    with pytest.raises(PlanError, match="model.norm"):
        replace(spec, norm="layernorm_no_weight")


_MEASURED = sorted((Path(__file__).parents[1] / "data" / "arch" / "measured").glob("*.json"))


@pytest.mark.parametrize("path", _MEASURED, ids=lambda p: p.stem)
def test_a_whole_training_step_is_the_fake_cuda_measurement(path: Path) -> None:
    # tests/data/arch/measured: python -m tools.measure --backend fake-cuda (torch 2.13.0 CPU build, transformers
    # 5.25.0), run 2026-12-06 on branch h63arch, on the catalogue's command-r7b: full fine-tuning in bf16 with SGD,
    # SDPA, micro-batch 2 × 2,048 tokens, with and without checkpointing; peak allocated bytes in step 1's backward.
    measured = load_measurement(path)
    config = json.loads(path.read_text("utf-8"))["model_config"]
    result = estimate(plan_for_case(measured.case, config))
    assert (measured.peak_phase, result.peak_phase) == ("backward", "backward")
    error = abs(result.tensor_peak_bytes - measured.peak_allocated_bytes) / measured.peak_allocated_bytes
    assert error < 1e-4  # 1.7 MB of 54.1 GB and 35 kB of 36.3 GB when recorded
