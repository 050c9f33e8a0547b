"""The residual stream of a freeze run whose trained blocks are cast to float32, under bf16 autocast (issue 22 item 4).

LLaMA-Factory casts the trained blocks of a freeze run to float32 (v0.9.4 model/adapter.py ``_setup_freeze_tuning``;
v1 ``get_freeze_model``); the frozen blocks, the embedding, the final norm and the head stay as loaded (bf16). This
builds a small Llama (transformers' ``LlamaForCausalLM``, random weights, nothing downloaded) that way, runs one
forward under ``torch.autocast(dtype=torch.bfloat16)`` on the CPU with ``saved_tensors_hooks``, and prints, per
decoder layer, the dtype of its input and output hidden states and the bytes autograd keeps, by dtype, beside the
same run of an all-float32 model (the plan's "mixed" mode, which the planner applies to the freeze plan today).

    .venv-measure/bin/python -m tools.measure.freeze_cast_residual

Only the layers above the frozen ones keep anything: nothing below them needs a gradient.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any

import torch

LAYERS, TRAINED = 4, 2
CONFIG: dict[str, Any] = {
    "model_type": "llama", "vocab_size": 256, "hidden_size": 128, "intermediate_size": 352, "num_hidden_layers": LAYERS,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256, "tie_word_embeddings": False,
}  # fmt: skip
BATCH, SEQ = 2, 64


def _model(cast_trained: bool, dtype: torch.dtype) -> torch.nn.Module:
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    config = AutoConfig.for_model(**CONFIG)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=dtype)
    for p in model.parameters():
        p.requires_grad_(False)
    for block in model.model.layers[LAYERS - TRAINED :]:
        for p in block.parameters():
            p.requires_grad_(True)
            if cast_trained:
                p.data = p.data.to(torch.float32)  # LLaMA-Factory: param.data = param.data.to(torch.float32)
    return model


def _run(model: torch.nn.Module) -> dict[str, Any]:
    """Per layer: input / output dtype and the saved bytes by dtype (each storage counted once)."""
    current = {"layer": "outside"}
    saved: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    seen: set[int] = set()
    dtypes: dict[str, tuple[str, str]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = t.untyped_storage().data_ptr()
        if key not in seen and not isinstance(t, torch.nn.Parameter):
            seen.add(key)
            saved[current["layer"]][str(t.dtype).removeprefix("torch.")] += t.untyped_storage().nbytes()
        return t

    def before(index: int):  # type: ignore[no-untyped-def]
        def hook(_m: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            current["layer"] = f"layer {index}"
            hidden = args[0] if args else kwargs["hidden_states"]
            dtypes[current["layer"]] = (str(hidden.dtype).removeprefix("torch."), "")

        return hook

    def after(index: int):  # type: ignore[no-untyped-def]
        def hook(_m: torch.nn.Module, _args: Any, output: Any) -> None:
            out = output[0] if isinstance(output, tuple) else output
            name = f"layer {index}"
            dtypes[name] = (dtypes[name][0], str(out.dtype).removeprefix("torch."))
            current["layer"] = "outside"

        return hook

    for i, layer in enumerate(model.model.layers):
        layer.register_forward_pre_hook(before(i), with_kwargs=True)
        layer.register_forward_hook(after(i))
    ids = torch.randint(0, CONFIG["vocab_size"], (BATCH, SEQ))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return {"dtypes": dtypes, "saved": {k: dict(v) for k, v in saved.items()}}


def main() -> int:
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}; Llama {CONFIG['hidden_size']} wide,")
    width = BATCH * SEQ * CONFIG["hidden_size"]
    print(f"{LAYERS} layers (top {TRAINED} trained), batch {BATCH} x {SEQ}; N·d = {width}")
    runs = {
        "LLaMA-Factory freeze (bf16 model, trained blocks cast to float32)": _model(True, torch.bfloat16),
        "all-float32 model (the plan's 'mixed' mode)": _model(False, torch.float32),
    }
    for title, model in runs.items():
        result = _run(model)
        print(f"\n{title}")
        for layer in sorted(result["dtypes"]):
            inp, out = result["dtypes"][layer]
            kept = result["saved"].get(layer, {})
            total = sum(kept.values())
            print(f"  {layer}: input {inp}, output {out}; saved {total:,} B {dict(sorted(kept.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
