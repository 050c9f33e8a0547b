"""What a whole Llama with PEFT LoRA keeps for the backward when one factor is frozen, measured on CPU (branch h61eval;
docs/REAL_GPU_MEMORY.md, "PEFT's method comparison: the eval's generate is not the peak").

The rows ``lora--llama-3.2-3B-rank32`` (lora_A and lora_B trained), ``...-rank32-lorafa`` (PEFT's LoRA-FA: every
lora_A frozen by ``create_lorafa_optimizer``, 3,670,016 trained) and ``...-rank32-mica`` (init_lora_weights "mica":
5,505,024 trained, the lora_A count, so lora_B frozen) of huggingface/peft 5d602fdb
method_comparison/MetaMathQA/results publish the same reserved peak, average and 99th percentile to 50 MiB. The
layer-level check (lycoris_check.py "lorafa") says a frozen lora_A keeps no input copy; this one runs transformers'
own LlamaForCausalLM (bf16, float32 adapters: ``autocast_adapter_dtype=True`` as the comparison runs) to see whether
any other module of the model keeps the float32 copy instead. Expected from PEFT's ``Linear.forward``
(``x = _cast_input_dtype(x, lora_A.weight.dtype)``; ``lora_B(lora_A(dropout(x)))``), per target and layer, N tokens:

* LoRA less LoRA-FA: the float32 input copy, N x in x 4 B (lora_A's matmul keeps it only for lora_A's gradient);
* LoRA less MiCA-like (lora_B frozen): lora_A's output, N x r x 4 B (kept only for lora_B's gradient); the copy stays.

Measured (torch 2.13.0 CPU, transformers 5.25.0, peft 0.18.0): 524,288 B and 16,384 B, both as expected.

    /tmp/torchenv/bin/python tools/measure/lora_frozen_factor_check.py
"""

from __future__ import annotations

import torch
from peft import LoraConfig, get_peft_model
from peft.tuners.lora import torchao as peft_lora_torchao
from transformers import LlamaConfig, LlamaForCausalLM

# As in lycoris_check.py: PEFT 0.18.0's dispatch_torchao imports a name torchao 0.18.0 no longer has.
peft_lora_torchao.is_torchao_available = lambda: False

D, FF, LAYERS, HEADS, KV_HEADS, VOCAB, R = 256, 512, 2, 4, 2, 1000, 8
BATCH, SEQ = 2, 64
TARGETS = ("q_proj", "v_proj")  # both read the block's D-wide normed input
N = BATCH * SEQ


def saved_bytes(frozen: str | None) -> int:
    """Bytes of the storages autograd keeps after one forward with the loss (parameters apart)."""
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                         num_key_value_heads=KV_HEADS, vocab_size=VOCAB, max_position_embeddings=4 * SEQ)  # fmt: skip
    base = LlamaForCausalLM(config).to(torch.bfloat16)
    model = get_peft_model(base, LoraConfig(r=R, lora_alpha=2 * R, target_modules=list(TARGETS)),
                           autocast_adapter_dtype=True)  # fmt: skip
    for name, param in model.named_parameters():
        if frozen is not None and frozen in name:
            param.requires_grad_(False)  # create_lorafa_optimizer's requires_grad_(False) on every lora_A
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return sum(saved.values())


if __name__ == "__main__":
    lora, lora_fa, mica = saved_bytes(None), saved_bytes("lora_A"), saved_bytes("lora_B")
    copies = LAYERS * len(TARGETS) * N * D * 4  # the float32 input copies LoRA-FA drops
    a_outputs = LAYERS * len(TARGETS) * N * R * 4  # lora_A's outputs a frozen lora_B does not need
    print(f"LoRA {lora:,} B; LoRA-FA {lora_fa:,} B; lora_B frozen {mica:,} B")
    print(f"LoRA - LoRA-FA = {lora - lora_fa:,} B (expected {copies:,}: the float32 input copies)")
    print(f"LoRA - lora_B frozen = {lora - mica:,} B (expected {a_outputs:,}: lora_A's outputs)")
    assert lora - lora_fa == copies and lora - mica == a_outputs
