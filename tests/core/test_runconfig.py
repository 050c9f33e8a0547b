"""Training configs in: real files from PEFT, TRL/alignment-handbook, axolotl, LLaMA-Factory and
torchtune (tests/data/runconfigs/SOURCES.md), and malformed ones.

Expected values are the values written in those files (quoted beside each assertion), or
the framework defaults named in core/runconfig's docstrings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.catalogue import find_model
from core.cli.app import main
from core.dtypes import Quant
from core.errors import PlanFileError
from core.estimate import estimate
from core.files.planfile import load
from core.files.runconfig import (
    ConfigKind,
    RunSettings,
    load_run_config,
    loads_run_config,
    name_key,
    plan_from_run,
    resolve_model,
)
from core.files.runconfig.mapping import apply_settings
from core.files.runconfig.reading import MAX_CONFIG_BYTES
from core.plan import Attention, Method, Optimizer, OptimizerImpl, Precision, Preset, Strategy
from core.presets import default_plan

DATA = Path(__file__).resolve().parents[1] / "data" / "runconfigs"
ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# all-linear as the plan keeps it (core.model.ALL_LINEAR): the seven names and itself, which on an MoE model also
# reaches the routers the release builds as nn.Linear.
ALL_LINEAR_ITSELF = (*ALL_LINEAR, "all-linear")


def sources(run: object) -> dict[str, str]:
    """setting -> the last source that set it."""
    return {f.setting: f.source for f in run.fields}  # type: ignore[attr-defined]


# ---- PEFT adapter_config.json ---------------------------------------------------------
def test_peft_adapter_of_llama_3_2_3b() -> None:
    run = load_run_config(DATA / "peft_llama3.2_3b_adapter_config.json")
    assert run.kind is ConfigKind.PEFT
    s = run.settings
    # "r": 8, "lora_alpha": 32, "target_modules": ["q_proj", "v_proj"], "use_dora": false
    assert (s.method, s.lora_rank, s.lora_alpha, s.lora_targets) == ("lora", 8, 32.0, ("q_proj", "v_proj"))
    assert sources(run)["lora_rank"] == "r"
    assert run.unknown == ()  # every key of a PEFT 0.14 LoraConfig is understood
    choice = resolve_model(run)
    assert choice is not None and choice.model_id == "llama-3.2-3b"  # "meta-llama/Llama-3.2-3B"
    plan = plan_from_run(run, default_plan(), choice)
    assert plan.model_id == "llama-3.2-3b" and plan.method is Method.LORA and plan.lora.rank == 8
    # The adapter file says nothing of batch or sequence: the plan's stay.
    assert plan.workload == default_plan().workload


def test_peft_dora_and_modules_to_save_are_read() -> None:
    document = json.loads((DATA / "peft_llama3.2_3b_adapter_config.json").read_text())
    document.update(use_dora=True, modules_to_save=["lm_head"], my_extension=1)
    run = loads_run_config(json.dumps(document).encode(), "dora.json")
    assert run.settings.method == "dora"
    # PEFT's modules_to_save (branch h60mts): the head's copy is the plan's setting now, no longer a note.
    assert run.settings.modules_to_save == "head"
    assert not any(n.source.startswith("modules_to_save") for n in run.notes)
    assert run.unknown == ("my_extension",)


def test_peft_unknown_target_names_are_listed_not_dropped() -> None:
    run = load_run_config(DATA / "peft_docs_bert_lora_adapter_config.json")
    # BERT's "query" and "value" are no matrices of the planner's decoder model.
    assert run.settings.lora_targets is None
    assert len(run.unknown) == 2 and all("target_modules" in u for u in run.unknown)
    choice = resolve_model(run)
    assert choice is not None and choice.spec is None  # bert-base-uncased: asked for


def test_peft_other_adapter_types_are_refused_in_one_line() -> None:
    # LoHa and LoKr are read since branch h53lyco, VeRA since h53vera, OFT since h54oft, AdaLoRA since h54ada, MiSS
    # since h58peft, FourierFT and RoAd since h76peft, VB-LoRA, RandLoRA and SHiRA since h78peft, BOFT since h80boft;
    # C3A is not modelled (huggingface/peft 51c2ff66 method_comparison/MetaMathQA/experiments/c3a/llama-3.2-3B-default/
    # adapter_config.json: "peft_type": "C3A", "block_size": 64).
    document = {"peft_type": "C3A", "block_size": 64, "target_modules": ["q_proj"]}
    with pytest.raises(
        PlanFileError,
        match=r"peft_type: 'C3A' .* expected LORA, IA3, PROMPT_TUNING, P_TUNING, PREFIX_TUNING, LN_TUNING, LOHA, "
        r"LOKR, VERA, OFT, ADALORA, MISS, TRAINABLE_TOKENS, FOURIERFT, ROAD, VBLORA, RANDLORA, SHIRA or BOFT",
    ) as info:
        loads_run_config(json.dumps(document).encode(), "c3a.json")
    assert "\n" not in str(info.value)


def test_peft_ia3_adapter_is_read() -> None:
    # PEFT's docs example (BERT): "peft_type": "IA3", targets key, value, output.dense — no
    # matrices of the planner's decoder model: listed as not understood, the method taken.
    run = load_run_config(DATA / "peft_docs_bert_ia3_adapter_config.json")
    assert (run.settings.method, run.settings.lora_targets, run.settings.ia3_feedforward) == ("ia3", None, None)
    assert sum("target_modules" in u or "feedforward_modules" in u for u in run.unknown) == 4
    # The peft_config of huggingface/peft 51c2ff66 method_comparison/MetaMathQA/results/
    # ia3--llama-3.2-3B-default.json, whose "num_trainable_params" is 286720.
    document = {
        "peft_type": "IA3",
        "base_model_name_or_path": "meta-llama/Llama-3.2-3B",
        "target_modules": ["down_proj", "v_proj", "k_proj"],
        "feedforward_modules": ["down_proj"],
        "fan_in_fan_out": False,
        "init_ia3_weights": True,
        "modules_to_save": None,
    }
    run = loads_run_config(json.dumps(document).encode(), "ia3.json")
    assert run.unknown == ()
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert plan.method is Method.IA3 and plan.lora.ia3_feedforward == ("down_proj",)
    assert estimate(plan).params.trainable == 286_720


def test_peft_regex_targets_take_the_names_they_mention() -> None:
    document = {"peft_type": "LORA", "r": 16, "target_modules": r".*language_model.*\.(q_proj|v_proj)$"}
    run = loads_run_config(json.dumps(document).encode(), "re.json")
    assert run.settings.lora_targets == ("q_proj", "v_proj")


# ---- transformers / TRL ------------------------------------------------------------
def test_trl_qlora_recipe_of_the_alignment_handbook() -> None:
    run = load_run_config(DATA / "trl_zephyr_sft_qlora.yaml")
    assert run.kind is ConfigKind.HF and run.model_ref == "mistralai/Mistral-7B-v0.1"
    s = run.settings
    assert (s.method, s.quant) == ("qlora", "nf4")  # load_in_4bit: true, use_peft: true
    assert (s.lora_rank, s.lora_alpha, s.lora_targets) == (16, 16.0, ALL_LINEAR)
    assert (s.micro_batch, s.grad_accum, s.seq_len, s.eval_batch) == (4, 2, 2048, 8)
    assert (s.model_dtype, s.autocast, s.checkpointing, s.attention) == ("bf16", "bf16", True, "flash")
    # No optim key: TrainingArguments' default with torch >= 2.8.
    assert (s.optimizer, s.optimizer_impl) == ("adamw", "fused")
    assert sources(run)["optimizer"].startswith("default:")
    assert run.unknown == ()
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert plan.model_id == "mistral-7b-v0.1" and plan.method is Method.QLORA and plan.quant is Quant.NF4
    # Loaded in bf16 (torch_dtype: bfloat16) with bf16: true: the Trainer(bf16=True) preset.
    assert plan.preset is Preset.TRAINER_BF16 and plan.attention is Attention.FLASH
    assert plan.optimizer_impl is OptimizerImpl.FUSED


def test_trl_full_recipe_and_the_default_batch() -> None:
    run = load_run_config(DATA / "trl_zephyr_sft_full.yaml")
    s = run.settings
    assert s.method == "full" and s.micro_batch == 32 and s.eval_batch == 16  # per_device_*_batch_size
    assert s.attention == "flash"  # use_flash_attention_2: true
    assert any(n.source.startswith("tf32") for n in run.notes)  # tf32: true is shown, not dropped
    minimal = load_run_config(DATA / "trl_example_config.yaml")
    # No per_device_train_batch_size: TrainingArguments' default of 8.
    assert minimal.settings.micro_batch == 8 and sources(minimal)["micro_batch"].startswith("default:")
    assert any(n.setting == "seq_len" for n in minimal.notes)


def test_training_arguments_json_dump_of_a_grpo_run() -> None:
    run = load_run_config(DATA / "trl_grpo_training_args.json")
    s = run.settings
    # "fp16": true, "optim": "paged_adamw_8bit", per_device_train_batch_size 6, accumulation 2
    assert (s.autocast, s.optimizer, s.micro_batch, s.grad_accum) == ("fp16", "paged-adamw-8bit", 6, 2)
    assert s.seq_len == 128 + 96  # max_prompt_length + max_completion_length
    assert s.checkpointing is False
    plan = plan_from_run(run, default_plan(), None)
    # The file names no model: the plan keeps Llama 3.1 8B, whose config.json says bfloat16,
    # so its weights are stored in bf16 whatever autocast does.
    assert plan.model_id == "llama-3.1-8b" and plan.precision is Precision.BF16
    assert (plan.weight_dtype.value, plan.autocast.value) == ("bf16", "fp16") and plan.grad_scaler
    assert plan.optimizer is Optimizer.PAGED_ADAMW_8BIT


@pytest.mark.parametrize(
    ("optim", "expected"),
    [
        ("adamw_torch_fused", ("adamw", "fused")),
        ("adamw_torch", ("adamw", "foreach")),
        ("adamw_bnb_8bit", ("adamw-8bit", None)),
        ("paged_adamw_8bit", ("paged-adamw-8bit", None)),
        ("adafactor", ("adafactor", None)),
        ("sgd", ("sgd", None)),
    ],
)
def test_hf_optim_names(optim: str, expected: tuple[str, str | None]) -> None:
    run = loads_run_config(json.dumps({"per_device_train_batch_size": 2, "optim": optim}).encode())
    assert (run.settings.optimizer, run.settings.optimizer_impl) == expected


def test_optim_implementation_reaches_the_plan() -> None:
    run = loads_run_config(b"per_device_train_batch_size: 2\noptim: adamw_torch\n", "foreach.yaml")
    assert plan_from_run(run, default_plan(), None).optimizer_impl is OptimizerImpl.FOREACH


def test_an_optimizer_the_planner_does_not_model_is_listed() -> None:
    # lion_8bit was the example until branch h57opt modelled bitsandbytes' Lion (tests/core/test_low_bit_optimizers.py),
    # rmsprop_bnb_8bit until branch h62optim modelled bitsandbytes' RMSprop (tests/core/test_hf_optimizer_names.py),
    # galore_adamw until branch h64galore modelled GaLore AdamW (tests/core/test_galore.py)
    run = loads_run_config(b"per_device_train_batch_size: 2\noptim: apollo_adamw\n", "apollo.yaml")
    assert run.settings.optimizer is None
    assert run.unknown[0].startswith("optim = 'apollo_adamw' (")


# ---- axolotl -------------------------------------------------------------------------
def test_axolotl_qlora_example() -> None:
    run = load_run_config(DATA / "axolotl_llama3_qlora.yml")
    assert run.kind is ConfigKind.AXOLOTL and run.model_ref == "NousResearch/Meta-Llama-3-8B"
    s = run.settings
    # lora_target_linear: true (axolotl b78dab1e find_all_linear_names: every nn.Linear's name): all-linear.
    targets = ALL_LINEAR_ITSELF
    assert (s.method, s.quant, s.lora_rank, s.lora_alpha, s.lora_targets) == ("qlora", "nf4", 32, 16.0, targets)
    assert (s.micro_batch, s.grad_accum, s.seq_len) == (2, 4, 4096)
    assert (s.optimizer, s.checkpointing, s.attention) == ("paged-adamw", True, "flash")
    assert s.model_dtype == "bf16" and "auto" in sources(run)["model_dtype"]  # bf16: auto
    assert any(n.source.startswith("sample_packing") for n in run.notes)
    assert run.unknown == ()


def test_axolotl_8bit_lora_is_an_int8_base() -> None:
    run = load_run_config(DATA / "axolotl_llama3_lora_8b.yml")
    # adapter: lora with load_in_8bit: true trains LoRA on an LLM.int8 base.
    assert (run.settings.method, run.settings.quant) == ("qlora", "int8")
    assert run.settings.optimizer == "adamw-8bit"  # optimizer: adamw_bnb_8bit
    # lora_modules_to_save: [embed_tokens, lm_head] (the file): both copies train, set rather than noted.
    assert run.settings.modules_to_save == "both"
    assert not any(n.source.startswith("lora_modules_to_save") for n in run.notes)


def _unknown_size(tmp_path: Path) -> Path:
    """axolotl's Llama 3 QLoRA example on a size no Llama 3 has (9B): a model the catalogue cannot answer for."""
    text = (DATA / "axolotl_llama3_qlora.yml").read_text().replace("Meta-Llama-3-8B", "Meta-Llama-3-9B")
    path = tmp_path / "axolotl_llama3_9b.yml"
    path.write_text(text)
    return path


