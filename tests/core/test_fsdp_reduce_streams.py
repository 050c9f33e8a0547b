"""Which stream FSDP2's gradient reduction leaves its blocks cached for (issue 22,
core.parallel.state._reduce_stream_cache).

Sources, read in the torch wheels of PyPI (each wheel's torch/version.py names its commit):
torch 2.5.0 (32f585d), 2.6.0 (2236df1), 2.7.0 (1341794) and 2.8.0 (a1cb3cc),
``torch/distributed/{_composable/fsdp,fsdp/_fully_shard}/_fsdp_collectives.py`` ``foreach_reduce``
allocate the reduce-scatter input on the current (default) stream, before
``with device_handle.stream(reduce_scatter_stream)``, and only the output inside it;
``_fsdp_param_group.py`` ``post_backward`` keeps the input in ``comm_ctx.reduce_scatter_state``
until the next unit's ``post_backward`` makes the default stream wait on its event and drops it.
torch 2.4.0 (e4ee3be) allocated the input inside the reduce-scatter stream. pytorch/pytorch
8fc2039 is as 2.5-2.8. Llama 3.2 1B's shapes from its config.json (vocabulary 128,256, hidden
2,048, intermediate 8,192, 16 blocks, 8 KV heads of 64, tied embedding)."""

from __future__ import annotations

import pytest

from core.breakdown import BucketKey, Phase, StepPhase
from core.dtypes import MpDtype
from core.estimate import Estimate, estimate
from core.parallel.layout import layout
from core.params import param_counts
from core.plan import Method, Offload, Plan, Preset, Strategy
from core.presets import plan_for_model
from core.roles import dtypes_for
from core.training import detailed

# Llama 3.2 1B (config.json): one block = q, o 2,048² + k, v 2,048 × 512 + gate, up, down
# 2,048 × 8,192 + two norms; the root = the tied embedding (the head) + the final norm.
BLOCK = 2 * 2_048 * 2_048 + 2 * 2_048 * 512 + 3 * 2_048 * 8_192 + 2 * 2_048
ROOT = 128_256 * 2_048 + 2_048
OUTPUT = "reduce-scatter stream's cache: the root unit's reduce-scatter output ({}, then freed)"


def _fsdp(**parallel: object) -> Plan:
    plan = plan_for_model("llama-3.2-1b").with_changes(preset=Preset.TRAINER_BF16)  # bf16 weights and gradients
    plan = plan.with_workload(micro_batch=2, seq_len=2048).with_method(Method.FULL)
    return plan.on_gpus(8, Strategy.FSDP).with_parallel(**parallel) if parallel else plan.on_gpus(8, Strategy.FSDP)


def _reserve(est: Estimate) -> dict[str, float]:
    return {t.label: t.bytes for t in est.buckets[-1].terms}


def test_fsdp2_reduce_scatter_input_is_allocated_on_the_default_stream_not_cached_apart() -> None:
    # The input is a default-stream tensor: alive while the next block runs its backward (the
    # allocated peak counts one), and once dropped its block serves the default stream again.
    # Before, the reserve carried it a second time as "reduce-scatter stream's cache".
    plan = _fsdp()
    lay = layout(plan)
    parts = detailed._parts(plan, param_counts(plan), dtypes_for(plan), detailed.Rank(lay, lay.stages[0]))
    phases = detailed.backward_phases(plan, parts, dtypes_for(plan))
    in_block = next(p for p in phases if p.kind is StepPhase.BACKWARD_BLOCK)
    held = {t.label: t.bytes for t in in_block.bucket(BucketKey.GRADIENTS).terms}
    assert held["reduce-scatter input (one block)"] == BLOCK * 2  # bf16 reduce (policy unset: the gradients')
    est = estimate(plan)
    reserve = _reserve(est)
    assert not any("reduce-scatter input" in label for label in reserve)
    # What the reduce-scatter stream keeps is its own allocation: the sharded gradients (views of
    # the output), freed by the next zero_grad.
    stream = [label for label in reserve if label.startswith("reduce-scatter stream's cache")]
    assert stream == ["reduce-scatter stream's cache: the last step's sharded gradients"]


def test_fsdp2_frees_each_units_output_on_its_stream_when_gradients_accumulate() -> None:
    # foreach_reduce: with a gradient from an earlier micro-batch,
    # ``sharded_param.grad._local_tensor += new_sharded_grad`` and the output is dropped; the next
    # unit's output takes the block again, so the stream keeps the largest unit's: the root's here
    # (262.7 M parameters ÷ 8 ranks, against a block's 60.8 M ÷ 8), in bf16.
    reserve = _reserve(estimate(_fsdp().with_workload(grad_accum=2)))
    label = OUTPUT.format("added to the accumulated gradient")
    assert reserve[label] == pytest.approx(ROOT / 8 * 2)


def test_fsdp2_frees_the_output_after_casting_it_to_the_parameters_dtype() -> None:
    # reduce_dtype float32 over bf16 parameters: ``_to_dtype_if_needed(reduce_output, orig_dtype)``
    # makes the bf16 gradient (kept) and drops the float32 output on the reduce-scatter stream.
    reserve = _reserve(estimate(_fsdp(fsdp_reduce_dtype=MpDtype.FP32)))
    assert reserve[OUTPUT.format("cast")] == pytest.approx(ROOT / 8 * 4)
    # Cast and accumulated: the float32 output and its bf16 cast are both dropped.
    both = _reserve(estimate(_fsdp(fsdp_reduce_dtype=MpDtype.FP32).with_workload(grad_accum=2)))
    label = OUTPUT.format("added to the accumulated gradient")
    assert both[label] == pytest.approx(ROOT / 8 * (4 + 2))


