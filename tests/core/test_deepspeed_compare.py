"""DeepSpeed's own model-state estimators (committed output, benchmarks/parallel/
deepspeed_estimates.json, DeepSpeed 0.19.8) against this estimator, term by term.

No DeepSpeed is needed: the file holds what ``estimate_zero{2,3}_model_states_mem_needs_all_cold``
printed (collected with ``.venv-ds/bin/python benchmarks/deepspeed_compare.py --collect``).
The first tests pin down what DeepSpeed's figures are made of (their formulas, read in
deepspeed/runtime/zero/stage_1_and_2.py and stage3.py, reproduce every printed row); the
last ones hold this estimator to the terms both count the same way.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from core.breakdown import BucketKey, StepPhase
from core.catalogue import find_model
from core.estimate import estimate
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30


def _module() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "deepspeed_compare.py", "deepspeed_compare")


DS = _module()
DATA = DS.load()


def test_the_file_is_deepspeeds_own_output() -> None:
    assert DATA["deepspeed_version"] == "0.19.8"
    assert len(DATA["runs"]) == len(DS.MODELS) * len(DS.SETUPS) * 2
    for run in DATA["runs"]:
        assert DS.parse_rows(run["printed"]) == run["rows"]  # rows are the printed text, re-read
        assert len(run["rows"]) == (2 if run["stage"] == 2 else 6)
        # DeepSpeed was fed the catalogue's counts: it prints them back in millions.
        total = find_model(run["model"]).spec.total_params()
        assert run["total_params"] == total and f"{int(total / 1e6)}M total params" in run["printed"]


def test_the_live_estimator_counts_what_the_cold_one_was_given() -> None:
    # _all_live on a real Llama 3.2 1B (transformers, bf16 on the CPU) derives the counts
    # itself; they are the catalogue's total and the embedding as the largest layer.
    live = DATA["live_check"]["printed"]
    total = find_model("llama-3.2-1b").spec.total_params()
    assert f"{int(total / 1e6)}M total params, {int(DS.largest_layer_params('llama-3.2-1b') / 1e6)}M largest" in live


def _deepspeed_formula(run: dict, offload: str, zero_init: bool = True) -> tuple[float, float]:  # type: ignore[type-arg]
    """(per CPU, per GPU) bytes by DeepSpeed's formulas as the module docstring reads them."""
    p, largest = run["total_params"], run["largest_layer_params"]
    nodes, per_node = run["nodes"], run["gpus_per_node"]
    n = nodes * per_node
    if run["stage"] == 2:
        if offload == "none":
            return p * 4 * per_node * 1.5, 2 * p + int(18 * p / n)
        return p * max(4 * n, 16) * 1.5, 2 * p
    layer = 4 * largest
    if offload == "params":
        return p * 18 / nodes * 1.5 if zero_init else p * max(4 * per_node, 18 / nodes) * 1.5, layer
    if offload == "optimizer":
        return p * 16 / nodes * 1.5 if zero_init else p * max(4 * per_node, 16 / nodes) * 1.5, layer + int(2 * p / n)
    return (largest * 4 * per_node * 1.5 if zero_init else p * 4 * per_node * 1.5), layer + int(18 * p / n)


def test_deepspeeds_formulas_reproduce_every_printed_row() -> None:
    for run in DATA["runs"]:
        for row in run["rows"]:
            cpu, gpu = _deepspeed_formula(run, DS._offload(row["options"]), "zero_init=0" not in row["options"])
            # Printed as GiB with two decimals.
            assert row["per_gpu_gib"] == pytest.approx(gpu / GIB, abs=0.006), (run["model"], row)
            assert row["per_cpu_gib"] == pytest.approx(cpu / GIB, abs=0.006), (run["model"], row)


def _rows(stage: int, offload: str) -> list[tuple[dict, dict]]:  # type: ignore[type-arg]
    return [
        (run, row)
        for run in DATA["runs"]
        for row in run["rows"]
        if run["stage"] == stage and DS._offload(row["options"]) == offload and "zero_init=0" not in row["options"]
    ]


def _phase(run: dict, options: str, kind: StepPhase) -> dict[BucketKey, float]:  # type: ignore[type-arg]
    """The worst rank's buckets at one moment of the step."""
    est = estimate(DS.plan_for(run, options))
    phase = next(p for p in est.worst.phases if p.kind is kind)
    return {b.key: b.bytes for b in phase.buckets}


def _multi(stage: int, offload: str) -> list[tuple[dict, dict]]:  # type: ignore[type-arg]
    # Every row, one GPU included: DeepSpeed runs its ZeRO optimizer at any world size
    # (v0.19.6 edaa7221 deepspeed/runtime/engine.py _configure_zero_optimizer picks the
    # optimizer by stage alone), and so does this estimator since the one-GPU fix.
    return _rows(stage, offload)


