"""Expert load imbalance and the capacity factor (issue 24 item 4, issue 22): the busiest expert-parallel rank.

A plan's routing was balanced: every EP rank's experts received the mean N·k routed copies. Real runs learn to
favour some experts, and the step waits for the busiest rank. ``parallel.expert_imbalance`` is that rank's copies
÷ the mean (1.0, the default, is what Megatron-Core's ``moe_router_force_load_balancing`` and torchtitan's
``--debug.moe_force_load_balance`` force); Megatron-Core's ``moe_expert_capacity_factor`` caps it and
``moe_pad_expert_input_to_capacity`` fixes it (NVIDIA/Megatron-LM d98e8a64,
megatron/core/transformer/moe/moe_utils.py ``get_capacity``, token_dispatcher.py ``preprocess``,
transformer_config.py).

The numbers are arithmetic on Qwen3-30B-A3B's own dimensions (Qwen/Qwen3-30B-A3B config.json: hidden_size 2048,
num_hidden_layers 48, num_experts 128, num_experts_per_tok 8, moe_intermediate_size 768, a gated MLP).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from core.catalogue import find_gpu, find_model
from core.cli.app import main
from core.errors import PlanError, PlanFileError
from core.files import planfile
from core.files.launch import Target, export
from core.files.runconfig import loads_run_config, plan_from_run
from core.inputs import input_at
from core.parallel.comm import step_communication
from core.parallel.layout import expert_capacity, expert_load, layout
from core.params import param_counts
from core.plan import Parallelism, Plan, Stack, Strategy, Workload
from core.training.detailed import Rank, training_breakdown
from core.training.speed import step_work
from tests.core.planfile_compat import reload_and_without

QWEN3_MOE = find_model("qwen3-30b-a3b").spec
D, LAYERS, EXPERTS, TOP_K, EXPERT_I = 2048, 48, 128, 8, 768  # Qwen/Qwen3-30B-A3B config.json
N = 4096  # micro-batch 1 × sequence 4,096 on one rank (no CP, no TP)


def _plan(stack: Stack = Stack.MEGATRON, ep: int = 8, accum: int = 4, **par: object) -> Plan:
    return Plan(
        model=QWEN3_MOE,
        model_id="qwen3-30b-a3b",
        parallel=Parallelism(nodes=1, gpus_per_node=8, strategy=Strategy.ZERO1, expert_parallel=ep, **par),  # type: ignore[arg-type]
        workload=Workload(micro_batch=1, seq_len=N, grad_accum=accum),
        stack=stack,
    )


# ---- the rule -----------------------------------------------------------------------------
def test_the_capacity_is_megatrons_ceiling_of_the_even_share_times_the_factor() -> None:
    # moe_utils.py get_capacity at d98e8a64: math.ceil((num_tokens / num_experts) * capacity_factor), num_tokens =
    # routing_map.size(0) * moe_router_topk (token_dispatcher.py preprocess): 4,096 × 8 = 32,768 copies over 128
    # experts is 256 each; × 1.1 = 281.6 -> 282; × 1.0 -> 256; × 1.25 -> 320.
    assert expert_capacity(N * TOP_K, EXPERTS, 1.1) == 282
    assert expert_capacity(N * TOP_K, EXPERTS, 1.0) == 256
    assert expert_capacity(N * TOP_K, EXPERTS, 1.25) == 320


def test_balanced_routing_is_the_default_and_leaves_every_plan_as_it_was() -> None:
    assert input_at("parallel.expert_imbalance").default == 1.0
    assert input_at("parallel.capacity_factor").default == 0.0  # Megatron's None: dropless
    assert expert_load(_plan()) == 1.0
    assert estimate_step(_plan()) == estimate_step(_plan(expert_imbalance=1.0))


def test_the_imbalance_applies_under_expert_parallel_and_is_at_most_ep() -> None:
    assert expert_load(_plan(expert_imbalance=1.3)) == 1.3
    # One rank holding every routed copy is EP times the mean: the most there is.
    assert expert_load(_plan(expert_imbalance=20.0)) == 8.0
    # EP 1: every rank runs every expert on its own tokens, so no rank waits for another's routing.
    assert expert_load(_plan(ep=1, expert_imbalance=1.3)) == 1.0
    # A dense model has no experts.
    dense = Plan(model=find_model("llama-3.1-8b").spec, parallel=Parallelism(gpus_per_node=8, expert_imbalance=1.3))
    assert expert_load(dense) == 1.0


def test_a_capacity_factor_caps_the_busiest_rank() -> None:
    # Each expert takes at most 282 of a rank's 32,768 copies (above): a rank's 16 experts take at most 16 × 282
    # from each of the 8 sources, 128 × 282 = 36,096 copies, 1.1015625 × the mean 32,768.
    capped = _plan(expert_imbalance=1.3, capacity_factor=1.1)
    assert expert_load(capped) == 128 * 282 / 32_768 == 1.1015625
    # Below the cap the routing's own imbalance stands.
    assert expert_load(_plan(expert_imbalance=1.05, capacity_factor=1.1)) == 1.05


def test_padding_to_capacity_holds_the_capacity_whatever_the_routing() -> None:
    # token_dispatcher.py preprocess with drop_and_pad: num_out_tokens = capacity * num_experts, every local expert
    # capacity × EP rows: 320 × 128 / 32,768 = 1.25 × the mean on every rank, balanced or not, under EP 1 too.
    assert expert_load(_plan(capacity_factor=1.25, pad_to_capacity=True)) == 1.25
    assert expert_load(_plan(capacity_factor=1.25, pad_to_capacity=True, expert_imbalance=1.1)) == 1.25
    assert expert_load(_plan(ep=1, capacity_factor=1.25, pad_to_capacity=True)) == 1.25


def test_only_megatron_drops_tokens() -> None:
    # torchtitan's token-choice MoE and transformers' experts are dropless (torchtitan b5bcd76 has no capacity
    # factor outside its HybridEP buffer sizing): the factor is Megatron's alone, and its row shows there only.
    titan = _plan(stack=Stack.COMPILE, expert_imbalance=1.3, capacity_factor=1.1)
    assert expert_load(titan) == 1.3
    assert not input_at("parallel.capacity_factor").matters(titan)
    assert input_at("parallel.capacity_factor").matters(_plan())
    assert input_at("parallel.expert_imbalance").matters(titan)
    assert not input_at("parallel.expert_imbalance").matters(_plan(ep=1))


# ---- the time -----------------------------------------------------------------------------
def estimate_step(plan: Plan) -> float:
    return step_work(plan, param_counts(plan), find_gpu("h100-sxm")).hardware_flops


def test_the_busiest_ranks_expert_matmuls_scale_with_its_share() -> None:
    # The routed experts' matmuls: gate|up (d -> 2I) and down (I -> d), 2 FLOPs a multiply-add, forward, input and
    # weight gradient (3 passes), for the rank's N·k copies, 48 layers, 4 micro-batches. The router (one d × E
    # matmul on the rank's own N tokens) and attention do not move.
    experts = 3 * 2 * 3 * D * EXPERT_I * N * TOP_K * LAYERS * 4
    base = estimate_step(_plan())
    assert estimate_step(_plan(expert_imbalance=1.3)) - base == pytest.approx(0.3 * experts, rel=1e-12)
    assert estimate_step(_plan(capacity_factor=1.25, pad_to_capacity=True)) - base == pytest.approx(
        0.25 * experts, rel=1e-12
    )


def test_the_busiest_rank_sorts_more_received_copies_and_padding_permutes_the_capacity() -> None:
    # Megatron's alltoall dispatcher (test_expert_parallel.py): permute + unpermute (N + N·k rows each way) and the
    # sort of the received copies by local expert and back (2·N·k each way). The busiest rank sorts 1.3 × the
    # copies; padded to capacity (1.25, above) the permute writes the capacity's rows too.
    def permute(plan: Plan) -> float:
        return step_work(plan, param_counts(plan), find_gpu("h100-sxm")).features["moe_permute"]

    rows = (N + N * TOP_K) * 2 + 2 * N * TOP_K * 2
    busy = (N + N * TOP_K) * 2 + 2 * N * TOP_K * 2 * 1.3
    padded = (N + N * TOP_K * 1.25) * 2 + 2 * N * TOP_K * 2 * 1.25
    assert permute(_plan(expert_imbalance=1.3)) == pytest.approx(permute(_plan()) * busy / rows)
    assert permute(_plan(capacity_factor=1.25, pad_to_capacity=True)) == pytest.approx(permute(_plan()) * padded / rows)


def test_the_all_to_all_waits_for_the_busiest_ranks_receive() -> None:
    def a2a(plan: Plan) -> float:
        comm = step_communication(plan, param_counts(plan), 10.0, 1 / 3)
        (term,) = [t for t in comm.terms if t.label.startswith("expert-parallel all-to-all")]
        assert ("busiest rank's" in term.formula) is (expert_load(plan) != 1.0)
        return term.bytes

    # N·k·d in bf16, (n−1)/n of it, 4 all-to-alls a layer, 48 layers, 4 micro-batches (test_expert_parallel.py).
    balanced = N * TOP_K * D * 2 * 7 / 8 * 4 * LAYERS * 4
    assert a2a(_plan()) == pytest.approx(balanced)
    assert a2a(_plan(expert_imbalance=1.3)) == pytest.approx(1.3 * balanced)


def test_a_busier_rank_takes_longer_a_step() -> None:
    from core.estimate import estimate

    def seconds(plan: Plan) -> float:
        return estimate(plan).compute.step_seconds  # type: ignore[union-attr]

    assert seconds(_plan()) < seconds(_plan(expert_imbalance=1.1)) < seconds(_plan(expert_imbalance=1.3))
    assert seconds(_plan(expert_imbalance=1.3, capacity_factor=1.1)) < seconds(_plan(expert_imbalance=1.3))


# ---- the memory ---------------------------------------------------------------------------
def _block_backward(plan: Plan) -> float:
    lay = layout(plan)
    phases = training_breakdown(plan, param_counts(plan), Rank(lay, lay.stages[0])).phases
    terms = [t for p in phases for b in p.buckets for t in b.terms if t.label.startswith("gradients through a block")]
    return terms[0].bytes


def test_the_all_to_all_buffer_holds_the_busiest_ranks_copies() -> None:
    # The all-to-all's received copy of the routed tokens beside a block's backward (test_expert_parallel.py):
    # N·k·d × 2 B balanced, 1.3 times it on the busiest rank.
    base = _plan().with_changes(fused_loss=True)
    busy = _plan(expert_imbalance=1.3).with_changes(fused_loss=True)
    assert _block_backward(busy) - _block_backward(base) == pytest.approx(0.3 * N * TOP_K * D * 2)


def test_the_busiest_rank_keeps_more_routed_activations() -> None:
    from core.training.activations import layer_activations

    def routed(plan: Plan) -> float:
        acts = layer_activations(plan, True)
        return sum(t.bytes for t in acts.items if t.label.startswith("experts:"))

    plan = _plan(stack=Stack.COMPILE)
    assert routed(plan.with_parallel(expert_imbalance=1.3)) == pytest.approx(1.3 * routed(plan))
    busy = layer_activations(plan.with_parallel(expert_imbalance=1.3), True).items
    assert [t.formula.split("·")[0] for t in busy if t.label.startswith("experts:")] == ["1.3 × N"] * 3


# ---- bad input ----------------------------------------------------------------------------
def test_an_imbalance_below_one_or_a_negative_factor_is_refused_in_one_line() -> None:
    with pytest.raises(PlanError, match=r"^parallel\.expert_imbalance: 0\.9 is not allowed; expected a number from 1"):
        Parallelism(gpus_per_node=8, expert_parallel=8, expert_imbalance=0.9)
    with pytest.raises(
        PlanError, match=r"^parallel\.capacity_factor: -1\.0 is not allowed; expected 0 \(no dropping\)"
    ):
        Parallelism(gpus_per_node=8, capacity_factor=-1.0)
    # Megatron's __post_init__: "moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity".
    with pytest.raises(PlanError, match=r"^parallel\.pad_to_capacity: True .*capacity factor"):
        Parallelism(gpus_per_node=8, pad_to_capacity=True)


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (("--expert-imbalance", "0.5"), "parallel.expert_imbalance"),
        (("--capacity-factor", "-1"), "parallel.capacity_factor"),
        (("--stack", "megatron", "--pad-to-capacity"), "parallel.pad_to_capacity"),
    ],
)
def test_the_command_line_refuses_bad_values_in_one_line(
    capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], fragment: str
) -> None:
    code = main(["estimate", "--model", "qwen3-30b-a3b", "--gpus-per-node", "8", "--ep", "8", *flags])
    _out, err = capsys.readouterr()
    assert code == 2 and fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_the_command_line_sets_them(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    flags = ["--stack", "megatron", "--expert-imbalance", "1.3", "--capacity-factor", "1.1", "--pad-to-capacity"]
    code = main(
        ["estimate", "--model", "qwen3-30b-a3b", "--gpus-per-node", "8", "--ep", "8", *flags, "--save", str(path)]
    )
    capsys.readouterr()
    assert code == 0
    par = planfile.load(path).parallel
    assert (par.expert_imbalance, par.capacity_factor, par.pad_to_capacity) == (1.3, 1.1, True)


def test_plan_files_keep_them_older_files_read_balanced_and_bad_ones_are_refused(tmp_path: Path) -> None:
    plan = _plan(expert_imbalance=1.3, capacity_factor=1.1, pad_to_capacity=True)
    for key in ("expert_imbalance", "capacity_factor"):
        loaded, older = reload_and_without(plan.with_parallel(pad_to_capacity=False), tmp_path, "parallel", key)
        assert loaded == plan.with_parallel(pad_to_capacity=False)
        assert getattr(older.parallel, key) == input_at(f"parallel.{key}").default
    loaded, older = reload_and_without(plan, tmp_path, "parallel", "pad_to_capacity")
    assert loaded == plan and older.parallel.pad_to_capacity is False
    path = tmp_path / "plan.json"
    planfile.save(_plan(), path)
    text = path.read_text().replace('"expert_imbalance": 1.0', '"expert_imbalance": 0.5')
    with pytest.raises(PlanFileError, match=r"parallel\.expert_imbalance: 0\.5 is not allowed") as caught:
        planfile.loads(text)
    assert "\n" not in str(caught.value)


# ---- the configs --------------------------------------------------------------------------
def _read(model: dict[str, object]):  # type: ignore[no-untyped-def]
    return loads_run_config(yaml.safe_dump({"train": {"micro_batch_size": 1}, "model": model}).encode(), "run.yaml")


def test_the_megatron_bridge_importer_reads_the_factor_and_the_padding() -> None:
    run = _read({"moe_expert_capacity_factor": 1.25, "moe_pad_expert_input_to_capacity": True})
    assert (run.settings.capacity_factor, run.settings.pad_to_capacity) == (1.25, True)
    par = plan_from_run(run, _plan()).parallel
    assert (par.capacity_factor, par.pad_to_capacity) == (1.25, True)
    # null (Megatron-Core's default) and a negative factor (set to None by its __post_init__) are dropless.
    assert _read({"moe_expert_capacity_factor": None}).settings.capacity_factor == 0.0
    assert _read({"moe_expert_capacity_factor": -1}).settings.capacity_factor == 0.0
    assert _read({"moe_grouped_gemm": True}).settings.capacity_factor is None  # not said: the plan keeps its own
    with pytest.raises(PlanFileError, match="moe_expert_capacity_factor: 0 is not allowed"):
        _read({"moe_expert_capacity_factor": 0})


def test_the_megatron_bridge_export_writes_them_and_reads_them_back() -> None:
    plan = _plan(capacity_factor=1.25, pad_to_capacity=True)
    out = export(plan, Target.MEGATRON_BRIDGE)
    model = yaml.safe_load(out.text)["model"]
    assert (model["moe_expert_capacity_factor"], model["moe_pad_expert_input_to_capacity"]) == (1.25, True)
    assert not {"parallel.capacity_factor", "parallel.pad_to_capacity"} & {u.field for u in out.unexpressed}
    back = plan_from_run(loads_run_config(out.text.encode(), "run_config.yaml"), _plan()).parallel
    assert (back.capacity_factor, back.pad_to_capacity) == (1.25, True)
    assert "moe_expert_capacity_factor" not in yaml.safe_load(export(_plan(), Target.MEGATRON_BRIDGE).text)["model"]


def test_the_imbalance_is_no_frameworks_setting_and_the_exports_say_so() -> None:
    busy = _plan(stack=Stack.COMPILE, expert_imbalance=1.3).with_parallel(strategy=Strategy.FSDP)
    titan = {u.field: u.why for u in export(busy, Target.TORCHTITAN).unexpressed}
    assert "not a setting" in titan["parallel.expert_imbalance"]
    assert "parallel.expert_imbalance" not in {
        u.field for u in export(_plan(stack=Stack.COMPILE), Target.TORCHTITAN).unexpressed
    }


def test_megatrons_capacity_is_a_ceiling_not_a_round() -> None:
    # 4,095 tokens: 32,760 copies ÷ 128 = 255.9375, × 1.0 = 255.9375 -> 256 (a round would give 256 too; × 1.002
    # = 256.449 -> 257 where a round gives 256).
    assert expert_capacity(4095 * TOP_K, EXPERTS, 1.002) == 257 == math.ceil(32_760 / 128 * 1.002)
