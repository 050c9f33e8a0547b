"""PEFT's OFT (branch h54oft): the skew-symmetric blocks PEFT trains, the rotation each forward builds and keeps,
the plan through the plan file, the command line, adapter_config.json and the exporters.

Source read: huggingface/peft 51c2ff666b142d004c12609c9686cf17ca055751 (PEFT 0.19.2.dev0, the version of the
method_comparison results): src/peft/tuners/oft/layer.py (``OFTRotationModule``: ``_pytorch_skew_symmetric``,
``_cayley_batch``, ``forward``; ``OFTLayer.update_layer``, ``adjust_oft_parameters``; ``Linear.forward``),
src/peft/tuners/oft/config.py (defaults, the r / oft_block_size rule). tools/measure/lycoris_check.py checks the
kept tensors on CPU with PEFT 0.18.0's own layers (its OFTRotationModule and Linear.forward equal 51c2ff66's).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.cli.app import main
from core.dtypes import Dtype
from core.errors import PlanFileError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.planfile import dumps, loads
from core.files.runconfig import loads_run_config, plan_from_run, resolve_model
from core.params import oft_adjust, oft_blocks, oft_index_elements, oft_neumann_bmms, param_counts
from core.plan import Autocast, LoraSettings, Method, Plan, Preset
from core.presets import default_plan, plan_for_model
from core.training.activations import layer_activations
from core.training.flops import token_flops
from core.training.optimizer import adafactor_state_elements, largest_trainable_tensor, trainable_tensors

D, KV, LAYERS = 3072, 1024, 28  # Llama-3.2-3B config.json: hidden_size, 8 kv heads x 128, num_hidden_layers
R = 32  # experiments/oft/llama-3.2-3B-rank32/adapter_config.json: "r": 32, "oft_block_size": 0
BLOCK = D // R  # 96: q_proj and v_proj both read the 3,072-wide hidden state (update_layer: in // r)
N = 4 * 768  # the corpus row's micro-batch 4 at 768 tokens (memory_figures.json)
ROTATION = "OFT: the rotation's blocks kept (Q, its powers and R, Cayley–Neumann, 3 bmms)"
CAST_ROTATION = "OFT: the rotation's blocks kept (the bmms' 16-bit casts and R's, Cayley–Neumann, 3 bmms)"
COPIES = "attention norm output, cast per adapter (PEFT / autocast)"


def _plan(rank: int = R, block: int = 0, **kw: object) -> Plan:
    # The method comparison's recipe: bf16 model, float32 adapters (autocast_adapter_dtype), no autocast,
    # q_proj and v_proj, micro-batch 4 at 768 tokens.
    kw.setdefault("preset", Preset.CUSTOM)
    kw.setdefault("base_dtype", Dtype.BF16)
    kw.setdefault("adapter_dtype", Dtype.FP32)
    kw.setdefault("autocast", Autocast.NONE)
    lora = LoraSettings(rank=rank, targets=("q_proj", "v_proj"), oft_block_size=block)
    plan = plan_for_model("llama-3.2-3b", method=Method.OFT, lora=lora, **kw)
    return plan.with_workload(micro_batch=4, seq_len=768)


def _terms(plan: Plan) -> dict[str, float]:
    return {t.label: t.bytes for t in layer_activations(plan, False).items}


def test_blocks_are_peft_s() -> None:
    # adjust_oft_parameters, run with PEFT 0.18.0 (same lines as 51c2ff66) on CPU: (3072, 100) -> 96, (3072, 5000)
    # -> 3072, (8192, 100) -> 128, (3072, 7) -> 6.
    assert [oft_adjust(3072, 100), oft_adjust(3072, 5000), oft_adjust(8192, 100), oft_adjust(3072, 7)] == [
        96,
        3072,
        128,
        6,
    ]
    assert oft_blocks(_plan(), D) == (R, BLOCK)  # r 32: blocks of 3,072 / 32
    assert oft_blocks(_plan(block=32), D) == (96, 32)  # OFTConfig's default oft_block_size 32: r = 3,072 / 32
    assert oft_blocks(_plan(block=100), D) == (32, 96)  # 100 does not divide 3,072: PEFT moves it to 96
    assert oft_blocks(_plan(rank=7), D) == (6, 512)  # nor 7: r moves to 6
    # Neumann series (OFTConfig num_cayley_neumann_terms, default 5): Q², Q³, Q⁴ are bmms.
    assert [oft_neumann_bmms(t) for t in (1, 2, 3, 5, 7)] == [0, 0, 2, 3, 5]


def test_trainable_blocks_are_peft_s_count() -> None:
    # oft--llama-3.2-3B-rank32.json: "num_trainable_params": 8171520 = 28 x 2 targets x 32 x (96 x 95 / 2).
    plan = _plan()
    assert (param_counts(plan).trainable, trainable_tensors(plan)) == (8_171_520, LAYERS * 2)
    assert largest_trainable_tensor(plan) == R * BLOCK * (BLOCK - 1) // 2  # one target's (32, 4,560) weight
    # Adafactor factors each 2-D weight: 32 rows + 4,560 columns a target.
    assert adafactor_state_elements(plan) == LAYERS * 2 * (R + BLOCK * (BLOCK - 1) // 2)


def test_index_buffers_are_int64_weights() -> None:
    # OFTRotationModule registers rows and cols of triu_indices(96, 96, 1): 4,560 int64 each, per target.
    plan = _plan()
    assert oft_index_elements(plan) == 2 * 2 * BLOCK * (BLOCK - 1) // 2
    weights = {t.label: t.bytes for t in estimate(plan).worst.buckets[0].terms}
    assert weights["OFT upper-triangle index buffers (int64)"] == LAYERS * 2 * 2 * 4_560 * 8
    assert weights["OFT skew-symmetric blocks (float32)"] == 8_171_520 * 4
    assert oft_index_elements(plan.with_method(Method.LORA)) == 0


def test_each_target_keeps_its_input_copy_and_the_rotation_s_blocks() -> None:
    kept = _terms(_plan())
    # _cast_input_dtype(x, float32): a float32 copy of the bf16 input per target, kept by the einsum's bmm.
    assert kept[COPIES] == 2 * N * D * 4
    # Q, Q², Q³ (kept by the Neumann bmms) and R (by the einsum), each r x b x b = 3,072 x 96 float32, per target.
    assert kept[ROTATION] == 4 * 2 * D * BLOCK * 4
    # Under bf16 autocast: a bf16 copy of the input, and each bmm's two fresh casts plus R's: 7 bf16 blocks.
    cast = _terms(_plan(autocast=Autocast.BF16))
    assert (cast[COPIES], cast[CAST_ROTATION]) == (2 * N * D * 2, 7 * 2 * D * BLOCK * 2)
    # bf16 blocks on a bf16 base: no input copy (the einsum keeps x itself), the blocks in bf16, none cast.
    same = _terms(_plan(adapter_dtype=Dtype.BF16))
    assert COPIES not in same and same[ROTATION] == 4 * 2 * D * BLOCK * 2


def test_the_rule_is_the_cpu_check_s_figure() -> None:
    # tools/measure/lycoris_check.py (torch 2.13.0 CPU, peft 0.18.0): q_proj 256 -> 256, v_proj 256 -> 64, N 128,
    # r 8 (blocks of 32): 524,288 B kept beyond the outputs without autocast, 360,448 B under bf16 autocast
    # (measured).
    plan = _plan(8).with_workload(micro_batch=1, seq_len=128)
    tiny = replace(plan.model, hidden_size=256, num_heads=4, num_kv_heads=1, head_dim=64)
    plan = plan.with_changes(model=tiny)
    assert _terms(plan)[COPIES] + _terms(plan)[ROTATION] == 524_288
    cast = _terms(plan.with_changes(autocast=Autocast.BF16))
    assert cast[COPIES] + cast[CAST_ROTATION] == 360_448


def test_autocast_caches_no_copy_of_the_blocks() -> None:
    # The weight is scattered by index_put (not an autocast op): no cached cast (lycoris_check.py lists none).
    labels = {t.label for t in estimate(_plan(autocast=Autocast.BF16)).worst.buckets[0].terms}
    assert "16-bit copies of the adapters (autocast)" not in labels


def test_the_rotation_is_counted_per_token() -> None:
    # einsum of (N, r, b) with (r, b, b): in x b multiply-adds a token, forward, input and R's gradients.
    terms = {t.label: t.per_token for t in token_flops(_plan()).terms}
    assert terms["OFT block-diagonal rotations"] == 6 * 2 * D * BLOCK * LAYERS


def test_plan_file_round_trips_and_old_files_read_32() -> None:
    plan = _plan()
    assert loads(dumps(plan)) == plan
    document = json.loads(dumps(plan))
    del document["plan"]["lora"]["oft_block_size"]
    assert loads(json.dumps(document)).lora.oft_block_size == 32  # OFTConfig's default


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "llama-3.2-3b", "--json", "--lora-targets", "q_proj,v_proj", "--method", "oft"]
    assert main([*args, "--oft-block-size", "0", "--lora-rank", "32"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 8_171_520  # the results file's
    # --method oft alone is OFTConfig(): blocks of 32, 96 a target: 28 x 2 x 96 x 496.
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == LAYERS * 2 * 96 * 496


# method_comparison/MetaMathQA/experiments/oft/llama-3.2-3B-rank32/adapter_config.json (peft 51c2ff66), with the
# results file's base_model_name_or_path.
OFT_CONFIG = {
    "alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": "meta-llama/Llama-3.2-3B", "bias": "none",
    "block_share": False, "coft": False, "eps": 6e-05, "exclude_modules": None, "fan_in_fan_out": False,
    "inference_mode": False, "init_weights": True, "layers_pattern": None, "layers_to_transform": None,
    "module_dropout": 0.0, "modules_to_save": None, "oft_block_size": 0, "peft_type": "OFT", "r": 32,
    "rank_pattern": {}, "revision": None, "target_modules": ["q_proj", "v_proj"], "task_type": None,
}  # fmt: skip


def _read(**changes: object) -> Plan:
    run = loads_run_config(json.dumps({**OFT_CONFIG, **changes}).encode(), "adapter_config.json")
    assert run.unknown == ()
    return plan_from_run(run, default_plan(), resolve_model(run))


def test_adapter_config_is_read() -> None:
    plan = _read()
    assert (plan.method, plan.lora.rank, plan.lora.oft_block_size) == (Method.OFT, 32, 0)
    assert plan.lora.targets == ("q_proj", "v_proj")
    assert estimate(plan).params.trainable == 8_171_520
    # PEFT's default config: r 0, oft_block_size 32 (a file without the key reads the default).
    default = {k: v for k, v in OFT_CONFIG.items() if k not in ("r", "oft_block_size")}
    run = loads_run_config(json.dumps(default).encode(), "adapter_config.json")
    assert plan_from_run(run, default_plan(), resolve_model(run)).lora.oft_block_size == 32
    # The results file's peft_config spells out the rotation: use_cayley_neumann true with 5 terms.
    assert _read(use_cayley_neumann=True, num_cayley_neumann_terms=5).lora.oft_block_size == 0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"oft_block_size": 32}, "r: 32 is not allowed; expected r or oft_block_size non-zero, not both"),
        ({"r": 0}, "r: 0 is not allowed; expected r or oft_block_size non-zero"),
        ({"use_cayley_neumann": False}, "use_cayley_neumann: False .* exact Cayley solve"),
        ({"num_cayley_neumann_terms": 3}, "num_cayley_neumann_terms: 3 .* expected 5"),
        ({"block_share": True}, "block_share: True"),
        ({"bias": "oft_only"}, "bias: 'oft_only'"),
    ],
)
def test_what_the_plan_cannot_state_is_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(PlanFileError, match=message):
        loads_run_config(json.dumps({**OFT_CONFIG, **changes}).encode(), "adapter_config.json")


def test_settings_without_effect_on_memory_are_noted() -> None:
    run = loads_run_config(json.dumps({**OFT_CONFIG, "coft": True, "module_dropout": 0.1}).encode(), "a.json")
    notes = " ".join(f.source for f in run.notes)
    assert "coft: " in notes and "module_dropout: " in notes


def test_exporters_say_they_write_lora() -> None:
    draft = export(_plan(), Target.TRL)
    assert draft.cannot("method.kind") and draft.cannot("method.lora.oft_block_size")