def test_zero2_at_the_optimizer_step_is_deepspeeds_figure_term_by_term() -> None:
    # DeepSpeed ZeRO-2 per GPU: 2·P 16-bit parameters (not partitioned) + 18·P/N where
    # 18 = 16-bit grads 2 + fp32 grads 4 + fp32 master 4 + Adam 8 (stage_1_and_2.py comment).
    # At the optimizer step this estimator holds exactly those terms.
    for run, row in _multi(2, "none"):
        p, n = run["total_params"], run["nodes"] * run["gpus_per_node"]
        step = _phase(run, row["options"], StepPhase.OPTIMIZER)
        assert step[BucketKey.WEIGHTS] == pytest.approx(2 * p, rel=1e-9), run["model"]
        assert step[BucketKey.GRADIENTS] == pytest.approx(2 * p / n, rel=1e-9), run["model"]
        # fp32 master 4 + Adam 8 + the fp32 gradient partition 4; the fused step counters are bytes.
        assert step[BucketKey.OPTIMIZER] == pytest.approx(16 * p / n, rel=1e-4), run["model"]
        model_state = sum(step[k] for k in (BucketKey.WEIGHTS, BucketKey.GRADIENTS, BucketKey.OPTIMIZER))
        assert model_state == pytest.approx(row["per_gpu_gib"] * GIB, abs=0.006 * GIB)  # DeepSpeed's own
    for run, row in _multi(2, "optimizer"):
        step = _phase(run, row["options"], StepPhase.OPTIMIZER)
        # Offloaded: DeepSpeed's whole GPU figure is the 16-bit parameters, and so is ours.
        assert step[BucketKey.WEIGHTS] == pytest.approx(row["per_gpu_gib"] * GIB, abs=0.006 * GIB)
        assert step[BucketKey.OPTIMIZER] == 0


def _forward_tail(model_id: str) -> int:
    """Elements ZeRO-3's coordinator keeps gathered from the forward's end into the backward, which
    DeepSpeed's model-state estimator does not count (it takes the largest layer only).

    microsoft/DeepSpeed v0.11.1 (e9503fe4), partitioned_param_coordinator.py ``__params_to_release``:
    a module followed by S elements in the forward is used again (its backward) 2·S elements of the
    trace later, and stays gathered while 2·S < stage3_max_reuse_distance (1e9 by default)."""
    spec = find_model(model_id).spec
    shapes = spec.linear_shapes()
    names = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    block = [shapes[name][0] * shapes[name][1] for name in names if name in shapes]
    modules = [spec.vocab_size * spec.hidden_size, *block[::-1] * spec.num_layers]
    if not spec.tie_embeddings:
        modules.append(spec.embedding_params())
    kept = after = 0
    for module in modules:
        if 2 * after >= 1_000_000_000:
            break
        kept, after = kept + module, after + module
    return kept


def test_zero3_shares_deepspeeds_partitions_and_largest_layer() -> None:
    for run, row in _multi(3, "none") + _multi(3, "optimizer"):
        p, n, largest = run["total_params"], run["nodes"] * run["gpus_per_node"], run["largest_layer_params"]
        # At the forward's end the forward's tail is gathered where it is larger than DeepSpeed's L
        # (Llama 3.2 1B: 5.0e8 elements, the head and the last projections; Llama 3.1 70B: the head, L).
        gathered = max(largest, _forward_tail(run["model"]))
        # stage3_prefetch_bucket_size 5e7, within stage3_max_live_parameters 1e9 (DeepSpeed
        # zero/config.py defaults): Llama 3.1 70B's 1.05e9-element embedding leaves no room.
        prefetch = min(50_000_000, max(0, 1_000_000_000 - gathered))
        forward = _phase(run, row["options"], StepPhase.FORWARD)
        # The 16-bit shard 2·P/N, and the gathered modules (DeepSpeed's L, the embedding, or the
        # forward's tail) with the prefetch bucket in 16 bits: DeepSpeed counts 4·L for L.
        assert forward[BucketKey.WEIGHTS] == pytest.approx(2 * p / n + 2 * (gathered + prefetch), rel=1e-6)
        if DS._offload(row["options"]) == "none":
            assert forward[BucketKey.OPTIMIZER] == pytest.approx(12 * p / n, rel=1e-4)


def _host_parts(run: dict, options: str) -> tuple[float, float]:  # type: ignore[type-arg]
    """(host bytes of the model state less the float32 gradient, that gradient) of one node."""
    est = estimate(DS.plan_for(run, options))
    assert est.host is not None
    fp32_grad = sum(t.bytes for t in est.host.terms if t.label.startswith("float32 gradient"))
    state = sum(t.bytes for t in est.host.terms if "pinned" in t.label) - fp32_grad
    return state, fp32_grad


