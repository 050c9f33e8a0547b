"""PEFT's BOFT with one butterfly factor (branch h80boft): what it trains per target, what its forward keeps, its
matmuls and passes, PEFT's refusals, the plan through a method switch, the command line, adapter_config.json and the
exporters.

Source read: huggingface/peft 51c2ff666b142d004c12609c9686cf17ca055751 (PEFT 0.19.2.dev0 at d787f51b, an ancestor with
the same src/peft/tuners/boft, ran the method_comparison results): src/peft/tuners/boft/config.py (boft_block_size 4,
boft_block_num 0, boft_n_butterfly_factor 1, exactly one of size and num non-zero), layer.py (``update_layer``,
``cayley_batch``, ``Linear.forward``). PEFT 0.21.2's BOFT forward is the same lines: tools/measure/boft_check.py ran on
it.
"""

from __future__ import annotations

import json

import pytest

from core.cli.app import main
from core.errors import PlanError, PlanFileError
from core.files.launch import Target, export
from core.files.planfile import dumps, loads
from core.files.runconfig import loads_run_config, plan_from_run, resolve_model
from core.hfconfig import model_from_hf_config
from core.params import boft_blocks, param_counts
from core.plan import LoraSettings, Method, Plan
from core.presets import default_plan
from core.training.activations import layer_activations
from core.training.flops import BOFT_ROTATION, block_gemms, method_work
from core.training.optimizer import adafactor_state_elements, trainable_tensors
from tests.core.test_fourierft_road import _plan as comparison_plan
from tests.core.test_miss import TINY  # the tiny Llama PEFT counted on (hidden 256, MLP 512, kv 128, 2 layers)

D, KV, LAYERS = 3072, 1024, 28  # Llama-3.2-3B config.json: hidden_size, 8 kv heads × 128, num_hidden_layers
N = 4 * 768  # the corpus row's micro-batch 4 at 768 tokens (memory_figures.json)
QV = ("q_proj", "v_proj")
# boft--llama-3.2-3B-default's adapter_config.json (51c2ff66 method_comparison/MetaMathQA/experiments/boft/).
COMPARISON_CONFIG = {
    "auto_mapping": None, "base_model_name_or_path": None, "bias": "none", "boft_block_num": 0, "boft_block_size": 4,
    "boft_dropout": 0.0, "boft_n_butterfly_factor": 1, "exclude_modules": None, "fan_in_fan_out": False,
    "inference_mode": False, "init_weights": True, "layers_pattern": None, "layers_to_transform": None,
    "modules_to_save": None, "peft_type": "BOFT", "revision": None, "target_modules": None, "task_type": None,
}  # fmt: skip


def _plan(block: int = 4, rank: int = 8, **kw: object) -> Plan:
    """The method comparison's recipe (tests/core/test_fourierft_road.py: bf16 model, float32 adapters, 4 × 768)."""
    return comparison_plan(Method.BOFT, LoraSettings(rank=rank, targets=QV, oft_block_size=block), **kw)


def _terms(plan: Plan) -> dict[str, float]:
    return {t.label: t.bytes for t in layer_activations(plan, False).items}


def test_the_comparison_s_trained_count() -> None:
    # boft--llama-3.2-3B-default results file (51c2ff66): "num_trainable_params": 802816 = 28 × (768·4·4 + 3,072 +
    # 768·4·4 + 1,024): boft_R (1, in/4, 4, 4) and boft_s (out, 1) per target, two tensors each.
    plan = _plan()
    assert boft_blocks(plan, D) == (768, 4)
    assert (param_counts(plan).trainable, trainable_tensors(plan)) == (802_816, LAYERS * 4)
    # Adafactor (torch/optim/_adafactor.py): boft_R's last two dimensions per leading index (in/b·b rows, as many
    # columns), boft_s (out, 1) rows and one column.
    assert adafactor_state_elements(plan) == LAYERS * ((2 * D + D + 1) + (2 * D + KV + 1))


@pytest.mark.parametrize(
    ("block", "rank", "targets", "peft_count"),
    [
        # PEFT 0.21.2 (torch 2.13 CPU), get_peft_model(LlamaForCausalLM(TINY), BOFTConfig(...)) with the extension's
        # cached failure (its block_diag path), the requires_grad parameters summed: boft_block_size=4 on q, v 4864;
        # boft_block_size=0, boft_block_num=8 on q, v, down 99584.
        (4, 8, QV, 4_864),
        (0, 8, ("q_proj", "v_proj", "down_proj"), 99_584),
    ],
)
def test_trained_counts_are_peft_s_on_a_tiny_llama(
    block: int, rank: int, targets: tuple[str, ...], peft_count: int
) -> None:
    model = model_from_hf_config(TINY, "tiny")
    lora = LoraSettings(rank=rank, targets=targets, oft_block_size=block)
    plan = default_plan().with_changes(model=model, method=Method.BOFT, lora=lora)
    assert param_counts(plan).trainable == peft_count


