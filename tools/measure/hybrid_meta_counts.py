"""Count the parameters of hybrid recurrent models as transformers builds them on the meta device, for
tests/data/hybrid/meta_counts.json (core.hybrid's counts are checked against it in tests/core/test_hybrid.py).
Qwen3.5 / Qwen3.6 ship as image-text checkpoints: those cases ("wrapped") build the whole model with
AutoModelForImageTextToText and record the vision tower's and the language model's shares apart.

Needs torch (the CPU build) and transformers==5.25.0 in one environment, e.g.

    python -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch transformers==5.25.0
    /tmp/torchenv/bin/python tools/measure/hybrid_meta_counts.py tests/data/hybrid/meta_counts.json
"""

from __future__ import annotations

import json
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

# fmt: off
GRANITE_TYPES = ["mamba"] * 5 + ["attention"] + (["mamba"] * 9 + ["attention"]) * 3 + ["mamba"] * 4
CASES = {
  "granite-4.0-h-tiny": ("granitemoehybrid", dict(hidden_size=1536, num_hidden_layers=40, num_attention_heads=12,
      num_key_value_heads=4, intermediate_size=512, shared_intermediate_size=1024, num_local_experts=64,
      num_experts_per_tok=6, vocab_size=100352, tie_word_embeddings=True, mamba_d_state=128, mamba_n_groups=1,
      mamba_n_heads=48, mamba_d_head=64, mamba_expand=2, mamba_d_conv=4, mamba_chunk_size=256,
      max_position_embeddings=131072, layer_types=GRANITE_TYPES, position_embedding_type="nope")),
  "granite-4.0-h-small": ("granitemoehybrid", dict(hidden_size=4096, num_hidden_layers=40, num_attention_heads=32,
      num_key_value_heads=8, intermediate_size=768, shared_intermediate_size=1536, num_local_experts=72,
      num_experts_per_tok=10, vocab_size=100352, tie_word_embeddings=True, mamba_d_state=128, mamba_n_groups=1,
      mamba_n_heads=128, mamba_d_head=64, mamba_expand=2, mamba_d_conv=4, layer_types=GRANITE_TYPES,
      position_embedding_type="nope")),
  "granite-dense-small": ("granitemoehybrid", dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
      num_key_value_heads=2, shared_intermediate_size=1024, num_local_experts=0, num_experts_per_tok=0,
      vocab_size=1000, tie_word_embeddings=False, mamba_d_state=64, mamba_n_groups=2, mamba_n_heads=16,
      mamba_d_head=64, layer_types=["mamba", "attention", "mamba", "mamba"], mamba_proj_bias=True,
      attention_bias=True, mamba_conv_bias=False)),
  "nemotron-nano-9b-v2": ("nemotron_h", dict(hidden_size=4480, num_hidden_layers=56, intermediate_size=15680,
      num_attention_heads=40, num_key_value_heads=8, head_dim=128, vocab_size=131072,
      hybrid_override_pattern="M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-", ssm_state_size=128,
      conv_kernel=4, n_groups=8, mamba_num_heads=128, mamba_head_dim=80, tie_word_embeddings=False)),
  "nemotron_h-default": ("nemotron_h", dict()),
  "qwen3-next-80b-a3b": ("qwen3_next", dict(hidden_size=2048, num_hidden_layers=48, num_attention_heads=16,
      num_key_value_heads=2, head_dim=256, linear_conv_kernel_dim=4, linear_key_head_dim=128,
      linear_value_head_dim=128, linear_num_key_heads=16, linear_num_value_heads=32, num_experts=512,
      num_experts_per_tok=10, moe_intermediate_size=512, shared_expert_intermediate_size=512, vocab_size=151936,
      intermediate_size=5120, full_attention_interval=4, tie_word_embeddings=False)),
  "falcon_h1-default": ("falcon_h1", dict()),
  "falcon-h1-1.5b-dims": ("falcon_h1", dict(hidden_size=2048, num_hidden_layers=24, intermediate_size=4608,
      num_attention_heads=8, num_key_value_heads=2, head_dim=128, vocab_size=65537, mamba_d_state=256,
      mamba_d_conv=4, mamba_n_groups=1, mamba_n_heads=48, mamba_d_head=64, mamba_d_ssm=3072,
      mamba_rms_norm=True, projectors_bias=True, mamba_proj_bias=True, attention_bias=True, mlp_bias=True,
      tie_word_embeddings=False)),
  "bamba-9b": ("bamba", dict(hidden_size=4096, num_hidden_layers=32, attn_layer_indices=[9, 18, 27],
      num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336, vocab_size=128256,
      mamba_n_heads=128, mamba_d_head=64, mamba_d_state=128, mamba_n_groups=1, mamba_expand=2, mamba_d_conv=4,
      tie_word_embeddings=False)),
}
QWEN35_VISION = dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, in_channels=3, patch_size=16,
    spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=2304)
