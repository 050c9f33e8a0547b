"""bitsandbytes' paged optimizers: which part of their state is paged (CUDA managed memory, outside the planner's
figures: core.training.optimizer.paged_state_bytes) and which stays an ordinary GPU tensor (the optimizer-state
bucket).

Source: bitsandbytes 95f9af309d4d5793847169c39288dcd3fcbdf564 bitsandbytes/optim/optimizer.py: get_state_buffer
(lines 374-390) pages state1 / state2 of a tensor of 1e5 elements or more; Optimizer2State.init_state (lines 524-529)
and Optimizer1State.init_state (line 695) make every 8-bit absmax with ``torch.zeros(..., device=p.device)``.
tools/measure/paged_state_check.py runs the library's own init_state (0.50.2, meta parameters, only get_paged
replaced) and prints, for a 512 x 256 tensor (131,072 elements) under PagedAdamW8bit: state1 and state2 uint8
131,072 B each PAGED, absmax1 and absmax2 float32 2,048 B each on the device."""

from __future__ import annotations

import pytest

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.estimate import estimate
from core.format import gb
from core.params import param_counts
from core.plan import Method, Offload, Optimizer, Plan, Preset, Strategy
from core.presets import default_plan
from core.roles import dtypes_for
from core.training.optimizer import (
    OPT8_BLOCK,
    OPT8_MIN_SIZE,
    OPT8_SMALL_STATE_BYTES,
    PAGED_8BIT_STATE_BYTES,
    PAGED_MIN_SIZE,
    optimizer_terms,
    paged_state_bytes,
    small_state_elements,
)


def _plan(optimizer: Optimizer) -> Plan:
    """Llama 2 7B full fine-tuning in pure bf16 on an A100 80GB."""
    plan = default_plan().with_changes(
        model=find_model("llama-2-7b").spec,
        model_id="llama-2-7b",
        method=Method.FULL,
        preset=Preset.PURE_BF16,
        optimizer=optimizer,
    )
    return plan.with_workload(micro_batch=1, seq_len=2048, grad_accum=1).with_hardware(gpu="a100-80gb-sxm")


def _on_gpu(plan: Plan) -> float:
    return sum(t.bytes for t in optimizer_terms(plan, param_counts(plan), dtypes_for(plan)))


def _rule_8bit_adam(n: int) -> tuple[float, float]:
    """(paged, device) bytes of one tensor of n elements under PagedAdamW8bit, as core.training.optimizer counts
    them: paged from 1e5 elements (uint8 state1 + state2), 8-bit from 4,096 (absmax on the device), float32 below."""
    if n >= PAGED_MIN_SIZE:  # get_state_buffer: p.numel() < 1e5 is torch.zeros_like
        return PAGED_8BIT_STATE_BYTES * n, 2 * n * 4 / OPT8_BLOCK
    if n >= OPT8_MIN_SIZE:  # min_8bit_size
        return 0, 2 * n * (1 + 4 / OPT8_BLOCK)
    return 0, OPT8_SMALL_STATE_BYTES * n


def test_the_rule_splits_each_measured_tensor_as_bitsandbytes_does() -> None:
    # tools/measure/paged_state_check.py, PagedAdamW8bit (bitsandbytes 0.50.2), qmaps left out:
    # 131,072 el: state1 + state2 uint8 131,072 B each PAGED, absmax1 + absmax2 2,048 B each device;
    # 65,536 el: 65,536 B + 65,536 B + 1,024 B + 1,024 B device; 4,096 el: 4,096 B + 4,096 B + 64 B + 64 B device;
    # 2,048 el: state1 + state2 float32 8,192 B each device; totals: paged 262,144 B, device 161,920 B.
    measured = {131_072: (262_144, 4_096), 65_536: (0, 133_120), 4_096: (0, 8_320), 2_048: (0, 16_384)}
    for n, split in measured.items():
        assert _rule_8bit_adam(n) == split
    assert sum(_rule_8bit_adam(n)[0] for n in measured) == 262_144
    assert sum(_rule_8bit_adam(n)[1] for n in measured) == 161_920


