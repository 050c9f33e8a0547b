"""PEFT's FourierFT and RoAd (branch h76peft): what each trains per target, what its forward keeps, its matmuls, the
plan through the command line, adapter_config.json and the exporters.

Source read: huggingface/peft 51c2ff666b142d004c12609c9686cf17ca055751 (PEFT 0.19.2.dev0, the version of the
method_comparison results): src/peft/tuners/fourierft/layer.py (``update_layer``, ``get_delta_weight``,
``FourierFTLinear.forward``), fourierft/config.py (n_frequency 1000); src/peft/tuners/road/layer.py (``update_layer``,
``Linear.forward``, ``_prepare_cols``, ``_apply_road``), road/config.py (variant road_1, group_size 64). PEFT 0.18.0's
forwards are 51c2ff66's (only update_layer's signature differs): tools/measure/peft_more_check.py ran on it.
"""

from __future__ import annotations

import json

import pytest

from core.cli.app import main
from core.dtypes import Dtype
from core.errors import PlanError, PlanFileError
from core.files.launch import Target, export
from core.files.runconfig import loads_run_config
from core.hfconfig import model_from_hf_config
from core.params import param_counts
from core.plan import (
    FOURIERFT_DEFAULT_FREQUENCIES,
    Autocast,
    LoraSettings,
    Method,
    Plan,
    Preset,
    RoadVariant,
)
from core.presets import default_plan, plan_for_model
from core.training.activations import layer_activations
from core.training.flops import ADAPTER_GEMMS, block_gemms
from core.training.optimizer import adafactor_state_elements, adapter_tensor_sizes, trainable_tensors
from tests.core.test_miss import TINY  # the tiny Llama PEFT 0.18.0 counted on (hidden 256, MLP 512, kv 128, 2 layers)

D, KV, LAYERS = 3072, 1024, 28  # Llama-3.2-3B config.json: hidden_size, 8 kv heads × 128, num_hidden_layers
N = 4 * 768  # the corpus rows' micro-batch 4 at 768 tokens (memory_figures.json)
DELTA = "FourierFT: each target's delta weight, kept by F.linear"
INDICES = "FourierFT: spectrum indices (int64), kept by the scatter"
ROTATED = "RoAd: the output and its rotated half, kept"
COLUMNS = "RoAd: the angle and scale columns, kept"
ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _plan(method: Method, lora: LoraSettings, **kw: object) -> Plan:
    # The method comparison's recipe: bf16 model, float32 adapters (autocast_adapter_dtype), no autocast.
    kw.setdefault("preset", Preset.CUSTOM)
    kw.setdefault("base_dtype", Dtype.BF16)
    kw.setdefault("adapter_dtype", Dtype.FP32)
    kw.setdefault("autocast", Autocast.NONE)
    return plan_for_model("llama-3.2-3b", method=method, lora=lora, **kw).with_workload(micro_batch=4, seq_len=768)


def _fourierft(n: int = 1000, **kw: object) -> Plan:
    return _plan(Method.FOURIERFT, LoraSettings(rank=n, targets=("q_proj", "v_proj")), **kw)


def _road(variant: RoadVariant = RoadVariant.ROAD_2, **kw: object) -> Plan:
    return _plan(Method.ROAD, LoraSettings(targets=("q_proj", "v_proj"), road_variant=variant), **kw)


def _terms(plan: Plan) -> dict[str, float]:
    return {t.label: t.bytes for t in layer_activations(plan, False).items}


def _tiny(method: Method, lora: LoraSettings) -> Plan:
    return default_plan().with_changes(model=model_from_hf_config(TINY, "tiny"), method=method, lora=lora)


@pytest.mark.parametrize(("n", "peft_count"), [(1000, 56_000), (5000, 280_000)])
def test_fourierft_trains_peft_s_count(n: int, peft_count: int) -> None:
    # fourierft--llama-3.2-3B-default.json and -n_frequency-5000.json (51c2ff66 results): "num_trainable_params":
    # 56000 and 280000 = 28 layers × 2 targets × n_frequency.
    plan = _fourierft(n)
    assert (param_counts(plan).trainable, trainable_tensors(plan)) == (peft_count, LAYERS * 2)
    assert adapter_tensor_sizes(plan) == [n, n]
    # Adafactor keeps a 1-D spectrum whole.
    assert adafactor_state_elements(plan) == LAYERS * 2 * n


