"""PEFT's MiSS, formerly Bone (branch h58peft): the r × out block PEFT trains per target, what its forward keeps, its
step's own work, the plan through the command line, adapter_config.json and the exporters, and the method comparison's
row mapped (held out).

Source read: huggingface/peft 51c2ff666b142d004c12609c9686cf17ca055751 (PEFT 0.19.2.dev0, the version of the
method_comparison results): src/peft/tuners/miss/layer.py (``MissLayer.update_layer``, ``reset_miss_parameters``,
``MissLinear.forward``), src/peft/tuners/miss/config.py (r 64, init_weights True, miss_dropout 0). PEFT 0.18.0's
MissLinear.forward is 51c2ff66's on a 16-bit base (51c2ff66 adds only a quantised base's clone of the base output).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.realgpu.mapping import HELD_OUT_METHODS, map_figure
from core.cli.app import main
from core.dtypes import Dtype
from core.errors import PlanFileError
from core.files.launch import Target, export
from core.files.runconfig import loads_run_config
from core.hfconfig import model_from_hf_config
from core.params import param_counts
from core.plan import MISS_DEFAULT_RANK, Autocast, LoraSettings, Method, Plan, Preset
from core.presets import default_plan, plan_for_model
from core.roles import dtypes_for
from core.training.activations import layer_activations
from core.training.flops import PEFT_METHOD_PASSES, block_gemms, method_work
from core.training.optimizer import adafactor_state_elements, adapter_tensor_sizes, trainable_tensors
from core.training.storage import copy_terms

D, KV, LAYERS = 3072, 1024, 28  # Llama-3.2-3B config.json: hidden_size, 8 kv heads × 128, num_hidden_layers
R = 64  # miss--llama-3.2-3B-default.json peft_config: "r": 64 (MissConfig's default), init_weights true
N = 4 * 768  # the corpus row's micro-batch 4 at 768 tokens (memory_figures.json)
KEPT = "MiSS: block sums kept for miss_block"
# A tiny Llama (transformers LlamaConfig(hidden_size=256, intermediate_size=512, num_attention_heads=4,
# num_key_value_heads=2, num_hidden_layers=2, vocab_size=1000)): the one PEFT 0.18.0 counted below.
TINY = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16",
}


def _plan(rank: int = R, targets: tuple[str, ...] = ("q_proj", "v_proj"), **kw: object) -> Plan:
    # The method comparison's recipe: bf16 model, float32 adapters (autocast_adapter_dtype), no autocast.
    kw.setdefault("preset", Preset.CUSTOM)
    kw.setdefault("base_dtype", Dtype.BF16)
    kw.setdefault("adapter_dtype", Dtype.FP32)
    kw.setdefault("autocast", Autocast.NONE)
    plan = plan_for_model("llama-3.2-3b", method=Method.MISS, lora=LoraSettings(rank=rank, targets=targets), **kw)
    return plan.with_workload(micro_batch=4, seq_len=768)


def _terms(plan: Plan) -> dict[str, float]:
    return {t.label: t.bytes for t in layer_activations(plan, False).items}


def test_trained_block_is_peft_s_count() -> None:
    # miss--llama-3.2-3B-default.json (51c2ff66 results): "num_trainable_params": 7340032 = 28 × 64 × (3,072 + 1,024).
    plan = _plan()
    assert (param_counts(plan).trainable, trainable_tensors(plan)) == (7_340_032, LAYERS * 2)
    assert adapter_tensor_sizes(plan) == [R * D, R * KV]
    # Adafactor factors each 2-D miss_block (r, out): r rows + out columns a target.
    assert adafactor_state_elements(plan) == LAYERS * (R + D + R + KV)


@pytest.mark.parametrize(
    ("rank", "targets", "peft_count"),
    [
        # PEFT 0.18.0 (torch 2.13 CPU), get_peft_model(LlamaForCausalLM(TINY), MissConfig(r, target_modules)) and the
        # requires_grad parameters summed: 49152 ((64, 256) and (64, 128) blocks); 65536 on every linear at r 16;
        # 61440 at r 48, which divides no input width (256, 512): the input is padded, the block stays r × out.
        (64, ("q_proj", "v_proj"), 49_152),
        (16, ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), 65_536),
        (48, ("q_proj", "v_proj", "down_proj"), 61_440),
    ],
)
def test_tiny_llama_counts_are_peft_s(rank: int, targets: tuple[str, ...], peft_count: int) -> None:
    plan = default_plan().with_changes(
        model=model_from_hf_config(TINY, "tiny"), method=Method.MISS, lora=LoraSettings(rank=rank, targets=targets)
    )
    assert param_counts(plan).trainable == peft_count


def test_forward_keeps_the_block_sums_only() -> None:
    # MissLinear.forward: the float32 cast of x is summed and freed; the matmul keeps the (N, r) block sum for
    # miss_block's gradient, float32 on the run's float32 adapters. tools/measure/lycoris_check.py ("miss", r 16,
    # N 128, two targets): 16,384 B = 2 × 128 × 16 × 4, the rule to the byte.
    terms = _terms(_plan())
    assert terms[KEPT] == 2 * N * R * 4
    # The frozen base linears keep no copy of their input for MiSS (no "cast per adapter" term, as LoRA's).
    assert not any("cast per adapter" in label for label in terms)
    # Under bf16 autocast the sum is cast to 16 bits (lycoris_check's autocast run: 2 × 128 × 16 × 2 B beside the
    # cache's 16-bit miss_block, counted with the weights).
    autocast = _plan(autocast=Autocast.BF16, base_dtype=Dtype.FP32)
    assert _terms(autocast)[KEPT] == 2 * N * R * 2
    # The autocast cache's 16-bit miss_block (a leaf that trains: cached, kept by the matmul) is the adapters' copy.
    copies = {t.label: t.bytes for t in copy_terms(autocast, param_counts(autocast), dtypes_for(autocast))}
    assert copies["16-bit copies of the adapters (autocast)"] == 7_340_032 * 2


def test_step_counts_its_float32_matmul_and_passes() -> None:
    plan = _plan().with_workload(micro_batch=4, seq_len=210)
    m = 4 * 210
    gemms = {g.name: (g.k, g.n) for g in block_gemms(plan) if g.name.endswith("MiSS block")}
    assert gemms == {"q_proj MiSS block": (R, D), "v_proj MiSS block": (R, KV)}  # block sum (r) → out, trained
    work = method_work(plan)
    assert work is not None
    # tools/measure/peft_method_cost.py --methods miss --bytes --shape IN OUT: forward 10·m·in + 16·m·out + 4·m·r,
    # backward 28·m·in + 12·m·out bytes, 5 / 8 kernels a target (e.g. 256 → 512 at 128 tokens: 1,409,024 /
    # 1,703,936 B).
    assert PEFT_METHOD_PASSES[Method.MISS].kernels == (5, 8)
    assert work.bytes_forward == pytest.approx(sum(10 * m * D + 16 * m * o + 4 * m * R for o in (D, KV)))
    assert work.bytes_backward == pytest.approx(sum(28 * m * D + 12 * m * o for o in (D, KV)))
    assert (work.build_forward, work.build_backward, work.kernels) == (0.0, 0.0, (10, 16))


def test_switching_to_miss_takes_its_default_rank() -> None:
    # MissConfig r: 64 by default (51c2ff66 src/peft/tuners/miss/config.py); LoraConfig's 8 comes back on a switch.
    plan = default_plan().with_method(Method.LORA)
    miss = plan.with_method(Method.MISS)
    assert miss.lora.rank == MISS_DEFAULT_RANK == 64
    assert miss.with_method(Method.LORA).lora.rank == 8


def _config(**changes: object) -> str:
    # experiments/miss/llama-3.2-3B-default/adapter_config.json's keys (51c2ff66 results' peft_config).
    doc: dict[str, object] = {
        "peft_type": "MISS",
        "base_model_name_or_path": "meta-llama/Llama-3.2-3B",
        "r": 64,
        "miss_dropout": 0.0,
        "mini_r": 1,
        "target_modules": ["q_proj", "v_proj"],
        "init_weights": True,
        "bias": "none",
    }
    doc.update(changes)
    return json.dumps(doc)


def test_adapter_config_is_read_and_its_other_rules_refused() -> None:
    run = loads_run_config(_config().encode(), "adapter_config.json")
    settings = run.settings
    assert (settings.method, settings.lora_rank, settings.lora_targets) == ("miss", 64, ("q_proj", "v_proj"))
    # init_weights false: a random block of the same shape through the same forward.
    assert loads_run_config(_config(init_weights=False).encode(), "x.json").settings.method == "miss"
    for bad in ({"init_weights": "bat"}, {"init_weights": "mini"}, {"miss_dropout": 0.1}, {"bias": "all"}):
        with pytest.raises(PlanFileError):
            loads_run_config(_config(**bad).encode(), "adapter_config.json")


def test_command_line_and_exporters(capsys: pytest.CaptureFixture[str]) -> None:
    args = "estimate --json --model llama-3.2-3b --method miss --lora-rank 64 --lora-targets q_proj,v_proj --gpu l40s"
    assert main(args.split()) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"]["trainable"] == 7_340_032
    # The exporters write LoRA and say so for the method.
    draft = export(_plan(), Target.TRL)
    assert draft.cannot("method.kind")


def test_corpus_row_maps_held_out() -> None:
    figures = json.loads(Path("benchmarks/realgpu/memory_figures.json").read_text(encoding="utf-8"))["figures"]
    row = next(f for f in figures if f["id"] == "peft-mc-miss--llama-3.2-3B-default")
    mapped = map_figure(row)
    assert mapped.expressible and mapped.plan is not None and mapped.plan.miss
    assert "miss" in HELD_OUT_METHODS
    assert param_counts(mapped.plan).trainable == row["recipe"]["lora"]["trainable_params"]