def test_a_hub_id_not_in_the_catalogue_is_asked_for_with_the_closest_names(tmp_path: Path) -> None:
    # NousResearch/Meta-Llama-3-8B (the file's) is the catalogue's Llama 3 8B since h88fix added it
    choice = resolve_model(load_run_config(DATA / "axolotl_llama3_qlora.yml"))
    assert choice is not None and choice.model_id == "llama-3-8b"
    choice = resolve_model(load_run_config(_unknown_size(tmp_path)))
    assert choice is not None and choice.spec is None
    assert choice.candidates[0] == "llama-3-8b"


# ---- LLaMA-Factory -------------------------------------------------------------------
def test_llamafactory_lora_sft_example() -> None:
    run = load_run_config(DATA / "llamafactory_llama3_lora_sft.yaml")
    assert run.kind is ConfigKind.LLAMA_FACTORY
    s = run.settings
    # lora_target: all (LLaMA-Factory ff6d4d12 find_all_linear_modules: every Linear but the head, all-linear); no
    # lora_rank: 8; no lora_alpha: 2 × rank
    assert (s.method, s.lora_rank, s.lora_alpha, s.lora_targets) == ("lora", 8, 16.0, ALL_LINEAR_ITSELF)
    assert (s.micro_batch, s.grad_accum, s.seq_len, s.eval_batch) == (1, 8, 1024, 1)
    assert s.checkpointing is True and sources(run)["checkpointing"].startswith("default:")
    # bf16: true sets only the compute dtype; LLaMA-Factory v0.9.4 model/loader.py:160 loads torch_dtype="auto",
    # the checkpoint's own (Meta-Llama-3-8B-Instruct's config.json: bfloat16), which plan_from_run takes.
    assert s.model_dtype is None and s.autocast == "bf16"
    assert run.unknown == ()


