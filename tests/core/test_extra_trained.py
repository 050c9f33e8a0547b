"""PEFT's modules_to_save and trainable_token_indices (branch h60mts): the copies that train beside the adapters,
what they keep, their refusals, and the setting through the plan file, the importers and the exports.

Sources: huggingface/peft 51c2ff666b142d004c12609c9686cf17ca055751 src/peft/utils/other.py (``ModulesToSaveWrapper``,
``set_additional_trainable_modules``, ``AuxiliaryTrainingWrapper.check_module``), src/peft/tuners/trainable_tokens/
layer.py (``TrainableTokensLayer``); measured by tools/measure/modules_to_save_check.py (peft 0.18.0, torch 2.13.0,
transformers 5.25.0, CPU; its output is quoted below as "measured").
"""

from __future__ import annotations

import json

import pytest

from core.catalogue import model_from_hf_config
from core.errors import PlanError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.planfile import dumps, loads
from core.files.runconfig import loads_run_config
from core.inputs import ModulesToSave
from core.params import param_counts
from core.plan import Accounting, Method, Optimizer, Plan, Preset, Strategy
from core.presets import default_plan, plan_for_model
from core.roles import dtypes_for
from core.training.activations import outside_blocks
from core.training.extra_trained import extra_elements, extra_grad_terms, extra_state_terms, extra_weight_terms
from core.training.flops import token_flops

# The measuring script's tiny Llama: vocabulary 1,000, width 64, 2 blocks, bf16, LoRA r 8 on q_proj / v_proj,
# one sequence of 32 tokens (tools/measure/modules_to_save_check.py VOCAB, WIDTH, _model, --tokens 32).
V, D, N = 1000, 64, 32


def _tiny(tied: bool = False, **lora: object) -> Plan:
    config = {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": V, "hidden_size": D,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "tie_word_embeddings": tied, "torch_dtype": "bfloat16",
    }  # fmt: skip
    plan = default_plan().on_model(model_from_hf_config(config)).with_method(Method.LORA)
    plan = plan.with_changes(preset=Preset.TRAINER_BF16).with_workload(micro_batch=1, seq_len=N)
    return plan.with_lora(targets=("q_proj", "v_proj"), rank=8, **lora)


def _sum(terms: list) -> float:  # type: ignore[type-arg]
    return sum(t.bytes for t in terms)


def _outside(plan: Plan) -> float:
    return _sum(list(outside_blocks(plan).items))


def test_a_copy_s_weights_gradient_and_adam_state_are_the_measured_bytes() -> None:
    for setting in (ModulesToSave.EMBEDDING, ModulesToSave.HEAD):
        plan = _tiny(modules_to_save=setting)
        dt = dtypes_for(plan)
        # measured "embed" / "head": trainable +64,000 (V·d), resident bf16 +128,000 (the frozen original stays),
        # grads +128,000; AdamW m and v of a bf16 parameter are bf16 (zeros_like): 2 × 128,000.
        assert extra_elements(plan) == 64_000
        assert _sum(extra_weight_terms(plan, dt)) == 128_000
        assert _sum(extra_grad_terms(plan, dt)) == 128_000
        assert _sum(extra_state_terms(plan, dt)) == 256_000


def test_both_on_a_tied_model_are_two_copies() -> None:
    # measured "tied-both" (and "tied-both-ensure": peft 0.18.0 keeps lm_head in modules_to_save): trainable
    # +128,000, resident bf16 532,128 against the tied LoRA's 276,128: two copies of 128,000 B.
    plan = _tiny(tied=True, modules_to_save=ModulesToSave.BOTH)
    assert extra_elements(plan) == 128_000 and _sum(extra_weight_terms(plan, dtypes_for(plan))) == 256_000


def test_a_trained_head_keeps_its_input_and_a_trained_embedding_keeps_nothing_new() -> None:
    lora = _outside(_tiny())
    # measured "head": saved +4,096 = N·d × 2 B, the head's bf16 input for its weight gradient.
    assert _outside(_tiny(modules_to_save=ModulesToSave.HEAD)) - lora == N * D * 2 == 4_096
    # measured "embed": saved +8,576, the first block's norm input (N·d × 4 + N × 4) and the indices (N × 8), which
    # the planner counts already (every block's norm input) or leaves out (8-byte indices): nothing outside.
    assert _outside(_tiny(modules_to_save=ModulesToSave.EMBEDDING)) == lora