QWEN35_TEXT = dict(vocab_size=248320, head_dim=256, linear_conv_kernel_dim=4, linear_key_head_dim=128,
    linear_value_head_dim=128, linear_num_key_heads=16, full_attention_interval=4, max_position_embeddings=262144,
    tie_word_embeddings=False, mamba_ssm_dtype="float32")
WRAPPED = {
  "qwen3.5-27b": ("qwen3_5", dict(QWEN35_TEXT, hidden_size=5120, num_hidden_layers=64, intermediate_size=17408,
      num_attention_heads=24, num_key_value_heads=4, linear_num_value_heads=48),
      dict(QWEN35_VISION, out_hidden_size=5120)),
  "qwen3.5-9b": ("qwen3_5", dict(QWEN35_TEXT, hidden_size=4096, num_hidden_layers=32, intermediate_size=12288,
      num_attention_heads=16, num_key_value_heads=4, linear_num_value_heads=32),
      dict(QWEN35_VISION, out_hidden_size=4096)),
  "qwen3.5-35b-a3b": ("qwen3_5_moe", dict(QWEN35_TEXT, hidden_size=2048, num_hidden_layers=40, num_attention_heads=16,
      num_key_value_heads=2, linear_num_value_heads=32, num_experts=256, num_experts_per_tok=8,
      moe_intermediate_size=512, shared_expert_intermediate_size=512), dict(QWEN35_VISION, out_hidden_size=2048)),
  "qwen3_5-small-tied": ("qwen3_5", dict(vocab_size=1000, hidden_size=256, num_hidden_layers=6, intermediate_size=512,
      num_attention_heads=4, num_key_value_heads=2, head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4,
      linear_key_head_dim=32, linear_value_head_dim=48, linear_conv_kernel_dim=3,
      layer_types=["linear_attention", "full_attention"] * 3, tie_word_embeddings=True),
      dict(depth=2, hidden_size=128, intermediate_size=256, num_heads=4, out_hidden_size=256,
           num_position_embeddings=64)),
  "qwen3_5_moe-default": ("qwen3_5_moe", dict(), dict()),
}
# fmt: on


def wrapped_case(model_type: str, text: dict, vision: dict) -> dict:
    """One image-text checkpoint: the whole model, its tower's share (everything outside model.language_model and
    lm_head) with the nn.Linear weights among them, and the language model's share."""
    tie = text.get("tie_word_embeddings", False)
    cfg = AutoConfig.for_model(model_type, text_config=text, vision_config=vision, tie_word_embeddings=tie)
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(cfg)
    whole = sum(p.numel() for p in model.parameters())
    tower = linear = 0
    for name, module in model.named_modules():
        if not name.startswith("model.visual"):
            continue
        own = sum(p.numel() for p in module.parameters(recurse=False))
        tower += own
        if isinstance(module, torch.nn.Linear):
            linear += module.weight.numel()
    built = cfg.to_dict()
    config = {k: v for k, v in built.items() if k not in ("text_config", "vision_config")}
    config["text_config"] = {k: v for k, v in built["text_config"].items() if k != "layer_types"} | text
    config["text_config"]["layer_types"] = list(built["text_config"]["layer_types"])
    config["vision_config"] = built["vision_config"] | vision
    config["model_type"] = model_type
    return {"config": config, "whole": whole, "tower": tower, "linear": linear, "text": whole - tower}