@pytest.mark.parametrize(
    ("variant", "peft_count"),
    # road--llama-3.2-3B-lr_0.001.json (51c2ff66 results, variant road_2): "num_trainable_params": 229376; road_1 and
    # road_4 train half and twice that (road/layer.py update_layer: out // 2, out, out * 2 angles and as many scales).
    [(RoadVariant.ROAD_1, 114_688), (RoadVariant.ROAD_2, 229_376), (RoadVariant.ROAD_4, 458_752)],
)
def test_road_trains_peft_s_count(variant: RoadVariant, peft_count: int) -> None:
    plan = _road(variant)
    assert (param_counts(plan).trainable, trainable_tensors(plan)) == (peft_count, LAYERS * 4)
    assert adafactor_state_elements(plan) == peft_count  # 1-D angles and scales: kept whole


@pytest.mark.parametrize(
    ("method", "lora", "peft_count"),
    [
        # PEFT 0.18.0 (torch 2.13 CPU), get_peft_model(LlamaForCausalLM(TINY), config) and the requires_grad
        # parameters summed: FourierFTConfig(n_frequency=1000) on q_proj, v_proj: 4000; n 300 on every linear: 4200;
        # RoadConfig road_1 / road_2 / road_4 on q_proj, v_proj: 768 / 1536 / 3072; road_2 on every linear: 8192.
        (Method.FOURIERFT, LoraSettings(rank=1000, targets=("q_proj", "v_proj")), 4_000),
        (Method.FOURIERFT, LoraSettings(rank=300, targets=ALL), 4_200),
        (Method.ROAD, LoraSettings(targets=("q_proj", "v_proj"), road_variant=RoadVariant.ROAD_1), 768),
        (Method.ROAD, LoraSettings(targets=("q_proj", "v_proj"), road_variant=RoadVariant.ROAD_2), 1_536),
        (Method.ROAD, LoraSettings(targets=("q_proj", "v_proj"), road_variant=RoadVariant.ROAD_4), 3_072),
        (Method.ROAD, LoraSettings(targets=ALL, road_variant=RoadVariant.ROAD_2), 8_192),
    ],
)
def test_tiny_llama_counts_are_peft_s(method: Method, lora: LoraSettings, peft_count: int) -> None:
    assert param_counts(_tiny(method, lora)).trainable == peft_count


def test_fourierft_refuses_more_coefficients_than_a_target_has() -> None:
    # PEFT 0.18.0 on TINY: FourierFTConfig(n_frequency=40000, target_modules=["v_proj"]) raises "`n_frequency` should
    # be less than or equal to the product of the input and output dimensions ... the product is 32768" (256 × 128).
    with pytest.raises(PlanError, match="32,768"):
        _tiny(Method.FOURIERFT, LoraSettings(rank=40_000, targets=("v_proj",)))
    assert param_counts(_tiny(Method.FOURIERFT, LoraSettings(rank=32_768, targets=("v_proj",)))).trainable == 65_536


def test_fourierft_keeps_the_delta_and_the_input_copy() -> None:
    # FourierFTLinear.forward: F.linear(x.to(float32), delta) keeps the float32 (out × in) delta and the float32 copy of
    # x per target; the scatter keeps the 2 × n int64 indices. tools/measure/peft_more_check.py (N 128, d 256, kv 64,
    # n 100): 593,024 B = 2 × 128 × 256 × 4 + (256 × 256 + 64 × 256) × 4 + 2 × 2 × 100 × 8, the rule to the byte.
    terms = _terms(_fourierft())
    assert terms[DELTA] == (D * D + KV * D) * 4
    assert terms[INDICES] == 2 * 2 * 1000 * 8
    assert terms["attention norm output, cast per adapter (PEFT / autocast)"] == 2 * N * D * 4
    # The delta does not grow with the tokens; the copy does.
    longer = _terms(_fourierft().with_workload(micro_batch=8, seq_len=768))
    assert longer[DELTA] == terms[DELTA]
    # Under bf16 autocast F.linear keeps its 16-bit casts of the delta (and of x).
    cast = _terms(_fourierft(autocast=Autocast.BF16, base_dtype=Dtype.FP32))
    assert cast[DELTA] == (D * D + KV * D) * 2