def test_trainable_tokens_are_float32_rows_and_a_tied_head_keeps_the_merged_matrix() -> None:
    plan = _tiny(trainable_tokens=2)
    dt = dtypes_for(plan)
    # measured "tokens2": trainable +128 (2 × 64), resident float32 +1,024 (delta and original rows, 4 B each),
    # grads +512.
    assert extra_elements(plan) == 128
    assert (_sum(extra_weight_terms(plan, dt)), _sum(extra_grad_terms(plan, dt))) == (1_024, 512)
    assert _outside(plan) == _outside(_tiny())
    tied = _tiny(tied=True, trainable_tokens=2)
    # measured "tied-tokens2": saved +141,216, of which the merged V × d bf16 matrix (128,000) and the head's input
    # (4,096) are the head's; the rest (9,120) is the embedding side's, as above.
    assert _outside(tied) - _outside(_tiny(tied=True)) == 128_000 + 4_096


def test_llama_3_1_8b_with_both_copies() -> None:
    lora = plan_for_model("llama-3.1-8b", method=Method.LORA, preset=Preset.TRAINER_BF16)
    both = lora.with_lora(modules_to_save=ModulesToSave.BOTH)
    # Llama 3.1 8B config.json: vocab_size 128,256, hidden_size 4,096, tie_word_embeddings false.
    assert extra_elements(both) == 2 * 128_256 * 4_096 == 1_050_673_152
    dt = dtypes_for(both)
    # bf16 copies (2 B), bf16 gradients, AdamW m and v in bf16: 8 B per trained element.
    extra = _sum(extra_weight_terms(both, dt) + extra_grad_terms(both, dt) + extra_state_terms(both, dt))
    assert extra == 8 * 1_050_673_152
    assert estimate(both).peak_bytes > estimate(lora).peak_bytes + 6e9  # weights and state at least
    assert any("embed_tokens copy (128,256 × 4,096)" in n for n in estimate(both).notes)
    # The head's weight gradient: a third pass over the logits' matmul, 2·V·d per token.
    assert token_flops(both).hardware - token_flops(lora).hardware == pytest.approx(2 * 128_256 * 4_096)


def test_under_accumulation_a_copy_s_new_gradient_forms_beside_the_accumulated_one() -> None:
    from core.training.extra_trained import formed_gradients

    # torch 2.13.0 accumulate_grad.h "Case 2.3": ``variable_grad += new_grad``, the new V × d tensor alive until the
    # in-place add; the first micro-batch's becomes .grad itself (no transient).
    both = _tiny(modules_to_save=ModulesToSave.BOTH).with_workload(grad_accum=1)
    assert formed_gradients(both, dtypes_for(both), head=True) == []
    accumulating = both.with_workload(grad_accum=2)
    dt = dtypes_for(accumulating)
    assert [t.bytes for t in formed_gradients(accumulating, dt, head=True)] == [V * D * 2]  # bf16 copy
    assert [t.bytes for t in formed_gradients(accumulating, dt, head=False)] == [V * D * 2]
    head_only = _tiny(modules_to_save=ModulesToSave.HEAD).with_workload(grad_accum=2)
    assert formed_gradients(head_only, dt, head=False) == []
    backward = [p for p in estimate(accumulating).phases if p.name == "backward"]
    assert any("lm_head copy's new gradient" in t.label for p in backward for b in p.buckets for t in b.terms)


def test_ddp_buckets_the_copies_gradients_like_any_other() -> None:
    # torch DDP (gradient_as_bucket_view=False): a flat bucket copy of every trainable gradient
    # (core.parallel.state._ddp); the two bf16 copies of Llama 3.1 8B add 2 × 128,256 × 4,096 × 2 B to the buckets.
    plan = plan_for_model("llama-3.1-8b", method=Method.LORA, preset=Preset.TRAINER_BF16).with_workload(grad_accum=1)
    ddp = plan.on_gpus(2, Strategy.DDP)
    both = ModulesToSave.BOTH

    def added(p: Plan) -> float:
        return estimate(p.with_lora(modules_to_save=both)).peak_bytes - estimate(p).peak_bytes

    assert added(ddp) - added(plan) == pytest.approx(2 * 128_256 * 4_096 * 2)