def main(target: str) -> None:
    out = {}
    for name, (model_type, overrides) in CASES.items():
        cfg = AutoConfig.for_model(model_type, **overrides)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(cfg)
        whole = sum(p.numel() for p in model.parameters())
        built = cfg.to_dict()
        # The input config.json as written: the class defaults with the overrides, spelled as given.
        config = {k: v for k, v in built.items() if k not in ("layer_types", "layers_block_type")}
        config.update(overrides)
        config["model_type"] = model_type
        if model_type == "nemotron_h" and "hybrid_override_pattern" not in overrides:
            config["layers_block_type"] = list(built.get("layers_block_type") or built.get("layer_types"))
        if model_type == "granitemoehybrid" and "layer_types" not in overrides:
            config["layer_types"] = list(built["layer_types"])
        out[name] = {"config": config, "whole": whole}
        print(name, whole, file=sys.stderr)
    wrapped = {}
    for name, (model_type, text, vision) in WRAPPED.items():
        wrapped[name] = wrapped_case(model_type, text, vision)
        print(name, wrapped[name]["whole"], wrapped[name]["tower"], file=sys.stderr)
    doc = {
        "source": SOURCE,
        "cases": out,
        "wrapped_source": WRAPPED_SOURCE,
        "wrapped": wrapped,
    }
    with open(target, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=1, sort_keys=True)


SOURCE = (
    f"huggingface/transformers {transformers.__version__} (torch {torch.__version__} CPU): for each case "
    "AutoConfig.for_model(model_type, **overrides); with torch.device('meta'): "
    "AutoModelForCausalLM.from_config(config); "
    "whole = every parameter's numel. 'config' is the class defaults with the overrides as config.json spells them. "
    "Overrides: granite-4.0-h-tiny / -h-small, nemotron-nano-9b-v2 and qwen3-next-80b-a3b take the dimensions of "
    "huggingface.co/ibm-granite/granite-4.0-h-tiny, ibm-granite/granite-4.0-h-small, nvidia/NVIDIA-Nemotron-Nano-9B-v2 "
    "and Qwen/Qwen3-Next-80B-A3B-Instruct config.json; bamba-9b ibm-ai-platform/Bamba-9B's; granite-dense-small is a "
    "made-up dense Granite with biases on; falcon-h1-1.5b-dims takes the Falcon-H1 widths a public test "
    "copies (24 layers, hidden 2,048, mamba_d_ssm 3,072, 48 SSM heads of 64, state 256) with every bias "
    "and the gated norm switched on to exercise them; falcon_h1-default and nemotron_h-default are the "
    "class defaults (Nemotron-H's with a MoE layer in layers_block_type)."
)

WRAPPED_SOURCE = (
    f"huggingface/transformers {transformers.__version__} (torch {torch.__version__} CPU): for each case "
    "AutoConfig.for_model(model_type, text_config=text, vision_config=vision, tie_word_embeddings=text's); with "
    "torch.device('meta'): AutoModelForImageTextToText.from_config(config); whole = every parameter's numel, "
    "tower = the parameters under model.visual, linear = the nn.Linear weights among them, text = whole - tower. "
    "'config' is the class defaults with the overrides. Overrides: qwen3.5-27b, qwen3.5-9b and qwen3.5-35b-a3b take "
    "the text and vision dimensions of Qwen/Qwen3.5-27B, Qwen/Qwen3.5-9B and Qwen/Qwen3.5-35B-A3B (= Qwen3.6-35B-A3B) "
    "config.json; qwen3_5-small-tied is a made-up small model with a tied head and its own layer_types; "
    "qwen3_5_moe-default is the config classes' defaults."
)


if __name__ == "__main__":
    main(sys.argv[1])