def test_llamafactory_on_the_fly_4bit() -> None:
    run = load_run_config(DATA / "llamafactory_llama3_lora_sft_otfq.yaml")
    assert (run.settings.method, run.settings.quant, run.settings.seq_len) == ("qlora", "nf4", 2048)


# ---- torchtune -----------------------------------------------------------------------
def test_torchtune_lora_recipe() -> None:
    run = load_run_config(DATA / "torchtune_llama3_1_8B_lora_single_device.yaml")
    assert run.kind is ConfigKind.TORCHTUNE
    s = run.settings
    # lora_attn_modules ['q_proj', 'v_proj', 'output_proj'] + apply_lora_to_mlp: True
    assert s.lora_targets == ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    assert (s.method, s.lora_rank, s.lora_alpha, s.micro_batch, s.grad_accum) == ("lora", 8, 16.0, 2, 8)
    assert (s.model_dtype, s.adapter_dtype, s.autocast) == ("bf16", "bf16", "none")
    assert (s.optimizer, s.optimizer_impl, s.checkpointing, s.chunked_loss) == ("adamw", "fused", True, True)
    assert run.unknown == ()
    choice = resolve_model(run)  # lora_llama3_1_8b
    assert choice is not None and choice.model_id == "llama-3.1-8b"


def test_torchtune_lora_recipe_maps_to_bf16_adapters_without_autocast() -> None:
    run = load_run_config(DATA / "torchtune_llama3_1_8B_lora_single_device.yaml")
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    # dtype: bf16 casts the whole model, adapters included; no autocast; optimizer fused: True.
    assert (plan.weight_dtype.value, plan.adapter_dtype.value, plan.autocast.value) == ("bf16", "bf16", "none")
    assert plan.preset is Preset.CUSTOM and plan.optimizer_impl is OptimizerImpl.FUSED


