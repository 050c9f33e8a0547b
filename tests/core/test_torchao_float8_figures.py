"""torchao's float8 / MX training READMEs as held-out evidence (benchmarks/realgpu/memory_figures.json,
source ``torchao-float8-torchtitan-2025``; docs/REAL_GPU_MEMORY.md, "torchao's float8 tables, held out").

The figures are the corpus records' (pytorch/ao 8c81863b torchao/float8/README.md: 8xH100; 853f87d1
the same file: 8xMI300X; d8bb51f6 torchao/prototype/mx_formats/README.md: 8xB200), Llama3-8B under
torchtitan, batch 1, 8,192 tokens, compile, FSDP2, per-op SAC. What the mapping reads was read at:
- pytorch/torchtitan 6fc499f6 torchtitan/models/attention.py: ``if has_cuda_capability(10, 0):
  cls.backends.insert(0, SDPBackend.CUDNN_ATTENTION)``; torchtitan/models/llama3/infra/parallelize.py
  ``_save_list`` names the flash and efficient SDPA ops only (cuDNN's joined in b39377f9, 2025-12-01);
- torchtitan/components/loss.py: compiled under --training.compile at 2c8b5947 and 6fc499f6, commented
  out ("compiling loss function causes CUDA errors") at 069bae28 and 54ef4222;
- torchtitan/config/job_config.py at 2c8b5947: ``recipe_name: Literal["tensorwise", "rowwise",
  "rowwise_with_gw_hp"]``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from core.dtypes import Dtype
from core.estimate import estimate
from core.plan import Attention, Float8, Stack, TorchVersion
from core.training.activations import selective_saved
from tests.scripts import load_script

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "realgpu"
SOURCE = "torchao-float8-torchtitan-2025"


@pytest.fixture(scope="module")
def mapping() -> ModuleType:
    return load_script(FOLDER / "mapping.py", "realgpu_mapping_torchao")


@pytest.fixture(scope="module")
def figures() -> dict[str, dict]:  # type: ignore[type-arg]
    corpus = json.loads((FOLDER / "memory_figures.json").read_text())
    return {f["id"]: f for f in corpus["figures"] if f["source_id"] == SOURCE}


def test_the_source_is_its_own_family_and_held_out(mapping: ModuleType, figures: dict) -> None:  # type: ignore[type-arg]
    assert len(figures) == 12
    for figure in figures.values():
        mapped = mapping.map_figure(figure)
        assert mapped.family == "torchao" and mapped.held_out


def test_the_float8_recipe_a_record_names_is_the_plans_or_listed(mapping: ModuleType, figures: dict) -> None:  # type: ignore[type-arg]
    def plan(name: str) -> object:
        return mapping.map_figure(figures[name]).plan

    assert plan("torchao-h100-llama3-8b-bf16").float8 is Float8.NONE  # type: ignore[attr-defined]
    tensorwise = plan("torchao-h100-llama3-8b-float8-tensorwise")
    assert tensorwise.float8 is Float8.TENSORWISE and tensorwise.parallel.fsdp_float8_all_gather  # type: ignore[attr-defined]
    rowwise = plan("torchao-mi300x-llama3-8b-float8-rowwise")
    assert rowwise.float8 is Float8.ROWWISE and not rowwise.parallel.fsdp_float8_all_gather  # type: ignore[attr-defined]
    # torchtitan's --float8.recipe_name=rowwise_with_gw_hp and its MX converter's two cuBLAS recipes (the records'
    # commands, benchmarks/float8/training/llama3.sh at pytorch/ao 49cb18a6) are the plan's own members.
    for name, recipe in (
        ("torchao-mi300x-llama3-8b-float8-rowwise-gw-hp", Float8.ROWWISE_GW_HP),
        ("torchao-b200-llama3-8b-mxfp8-cublas", Float8.MXFP8),
        ("torchao-b200-llama3-8b-mxfp8-cublas-rceil", Float8.MXFP8),
    ):
        mapped = mapping.map_figure(figures[name])
        assert mapped.missing == () and mapped.plan.float8 is recipe and not mapped.plan.parallel.fsdp_float8_all_gather
    # A recipe the plan does not have stays listed with its name.
    other = {**figures["torchao-b200-llama3-8b-mxfp8-cublas"]}
    other["recipe"] = {**other["recipe"], "float8_recipe": "mxfp4_cutlass"}
    mapped = mapping.map_figure(other)
    assert mapped.plan is None and mapped.missing == ("low-precision training recipe mxfp4_cutlass (torchao)",)


def test_the_august_2025_runs_compile_their_loss_and_the_march_run_does_not(
    mapping: ModuleType,
    figures: dict,  # type: ignore[type-arg]
) -> None:
    h100 = mapping.map_figure(figures["torchao-h100-llama3-8b-bf16"]).plan
    assert h100.stack is Stack.COMPILE and not h100.compiled_loss
    assert h100.hardware.torch_version is TorchVersion.V2_5_TO_2_7 and h100.hardware.nccl_avoid_record_streams
    for name in ("torchao-mi300x-llama3-8b-bf16", "torchao-b200-llama3-8b-bf16"):
        plan = mapping.map_figure(figures[name]).plan
        assert plan.stack is Stack.COMPILE and plan.compiled_loss
        assert plan.hardware.torch_version is TorchVersion.V2_8


def test_op_sac_on_a_b200_of_august_2025_keeps_no_attention_output(mapping: ModuleType, figures: dict) -> None:  # type: ignore[type-arg]
    b200 = mapping.map_figure(figures["torchao-b200-llama3-8b-bf16"]).plan
    mi300x = mapping.map_figure(figures["torchao-mi300x-llama3-8b-bf16"]).plan
    assert b200.attention is Attention.FLASH and mi300x.attention is Attention.SDPA

    def saved(plan: object) -> list[str]:
        # As the rank computes it: FSDP2 gathers the float32 shards in bf16 (core.parallel.state.compute_plan).
        bf16 = {"weight_dtype": Dtype.BF16, "base_dtype": Dtype.BF16, "adapter_dtype": Dtype.BF16}
        return [t.label for t in selective_saved(plan.with_changes(**bf16)).items]  # type: ignore[attr-defined]

    assert not any("attention" in label for label in saved(b200))
    assert "op SAC: attention output (saved)" in saved(mi300x)
    # One block's attention output, 8,192 tokens x 4,096 x 2 B, and its float32 log-sum-exp,
    # 32 heads x 8,192 x 4 B, times Llama 3's 32 blocks: what the B200 run does not keep.
    kept = (8_192 * 4_096 * 2 + 32 * 8_192 * 4) * 32
    sdpa = estimate(b200.with_changes(attention=Attention.SDPA))
    assert abs((sdpa.tensor_peak_bytes - estimate(b200).tensor_peak_bytes) - kept) < 0.05 * kept


def test_held_out_figures_are_scored_with_the_shipped_fit_and_move_it_not() -> None:
    bench = load_script(FOLDER / "memory.py", "realgpu_memory_torchao")
    result = bench.run()
    mine = [r for r in result.rows if r.mapped.source == SOURCE]
    # 9 figures, and the three whose recipe the plan has since h78ao (rowwise_with_gw_hp, mxfp8_cublas[_rceil]).
    assert len(mine) == 12
    # Scored with the fraction fitted on every other family, which is the shipped one: adding them
    # moved no constant (the fit on every family read 0.185 with them fitted on).
    assert all(r.fitted == result.fitted_without["torchao"] == result.fitted_all for r in mine)
    assert result.fitted_all == bench.fit_fraction(r for r in result.rows if r.mapped.source != SOURCE)
    # Each within ±6 % held out (torchao-mi300x-llama3-8b-float8-tensorwise, -5.7 %, the worst).
    assert max(abs(r.error_pct) for r in mine) < 6.0