def test_fsdp2_cpu_offload_drops_the_output_once_its_copy_to_the_host_is_queued() -> None:
    # foreach_reduce under CPUOffloadPolicy: "Since the GPU sharded gradient is allocated in the RS
    # stream, we can free it here by not keeping a ref".
    reserve = _reserve(estimate(_fsdp(offload=Offload.PARAMS)))
    label = OUTPUT.format("offloaded to the host")
    assert reserve[label] == pytest.approx(ROOT / 8 * 2)
    assert not any("sharded gradients" in lbl for lbl in reserve)  # on the host


def test_fsdp1_keeps_its_post_backward_streams_reduce_scatter_input() -> None:
    # FSDP1 (torch 2.4.0 fsdp/_runtime_utils.py): _post_backward_hook casts the flat gradient to the
    # reduce dtype under the post-backward stream and _get_reduce_scatter_tensors pads it there.
    reserve = _reserve(estimate(_fsdp(fsdp1_wrap=True)))
    assert reserve["post-backward stream's cache (FSDP1): reduce-scatter input (one block)"] == BLOCK * 2


def test_fsdp2_with_the_optimizer_in_the_backward_keeps_one_units_output_not_the_gradients() -> None:
    # foreach_reduce runs the sharded parameters' post-accumulate-grad hooks (torch 2.5.0 onwards), and
    # torchtune's hook steps and zero_grad()s each parameter there (pytorch/torchtune 0331778,
    # torchtune/training/memory.py register_optim_in_bwd_hooks): every unit's output is freed in the
    # backward, so the stream keeps the largest one's, not the step's sharded gradients. Before, the
    # reserve counted the whole model's sharded gradients as left for the next zero_grad.
    reserve = _reserve(estimate(_fsdp().with_changes(optimizer_in_backward=True)))
    assert reserve[OUTPUT.format("stepped in the backward")] == pytest.approx(ROOT / 8 * 2)
    assert not any("sharded gradients" in label for label in reserve)


def _moments(plan: Plan) -> tuple[list[Phase], float]:
    """The step's moments on the plan's first rank (the forward, every sub-phase of the backward, the optimizer)
    and the rank's sharded gradients."""
    lay, dt, counts = layout(plan), dtypes_for(plan), param_counts(plan)
    parts = detailed._parts(plan, counts, dt, detailed.Rank(lay, lay.stages[0]))
    forward, optimizer = detailed.forward_phase(plan, parts), detailed.optimizer_phase(plan, counts, parts, dt)
    assert parts.state is not None
    return [forward, *detailed.backward_phases(plan, parts, dt), optimizer], sum(t.bytes for t in parts.state.grads)


@pytest.mark.parametrize(
    ("plan", "moment"),
    [
        (_fsdp(), None),  # Llama 3.2 1B: the allocated peak is also the reserved one
        # Qwen3 32B (the model of torchtitan PR #1690's one-host rows), batch 1 × 4,096 on 8 GPUs, no checkpointing:
        # the last block's backward holds the most, the loss's backward (no gradient alive yet) the most + cache.
        (
            plan_for_model("qwen3-32b").with_method(Method.FULL).with_workload(micro_batch=1, seq_len=4096).on_gpus(8),
            "start of the backward pass",
        ),
    ],
)
def test_the_reserved_peak_is_the_largest_moment_with_the_last_steps_gradients_cached(
    plan: Plan, moment: str | None
) -> None:
    # The sharded gradients foreach_reduce allocated on the reduce-scatter stream are freed by zero_grad and cached
    # for that stream alone (CUDACachingAllocator.cpp get_free_block matches the stream: _cached_at's sources), so
    # max_memory_reserved is the largest, over the step's moments, of what is allocated there plus those of them
    # not alive there; the other reserve terms are the same at every moment.
    plan = plan.with_parallel(strategy=Strategy.FSDP)
    est = estimate(plan)
    worst = est.worst
    moments, sharded = _moments(plan)
    largest = max(p.allocated_bytes + max(0.0, sharded - p.bucket(BucketKey.GRADIENTS).bytes) for p in moments)
    runtime = est.total_bytes - worst.reserved_bytes
    # The overhead's terms: the workspaces, the reserve and the runtime; all but the cache's are the same anywhere.
    others = sum(t.bytes for t in est.buckets[-1].terms if not t.label.startswith(detailed.LAST_STEP_CACHE))
    assert worst.reserved_bytes - (others - runtime) == pytest.approx(largest)
    # The allocated peak and its phase are the largest moment's without the cache, as before.
    assert worst.peak_bytes - worst.workspace_bytes == pytest.approx(max(p.allocated_bytes for p in moments))
    notes = [n for n in worst.notes if n.startswith("The reserved peak is at the ")]
    if moment is None:
        assert not notes
    else:
        assert notes and notes[0].startswith(f"The reserved peak is at the {moment}, not at the allocated peak")
