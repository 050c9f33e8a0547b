"""PEFT's VB-LoRA, RandLoRA and SHiRA (branch h78peft): what each trains per target, what its forward keeps, its
matmuls and passes, the plan through the command line, adapter_config.json and the exporters.

Source read: huggingface/peft 51c2ff666b142d004c12609c9686cf17ca055751 (PEFT 0.19.2.dev0, the version of the
method_comparison results): src/peft/tuners/vblora/layer.py (``update_layer``, ``_get_low_rank_matrix``,
``_get_lora_matrices``, ``Linear.forward``), vblora/model.py (``_init_vblora_vector_bank``), vblora/config.py (r 4, 256
vectors of 256, top 2); src/peft/tuners/randlora/layer.py (``UniqueBaseGrad``, ``update_layer``, ``get_scaled_bases``,
``Linear.forward``), randlora/model.py (``_find_dim``, ``_init_randlora_A_randlora_B``), randlora/config.py (r 32);
src/peft/tuners/shira/layer.py (``update_layer``, ``get_delta_weight``, ``Linear.forward``), shira/mask_functions.py,
shira/config.py (r 32). PEFT 0.18.0's forwards are 51c2ff66's (only update_layer's signature differs):
tools/measure/peft_more_check.py ran on it.
"""

from __future__ import annotations

import json

import pytest

from core.breakdown import Term
from core.cli.app import main
from core.errors import PlanError, PlanFileError
from core.files.launch import Target, export
from core.files.runconfig import loads_run_config
from core.hfconfig import model_from_hf_config
from core.params import param_counts, randlora_projection_elements
from core.plan import LoraSettings, Method, Plan
from core.presets import default_plan, plan_for_model
from core.roles import dtypes_for
from core.training.activations import layer_activations
from core.training.flops import ADAPTER_GEMMS, block_gemms, method_work
from core.training.optimizer import adafactor_state_elements, head_adapter_tensor_sizes, trainable_tensors
from core.training.storage import weight_terms
from tests.core.test_fourierft_road import _plan as comparison_plan
from tests.core.test_miss import TINY  # the tiny Llama PEFT 0.18.0 counted on (hidden 256, MLP 512, kv 128, 2 layers)

D, KV, LAYERS = 3072, 1024, 28  # Llama-3.2-3B config.json: hidden_size, 8 kv heads × 128, num_hidden_layers
N = 4 * 768  # the corpus rows' micro-batch 4 at 768 tokens (memory_figures.json)
QV = ("q_proj", "v_proj")
ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _plan(method: Method, rank: int, **kw: object) -> Plan:
    """The method comparison's recipe (tests/core/test_fourierft_road.py: bf16 model, float32 adapters, 4 × 768)."""
    return comparison_plan(method, LoraSettings(rank=rank, targets=QV), **kw)


def _terms(plan: Plan) -> dict[str, float]:
    return {t.label: t.bytes for t in layer_activations(plan, False).items}


def _tiny(method: Method, rank: int, targets: tuple[str, ...]) -> Plan:
    model = model_from_hf_config(TINY, "tiny")
    return default_plan().with_changes(model=model, method=method, lora=LoraSettings(rank=rank, targets=targets))


@pytest.mark.parametrize(
    ("method", "rank", "peft_count", "tensors"),
    [
        # The 51c2ff66 results files' "num_trainable_params": vblora--llama-3.2-3B-default 1212416 (28 × 2 targets × 2
        # logits tensors, and the bank), randlora--llama-3.2-3B-default 9289728, shira--llama-3.2-3B-lr_0.0003-
        # random_seed_42 9175040.
        (Method.VBLORA, 4, 1_212_416, LAYERS * 4 + 1),
        (Method.RANDLORA, 32, 9_289_728, LAYERS * 4),
        (Method.SHIRA, 32, 9_175_040, LAYERS * 2),
    ],
)
def test_the_comparison_s_trained_counts(method: Method, rank: int, peft_count: int, tensors: int) -> None:
    plan = _plan(method, rank)
    assert (param_counts(plan).trainable, trainable_tensors(plan)) == (peft_count, tensors)


