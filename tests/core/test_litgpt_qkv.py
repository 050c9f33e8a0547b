"""lit-gpt's fused q|k|v output kept whole through v (issue 22, docs/REAL_GPU_MEMORY.md "lit-gpt's fused
q|k|v view, settled"): with multi-head attention lit-gpt 8641822 / litgpt 5895df1 and 00af8b0
``CausalSelfAttention.forward`` hand SDPA a v that is a view of the fused projection's output, so the
whole N·(q + 2kv) output stays for the backward (tools/measure/litgpt_qkv_check.py, torch 2.13.0 CPU:
the q|k|v storage, 1,536 B a token at d 256 in bf16, is among the saved tensors with 8 heads in 8 groups,
not with 2 groups). Plans: the resource tables' StableLM-alpha 3B LoRA row (micro-batch 1 × 1,034 tokens,
litgpt-rt-lora-stablelmalpha3-bf16-mb1 in benchmarks/realgpu/memory_figures.json)."""

from __future__ import annotations

from core.catalogue import find_model
from core.dtypes import Autocast, Dtype, Quant
from core.plan import LoraSettings, Method, Plan, Preset, Workload
from core.training.activations import layer_activations, litgpt_pins_qkv

N = 1_034  # micro-batch 1 × 1,034 tokens (the resource tables' Alpaca longest sample, lit-gpt 8641822)
D = 4_096  # stablelm-base-alpha-3b: n_embd 4,096, 32 heads, n_query_groups 32 (lit_gpt/config.py 8641822)


def rt_plan(model: str = "stablelm-base-alpha-3b", **changes: object) -> Plan:
    """lit-gpt 8641822 finetune/lora.py: r 8, alpha 16, dropout 0.05 on query and value, bf16-true."""
    base = Plan(
        model=find_model(model).spec,
        method=Method.LORA,
        lora=LoraSettings(rank=8, alpha=16, dropout=0.05, targets=("q_proj", "v_proj")),
        workload=Workload(micro_batch=1, seq_len=N),
        litgpt=True,
        preset=Preset.CUSTOM,  # bf16-true: weights, base and adapters in bf16, no autocast (the recipe's fields)
        weight_dtype=Dtype.BF16,
        base_dtype=Dtype.BF16,
        adapter_dtype=Dtype.BF16,
        autocast=Autocast.NONE,
    )
    return base.with_changes(**changes)


def _terms(plan: Plan) -> dict[str, int]:
    return {t.label: int(t.bytes) for t in layer_activations(plan, False).items}


def test_litgpt_mha_keeps_the_whole_fused_qkv_output_through_v() -> None:
    terms = _terms(rt_plan())
    # v pins q|k|v: N·(q + 2kv) × 2 B = 1,034 × 12,288 × 2 = 25,411,584; k after RoPE 1,034 × 4,096 × 2 = 8,470,528.
    assert terms["v, a view of the fused q|k|v output (kept whole)"] == 25_411_584
    assert terms["k after RoPE"] == 8_470_528
    assert "k, v" not in terms


def test_the_pin_adds_q_plus_kv_per_token_over_a_copied_v() -> None:
    # Against the same plan outside lit-gpt's loop (k and v of their own, 2 × 8,470,528): N·(q + kv) × 2 B
    # = 1,034 × 8,192 × 2 = 16,941,056 a layer more.
    pinned = _terms(rt_plan())
    pinned_kv = pinned["v, a view of the fused q|k|v output (kept whole)"] + pinned["k after RoPE"]
    assert pinned_kv - 2 * 8_470_528 == 16_941_056


def test_grouped_and_multi_query_heads_copy_v() -> None:
    # litgpt 5895df1 / 00af8b0 ``k.expand(...)`` / ``v.expand(...)`` then ``reshape``: a copy, nothing pinned
    # (Llama 3.2 1B: 32 heads, 8 groups; Falcon-7B: 71 heads, 1 group).
    for model in ("llama-3.2-1b", "falcon-7b"):
        plan = rt_plan(model)
        assert not litgpt_pins_qkv(plan)
        assert not any(label.startswith("v, a view") for label in _terms(plan))


def test_outside_litgpt_nothing_changes() -> None:
    # transformers / PEFT plans of the same model: not read for this (docs), k and v as before.
    terms = _terms(rt_plan(litgpt=False))
    assert terms["k, v"] == 2 * 8_470_528
    assert not any(label.startswith("v, a view") for label in terms)


def test_the_4bit_input_kept_by_bitsandbytes_041_is_not_the_lora_branchs_copy() -> None:
    # bitsandbytes 0.41.1 (18e827d6) MatMul4Bit.forward: ``ctx.tensors = (A, B)``; lit-gpt's lora_A reads
    # ``self.lora_dropout(x)`` (dropout 0.05: a new tensor), so the 4-bit q|k|v input is a storage of its own:
    # litgpt_qkv_check.py part 2 measures 3,072 B a token more with the stand-in at d 256 = (d + d + 4d) × 2.
    terms = _terms(rt_plan(method=Method.QLORA, quant=Quant.NF4, bnb_legacy=True))
    assert terms["4-bit q/k/v input kept (bitsandbytes < 0.43.2)"] == N * D * 2  # 8,470,528
    assert terms["v, a view of the fused q|k|v output (kept whole)"] == 25_411_584