def test_paged_adamw_8bit_keeps_every_absmax_on_the_gpu() -> None:
    plan = _plan(Optimizer.PAGED_ADAMW_8BIT)
    counts = param_counts(plan)
    t = counts.trainable
    small = small_state_elements(plan, 100_000)  # get_state_buffer: p.numel() < 1e5 is an ordinary tensor
    assert small_state_elements(plan) == 0  # Llama 2 7B has no tensor under min_8bit_size 4,096 (4,096-wide norms)
    # paged: uint8 state1 and state2 of the tensors of 1e5 elements or more, nothing else
    assert paged_state_bytes(plan, counts) == (t - small) * 2
    # on the GPU: the small tensors' 8-bit moments with their absmax, and the paged tensors' absmax (2 x 4 B / 256)
    assert _on_gpu(plan) == pytest.approx(small * 2 * (1 + 4 / 256) + (t - small) * 2 * 4 / 256)
    # Llama 2 7B's 6.74e9 elements (catalogue): 211 MB of absmax stay on the card (2 x 4/256 B an element), 1.5 %
    # of the 8-bit state (2 x 4/256 of 2 x (1 + 4/256) B an element)
    assert (t - small) * 2 * 4 / 256 == pytest.approx(211e6, rel=0.01)


def test_paged_and_unpaged_8bit_adamw_hold_the_same_bytes_split_differently() -> None:
    paged, plain = _plan(Optimizer.PAGED_ADAMW_8BIT), _plan(Optimizer.ADAMW_8BIT)
    counts = param_counts(paged)
    assert _on_gpu(paged) + paged_state_bytes(paged, counts) == pytest.approx(_on_gpu(plain))
    optimizer = next(b for b in estimate(paged).buckets if b.key is BucketKey.OPTIMIZER)
    assert any(term.label == "8-bit Adam absmax of the paged tensors" for term in optimizer.terms)


def test_paged_32bit_optimizers_page_all_their_large_state() -> None:
    """No absmax at 32 bits: only the tensors under 1e5 elements stay on the GPU (float32 state1 / state2)."""
    for optimizer, moments in ((Optimizer.PAGED_ADAMW, 2), (Optimizer.PAGED_LION, 1)):
        plan = _plan(optimizer)
        counts = param_counts(plan)
        small = small_state_elements(plan, 100_000)
        assert _on_gpu(plan) == small * moments * 4
        assert paged_state_bytes(plan, counts) == (counts.trainable - small) * moments * 4


def _paged_notes(plan: Plan) -> list[str]:
    return [n for n in estimate(plan).notes if n.startswith("Paged optimizer")]


@pytest.mark.parametrize(
    ("strategy", "share"),
    [
        (Strategy.FSDP, 1 / 8),  # FSDP2 shards the state over the 8 ranks (core.parallel.state._fsdp: optim ÷ dp)
        (Strategy.ZERO1, 1 / 8),  # ZeRO steps the rank's flat partition (_zero_optimizer_partition: ÷ dp)
        (Strategy.ZERO3, 1 / 8),
        (Strategy.DDP, 1.0),  # DDP replicates the whole state on every rank
    ],
)
def test_the_paged_note_counts_one_ranks_share_of_the_state(strategy: Strategy, share: float) -> None:
    """Each rank pages the optimizer state it steps: under FSDP and ZeRO its shard, 1/8 of it on 8 GPUs (a plan
    the planner generated read the whole model's 134 GB as paged on each of 8 FSDP ranks)."""
    one = _plan(Optimizer.PAGED_ADAMW)
    whole = paged_state_bytes(one, param_counts(one))
    assert _paged_notes(one)[0].startswith(f"Paged optimizer: {gb(whole)} GB per GPU ")
    notes = _paged_notes(one.on_gpus(8, strategy))
    assert len(notes) == 1
    assert notes[0].startswith(f"Paged optimizer: {gb(whole * share)} GB per GPU ")


def test_an_offloaded_state_pages_nothing_on_the_gpu() -> None:
    """With the optimizer state on the host (FSDP2 CPUOffloadPolicy, a CPU optimizer beside DDP) the rank's GPU
    holds none of it, paged or not: the host bucket counts it, and no paged note is given."""
    for strategy in (Strategy.FSDP, Strategy.DDP):
        plan = _plan(Optimizer.PAGED_ADAMW).on_gpus(8, strategy).with_parallel(offload=Offload.OPTIMIZER)
        assert _paged_notes(plan) == []
