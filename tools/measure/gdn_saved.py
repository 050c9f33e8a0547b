"""What one Gated DeltaNet layer (or a Qwen3-Next / Qwen3.5 gated attention layer) keeps for the backward on
transformers' torch path, tensor by tensor (core.training.gdn).

    python tools/measure/gdn_saved.py tiny-qwen3.5 [--frozen] [--batch 2] [--seq 1024] [--attention]
    python tools/measure/gdn_saved.py tiny-qwen3-next --backward      # the backward's transient (CPU, bf16)

The config is benchmarks/accuracy/configs/<name>.json (a qwen3_5 wrapper is read from its text_config). Saved
tensors: the mixer alone (Qwen3NextGatedDeltaNet / Qwen3_5GatedDeltaNet, no cache, training mode, the input
needing a gradient; ``--attention``: Qwen3NextAttention / Qwen3_5Attention with its rotary embedding) runs under
torch.autograd.graph.saved_tensors_hooks on fake CUDA tensors (tools.measure's fake_cuda), twice: 16-bit weights
without autocast, then float32 weights under bf16 autocast. Each storage is listed once; the layer's own
parameters are left out, the input and the autocast weight casts are listed. ``--frozen``: the weights need no
gradient (LoRA's frozen base). ``--backward``: the live storage bytes (live_bytes.LiveBytes) over the mixer's
backward on real CPU tensors in bf16, above what the forward left.

Run with the measuring environment's python (torch 2.13.0 CPU, transformers 5.25.0, without
flash-linear-attention or causal-conv1d, so the layer runs torch_chunk_gated_delta_rule and F.conv1d).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))


def _layer(name: str, attention: bool) -> tuple[Any, Any, Any]:
    """(config, layer class, rotary class) of the named config's text decoder."""
    from transformers import CONFIG_MAPPING

    doc = json.loads((REPO / "benchmarks" / "accuracy" / "configs" / f"{name}.json").read_text())
    doc = doc.get("text_config", doc)
    model_type = doc.pop("model_type")
    config = CONFIG_MAPPING[model_type](**doc)
    config._attn_implementation = "sdpa"
    if model_type == "qwen3_next":
        from transformers.models.qwen3_next import modeling_qwen3_next as mod

        names = ("Qwen3NextAttention", "Qwen3NextGatedDeltaNet", "Qwen3NextRotaryEmbedding")
    else:
        from transformers.models.qwen3_5 import modeling_qwen3_5 as mod

        names = ("Qwen3_5Attention", "Qwen3_5GatedDeltaNet", "Qwen3_5TextRotaryEmbedding")
    cls = getattr(mod, names[0] if attention else names[1])
    return config, cls, getattr(mod, names[2])


def _index(config: Any, attention: bool) -> int:
    kind = "full_attention" if attention else "linear_attention"
    return list(config.layer_types).index(kind)


def _run(layer: Any, rotary: Any, x: Any, attention: bool) -> Any:
    import torch

    if not attention:
        return layer(x)
    b, s = x.shape[:2]
    positions = torch.arange(s, device=x.device).unsqueeze(0).expand(b, s)
    if "Qwen3_5" in type(rotary).__name__:
        positions = positions.unsqueeze(0).expand(3, b, s)  # mrope: text positions on all three axes
    cos, sin = rotary(x, positions)
    return layer(x, (cos, sin), None)[0]


def saved(name: str, b: int, s: int, frozen: bool, autocast: bool, attention: bool) -> int:
    """The saved storages of one forward, printed; returns their bytes (the parameters left out)."""
    from tools.measure.mamba_saved import record_saved

    config, cls, rotary_cls = _layer(name, attention)
    how = "float32 weights, bf16 autocast" if autocast else "bf16 weights"
    what = "attention" if attention else "Gated DeltaNet"
    label = f"{name} {what} B={b} S={s} {how}{' frozen' if frozen else ''}"

    def make() -> tuple[Any, tuple[Any, ...]]:
        return cls(config, _index(config, attention)), (rotary_cls(config),)

    def run(layer: Any, x: Any, rotary: Any) -> Any:
        return _run(layer, rotary, x, attention)

    return record_saved(make, run, (b, s, config.hidden_size), frozen, autocast, label)


def backward(name: str, b: int, s: int, frozen: bool, attention: bool) -> int:
    import torch

    sys.path.insert(0, str(HERE))
    from live_bytes import LiveBytes

    config, cls, rotary_cls = _layer(name, attention)
    layer = cls(config, _index(config, attention)).to(torch.bfloat16)
    rotary = rotary_cls(config)
    for p in layer.parameters():
        p.requires_grad_(not frozen)
    x = torch.randn(b, s, config.hidden_size, dtype=torch.bfloat16, requires_grad=True)
    mode = LiveBytes()
    with mode:
        y = _run(layer, rotary, x, attention)
        start = mode.live
        mode.peak = start
        y.backward(torch.ones_like(y))
    rise = mode.peak - start
    print(f"{name} B={b} S={s}{' frozen' if frozen else ''}: {rise:,} B over the forward's {start:,} B")
    return rise


def main(argv: list[str] | None = None) -> int:
    from tools.measure.mamba_saved import parser

    ap = parser(__doc__, "a benchmarks/accuracy/configs name: tiny-qwen3-next, tiny-qwen3.5")
    ap.add_argument("--attention", action="store_true", help="the gated attention layer instead")
    args = ap.parse_args(argv)
    if args.backward:
        backward(args.config, args.batch, args.seq, args.frozen, args.attention)
        return 0
    from tools.measure import fake_cuda

    fake_cuda.preload()
    for autocast in (False, True):
        saved(args.config, args.batch, args.seq, args.frozen, autocast, args.attention)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