def test_dora_becomes_the_dora_method() -> None:
    document = json.loads((DATA / "peft_llama3.2_3b_adapter_config.json").read_text())
    document["use_dora"] = True
    run = loads_run_config(json.dumps(document).encode(), "dora.json")
    assert plan_from_run(run, default_plan(), resolve_model(run)).method is Method.DORA


def test_torchtune_qlora_recipe() -> None:
    run = load_run_config(DATA / "torchtune_llama3_1_8B_qlora_single_device.yaml")
    assert (run.settings.method, run.settings.quant) == ("qlora", "nf4")
    assert run.settings.chunked_loss is True  # CEWithChunkedOutputLoss
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    est = estimate(plan)
    assert plan.method is Method.QLORA and plan.chunked_loss and est.peak_bytes > 0


# ---- the one mapping function --------------------------------------------------------
@pytest.mark.parametrize(
    ("dtype", "autocast", "adapter", "expected"),
    [
        ("fp32", "bf16", None, Preset.FP32_AUTOCAST_BF16),  # float32 weights + autocast
        ("fp32", "fp16", None, Preset.FP16_AMP),
        ("fp32", "none", None, Preset.FP32),
        ("bf16", "bf16", None, Preset.TRAINER_BF16),  # Trainer(bf16=True) on a bf16-loaded model
        ("bf16", "none", None, Preset.PURE_BF16),
        ("bf16", "none", "bf16", Preset.CUSTOM),  # torchtune: adapters in the model's dtype too
    ],
)
def test_precision_roles_from_load_dtype_and_autocast(
    dtype: str, autocast: str, adapter: str | None, expected: Preset
) -> None:
    settings = RunSettings(method="lora", model_dtype=dtype, autocast=autocast, adapter_dtype=adapter)
    plan = apply_settings(default_plan(), settings)
    assert plan.preset is expected
    assert (plan.weight_dtype.value, plan.base_dtype.value, plan.autocast.value) == (dtype, dtype, autocast)
    assert plan.adapter_dtype.value == (adapter or "fp32")