def test_eight_bit_and_paged_optimizers_keep_the_copies_as_they_keep_any_large_tensor() -> None:
    plan = _tiny(modules_to_save=ModulesToSave.HEAD)
    n = V * D
    eight = plan.with_changes(optimizer=Optimizer.ADAMW_8BIT)
    # bitsandbytes blockwise: two uint8 moments and a float32 absmax per 256 (core.training.optimizer OPT8_BLOCK).
    assert _sum(extra_state_terms(eight, dtypes_for(eight))) == pytest.approx(2 * n * (1 + 4 / 256))
    paged = plan.with_changes(optimizer=Optimizer.PAGED_ADAMW)  # 64,000 < PAGED_MIN_SIZE 100,000: on the GPU
    assert _sum(extra_state_terms(paged, dtypes_for(paged))) == 2 * n * 4
    big = plan_for_model("llama-3.1-8b", method=Method.LORA, optimizer=Optimizer.PAGED_ADAMW)
    big = big.with_lora(modules_to_save=ModulesToSave.HEAD)
    assert _sum(extra_state_terms(big, dtypes_for(big))) == 0  # paged: CUDA managed memory


def test_what_peft_refuses_is_refused_with_its_reason() -> None:
    with pytest.raises(PlanError, match="already marked to be trained fully"):
        _tiny(modules_to_save=ModulesToSave.EMBEDDING, trainable_tokens=2)
    with pytest.raises(PlanError, match="cannot be applied to a LoRA layer"):
        _tiny(modules_to_save=ModulesToSave.HEAD).with_lora(targets=("q_proj", "lm_head"))
    with pytest.raises(PlanError, match="not PEFT's"):
        _tiny().with_changes(method=Method.FULL, lora=_tiny(trainable_tokens=2).lora)
    with pytest.raises(PlanError, match="not modelled"):  # a vocabulary split of the copies (branch h61mts2)
        _tiny(modules_to_save=ModulesToSave.HEAD).on_gpus(2, Strategy.DDP).with_parallel(tensor_parallel=2)
    with pytest.raises(PlanError, match="four buckets"):
        _tiny(modules_to_save=ModulesToSave.HEAD).with_changes(accounting=Accounting.LESSON)
    with pytest.raises(PlanError, match="a LoraConfig key"):
        _tiny(trainable_tokens=2).with_changes(method=Method.LOHA)
    with pytest.raises(PlanError, match="rows of the embedding"):
        _tiny(trainable_tokens=V + 1)


def test_leaving_peft_drops_the_setting() -> None:
    full = _tiny(modules_to_save=ModulesToSave.BOTH).with_method(Method.FULL)
    assert full.lora.modules_to_save is ModulesToSave.NONE and extra_elements(full) == 0
    ia3 = _tiny(modules_to_save=ModulesToSave.HEAD, trainable_tokens=2).with_method(Method.IA3)
    assert (ia3.lora.modules_to_save, ia3.lora.trainable_tokens) == (ModulesToSave.HEAD, 0)  # rows: LoRA's alone


def test_the_plan_file_keeps_it_and_an_older_file_reads_as_none() -> None:
    plan = _tiny(modules_to_save=ModulesToSave.HEAD)
    assert loads(dumps(plan)) == plan
    document = json.loads(dumps(_tiny(trainable_tokens=3)))
    lora = document["plan"]["lora"]
    assert lora.pop("modules_to_save") == "none" and lora.pop("trainable_tokens") == 3
    assert loads(json.dumps(document)).lora.trainable_tokens == 0


def _peft(**keys: object) -> dict[str, object]:
    return {"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"], **keys}


