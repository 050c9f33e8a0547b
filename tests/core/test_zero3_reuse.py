"""ZeRO-3 keeps a checkpointed block gathered through its backward (core.parallel.state._zero3_kept_block).

Source: deepspeedai/DeepSpeed edaa7221, deepspeed/runtime/zero/partitioned_param_coordinator.py
(``__params_to_release``: parameters used again within ``stage3_max_reuse_distance`` elements of
the trace are not released) and runtime/zero/config.py (max_reuse_distance, max_live_parameters
1e9; prefetch_bucket_size 5e7). Llama 2 70B's shapes (meta-llama/Llama-2-70b-hf config.json:
hidden 8192, 8 KV heads of 128, intermediate 28672)."""

from __future__ import annotations

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.estimate import estimate
from core.plan import Method, Plan, Strategy, Workload

# One block: q and o 8192², k and v 8192 × 1024, gate / up / down 8192 × 28672, two norms.
BLOCK = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
PREFETCH = 50_000_000


def _gathered(checkpointing: bool) -> tuple[str, float]:
    plan = Plan(
        model=find_model("llama-2-70b").spec,
        method=Method.LORA,
        workload=Workload(micro_batch=8, seq_len=2_048),
        checkpointing=checkpointing,
    ).on_gpus(8, Strategy.ZERO3)
    est = estimate(plan)
    terms = [t for b in est.worst.buckets if b.key is BucketKey.WEIGHTS for t in b.terms]
    found = next(t for t in terms if t.label.startswith("gathered:"))
    return found.label, found.bytes


def test_a_checkpointed_block_stays_gathered_between_its_recompute_and_its_backward() -> None:
    assert BLOCK == 855_654_400
    label, kept = _gathered(True)
    assert label == "gathered: a checkpointed block's modules, kept for its backward + the prefetch bucket"
    label_plain, largest = _gathered(False)
    assert label_plain == "gathered: the largest module + the prefetch bucket"
    # Same bytes per element either way: the block's elements replace the largest module's
    # (the 32,000 × 8,192 embedding, 262,144,000 elements).
    per = largest / (32_000 * 8_192 + PREFETCH)
    assert kept == (BLOCK + PREFETCH) * per
