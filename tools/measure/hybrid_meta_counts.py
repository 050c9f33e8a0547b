"""Count the parameters of hybrid recurrent models as transformers builds them on the meta device, for
tests/data/hybrid/meta_counts.json (core.hybrid's counts are checked against it in tests/core/test_hybrid.py).

Needs torch (the CPU build) and transformers==5.25.0 in one environment, e.g.

    python -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch transformers==5.25.0
    /tmp/torchenv/bin/python tools/measure/hybrid_meta_counts.py tests/data/hybrid/meta_counts.json
"""

from __future__ import annotations

import json
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

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
# fmt: on


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
    doc = {
        "source": SOURCE,
        "cases": out,
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


if __name__ == "__main__":
    main(sys.argv[1])