@pytest.mark.parametrize(
    ("method", "rank", "targets", "peft_count"),
    [
        # PEFT 0.18.0 (torch 2.13 CPU), get_peft_model(LlamaForCausalLM(TINY), config), the requires_grad parameters
        # summed: VBLoRAConfig(r=4) on q, o, gate, up, down 92160 (k / v are 128 wide: refused below), r 8 on q, o
        # 81920; RandLoraConfig(r=32) on q, v 5888, on every linear 25600; ShiraConfig(r=32) on q, v 57344, r 16 on
        # every linear 131072.
        (Method.VBLORA, 4, ("q_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), 92_160),
        (Method.VBLORA, 8, ("q_proj", "o_proj"), 81_920),
        (Method.RANDLORA, 32, QV, 5_888),
        (Method.RANDLORA, 32, ALL, 25_600),
        (Method.SHIRA, 32, QV, 57_344),
        (Method.SHIRA, 16, ALL, 131_072),
    ],
)
def test_tiny_llama_counts_are_peft_s(method: Method, rank: int, targets: tuple[str, ...], peft_count: int) -> None:
    assert param_counts(_tiny(method, rank, targets)).trainable == peft_count


def test_randlora_s_shared_bases_are_peft_s_buffers() -> None:
    # PEFT 0.18.0 on TINY: randlora_A (32, 1, 128) + randlora_B (256, 4, 32) on q, v = 73,728 elements; on every linear
    # (largest in 512, largest out 512: min 512, 16 bases) (32, 1, 512) + (512, 16, 32) = 278,528; float32.
    assert randlora_projection_elements(_tiny(Method.RANDLORA, 32, QV)) == 73_728
    assert randlora_projection_elements(_tiny(Method.RANDLORA, 32, ALL)) == 278_528
    labels = [t.label for t in weight_terms_of(_plan(Method.RANDLORA, 32))]
    assert "RandLoRA shared randlora_A, randlora_B (frozen, float32)" in labels


def weight_terms_of(plan: Plan) -> list[Term]:
    return weight_terms(plan, param_counts(plan), dtypes_for(plan))


def test_peft_s_own_refusals() -> None:
    # PEFT 0.18.0 on TINY: VBLoRAConfig(target_modules=["v_proj"]) raises "`out_features` 128 must be divisible by
    # `vector_length` 256"; ShiraConfig(r=100, target_modules=["v_proj"]) "The set rank 100 results in more shira
    # params than the total number of params in the base layer 32768" (100 × (256 + 128) > 256 × 128).
    with pytest.raises(PlanError, match="128 wide"):
        _tiny(Method.VBLORA, 4, ("v_proj",))
    with pytest.raises(PlanError, match="at most 85"):
        _tiny(Method.SHIRA, 100, ("v_proj",))
    assert param_counts(_tiny(Method.SHIRA, 85, ("v_proj",))).trainable == 2 * 85 * (256 + 128)


def test_vblora_keeps_lora_s_tensors_and_its_assembly() -> None:
    # tools/measure/peft_more_check.py (N 128, d 256, kv 64; r 4, 32 vectors of 64, top 2): 307,424 B = the two float32
    # input copies, x·Aᵀ, A and B, the gathered vectors, the top-k indices and weights, the rule to the byte.
    terms = _terms(_plan(Method.VBLORA, 4))
    sides = (D + D) + (D + KV)
    assert terms["attention norm output, cast per adapter (PEFT / autocast)"] == 2 * N * D * 4
    assert terms["VB-LoRA: x·Aᵀ outputs (kept for B)"] == 2 * N * 4 * 4
    assert terms["VB-LoRA: assembled A and B, kept by F.linear"] == 4 * sides * 4
    slots = 4 * sides // 256
    assert terms["VB-LoRA: gathered bank vectors, top-k indices and weights"] == 2 * 4 * sides * 4 + 2 * slots * 12
    # The bank trains once for the model: one more tensor, its 256 × 256 elements, whole under Adafactor (2-D: 512).
    plan = _plan(Method.VBLORA, 4)
    assert head_adapter_tensor_sizes(plan) == [256 * 256]
    logits_stats = 4 * (D // 256 + 256) * 2 + (D // 256) * (4 + 256) + (KV // 256) * (4 + 256)
    assert adafactor_state_elements(plan) == LAYERS * logits_stats + 256 + 256


def test_randlora_keeps_the_basis_and_one_side() -> None:
    # tools/measure/peft_more_check.py (r 32; q 256 → 256, v 256 → 64): 442,368 B = q's float32 input copy and scaled
    # basis (32 × 8 × 256), v's basis (32 × 2 × 64) and its first matmul's output (N × 64): the rule to the byte.
    terms = _terms(_plan(Method.RANDLORA, 32))
    # q_proj (in ≤ out) keeps its input copy; v_proj (out < in) does not.
    assert terms["attention norm output, cast per adapter (PEFT / autocast)"] == N * D * 4
    assert terms["RandLoRA: each target's scaled basis λ·A·γ, kept"] == (32 * 96 * D + 32 * 32 * KV) * 4
    assert terms["RandLoRA: the first matmul's output where out < in (kept for γ)"] == N * 32 * 32 * 4
    # v_proj alone keeps no input copy at all, only its basis and middle.
    alone = {t.label for t in layer_activations(_plan(Method.RANDLORA, 32).with_input("lora.targets", ("v_proj",)),
                                                False).items}  # fmt: skip
    assert not any("cast per adapter" in label for label in alone)
    assert "RandLoRA: each target's scaled basis λ·A·γ, kept" in alone


def test_shira_keeps_the_new_weight_and_the_input_itself() -> None:
    # tools/measure/peft_more_check.py (r 4): 230,400 B = the bf16 new weights ((256² + 64 × 256) × 2) and the sparse
    # tensors' int64 indices and float32 values (4 × 832 × 20): the rule to the byte. x itself is kept by F.linear
    # (no cast of its own): one copy for both targets, in the model's dtype.
    terms = _terms(_plan(Method.SHIRA, 32))
    assert terms["SHiRA: each target's new weight (copy + sparse delta), kept by F.linear"] == (D * D + KV * D) * 2
    assert terms["SHiRA: the sparse delta's indices (int64) and values"] == 32 * (2 * D + D + KV) * 20
    assert terms["attention norm output"] == N * D * 2
    # Its mask indices stay on the GPU, int32, one pair an entry (shira_indices moved at update_layer).
    index = next(t for t in weight_terms_of(_plan(Method.SHIRA, 32)) if t.label == "SHiRA mask indices (int32)")
    assert index.bytes == LAYERS * 2 * 32 * (2 * D + D + KV) * 4


def test_matmuls_and_passes() -> None:
    # VB-LoRA: LoRA's A (in → r) and B (r → out), both trained.
    vb = {g.name: (g.k, g.n, g.trains) for g in block_gemms(_plan(Method.VBLORA, 4)) if g.name.endswith(ADAPTER_GEMMS)}
    assert vb["q_proj LoRA A"] == (D, 4, True) and vb["v_proj LoRA B"] == (4, KV, True)
    # RandLoRA: in → r·bases → out in float32; q_proj's first weight is the trained basis, v_proj's second.
    rand = {g.name: (g.k, g.n, g.trains) for g in block_gemms(_plan(Method.RANDLORA, 32))
            if g.name.endswith(ADAPTER_GEMMS)}  # fmt: skip
    assert rand == {
        "q_proj RandLoRA basis": (D, D, True), "q_proj RandLoRA bases B": (D, D, False),
        "v_proj RandLoRA bases B": (D, KV, False), "v_proj RandLoRA basis": (KV, KV, True),
    }  # fmt: skip
    # SHiRA: no adapter matmul; its targets' own matmuls get a weight gradient, the others' do not.
    shira = {g.name: g.trains for g in block_gemms(_plan(Method.SHIRA, 32))}
    assert shira["q"] and shira["v"] and not shira["k"] and not shira["o"]
    assert not [n for n in shira if n.endswith(ADAPTER_GEMMS)]
    # Each method's passes (PEFT_METHOD_PASSES: tools/measure/peft_method_cost.py), kernels a target.
    for method, rank, kernels in ((Method.VBLORA, 4, (40, 50)), (Method.RANDLORA, 32, (16, 28)),
                                  (Method.SHIRA, 32, (18, 8)), (Method.FOURIERFT, 1000, (18, 20))):  # fmt: skip
        work = method_work(_plan(method, rank))
        assert work is not None and work.kernels == kernels
    road = method_work(plan_for_model("llama-3.2-3b", method=Method.ROAD, lora=LoraSettings(targets=QV)))
    assert road is not None and road.kernels == (22, 48) and road.build_forward == 0.0


def test_switching_takes_each_config_s_default_rank() -> None:
    # VBLoRAConfig r 4, RandLoraConfig r 32, ShiraConfig r 32 (51c2ff66 config.py files); LoRA's 8 comes back.
    plan = default_plan().with_method(Method.LORA)
    for method, rank in ((Method.VBLORA, 4), (Method.RANDLORA, 32), (Method.SHIRA, 32)):
        switched = plan.with_method(method)
        assert switched.lora.rank == rank and switched.with_method(Method.LORA).lora.rank == 8


def _config(**doc: object) -> bytes:
    return json.dumps({"base_model_name_or_path": "meta-llama/Llama-3.2-3B", **doc}).encode()


def test_adapter_configs_are_read_and_their_other_rules_refused() -> None:
    # The 51c2ff66 results' peft_config keys (vblora / randlora / shira llama-3.2-3B runs).
    vb = _config(
        peft_type="VBLORA", r=4, num_vectors=256, vector_length=256, topk=2, target_modules=["v_proj", "q_proj"],
        save_only_topk_weights=False, vblora_dropout=0.0, fan_in_fan_out=False, bias="none",
        init_vector_bank_bound=0.02, init_logits_std=0.1,
    )  # fmt: skip
    settings = loads_run_config(vb, "adapter_config.json").settings
    assert (settings.method, settings.lora_rank, settings.lora_targets) == ("vblora", 4, QV)
    rand = _config(
        peft_type="RANDLORA", r=32, target_modules=["q_proj", "v_proj"], projection_prng_key=0, save_projection=True,
        sparse=False, very_sparse=False, randlora_dropout=0.0, randlora_alpha=640, bias="none", init_weights=True,
    )  # fmt: skip
    assert loads_run_config(rand, "a.json").settings.method == "randlora"
    shira = _config(peft_type="SHIRA", r=32, mask_type="random", random_seed=42, target_modules=["q_proj", "v_proj"])
    assert loads_run_config(shira, "a.json").settings.lora_rank == 32
    # The defaults where a file leaves them out: VB-LoRA r 4, RandLoRA and SHiRA r 32.
    assert [loads_run_config(_config(peft_type=k), "a.json").settings.lora_rank for k in ("VBLORA", "RANDLORA", "SHIRA")
            ] == [4, 32, 32]  # fmt: skip
    for bad in (
        _config(peft_type="VBLORA", num_vectors=128),
        _config(peft_type="VBLORA", topk=3),
        _config(peft_type="VBLORA", vblora_dropout=0.1),
        _config(peft_type="RANDLORA", bias="all"),
        _config(peft_type="SHIRA", mask_type="my_custom_mask"),
    ):
        with pytest.raises(PlanFileError):
            loads_run_config(bad, "adapter_config.json")


def test_command_line_and_exporters(capsys: pytest.CaptureFixture[str]) -> None:
    for method, rank, count in (("vblora", 4, 1_212_416), ("randlora", 32, 9_289_728), ("shira", 32, 9_175_040)):
        args = f"estimate --json --model llama-3.2-3b --method {method} --lora-rank {rank} --lora-targets q_proj,v_proj"
        assert main(args.split()) == 0
        assert json.loads(capsys.readouterr().out)["params"]["trainable"] == count
        # The exporters write LoRA and say so for the method.
        assert export(_plan(Method(method), rank), Target.TRL).cannot("method.kind")
