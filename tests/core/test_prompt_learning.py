"""PEFT's prompt tuning and P-tuning (branch h41soft): the tensors PEFT trains, the sequence the
model runs on, the plan's setting through the plan file, the command line, adapter_config.json
and the exporters.

Source read: huggingface/peft 51c2ff666b142d004c12609c9686cf17ca055751 (PEFT 0.19.2.dev0, the
version of the method_comparison results): src/peft/peft_model.py (``PeftModelForCausalLM.forward``,
``PeftModel._setup_prompt_encoder``, ``get_prompt``), src/peft/tuners/prompt_tuning/model.py
(``PromptEmbedding``), src/peft/tuners/p_tuning/model.py (``PromptEncoder``), src/peft/utils/other.py
(``_prepare_prompt_learning_config``).
"""

from __future__ import annotations

import json

import pytest

from core.cli.app import main
from core.errors import PlanError, PlanFileError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.planfile import dumps, loads
from core.files.runconfig import loads_run_config, plan_from_run, resolve_model
from core.params import param_counts
from core.plan import LoraSettings, Method, Plan, Preset, Strategy
from core.presets import default_plan, plan_for_model
from core.training.activations import outside_blocks
from core.training.optimizer import largest_trainable_tensor, trainable_tensors


def _prompt(method: Method = Method.PROMPT_TUNING, tokens: int = 200, **kw: object) -> Plan:
    kw.setdefault("preset", Preset.TRAINER_BF16)
    return plan_for_model("llama-3.2-3b", method=method, lora=LoraSettings(virtual_tokens=tokens), **kw)


def test_trainable_parameters_are_peft_s_count() -> None:
    # method_comparison/MetaMathQA/results/prompt_tuning--llama-3.2-3B-default.json (peft 51c2ff66):
    # num_virtual_tokens 200, token_dim 3072: "num_trainable_params": 614400 (200 × 3,072).
    prompt = _prompt()
    assert (param_counts(prompt).trainable, trainable_tensors(prompt)) == (614_400, 1)
    # ptuning--llama-3.2-3B-default.json: 20 tokens, MLP encoder of width 3,072:
    # "num_trainable_params": 28382208 = 20 × 3,072 + 3 × (3,072² + 3,072).
    p_tuning = _prompt(Method.P_TUNING, 20)
    assert (param_counts(p_tuning).trainable, trainable_tensors(p_tuning)) == (28_382_208, 7)
    assert largest_trainable_tensor(p_tuning) == 3072 * 3072


def test_the_model_runs_on_the_sequence_plus_the_virtual_tokens() -> None:
    # PeftModelForCausalLM.forward: inputs_embeds = cat((prompts, inputs_embeds), dim=1), labels
    # padded with -100: the blocks and the logits cover seq + num_virtual_tokens positions, so the
    # activations are those of a frozen-base run on the longer sequence.
    prompt = _prompt(tokens=200).with_workload(micro_batch=4, seq_len=768)
    peak = estimate(prompt).worst.peak_bytes
    one_token = prompt.with_changes(lora=LoraSettings(virtual_tokens=1))
    assert peak > estimate(one_token).worst.peak_bytes
    # 200 virtual tokens before 768 are one virtual token before 967: the same 968 positions (the
    # prompt's 200 × 3,072 float32 weights, gradients and Adam state, 9.8 MB, aside).
    same = estimate(one_token.with_workload(seq_len=967)).worst.peak_bytes
    assert abs(peak - same) < 200 * 3072 * 4 * 4
    assert prompt.run_seq_len == 968 and prompt.with_method(Method.LORA).run_seq_len == 768


def test_p_tuning_encoder_keeps_its_input_and_relu_outputs() -> None:
    # PromptEncoder.forward: mlp_head(embedding(indices)) on B × n tokens; float32 encoder.
    plan = _prompt(Method.P_TUNING, 20)
    terms = {t.label: t.bytes for t in outside_blocks(plan).items}
    b = plan.workload.micro_batch
    assert terms["P-tuning encoder: its input and ReLU outputs"] == b * 20 * 3 * 3072 * 4
    assert "P-tuning encoder: its input and ReLU outputs" not in {t.label for t in outside_blocks(_prompt()).items}


def test_layouts_beyond_one_process_or_ddp_are_refused() -> None:
    with pytest.raises(PlanError, match="one GPU or DDP"):
        _prompt().with_parallel(strategy=Strategy.FSDP, gpus_per_node=2)
    assert _prompt().with_parallel(strategy=Strategy.DDP, gpus_per_node=2).world_size == 2


def test_plan_file_round_trips_and_old_files_read_twenty() -> None:
    plan = _prompt(Method.P_TUNING, 33)
    assert loads(dumps(plan)) == plan
    document = json.loads(dumps(plan_for_model("llama-3.2-3b", method=Method.LORA)))
    del document["plan"]["lora"]["virtual_tokens"]
    assert loads(json.dumps(document)).lora.virtual_tokens == 20


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "llama-3.2-3b", "--json", "--virtual-tokens", "200"]
    assert main([*args, "--method", "prompt-tuning"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 614_400
    assert main([*args, "--method", "p-tuning"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 200 * 3072 + 3 * (3072**2 + 3072)


def _read(document: dict[str, object]) -> Plan:
    run = loads_run_config(json.dumps(document).encode(), "adapter_config.json")
    assert run.unknown == ()
    return plan_from_run(run, default_plan(), resolve_model(run))


def test_adapter_config_is_read() -> None:
    # The peft_config blocks of prompt_tuning--llama-3.2-3B-default.json and ptuning--llama-3.2-3B-default.json.
    common = {
        "task_type": "CAUSAL_LM",
        "peft_version": "0.19.2.dev0@UNKNOWN",
        "base_model_name_or_path": "meta-llama/Llama-3.2-3B",
        "revision": None,
        "inference_mode": False,
        "token_dim": 3072,
        "num_transformer_submodules": 1,
        "num_attention_heads": 24,
        "num_layers": 28,
        "modules_to_save": None,
    }
    prompt = _read({
        **common, "peft_type": "PROMPT_TUNING", "num_virtual_tokens": 200, "prompt_tuning_init": "RANDOM",
    })  # fmt: skip
    assert (prompt.method, prompt.lora.virtual_tokens) == (Method.PROMPT_TUNING, 200)
    assert estimate(prompt).params.trainable == 614_400
    encoder = {"encoder_reparameterization_type": "MLP", "encoder_hidden_size": 3072, "encoder_num_layers": 2}
    p_tuning = _read({**common, "peft_type": "P_TUNING", "num_virtual_tokens": 20, **encoder, "encoder_dropout": 0.0})
    assert estimate(p_tuning).params.trainable == 28_382_208
    lstm = {**common, "peft_type": "P_TUNING", **encoder, "encoder_reparameterization_type": "LSTM"}
    with pytest.raises(PlanFileError, match="encoder_reparameterization_type: 'LSTM'"):
        loads_run_config(json.dumps(lstm).encode(), "a.json")
    narrow = {**common, "peft_type": "P_TUNING", **encoder, "encoder_hidden_size": 1024}
    with pytest.raises(PlanFileError, match="encoder_hidden_size: 1024"):
        loads_run_config(json.dumps(narrow).encode(), "a.json")


def test_exporters_say_they_write_lora() -> None:
    written = export(_prompt(), Target.TRL)
    assert written.cannot("method.kind") and written.cannot("method.lora.virtual_tokens")