def test_the_models_own_dtype_is_used_when_the_file_does_not_say() -> None:
    plan = apply_settings(default_plan(), RunSettings(method="full", autocast="bf16"), model_dtype="fp32")
    assert plan.precision is Precision.BF16_MIXED
    plan = apply_settings(default_plan(), RunSettings(method="full", autocast="bf16"), model_dtype="bf16")
    assert plan.precision is Precision.BF16


def test_freeze_tuning_trains_the_top_blocks() -> None:
    run = loads_run_config(b"finetuning_type: freeze\nfreeze_trainable_layers: 4\n", "freeze.yaml")
    plan = plan_from_run(run, default_plan(), None)
    # Llama 3.1 8B has 32 blocks: 28 frozen, the top 4 train.
    assert plan.method is Method.FROZEN and plan.frozen_layers == 32 - 4


@pytest.mark.parametrize(
    ("ref", "key"),
    [
        ("meta-llama/Llama-3.2-3B-Instruct", "llama323b"),
        ("llama-3.2-3b", "llama323b"),
        ("Qwen/Qwen2.5-0.5B", "qwen2505b"),
    ],
)
def test_name_keys(ref: str, key: str) -> None:
    assert name_key(ref) == key


def test_a_local_model_folder_named_by_the_config_is_used(tmp_path: Path) -> None:
    folder = tmp_path / "my-model"
    folder.mkdir()
    # The adapter names a folder beside it; the folder holds a real config.json (the catalogue's copy).
    (folder / "config.json").write_text(json.dumps(dict(find_model("llama-3.2-1b").config)))
    (tmp_path / "adapter_config.json").write_text(
        json.dumps({"peft_type": "LORA", "r": 4, "target_modules": ["q_proj"], "base_model_name_or_path": "my-model"})
    )
    run = load_run_config(tmp_path / "adapter_config.json")
    choice = resolve_model(run)
    assert choice is not None and choice.spec is not None and choice.how.startswith("local model")
    assert choice.spec.num_layers == find_model("llama-3.2-1b").spec.num_layers


