"""MPT's LPLayerNorm as a model flag (``ModelSpec.low_precision_layernorm``).

llm-foundry's benchmark script sets it for every run it submits: mosaicml/examples 71dd21bd
``examples/llm/throughput/submit_benchmarks.py`` L270 ``parameters['model']['low_precision_layernorm'] = True``
(the A100 40GB table's commit, Composer 0.13.2) and mosaicml/llm-foundry b2a43a147 / 5e85bd62d / 495218376
``scripts/train/benchmarking/submit_benchmarks.py`` L307 ``parameters['model']['norm_type'] =
'low_precision_layernorm'``. LPLayerNorm.forward (mosaicml/composer v0.13.2
``composer/algorithms/low_precision_layernorm/low_precision_layernorm.py``; llm-foundry b2a43a147
``llmfoundry/models/layers/norm.py``) casts the input, weight and bias to the autocast dtype and calls
F.layer_norm with autocast off. native_layer_norm saves that input, mean and rstd (pytorch/pytorch
``tools/autograd/derivatives.yaml``), mean and rstd in the accumulate type, float32, and its output is
``empty_like`` the input (``aten/src/ATen/native/cuda/layer_norm_kernel.cu`` ``layer_norm_cuda``).
nn.LayerNorm is on autocast's float32 list instead: its input is cast up and kept in float32.

Figures: benchmarks/realgpu/throughput_figures.json, the 78 rows of mosaicml/llm-foundry@4952183
scripts/train/benchmarking/README.md '## A100 40GB with 1600 Gbps node-node interconnect (RoCE)', runs that ran
on cards of 40 GiB."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

from core.dtypes import Autocast
from core.errors import PlanError
from core.estimate import estimate
from core.inputs import Preset
from core.model import ModelSpec, model_from_dict
from core.plan import Plan
from core.training.activations import layer_activations, outside_blocks
from core.verdict import Verdict
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "benchmarks" / "realgpu"
MPT_1B = "mosaic-a10040gb-bf16-1b-s2048-g32-mb10"  # |  1b | 2048 | 32 | a100_40gb | ... | 10 | 1 | ...
# MPT-1b (mpt-1b.yaml): d_model 2048, n_layers 24; micro-batch 10 × 2,048 tokens: N = 20,480.
N, D, LAYERS = 10 * 2_048, 2_048, 24
CARD_40GB = 40 * 2**30  # a100_40gb: 40,960 MiB


def _throughput() -> ModuleType:
    return load_script(FOLDER / "throughput.py", "throughput_benchmark_lp_layernorm")


def _figures() -> list[dict[str, object]]:
    return list(json.loads((FOLDER / "throughput_figures.json").read_text())["figures"])


def _mpt_1b() -> Plan:
    row = next(f for f in _figures() if f["id"] == MPT_1B)
    return _throughput().case_of(row).plan


def _without(plan: Plan) -> Plan:
    return plan.with_changes(model=replace(plan.model, low_precision_layernorm=False))


def _models() -> list[tuple[dict, ModelSpec]]:  # type: ignore[type-arg]
    """Every throughput row the benchmark can express, with the model it builds for it."""
    throughput = _throughput()
    found = []
    for row in _figures():
        try:
            found.append((row, throughput.model_of(row)[0]))
        except throughput.NotExpressible:
            continue
    return found


def test_every_mosaicml_model_runs_lplayernorm_and_no_other_source_does() -> None:
    for row, model in _models():
        assert model.low_precision_layernorm is (row["source_id"] == "mosaicml-llm-foundry"), row["id"]


def test_the_norm_keeps_its_input_and_writes_its_output_in_the_autocast_dtype() -> None:
    plan = _mpt_1b()  # bf16 autocast over float32 masters
    kept = {t.label: t.bytes for t in layer_activations(plan, True).items}
    assert kept["attention norm: input (LPLayerNorm, the autocast dtype)"] == N * D * 2
    assert kept["MLP norm: input (LPLayerNorm, the autocast dtype)"] == N * D * 2
    assert kept["attention norm: mean, 1/std (float32)"] == 2 * N * 4
    # The bf16 output reaches q, k and v (and the MLP) as it is: one tensor, however many matmuls read it.
    assert kept["attention norm output"] == N * D * 2
    assert kept["MLP input"] == N * D * 2
    outside = {t.label: t.bytes for t in outside_blocks(plan).items}
    assert outside["final norm: input (LPLayerNorm, the autocast dtype)"] == N * D * 2
    assert outside["final norm output (head input)"] == N * D * 2
    # nn.LayerNorm under the same autocast keeps a float32 input.
    plain = {t.label: t.bytes for t in layer_activations(_without(plan), True).items}
    assert plain["attention norm: input"] == N * D * 4


def test_mpt_1b_peaks_4_bytes_per_token_and_width_lower_per_block_than_with_nn_layernorm() -> None:
    # The rank computes in FSDP's bf16 parameters (MP Mode PURE): with nn.LayerNorm each of a block's two
    # norms keeps a float32 copy of its bf16 input (4 B), LPLayerNorm the input itself (2 B): 2 × 2 B a token
    # and width per block, and 2 B for the final norm. 98 × N·d = 4,110,417,920 B.
    plan = _mpt_1b()
    assert estimate(_without(plan)).peak_bytes - estimate(plan).peak_bytes == (LAYERS * 4 + 2) * N * D


def test_the_mosaicml_a100_40gb_runs_peak_below_their_card_and_none_reads_out_of_memory() -> None:
    throughput = _throughput()
    rows = [f for f in _figures() if f["source_id"] == "mosaicml-llm-foundry" and f["gpu"] == "a100_40gb"]
    assert len(rows) == 78
    for row in rows:
        result = estimate(throughput.case_of(row).plan)
        assert result.peak_bytes < CARD_40GB, row["id"]
        assert result.verdict is not Verdict.OOM, row["id"]
    # The largest, MPT-1b at 10 × 2,048 tokens: 41.5 GB allocated with nn.LayerNorm, 37.4 GB with LPLayerNorm.
    assert estimate(_mpt_1b()).peak_bytes == pytest.approx(37.35e9, rel=1e-3)


def test_without_autocast_lplayernorm_is_nn_layernorm() -> None:
    plan = _mpt_1b().with_changes(preset=Preset.PURE_BF16)
    assert plan.autocast is Autocast.NONE
    assert layer_activations(plan, True) == layer_activations(_without(plan), True)


def test_the_flag_round_trips_through_a_plan_file_and_is_refused_on_an_rmsnorm_model() -> None:
    model = _mpt_1b().model
    assert model_from_dict(json.loads(json.dumps(model.to_dict()))) == model
    older = {k: v for k, v in model.to_dict().items() if k != "low_precision_layernorm"}
    assert model_from_dict(older).low_precision_layernorm is False  # a file written before the flag
    with pytest.raises(PlanError, match="model.low_precision_layernorm"):
        model_from_dict({**model.to_dict(), "low_precision_layernorm": "yes"})
    with pytest.raises(PlanError, match="model.low_precision_layernorm"):
        replace(model, norm="rmsnorm")


def test_every_mosaicml_model_computes_q_k_v_in_one_fused_linear() -> None:
    # MPT's attention: ``self.Wqkv = nn.Linear(self.d_model, 3 * self.d_model)`` and ``qkv = self.Wqkv(x)``
    # (mosaicml/examples 71dd21bd examples/llm/src/models/layers/attention.py L267, L307; llm-foundry b2a43a147
    # llmfoundry/models/layers/attention.py L518, L562): one d × 3d GEMM where unfused q, k, v are three.
    for row, model in _models():
        if row["source_id"] == "mosaicml-llm-foundry":
            assert model.fused_qkv and not model.gated_mlp, row["id"]