def test_the_peft_reader_sets_it_and_lists_what_it_cannot_price() -> None:
    run = loads_run_config(json.dumps(_peft(modules_to_save=["embed_tokens", "lm_head", "score"])).encode(), "a.json")
    assert run.settings.modules_to_save == "both"
    assert any(n.value == ["score"] and "no shape" in n.source for n in run.notes)
    run = loads_run_config(json.dumps(_peft(trainable_token_indices=[0, 1, 1])).encode(), "a.json")
    assert run.settings.trainable_tokens == 2  # distinct rows
    by_layer = _peft(trainable_token_indices={"embed_tokens": [5, 6, 7], "lm_head": [1]})
    run = loads_run_config(json.dumps(by_layer).encode(), "a.json")
    assert run.settings.trainable_tokens == 3 and any(n.value == ["lm_head"] for n in run.notes)
    with pytest.raises(Exception, match="token indices"):
        loads_run_config(json.dumps(_peft(trainable_token_indices=["a"])).encode(), "a.json")


def test_axolotl_trl_and_llama_factory_keys_are_read() -> None:
    axolotl = b"base_model: meta-llama/Llama-3.1-8B\nadapter: lora\nlora_r: 8\nlora_modules_to_save: [lm_head]\n"
    assert loads_run_config(axolotl, "a.yml").settings.modules_to_save == "head"
    factory = (
        b"model_name_or_path: meta-llama/Llama-3.1-8B\nstage: sft\nfinetuning_type: lora\n"
        b"additional_target: embed_tokens\n"
    )
    assert loads_run_config(factory, "f.yaml").settings.modules_to_save == "embedding"


@pytest.mark.parametrize("target", [Target.AXOLOTL, Target.TRL, Target.LLAMA_FACTORY])
def test_the_exports_write_it_back(target: Target) -> None:
    plan = plan_for_model("llama-3.1-8b", method=Method.LORA).with_lora(modules_to_save=ModulesToSave.BOTH)
    exported = export(plan, target)
    assert not exported.cannot("method.lora.modules_to_save")
    run = loads_run_config(exported.text.encode(), f"plan{exported.suffix}")
    assert run.settings.modules_to_save == "both"


def test_an_export_without_the_key_says_so() -> None:
    plan = plan_for_model("llama-3.1-8b", method=Method.LORA).with_lora(trainable_tokens=4)
    assert export(plan, Target.AXOLOTL).cannot("method.lora.trainable_tokens")


def test_param_counts_are_the_adapters_alone() -> None:
    # The copies are kept apart from counts.trainable (their dtype is the base's, not the adapters' float32).
    plan = _tiny(modules_to_save=ModulesToSave.HEAD)
    assert param_counts(plan).trainable == param_counts(_tiny()).trainable == 3_584  # measured "lora": 3,584


# --- Sharded layouts (branch h61mts2) ----------------------------------------------------------------------------
# Llama 3.1 8B config.json: vocab_size 128,256, hidden_size 4,096: one copy is V·d elements, bf16 under
# Trainer(bf16=True) on a bf16 base (measured above: the copy keeps the module's dtype).
VD_8B = 128_256 * 4_096


def _llama_8b(strategy: Strategy, setting: ModulesToSave = ModulesToSave.HEAD, accum: int = 1) -> Plan:
    plan = plan_for_model("llama-3.1-8b", method=Method.LORA, preset=Preset.TRAINER_BF16).with_workload(
        grad_accum=accum
    )
    return plan.on_gpus(4, strategy).with_lora(modules_to_save=setting)


def _parts(plan: Plan):  # type: ignore[no-untyped-def]
    from core.parallel.layout import layout
    from core.training import detailed

    lay = layout(plan)
    return detailed._parts(plan, param_counts(plan), dtypes_for(plan), detailed.Rank(lay, lay.stages[0]))


def _labelled(terms: list, word: str) -> float:  # type: ignore[type-arg]
    return _sum([t for t in terms if word in t.label])


