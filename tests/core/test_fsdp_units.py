"""What FSDP gathers and stages per unit (core.parallel.state ``_unit_bytes``, ``_offload_staging``).

Sources: bitsandbytes replaces only ``nn.Linear`` modules by ``Linear4bit`` (0.43.0, 4876324,
bitsandbytes/nn/modules.py) and transformers' BitsAndBytesConfig keeps ``lm_head`` out, so a QLoRA
model's embedding and head stay in the base dtype; pytorch/pytorch 01caf79
torch/distributed/fsdp/_flat_param.py (``pre_unshard``: under CPU offload the local shard is copied
to the GPU on the pre-unshard stream) and 00ae0bc9 ``_runtime_utils.py`` (``_init_streams``,
``limit_all_gathers``). Llama-2-7B's shapes (meta-llama/Llama-2-7b-hf config.json: hidden 4096,
intermediate 11008, 32 layers, vocabulary 32000, untied head)."""

from __future__ import annotations

import pytest

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.dtypes import Dtype
from core.estimate import estimate
from core.plan import Hardware, Method, Offload, Plan, Preset, Strategy, Workload

HIDDEN, FFN, LAYERS, VOCAB = 4096, 11008, 32, 32000
LINEAR = 4 * HIDDEN * HIDDEN + 3 * HIDDEN * FFN  # one block's q, k, v, o, gate, up, down
NORMS = 2 * HIDDEN  # one block's two RMSNorms
ROOT = 2 * VOCAB * HIDDEN + HIDDEN  # embedding, head (not tied), final norm


def _plan(method: Method, offload: Offload = Offload.NONE, fsdp1: bool = False) -> Plan:
    plan = Plan(
        model=find_model("llama-2-7b").spec,
        method=method,
        double_quant=True,
        preset=Preset.CUSTOM,  # every parameter in bfloat16, as Answer.AI's precision 'bf16'
        weight_dtype=Dtype.BF16,
        base_dtype=Dtype.BF16,
        adapter_dtype=Dtype.BF16,
        workload=Workload(micro_batch=10, seq_len=2_048),
        hardware=Hardware(gpu="rtx-4090"),
    ).on_gpus(2, Strategy.FSDP)
    return plan.with_input("parallel.offload", offload).with_input("parallel.fsdp1_wrap", fsdp1)


def _terms(plan: Plan, key: BucketKey) -> dict[str, float]:
    est = estimate(plan)
    return {t.label: t.bytes for b in est.worst.buckets if b.key is key for t in b.terms}


def test_a_qlora_root_unit_gathers_its_embedding_and_head_in_the_base_dtype() -> None:
    weights = _terms(_plan(Method.QLORA), BucketKey.WEIGHTS)
    root = weights["root unit gathered (embedding, final norm, head: not resharded after forward)"]
    assert root == ROOT * 2 == 524_296_192  # it was ROOT × the rank's average stored bytes (≈ 0.51 B)
    in_flight = weights["one block's all-gather output in flight (prefetch)"]
    assert in_flight == LINEAR * 0.5 + NORMS * 2 == 101_203_968  # packed 4-bit linears, bf16 norms


def test_a_qlora_root_unit_gathers_what_is_stored_whatever_the_preset_says() -> None:
    # The app's default preset (float32 weights + bf16 autocast) on a QLoRA plan: bitsandbytes still
    # leaves the embedding, head and norms in the 16-bit load dtype, as the weights bucket stores
    # them (2 B), and FSDP gathers what it stores. The root was gathered at the base dtype's 4 B.
    plan = _plan(Method.QLORA).with_changes(
        preset=Preset.FP32_AUTOCAST_BF16, weight_dtype=Dtype.FP32, base_dtype=Dtype.FP32, adapter_dtype=Dtype.FP32
    )
    weights = _terms(plan, BucketKey.WEIGHTS)
    root = weights["root unit gathered (embedding, final norm, head: not resharded after forward)"]
    stored = weights["unquantised (embeddings, head, norms) ÷ 2 ranks"] * 2
    assert root == ROOT * 2 == 524_296_192
    assert root / ROOT == stored / (ROOT + LAYERS * NORMS)  # the same bytes per parameter as stored


def test_cpu_offload_stages_the_local_shards_on_a_side_stream() -> None:
    # FSDP1 (two all-gathers in flight): two blocks' local shards, each (LINEAR + NORMS) × 2 B ÷ 2 ranks,
    # are more than the root's (ROOT × 2 B ÷ 2).
    cache = _terms(_plan(Method.LORA, Offload.PARAMS, fsdp1=True), BucketKey.OVERHEAD)
    staged = {k: v for k, v in cache.items() if k.startswith("CPU offload")}
    block = LINEAR + NORMS
    # (Bytes per parameter: the rank's stored average, bf16 with the adapters in it: within 0.1 % of 2 B.)
    assert list(staged.values()) == [pytest.approx(2 * block * 2 / 2, rel=1e-3)]
    assert 2 * block * 2 / 2 == 404_766_720
    # FSDP2 drops each copy once it is in the all-gather output: the root's one shard is the largest.
    cache = _terms(_plan(Method.LORA, Offload.PARAMS), BucketKey.OVERHEAD)
    staged = {k: v for k, v in cache.items() if k.startswith("CPU offload")}
    assert list(staged.values()) == [pytest.approx(ROOT * 2 / 2, rel=1e-3)]
    # Without offload nothing is staged.
    assert not [k for k in _terms(_plan(Method.LORA), BucketKey.OVERHEAD) if k.startswith("CPU offload")]
