"""What PEFT's ``modules_to_save`` and ``trainable_token_indices`` add to a LoRA run, on CPU, to the byte.

A tiny Llama (vocabulary 1,000, width 64, 2 blocks) loaded in bfloat16, LoRA on q_proj / v_proj (r 8) and, beside
it, each option of huggingface/peft 51c2ff66 (``ModulesToSaveWrapper`` in src/peft/utils/other.py: the original
module kept frozen beside a ``copy.deepcopy`` that trains; ``TrainableTokensLayer`` in src/peft/tuners/
trainable_tokens/layer.py: a k × d delta plus a k × d buffer of the original rows, and in the forward
``W.index_copy(0, index, delta)``, a merged copy of the whole matrix). For each case it prints:

- trainable parameters and their bytes by dtype, and every parameter's and buffer's bytes by dtype (what stays
  on the device: the frozen original beside the copy);
- the bytes one forward saves for backward (``torch.autograd.graph.saved_tensors_hooks``), each storage once,
  storages that are parameters left out (they are resident anyway);
- the bytes of the gradients one backward leaves on the trained tensors, and of torch.optim.AdamW's m and v after
  one step (``torch.zeros_like(param)``: the copy's dtype);

and each case's difference from plain LoRA next to the planner's rule for it (core/training/extra_trained.py).
Needs torch, transformers and peft (not the planner's environment):
    /tmp/torchenv/bin/python tools/measure/modules_to_save_check.py [--tokens 32]
Measured with torch 2.13.0+cpu, transformers 5.25.0, peft 0.18.0; quoted in tests/core/test_extra_trained.py.
"""

from __future__ import annotations

import argparse
import collections
from typing import Any

import torch

VOCAB, WIDTH = 1000, 64
_CASES: dict[str, dict[str, Any]] = {
    "lora": {},
    "tied-lora": {"tied": True},
    "embed": {"modules_to_save": ["embed_tokens"]},
    "head": {"modules_to_save": ["lm_head"]},
    "both": {"modules_to_save": ["embed_tokens", "lm_head"]},
    "tied-both": {"modules_to_save": ["embed_tokens", "lm_head"], "tied": True},
    "tied-embed": {"modules_to_save": ["embed_tokens"], "tied": True},
    "tied-embed-ensure": {"modules_to_save": ["embed_tokens"], "tied": True, "ensure_weight_tying": True},
    "tied-both-ensure": {"modules_to_save": ["embed_tokens", "lm_head"], "tied": True, "ensure_weight_tying": True},
    "tokens2": {"trainable_token_indices": [0, 1]},
    "tied-tokens2": {"trainable_token_indices": [0, 1], "tied": True},
}


def _model(tied: bool) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=WIDTH,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=tied,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(config).to(torch.bfloat16)


def _peft(case: dict[str, Any]) -> Any:
    import peft.tuners.lora.torchao as peft_torchao
    from peft import LoraConfig, get_peft_model

    # torchao 0.18 no longer has the class peft 0.18's torchao dispatcher imports; no base here is torchao's.
    peft_torchao.is_torchao_available = lambda: False

    options = {k: v for k, v in case.items() if k != "tied"}
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], lora_dropout=0.0, **options)
    return get_peft_model(_model(bool(case.get("tied"))), config)


def _by_dtype(tensors: Any) -> dict[str, int]:
    out: collections.Counter[str] = collections.Counter()
    seen: set[int] = set()
    for t in tensors:
        if t.untyped_storage().data_ptr() in seen:
            continue
        seen.add(t.untyped_storage().data_ptr())
        out[str(t.dtype).removeprefix("torch.")] += t.numel() * t.element_size()
    return dict(out)


def measure(name: str, tokens: int) -> dict[str, Any]:
    model = _peft(_CASES[name])
    params = list(model.parameters())
    resident = {p.untyped_storage().data_ptr() for p in params}
    trained = [p for p in params if p.requires_grad]
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in resident and t.device.type != "meta":
            saved[ptr] = t.untyped_storage().nbytes()
        return t

    ids = torch.randint(2, VOCAB, (1, tokens))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer = torch.optim.AdamW(trained, foreach=False)
    optimizer.step()
    state = [t for st in optimizer.state.values() for t in st.values() if t.dim() > 0]  # m, v (not the step)
    return {
        "state": sum(t.numel() * t.element_size() for t in state),
        "trainable": sum(p.numel() for p in trained),
        "trainable_bytes": _by_dtype(trained),
        "resident": _by_dtype([*params, *model.buffers()]),
        "saved": sum(saved.values()),
        "grads": sum(p.grad.numel() * p.grad.element_size() for p in trained if p.grad is not None),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args(argv)
    base, base_tied = measure("lora", args.tokens), measure("tied-lora", args.tokens)
    for name in _CASES:
        got = measure(name, args.tokens)
        ref = base_tied if _CASES[name].get("tied") else base
        print(
            f"{name:18s} trainable {got['trainable']:>8,} ({got['trainable'] - ref['trainable']:+,})"
            f"  trained bytes {got['trainable_bytes']}  resident {got['resident']}"
            f"  saved {got['saved']:,} ({got['saved'] - ref['saved']:+,})"
            f"  grads {got['grads']:,} ({got['grads'] - ref['grads']:+,})"
            f"  AdamW state {got['state']:,} ({got['state'] - ref['state']:+,})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