def test_fsdp2_shards_the_copies_and_gathers_them_with_the_root_unit() -> None:
    # FSDP2 (pytorch/pytorch 010ae4a8 torch/distributed/fsdp/_fully_shard/_fsdp_param.py): every parameter of a unit
    # dim-0 sharded, its gradient and (torch.optim's zeros_like) state too: the bf16 copy, its bf16 gradient and
    # its bf16 Adam m, v ÷ 4 ranks. ModulesToSaveWrapper sits outside the decoder blocks, so the copy is in the root
    # unit, which _fsdp_state.py _lazy_init keeps gathered from the forward to the backward's end: + V·d × 2 B.
    head, lora = _parts(_llama_8b(Strategy.FSDP)), _parts(_llama_8b(Strategy.FSDP, ModulesToSave.NONE))
    assert _labelled(head.weights, "lm_head copy ÷ 4") == VD_8B * 2 / 4
    assert _labelled(head.optim, "lm_head copy") == 2 * VD_8B * 2 / 4
    assert _labelled(head.grads, "lm_head copy") == VD_8B * 2 / 4
    gathered = [t for t in head.extra("forward") if "root unit" in t.label]
    before = [t for t in lora.extra("forward") if "root unit" in t.label]
    assert _sum(gathered) - _sum(before) == pytest.approx(VD_8B * 2)  # the root's own average bytes unchanged
    # Reduced last with the root (_fsdp_param_group.py post_backward, as a full fine-tune's root): the unsharded
    # gradient held from the head's backward, then the reduce-scatter input, the sharded one missing until then.
    assert _sum(head.root_grads) == VD_8B * 2
    assert [t.bytes for t in head.extra("root_reduce")] == [VD_8B * 2, VD_8B * 2]
    assert _sum(head.extra("root_pending")) == -VD_8B * 2 / 4


def test_fsdp2_with_a_float32_reduce_reduces_the_copies_in_float32() -> None:
    from core.dtypes import MpDtype

    # MixedPrecisionPolicy(reduce_dtype=float32): the reduce-scatter input in float32 (core.parallel.layout
    # fsdp_reduce_bytes), the unsharded gradient in the gathered bf16.
    plan = _llama_8b(Strategy.FSDP, ModulesToSave.BOTH).with_parallel(fsdp_reduce_dtype=MpDtype.FP32)
    assert [t.bytes for t in _parts(plan).extra("root_reduce")] == [2 * VD_8B * 2, 2 * VD_8B * 4]


def test_zero_prices_the_copies_as_trainable_parameters_of_its_partition() -> None:
    # DeepSpeed edaa7221 stage_1_and_2.py: the 16-bit weights whole on every rank, a float32 master and float32
    # Adam m, v of the rank's 1/4 partition, the reduced gradient partition in the 16-bit dtype (ZeRO-2);
    # stage3.py partitions the 16-bit weights too and keeps a gradient partition from start-up.
    for strategy, weights in ((Strategy.ZERO2, VD_8B * 2), (Strategy.ZERO3, VD_8B * 2 / 4)):
        head, lora = _parts(_llama_8b(strategy)), _parts(_llama_8b(strategy, ModulesToSave.NONE))
        assert _sum(head.weights) - _sum(lora.weights) == pytest.approx(weights)
        assert _labelled(head.optim, "master") - _labelled(lora.optim, "master") == pytest.approx(VD_8B * 4 / 4)
        assert _labelled(head.optim, "lm_head copy (Adam m, v at 4 B)") == pytest.approx(2 * VD_8B * 4 / 4)
    zero2 = _parts(_llama_8b(Strategy.ZERO2))
    grads = _labelled(zero2.grads, "partition") - _labelled(
        _parts(_llama_8b(Strategy.ZERO2, ModulesToSave.NONE)).grads, "partition"
    )
    assert grads == pytest.approx(VD_8B * 2 / 4)
    zero3 = _parts(_llama_8b(Strategy.ZERO3))
    persistent = _labelled(zero3.extra("persistent"), "gradient partition")
    assert persistent - _labelled(
        _parts(_llama_8b(Strategy.ZERO3, ModulesToSave.NONE)).extra("persistent"), "gradient partition"
    ) == pytest.approx(VD_8B * 2 / 4)


def test_sharded_layouts_refuse_what_is_not_modelled_with_the_reason() -> None:
    with pytest.raises(PlanError, match="trainable tokens under FSDP or ZeRO"):
        _tiny(trainable_tokens=2).on_gpus(2, Strategy.ZERO2)
    with pytest.raises(PlanError, match="unit of its own"):  # PEFT's fsdp_auto_wrap_policy under FSDP1
        _tiny(modules_to_save=ModulesToSave.HEAD).on_gpus(2, Strategy.FSDP).with_parallel(fsdp1_wrap=True)
    with pytest.raises(PlanError, match="split of the embedding"):
        _tiny(modules_to_save=ModulesToSave.HEAD).on_gpus(4, Strategy.FSDP).with_parallel(tensor_parallel=2)
