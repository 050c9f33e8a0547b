"""LoRA on the output head (issue 22, "recipes people run"): litgpt's ``lora_head: true``, torchtune's
``apply_lora_to_output``, PEFT's ``target_modules=[..., "lm_head"]``.

Shapes: google/gemma-2b config.json (hidden_size 2048, vocab_size 256000, 18 layers, 8 heads × 256,
1 key/value head, intermediate_size 16384, tie_word_embeddings) as litgpt's ``Gemma-2b`` config has them
(Lightning-AI/litgpt 00af8b0d litgpt/config.py: n_embd 2048, padded_vocab_size 256000, n_layer 18);
meta-llama/Llama-2-7b-hf config.json (hidden_size 4096, vocab_size 32000, untied head).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from core.catalogue import find_model
from core.cli.app import main
from core.errors import PlanError
from core.files.launch import Target, export
from core.files.runconfig import load_run_config, loads_run_config, plan_from_run, resolve_model
from core.model import LORA_TARGETS, normalise_lora_targets
from core.params import param_counts
from core.plan import Method, Plan, Workload
from core.presets import default_plan
from core.training.activations import outside_blocks
from core.training.flops import token_flops
from core.training.optimizer import trainable_tensors

DATA = Path(__file__).resolve().parents[1] / "data" / "runconfigs"
# litgpt config_hub/finetune/gemma-2b/lora.yaml at 00af8b0d: lora_r 8, lora_query/key/value/projection/mlp/head true.
LITGPT_GEMMA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")


def test_gemma_2b_head_adapter_is_r_times_hidden_plus_vocab() -> None:
    spec = find_model("gemma-2b").spec
    # lora_A (8 × 2048) + lora_B (256000 × 8), once for the model (litgpt LoRALinear: lora_A (r, in),
    # lora_B (out, r)).
    head = 8 * 2_048 + 256_000 * 8
    assert head == 2_064_384
    assert spec.lora_params(8, ("lm_head",), False) == head
    # The blocks by hand, per layer at r = 8: q 8·(2048+2048), k and v 8·(2048+256), o 8·(2048+2048),
    # gate, up and down 8·(2048+16384) each; 18 layers.
    per_layer = 8 * (4_096 + 2_304 + 2_304 + 4_096 + 3 * 18_432)
    assert spec.lora_params(8, LITGPT_GEMMA_TARGETS, False) == 18 * per_layer + head == 11_870_208


def test_a_tied_head_gets_the_same_adapter() -> None:
    # PEFT 51c2ff66 tuners_utils.py inject_adapter wraps a tied lm_head like any linear (it only warns).
    tied = find_model("gemma-2b").spec
    assert tied.tie_embeddings
    untied = replace(tied, tie_embeddings=False)
    assert tied.lora_params(8, ("q_proj", "lm_head"), False) == untied.lora_params(8, ("q_proj", "lm_head"), False)


def test_all_linear_still_leaves_the_head_out() -> None:
    # huggingface/peft 51c2ff66 tuners_utils.py _maybe_include_all_linear_layers drops the output embedding.
    # all-linear is kept beside the seven names it covers (core.model.ALL_LINEAR).
    assert normalise_lora_targets(["all-linear"]) == (*LORA_TARGETS, "all-linear")
    assert "lm_head" not in normalise_lora_targets(["all"])
    assert normalise_lora_targets(["all-linear", "lm_head"]) == (*LORA_TARGETS, "all-linear", "lm_head")
    spec = find_model("llama-2-7b").spec
    assert spec.lora_params(8, ("all-linear", "lm_head"), False) - spec.lora_params(8, ("all-linear",), False) == 8 * (
        4_096 + 32_000
    )


def test_the_frameworks_names_for_the_head() -> None:
    assert normalise_lora_targets(["head"]) == ("lm_head",)  # litgpt
    assert normalise_lora_targets(["output"]) == ("lm_head",)  # torchtune
    assert normalise_lora_targets(["LM_HEAD", "v_proj"]) == ("v_proj", "lm_head")


def test_the_cli_flag(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "llama-2-7b", "--method", "lora", "--lora-rank", "8", "--json"]
    assert main([*args, "--lora-targets", "q_proj,v_proj,lm_head"]) == 0
    # PEFT's 4,194,304 for q_proj, v_proj at r = 8, plus 8·(4096 + 32000) for the head.
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 4_194_304 + 288_768


def test_torchtune_apply_lora_to_output_is_read_and_written() -> None:
    run = load_run_config(DATA / "torchtune_mistral_7B_lora_single_device.yaml")
    # lora_attn_modules ['q_proj', 'v_proj', 'output_proj'], apply_lora_to_mlp: True, apply_lora_to_output: True
    assert run.settings.lora_targets == ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert plan.lora.targets[-1] == "lm_head"
    assert yaml.safe_load(export(plan, Target.TORCHTUNE).text)["model"]["apply_lora_to_output"] is True


def test_peft_target_modules_with_lm_head() -> None:
    document = json.loads((DATA / "peft_llama3.2_3b_adapter_config.json").read_text())
    document["target_modules"] = ["q_proj", "v_proj", "lm_head"]
    run = loads_run_config(json.dumps(document).encode(), "adapter_config.json")
    assert run.settings.lora_targets == ("q_proj", "v_proj", "lm_head")


def test_axolotl_target_linear_keeps_the_modules_it_names() -> None:
    # axolotl 067b021 loaders/adapter.py _build_peft_lora_config: lora_target_linear adds every linear but the
    # head to lora_target_modules; the head named there stays a target.
    text = (DATA / "axolotl_llama3_qlora.yml").read_text() + "lora_target_modules:\n  - lm_head\n"
    run = loads_run_config(text.encode(), "qlora.yml")
    assert run.settings.lora_targets == (*LORA_TARGETS, "all-linear", "lm_head")
    assert load_run_config(DATA / "axolotl_llama3_qlora.yml").settings.lora_targets == (*LORA_TARGETS, "all-linear")


def _plan(targets: tuple[str, ...], **changes: object) -> Plan:
    plan = Plan(model=find_model("llama-2-7b").spec, method=Method.LORA, workload=Workload(micro_batch=2, seq_len=512))
    return plan.with_lora(targets=targets, rank=8, **changes)


def test_the_head_keeps_its_input_and_the_rank_r_intermediate() -> None:
    without, with_head = _plan(("q_proj", "v_proj")), _plan(("q_proj", "v_proj", "lm_head"))
    n = 2 * 512
    added = sum(t.bytes for t in outside_blocks(with_head).items) - sum(t.bytes for t in outside_blocks(without).items)
    # The frozen head keeps nothing; its adapter keeps the final norm's output (N·d, the model's bf16 — the
    # input lora_A reads, PEFT/litgpt/torchtune with no dropout) and lora_A's output (N·r, bf16).
    assert added == n * 4_096 * 2 + n * 8 * 2
    # With dropout: the dropped copy (bf16) and its one-byte mask instead of the input itself.
    dropped = _plan(("q_proj", "v_proj", "lm_head"), dropout=0.1)
    plain = _plan(("q_proj", "v_proj"), dropout=0.1)
    added = sum(t.bytes for t in outside_blocks(dropped).items) - sum(t.bytes for t in outside_blocks(plain).items)
    assert added == n * 4_096 * (2 + 1) + n * 8 * 2


def test_its_weights_train_once_and_its_flops_are_three_passes() -> None:
    without, with_head = _plan(("q_proj", "v_proj")), _plan(("q_proj", "v_proj", "lm_head"))
    assert param_counts(with_head).trainable - param_counts(without).trainable == 288_768
    assert trainable_tensors(with_head) - trainable_tensors(without) == 2  # lora_A, lora_B
    extra = token_flops(with_head).hardware - token_flops(without).hardware
    assert extra == pytest.approx(2 * 288_768 * 3)  # forward, input and weight gradients of A and B


def test_ia3_on_the_head_is_refused_and_left_out_on_a_switch() -> None:
    plan = _plan(("q_proj", "v_proj", "lm_head"))
    with pytest.raises(PlanError, match="lora.targets"):
        replace(plan, method=Method.IA3)
    assert plan.with_method(Method.IA3).lora.targets == ("q_proj", "v_proj")