def test_road_keeps_the_float32_output_and_its_rotation() -> None:
    # _apply_road: x * first_col + rotate_half_x * second_col on the float32 cast of the base output; each multiply
    # keeps its tensor (N × out) and its column. tools/measure/peft_more_check.py (N 128, q 256 and v 64 outputs):
    # 327,680 B = 2 × 128 × 320 × 4 of outputs, and 6 (road_1), 4 (road_2) or 6 (road_4, 4 on the one-group v_proj)
    # out-long float32 columns a target (335,360 / 332,800 / 334,848 B in all, each the rule to the byte).
    plan = _road()
    terms = _terms(plan)
    assert terms[ROTATED] == 2 * N * (D + KV) * 4
    assert terms[COLUMNS] == 4 * (D + KV) * 4
    assert _terms(_road(RoadVariant.ROAD_1))[COLUMNS] == 6 * (D + KV) * 4
    assert _terms(_road(RoadVariant.ROAD_4))[COLUMNS] == 6 * (D + KV) * 4  # the strided scale halves copied
    # The frozen base keeps no copy of x for RoAd (no "cast per adapter" term, as LoRA's).
    assert not any("cast per adapter" in label for label in terms)
    # Elementwise multiplies are not autocast: the float32 copies stay float32 under bf16 autocast.
    assert _terms(_road(autocast=Autocast.BF16, base_dtype=Dtype.FP32))[ROTATED] == terms[ROTATED]


def test_matmuls() -> None:
    # FourierFT: F.linear(x, delta), the whole in → out matmul whose weight (the delta) gets a gradient, as LoHa's.
    gemms = {g.name: (g.k, g.n) for g in block_gemms(_fourierft()) if "delta" in g.name}
    assert gemms == {"q_proj delta weight": (D, D), "v_proj delta weight": (D, KV)}
    # RoAd multiplies elementwise: no adapter matmul beside the frozen projections.
    assert not [g.name for g in block_gemms(_road()) if g.name.endswith(ADAPTER_GEMMS)]
    assert [g.name for g in block_gemms(_fourierft()) if g.name.endswith(ADAPTER_GEMMS)]


def test_switching_to_fourierft_takes_its_default_count() -> None:
    # FourierFTConfig n_frequency: 1000 by default (51c2ff66 src/peft/tuners/fourierft/config.py); LoRA's 8 comes back.
    plan = default_plan().with_method(Method.LORA)
    fourier = plan.with_method(Method.FOURIERFT)
    assert fourier.lora.rank == FOURIERFT_DEFAULT_FREQUENCIES == 1000
    assert fourier.with_method(Method.LORA).lora.rank == 8


def _config(**doc: object) -> bytes:
    return json.dumps({"base_model_name_or_path": "meta-llama/Llama-3.2-3B", **doc}).encode()


def test_adapter_configs_are_read_and_their_other_rules_refused() -> None:
    # experiments/fourierft/llama-3.2-3B-n_frequency-5000 and road/llama-3.2-3B-lr_0.001 (51c2ff66 results'
    # peft_config keys).
    fourier = _config(
        peft_type="FOURIERFT", n_frequency=5000, scaling=300, random_loc_seed=777, target_modules=["q_proj", "v_proj"],
        bias="none", n_frequency_pattern={}, init_weights=False, fan_in_fan_out=False,
    )  # fmt: skip
    settings = loads_run_config(fourier, "adapter_config.json").settings
    assert (settings.method, settings.lora_rank, settings.lora_targets) == ("fourierft", 5000, ("q_proj", "v_proj"))
    road = _config(peft_type="ROAD", variant="road_2", group_size=64, init_weights=True, target_modules=["v_proj"])
    settings = loads_run_config(road, "adapter_config.json").settings
    assert (settings.method, settings.road_variant, settings.lora_targets) == ("road", "road_2", ("v_proj",))
    # The defaults where a file leaves them out: n_frequency 1000, road_1.
    assert loads_run_config(_config(peft_type="FOURIERFT"), "a.json").settings.lora_rank == 1000
    assert loads_run_config(_config(peft_type="ROAD"), "a.json").settings.road_variant == "road_1"
    for bad in (
        _config(peft_type="FOURIERFT", n_frequency_pattern={"q_proj": 10}),
        _config(peft_type="FOURIERFT", bias="all"),
        _config(peft_type="ROAD", variant="road_3"),
    ):
        with pytest.raises(PlanFileError):
            loads_run_config(bad, "adapter_config.json")


def test_command_line_and_exporters(capsys: pytest.CaptureFixture[str]) -> None:
    args = "estimate --json --model llama-3.2-3b --method fourierft --lora-rank 5000 --lora-targets q_proj,v_proj"
    assert main(args.split()) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 280_000
    args = "estimate --json --model llama-3.2-3b --method road --road-variant road_4 --lora-targets q_proj,v_proj"
    assert main(args.split()) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 458_752
    # The exporters write LoRA and say so for the method (and RoAd's variant).
    assert export(_fourierft(), Target.TRL).cannot("method.kind")
    draft = export(_road(), Target.TRL)
    assert draft.cannot("method.kind") and draft.cannot("method.lora.road_variant")