# ---- malformed files: one line each, never a traceback ---------------------------------
MALFORMED = {
    "bad_indent.yml": "is not valid YAML",
    "python_tag.yml": "would build a Python object",
    "training_args.bin": "is a Python pickle",
    "pickle_named.json": "is a Python pickle",
    "list_top.yaml": "is a list, not a mapping",
    "negative_batch.yml": "micro_batch_size: -3 is not allowed",
    "peft_rank_text.json": "r: 'sixteen' is not allowed",
    "not_training.yaml": "is not a training config",
    "nan.json": "NaN is not a number",
    "broken.json": "is not valid JSON",
    "alias_bomb.yaml": "more than 20,000 entries",
    "bf16_and_fp16.yaml": "bf16 or fp16, not both",
    "not_utf8.yaml": "is not UTF-8",
    "empty.yaml": "is empty",
}


@pytest.mark.parametrize(("name", "message"), sorted(MALFORMED.items()))
def test_malformed_configs_give_one_line(name: str, message: str) -> None:
    with pytest.raises(PlanFileError) as info:
        load_run_config(DATA / "malformed" / name)
    text = str(info.value)
    assert message in text and "\n" not in text and text.startswith(str(DATA / "malformed" / name))


def test_every_malformed_fixture_is_tested() -> None:
    assert {p.name for p in (DATA / "malformed").iterdir()} == set(MALFORMED)


# A list where a name is looked up in a table: each raised TypeError (unhashable) before.
@pytest.mark.parametrize(
    ("fixture", "old", "new"),
    [
        ("llamafactory_llama3_lora_sft.yaml", "finetuning_type: lora", "finetuning_type: lora\nflash_attn: [fa2]"),
        ("torchtune_llama3_1_8B_lora_single_device.yaml", "dtype: bf16", "dtype: [bf16]"),
        ("torchtitan_llama3_8b.toml", 'name = "AdamW"', 'name = ["AdamW"]'),
        ("torchtitan_llama3_8b.toml", "[optimizer]", '[optimizer]\nimplementation = ["fused"]'),
    ],
)
def test_a_list_where_a_name_belongs_is_the_projects_error(fixture: str, old: str, new: str) -> None:
    text = (DATA / fixture).read_text()
    assert old in text
    suffix = Path(fixture).suffix
    try:
        loads_run_config(text.replace(old, new, 1).encode(), f"hostile{suffix}")
    except PlanFileError as exc:
        assert "\n" not in str(exc)


def test_size_cap_is_checked_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "huge.yaml"
    big.write_bytes(b"a: 1\n" + b"#" * MAX_CONFIG_BYTES)
    with pytest.raises(PlanFileError, match="a training config is a few kB"):
        load_run_config(big)


def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PlanFileError, match="is a folder"):
        load_run_config(tmp_path)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_raise_only_the_projects_error(raw: bytes) -> None:
    try:
        loads_run_config(raw, "fuzz")
    except PlanFileError as exc:
        assert "\n" not in str(exc)


_scalars = st.none() | st.booleans() | st.integers(-10, 10**6) | st.floats(allow_nan=False) | st.text(max_size=12)
_keys = st.sampled_from(
    ["r", "lora_alpha", "target_modules", "peft_type", "micro_batch_size", "sequence_len", "adapter", "bf16",
     "fp16", "optim", "optimizer", "per_device_train_batch_size", "cutoff_len", "finetuning_type",
     "quantization_bit", "lora_target", "load_in_4bit", "gradient_checkpointing", "batch_size", "dtype",
     "flash_attn"]
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_keys, _scalars | st.lists(st.text(max_size=8), max_size=3), max_size=8))
def test_arbitrary_documents_map_to_a_plan_or_one_error(document: dict[str, object]) -> None:
    try:
        run = loads_run_config(json.dumps(document).encode(), "doc.json")
        plan = plan_from_run(run, default_plan(), None)
    except PlanFileError as exc:
        assert "\n" not in str(exc)
        return
    estimate(plan)


