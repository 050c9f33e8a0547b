"""ZeRO-3 keeps a checkpointed block gathered through its backward (core.parallel.state._zero3_kept_block).

Source: deepspeedai/DeepSpeed edaa7221, deepspeed/runtime/zero/partitioned_param_coordinator.py
(``__params_to_release``: parameters used again within ``stage3_max_reuse_distance`` elements of
the trace are not released) and runtime/zero/config.py (max_reuse_distance, max_live_parameters
1e9; prefetch_bucket_size 5e7). Llama 2 70B's shapes (meta-llama/Llama-2-70b-hf config.json:
hidden 8192, 8 KV heads of 128, intermediate 28672)."""

from __future__ import annotations

from core.breakdown import BucketKey, Term
from core.catalogue import find_model
from core.dtypes import Dtype
from core.estimate import estimate
from core.plan import Method, Plan, Strategy, Workload

# One block: q and o 8192², k and v 8192 × 1024, gate / up / down 8192 × 28672, two norms.
BLOCK = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
PREFETCH = 50_000_000
# The forward's tail kept for the backward without checkpointing: the 32,000 × 8,192 head, then
# down_proj (262.1e6 elements follow it: 2 × 262.1e6 < 1e9) and up_proj (497.9e6 follow it:
# 9.96e8 < 1e9); gate_proj (732e6 follow it) is released (microsoft/DeepSpeed v0.11.1 e9503fe4,
# partitioned_param_coordinator.py ``__params_to_release``).
TAIL_70B = 32_000 * 8_192 + 2 * 8_192 * 28_672


def _llama2_70b_lora(checkpointing: bool) -> Plan:
    return Plan(
        model=find_model("llama-2-70b").spec,
        method=Method.LORA,
        workload=Workload(micro_batch=8, seq_len=2_048),
        checkpointing=checkpointing,
    ).on_gpus(8, Strategy.ZERO3)


def _gathered(checkpointing: bool) -> tuple[str, float]:
    est = estimate(_llama2_70b_lora(checkpointing))
    terms = [t for b in est.worst.buckets if b.key is BucketKey.WEIGHTS for t in b.terms]
    found = next(t for t in terms if t.label.startswith("gathered:"))
    return found.label, found.bytes


def test_a_checkpointed_block_stays_gathered_between_its_recompute_and_its_backward() -> None:
    assert BLOCK == 855_654_400
    label, kept = _gathered(True)
    assert label == "gathered: a checkpointed block's modules, kept for its backward + the prefetch bucket"
    label_plain, tail = _gathered(False)
    # Without checkpointing the peak holds the forward's tail instead (_zero3_forward_tail, below).
    assert label_plain == "gathered: the forward's last modules, kept for the backward + the prefetch bucket"
    # Same bytes per element either way: the block's elements replace the tail's.
    per = tail / (TAIL_70B + PREFETCH)
    assert kept == (BLOCK + PREFETCH) * per


def _llama2_7b_zero3(checkpointing: bool = False, gpus: int = 8) -> Plan:
    return Plan(
        model=find_model("llama-2-7b").spec,
        method=Method.FULL,
        weight_dtype=Dtype.BF16,  # 2 B gathered per element
        workload=Workload(micro_batch=1, seq_len=4_096),
        checkpointing=checkpointing,
    ).on_gpus(gpus, Strategy.ZERO3)


def _phase_gathered(plan: Plan) -> dict[str, Term]:
    est = estimate(plan)
    return {
        phase.name: t
        for phase in est.worst.phases
        for b in phase.buckets
        if b.key is BucketKey.WEIGHTS
        for t in b.terms
        if t.label.startswith("gathered:")
    }


