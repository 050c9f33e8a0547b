"""LLaMA-Factory's casts the planner missed (issue 22 items 2 and 3, branch h94cfg). Each test failed before.

- v1 FSDPTurbo with LoRA, read at hiyouga/LLaMA-Factory ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30 (the commit of the
  v1 reader): ``src/llamafactory/v1/plugins/trainer_plugins/distributed/fsdpturbo.py``
  ``FSDPTurboFSDP2Engine.shard_model`` (lines 302-307) runs ``model.to(param_dtype)`` — bf16 with ``bf16`` (the
  default), else float32 — on the model the PEFT plugin already wrapped (``core/model_engine.py`` applies
  ``peft_config`` at load; ``core/base_trainer.py`` ``_shard_model`` runs later): PEFT's float32 adapters
  (``plugins/model_plugins/peft.py`` line 198, ``get_peft_model`` with PEFT 0.18's ``autocast_adapter_dtype=True``)
  become bf16. The reader applied the cast to full and freeze tuning only.
- v0.9.4 full tuning of an image-text model, read at v0.9.4 (95ac3f2373b82662c1bd855c284d3379e6a763d3):
  ``src/llamafactory/model/adapter.py`` ``_setup_full_tuning`` (lines 40-56) casts every parameter outside
  ``get_forbidden_modules`` to float32 and freezes the rest without a cast; ``model/model_utils/visual.py``
  ``get_forbidden_modules`` (lines 159-179) names the vision tower and the projector under ``freeze_vision_tower`` /
  ``freeze_multi_modal_projector`` (``hparams/finetuning_args.py`` lines 493-500: both true by default), gemma3
  registered with the defaults ``vision_tower`` / ``multi_modal_projector`` (lines 211-213). The planner stored the
  frozen tower as the float32 trained weights.
"""

from __future__ import annotations

from core.files.runconfig import loads_run_config, plan_from_run, resolve_model
from core.plan import Preset
from core.presets import default_plan
from core.roles import dtypes_for
from core.training.storage import vision_weight_term

LORA_TURBO = b"model: Qwen/Qwen3-4B\npeft_config:\n  name: lora\ndist_config:\n  name: fsdpturbo\n"


def _plan(text: bytes, where: str = "lf.yaml"):  # type: ignore[no-untyped-def]
    run = loads_run_config(text, where)
    return run, plan_from_run(run, default_plan(), resolve_model(run))


# ---- item 2: FSDPTurbo's cast reaches the LoRA adapters -----------------------------------------------------------
def test_fsdpturbo_casts_lora_adapters_to_bf16() -> None:
    run, plan = _plan(LORA_TURBO)
    assert run.settings.adapter_dtype == "bf16" and run.settings.model_dtype == "bf16"
    dt = dtypes_for(plan)
    assert dt.adapter == 2 and dt.grad == 2  # bf16 adapters: bf16 gradients and (zeros_like) optimizer state
    assert dt.base == 2


def test_fsdpturbo_without_bf16_holds_everything_in_float32() -> None:
    # shard_model: param_dtype = torch.float32 when mixed_precision is not bf16: the frozen base too.
    run, plan = _plan(LORA_TURBO + b"bf16: false\n")
    assert run.settings.adapter_dtype == "fp32" and run.settings.model_dtype == "fp32"
    assert dtypes_for(plan).base == 4


def test_fsdpturbo_qlora_keeps_its_codes_and_casts_the_adapters() -> None:
    # nn.Module.to(dtype) casts floating tensors only: bitsandbytes' packed uint8 codes stay.
    text = LORA_TURBO + b"quant_config:\n  name: bnb\n  quantization_bit: 4\n"
    run, _ = _plan(text)
    assert run.settings.method == "qlora" and run.settings.adapter_dtype == "bf16"
    assert run.settings.model_dtype is None


def test_fsdp2_lora_keeps_peft_float32_adapters() -> None:
    # fsdp2.py stores what PEFT made (float32 adapters) and gathers them in bf16 (MixedPrecisionPolicy): unchanged.
    run, _ = _plan(LORA_TURBO.replace(b"fsdpturbo", b"fsdp2"))
    assert run.settings.adapter_dtype is None and run.settings.fsdp_param_dtype == "bf16"


# ---- item 3: v0.9.4 full tuning keeps the frozen vision tower as loaded --------------------------------------------
GEMMA3_FULL = (
    b"model_name_or_path: google/gemma-3-12b-it\nstage: sft\nfinetuning_type: full\nbf16: true\n"
    b"cutoff_len: 2048\nper_device_train_batch_size: 1\n"
)


def test_full_tuning_keeps_the_frozen_vision_tower_in_bf16() -> None:
    _, plan = _plan(GEMMA3_FULL)
    assert plan.model.vision_params == 421_290_864  # the catalogue's Gemma 3 12B SigLIP tower + projector
    assert plan.weight_dtype.value == "fp32"  # the trained language model, cast by _setup_full_tuning
    assert plan.base_dtype.value == "bf16"  # the tower, frozen and not cast
    term = vision_weight_term(plan, dtypes_for(plan))
    assert term.bytes == 421_290_864 * 2  # was × 4: 0.84 GB lower


def test_a_text_model_full_run_is_still_the_preset() -> None:
    # No frozen weights in a text-only full run: the roles stay FP32_AUTOCAST_BF16 (no golden plan moves).
    _, plan = _plan(GEMMA3_FULL.replace(b"google/gemma-3-12b-it", b"meta-llama/Llama-3.2-3B"))
    assert plan.preset.value == "fp32-autocast-bf16"


def test_a_preset_full_plan_stores_the_tower_as_its_weights() -> None:
    # Every preset holds the base in the weights' dtype (core.plan.PRESET_ROLES): a preset plan does not move.
    _, plan = _plan(GEMMA3_FULL)
    preset = plan.with_changes(preset=Preset.FP32_AUTOCAST_BF16)  # float32 weights and base, bf16 autocast
    assert vision_weight_term(preset, dtypes_for(preset)).bytes == 421_290_864 * 4


def test_training_the_tower_is_listed() -> None:
    run, _ = _plan(GEMMA3_FULL + b"freeze_vision_tower: false\nfreeze_language_model: true\n")
    assert any(item.startswith("freeze_vision_tower = False") for item in run.unknown)
    assert any(item.startswith("freeze_language_model = True") for item in run.unknown)
    defaults, _ = _plan(GEMMA3_FULL + b"freeze_vision_tower: true\nfreeze_multi_modal_projector: true\n")
    assert defaults.unknown == ()