# ---- command line ---------------------------------------------------------------------
def test_cli_estimate_from_a_config(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["estimate", "--from", str(DATA / "trl_zephyr_sft_qlora.yaml"), "--gpu", "rtx-4090"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "LoRA rank" in out and "← lora_r" in out and "not understood: none" in out
    assert "Mistral 7B v0.1 · qlora" in out


def test_cli_estimate_from_json_carries_the_sources(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / "axolotl_llama3_qlora.yml"
    saved = tmp_path / "plan.json"
    argv = ["estimate", "--from", str(path), "--model", "llama-3.1-8b", "--micro-batch", "1", "--json"]
    rc = main([*argv, "--save", str(saved)])
    document = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert document["from_config"]["kind"] == "axolotl"
    assert {"setting": "micro_batch", "value": 2, "source": "micro_batch_size"} in document["from_config"]["fields"]
    assert document["from_config"]["not_understood"] == []
    plan = load(saved)
    # --micro-batch overrides the file's micro_batch_size: 2; the rest comes from the file.
    assert plan.workload.micro_batch == 1 and plan.workload.seq_len == 4096 and plan.model_id == "llama-3.1-8b"


def test_cli_unresolved_model_is_one_line_with_candidates(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc = main(["estimate", "--from", str(_unknown_size(tmp_path))])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--model" in err and "llama-3-8b" in err


def test_cli_refuses_a_pickle(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["estimate", "--from", str(DATA / "malformed" / "training_args.bin")])
    err = capsys.readouterr().err
    assert rc == 2 and "pickle" in err and err.count("\n") == 1


# ---- sharding from DeepSpeed / FSDP ----------------------------------------------------
def test_llamafactory_deepspeed_zero3_file_sets_the_sharding() -> None:
    run = load_run_config(DATA / "llamafactory_llama3_lora_sft_ds3.yaml")
    # deepspeed: examples/deepspeed/ds_z3_config.json, whose zero_optimization.stage is 3
    assert run.settings.sharding == "zero3"
    assert sources(run)["sharding"] == "deepspeed → examples/deepspeed/ds_z3_config.json: zero_optimization.stage"
    plan = plan_from_run(run, default_plan(), None)
    assert plan.parallel.strategy is Strategy.ZERO3 and plan.world_size == default_plan().world_size
    assert run.unknown == ()


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"fsdp": "full_shard auto_wrap"}, "fsdp"),  # TrainingArguments.fsdp is a space-separated string
        ({"fsdp": ["shard_grad_op"]}, "fsdp"),
        ({"deepspeed": {"zero_optimization": {"stage": 1}}}, "zero1"),
        ({"deepspeed": {"zero_optimization": {"stage": 0}}}, "ddp"),
    ],
)
def test_sharding_from_inline_settings(extra: dict[str, object], expected: str) -> None:
    run = loads_run_config(json.dumps({"per_device_train_batch_size": 1, **extra}).encode(), "inline.json")
    assert run.settings.sharding == expected


def test_a_missing_deepspeed_file_is_noted(tmp_path: Path) -> None:
    path = tmp_path / "args.yaml"
    path.write_text("per_device_train_batch_size: 1\ndeepspeed: nowhere/ds.json\n")
    run = load_run_config(path)
    assert run.settings.sharding is None and any(n.source.startswith("deepspeed") for n in run.notes)


# TrainingArguments.fsdp words and DeepSpeed's zero_optimization.offload_* (their docs):
# "offload" with full_shard is FSDP's CPUOffload(offload_params=True); a device of "cpu"
# under offload_optimizer moves the optimizer state, under offload_param the parameters.
@pytest.mark.parametrize(
    ("extra", "strategy", "offload", "reshard"),
    [
        ({"fsdp": "full_shard offload auto_wrap"}, "fsdp", "params", True),
        ({"fsdp": "shard_grad_op"}, "fsdp", None, False),
        (
            {"deepspeed": {"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}},
            "zero3",
            "params",
            None,
        ),
        (
            {"deepspeed": {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}},
            "zero2",
            "optimizer",
            None,
        ),
        (
            {"deepspeed": {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "none"}}}},
            "zero2",
            None,
            None,
        ),
    ],
)
def test_offload_and_resharding_are_read(
    extra: dict[str, object], strategy: str, offload: str | None, reshard: bool | None
) -> None:
    run = loads_run_config(json.dumps({"per_device_train_batch_size": 1, **extra}).encode(), "inline.json")
    s = run.settings
    assert (s.sharding, s.offload, s.reshard_after_forward) == (strategy, offload, reshard)
    plan = plan_from_run(run, default_plan(), None)
    assert plan.parallel.strategy.value == strategy
    assert plan.parallel.offload.value == (offload or "none")
    assert plan.parallel.reshard_after_forward is (True if reshard is None else reshard)