def test_without_checkpointing_the_forwards_last_modules_stay_gathered_into_the_backward() -> None:
    # Llama 2 7B (meta-llama/Llama-2-7b-hf config.json: hidden 4096, 32 heads, intermediate 11008,
    # vocab 32000). DeepSpeed v0.11.1 (e9503fe4) partitioned_param_coordinator.py
    # ``__params_to_release``: a module released at the forward's end stays gathered when its
    # backward comes before 1e9 elements of the trace: the head (nothing follows it), block 31's
    # seven projections and block 30's down, up, gate, o and v (485.5e6 follow v: 9.7e8 < 1e9);
    # block 30's k (502.3e6 follow it) is released. FlagPerf's llama2_7b-deepspeed case runs this
    # model so (no checkpointing), as docs/REAL_GPU_MEMORY.md records.
    qkvo, mlp = 4_096 * 4_096, 4_096 * 11_008
    tail = 32_000 * 4_096 + (4 * qkvo + 3 * mlp) + (3 * mlp + 2 * qkvo)
    assert tail == 502_267_904
    terms = _phase_gathered(_llama2_7b_zero3())
    for phase in ("forward + loss", "backward"):
        assert terms[phase].label == "gathered: the forward's last modules, kept for the backward + the prefetch bucket"
        assert terms[phase].bytes == (tail + PREFETCH) * 2


def test_the_tail_is_not_counted_under_checkpointing_or_without_the_head() -> None:
    labels = {t.label for t in _phase_gathered(_llama2_7b_zero3(checkpointing=True)).values()}
    assert not any("forward's last modules" in label for label in labels)


def test_the_tail_leaves_the_blocks_backward_to_the_module_and_its_prefetch() -> None:
    # Each tail module is released after its own backward (its next use, the next step's forward,
    # lies beyond 1e9 elements), so inside the blocks' backward and at its end only the largest
    # module (the 32,000 × 4,096 embedding / head) and the prefetch are gathered.
    from core.parallel.layout import layout
    from core.training import detailed

    plan = _llama2_7b_zero3()
    lay = layout(plan)
    (stage,) = lay.stages
    dt = detailed.dtypes_for(plan)
    parts = detailed._parts(plan, detailed.param_counts(plan), dt, detailed.Rank(lay, stage))
    phases = detailed.backward_phases(plan, parts, dt)
    gathered = [
        [t for b in phase.buckets if b.key is BucketKey.WEIGHTS for t in b.terms if t.label.startswith("gathered:")]
        for phase in phases
    ]
    start, in_block, end = ([t.bytes for t in terms] for terms in gathered)
    assert start == [(502_267_904 + PREFETCH) * 2]
    assert in_block == end == [(32_000 * 4_096 + PREFETCH) * 2]


def test_the_reuse_distance_is_a_plan_setting_both_rules_read() -> None:
    # stage3_max_reuse_distance (parallel.zero3_max_reuse_elements). At 3e8 the Llama 2 7B tail is
    # the head (nothing follows it) and block 31's down_proj (the head's 1.31e8 follow it: 2.6e8 <
    # 3e8); up_proj (1.76e8 follow it: 3.5e8) is released. At 1 only the head stays. A 70B block
    # (8.56e8) under checkpointing stays gathered at 1e9 and not at 8e8 (__params_to_release,
    # DeepSpeed v0.11.1 e9503fe4).
    plan = _llama2_7b_zero3().with_parallel(zero3_max_reuse_elements=300_000_000)
    terms = _phase_gathered(plan)
    assert terms["backward"].bytes == (32_000 * 4_096 + 4_096 * 11_008 + PREFETCH) * 2
    one = _phase_gathered(_llama2_7b_zero3().with_parallel(zero3_max_reuse_elements=1))
    assert one["backward"].label == "gathered: the largest module + the prefetch bucket"
    base = _llama2_70b_lora(checkpointing=True)
    short = _phase_gathered(base.with_parallel(zero3_max_reuse_elements=800_000_000))
    assert short["backward"].label == "gathered: the largest module + the prefetch bucket"
    assert _phase_gathered(base)["backward"].label.startswith("gathered: a checkpointed block's")