def test_zero3_offload_host_memory_is_deepspeeds_without_its_buffer_factor() -> None:
    # DeepSpeed per CPU (zero_init=1): 18·P/n × 1.5 with parameters offloaded (2 16-bit +
    # 4 master + 8 Adam + 4 fp32 grads), 16·P/n × 1.5 with the optimizer only.
    sub_group = 1_000_000_000  # sub_group_size default: the fp32 gradient is cast a group at a time
    for offload, factor in (("params", 18), ("optimizer", 16)):
        for run, row in _multi(3, offload):
            p, nodes, per_node = run["total_params"], run["nodes"], run["gpus_per_node"]
            n = nodes * per_node
            state, fp32_grad = _host_parts(run, row["options"])
            assert row["per_cpu_gib"] * GIB == pytest.approx(factor * p / nodes * 1.5, abs=0.006 * GIB)
            # DeepSpeed's 4 for float32 gradients is, in stage3.py (v0.19.6 edaa7221), the
            # gradient partition ``grad_partitions_flat_buffer`` (lines 742-746, on
            # ``self.device``, the CPU with the optimizer offloaded, line 328) in
            # grad_accum_dtype, the model's bf16 (engine.py get_data_types): 2·P/n here, on
            # the host; the float32 copy is one sub-group's (below).
            assert state == pytest.approx((factor - 4 + 2) * p / nodes, rel=1e-4), (run["model"], offload)
            # DeepSpeed counts the whole fp32 gradient partition, we the group being stepped.
            assert fp32_grad == pytest.approx(per_node * min(p / n, sub_group) * 4, rel=1e-6)


def test_the_comparison_table_covers_every_training_row() -> None:
    rows = DS.compare(DATA)
    assert len(rows) == sum(len(_rows(s, o)) for s in (2, 3) for o in ("none", "optimizer", "params"))
    text = DS.render(rows, DATA["deepspeed_version"])
    assert "DeepSpeed 0.19.8" in text and all(r.model in text for r in rows)


def test_zero3_with_the_optimizer_offloaded_keeps_no_gradient_partition_on_the_gpu() -> None:
    # deepspeedai/DeepSpeed v0.19.6 (edaa7221) stage3.py line 328: ``self.device`` is the
    # CPU when offload_optimizer is set; lines 742-746 allocate grad_partitions_flat_buffer
    # on it (pinned). What the GPU keeps of the gradients is the ipg bucket
    # (``reduce_bucket_size`` elements in bf16, lines 731-735; 5e8 by zero/config.py), whole
    # even for a model with fewer parameters: nothing caps it.
    for offload in ("optimizer", "params"):
        for run, row in _multi(3, offload):
            step = _phase(run, row["options"], StepPhase.OPTIMIZER)
            assert step[BucketKey.GRADIENTS] == pytest.approx(500_000_000 * 2, rel=1e-9), run["model"]


def test_zero2_with_the_optimizer_offloaded_holds_no_gradient_partition_at_the_step() -> None:
    # stage_1_and_2.py (v0.19.6 edaa7221) copy_grads_in_partition: with cpu_offload each
    # reduced gradient goes straight to the float32 host partition and grads_in_partition
    # is never allocated; the GPU keeps temp_grad_buffer_for_gpu_offload, the largest
    # parameter's numel in bf16 (lines 558-567, 591-593): the embedding for these models
    # (DeepSpeed's own "largest layer" in the committed file).
    for run, row in _multi(2, "optimizer"):
        step = _phase(run, row["options"], StepPhase.OPTIMIZER)
        assert step[BucketKey.GRADIENTS] == pytest.approx(2 * run["largest_layer_params"], rel=1e-9), run["model"]


def test_one_gpu_with_zero_runs_deepspeeds_optimizer() -> None:
    # With one GPU the ZeRO partition is the whole model: DeepSpeed's own one-GPU row
    # (2·P + 18·P, committed output) is what this estimator holds at the step.
    rows = [(run, row) for run, row in _rows(2, "none") if run["nodes"] * run["gpus_per_node"] == 1]
    assert rows
    for run, row in rows:
        step = _phase(run, row["options"], StepPhase.OPTIMIZER)
        model_state = sum(step[k] for k in (BucketKey.WEIGHTS, BucketKey.GRADIENTS, BucketKey.OPTIMIZER))
        assert model_state == pytest.approx(row["per_gpu_gib"] * GIB, abs=0.006 * GIB), run["model"]