def test_what_the_forward_keeps() -> None:
    # core.training.activations._boft, measured to the byte by tools/measure/boft_check.py (921,472 B for its pair of
    # targets at blocks of 8): per target three in × in matrices in the input's dtype (bf16), the base's N × out
    # output, linalg.solve's float32 A, LU and Q and its int32 pivots, the scale vectors.
    terms = _terms(_plan())
    assert terms["BOFT: the identity, boft_P's copy and the rotation, in × in each, kept"] == 3 * 2 * D * D * 2
    assert terms["BOFT: the frozen base's output, kept for boft_s"] == N * (D + KV) * 2
    solve = 2 * (3 * 4 * 4 + 4) * D + (D + KV) * (4 + 2)
    assert terms["BOFT: the Cayley solve's blocks and pivots, the scale vectors"] == solve
    # The input is read as is (no cast of its own): the norm's output, kept once for both targets.
    assert terms["attention norm output"] == N * D * 2


def test_peft_s_refusals_and_the_switch() -> None:
    # update_layer: "in_features (3072) must be divisible by boft_block_size (5)!" (no adjustment, unlike OFT).
    with pytest.raises(PlanError, match="lora.oft_block_size.*BOFT refuses"):
        _plan(block=5)
    with pytest.raises(PlanError, match="lora.rank.*boft_block_num"):
        _plan(block=0, rank=5)
    # A switch takes BOFTConfig's boft_block_size 4 from OFTConfig's 32 and back, unless typed.
    lora = default_plan().with_method(Method.OFT)
    assert lora.lora.oft_block_size == 32
    assert lora.with_method(Method.BOFT).lora.oft_block_size == 4
    assert lora.with_method(Method.BOFT).with_method(Method.OFT).lora.oft_block_size == 32
    typed = lora.with_lora(oft_block_size=16).with_method(Method.BOFT, typed=frozenset({"lora.oft_block_size"}))
    assert typed.lora.oft_block_size == 16


def test_matmuls_and_passes() -> None:
    plan = _plan()
    rotations = [g for g in block_gemms(plan) if g.name.endswith(BOFT_ROTATION)]
    # x @ boft_rotation: in → in a token, the rotation gets a gradient (it is built from boft_R).
    assert [(g.k, g.n, g.trains) for g in rotations] == [(D, D, True), (D, D, True)]
    work = method_work(plan)
    assert work is not None and work.builds_as_blocks
    # Three in × in × in matmuls forward, one gradient each backward: 6·in³ a target each way.
    assert work.build_forward == work.build_backward == 2 * 6.0 * D**3
    # tools/measure/peft_method_cost.py --methods boft: 19 / 23 kernels a target, and torch.block_diag's copy_ per
    # block (in / 4 = 768 a target) forward.
    assert work.kernels == (2 * 19 + 2 * 768, 2 * 23)


def test_command_line_config_and_exporters(capsys: pytest.CaptureFixture[str]) -> None:
    # --method boft takes BOFTConfig's blocks of 4: the comparison's count.
    args = "estimate --json --model llama-3.2-3b --method boft --lora-targets q_proj,v_proj"
    assert main(args.split()) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 802_816
    run = loads_run_config(json.dumps(COMPARISON_CONFIG).encode(), "adapter_config.json")
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert (plan.method, plan.lora.oft_block_size) == (Method.BOFT, 4)
    by_num = {**COMPARISON_CONFIG, "boft_block_size": 0, "boft_block_num": 8}
    run = loads_run_config(json.dumps(by_num).encode(), "adapter_config.json")
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert (plan.lora.oft_block_size, plan.lora.rank) == (0, 8)
    for key, value, why in (
        ("boft_n_butterfly_factor", 2, "fbd_cuda"),
        ("boft_dropout", 0.1, "multiplicative dropout"),
        ("bias", "boft_only", "trained biases"),
        ("boft_block_num", 8, "not both"),
    ):
        with pytest.raises(PlanFileError, match=why) as info:
            loads_run_config(json.dumps({**COMPARISON_CONFIG, key: value}).encode(), "adapter_config.json")
        assert "\n" not in str(info.value)
    # A plan file keeps the method and its block size.
    assert loads(dumps(_plan(block=8))) == _plan(block=8)
    # The exporters write LoRA and say so for the method and its block size.
    draft = export(_plan(), Target.TRL)
    assert draft.cannot("method.kind") and draft.cannot("method.lora.oft_block_size")
