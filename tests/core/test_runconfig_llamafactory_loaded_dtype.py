"""LLaMA-Factory 0.9.4 loads the checkpoint's own dtype, not the compute dtype (branch h97cfg, issue 22).

Read at hiyouga/LLaMA-Factory v0.9.4 (95ac3f2373b82662c1bd855c284d3379e6a763d3):
- src/llamafactory/model/loader.py line 160: ``init_kwargs["torch_dtype"] = "auto"`` for every run (moved there from
  patcher.py by 55590f5e); transformers then loads the dtype the checkpoint's config.json names;
- hparams/parser.py lines 454-457: ``bf16`` / ``pure_bf16`` / ``fp16`` set only ``model_args.compute_dtype``
  (bitsandbytes' compute dtype, model_utils/quantization.py lines 175-178, and Qwen-1's config flags, patcher.py
  lines 128-131);
  nothing in src/ casts the loaded model to it (``pure_bf16`` appears only in parser.py and adapter.py line 347);
- v0.9.3 (ca75f1edf3cb50343ed1c98605141c3e22075b5f) patcher.py line 144 passed ``torch_dtype=compute_dtype``.
Each test failed before: the reader held the model in bf16 under ``bf16`` / ``pure_bf16`` and fp16 under ``fp16``.
The checkpoints' dtypes are their config.json's ``torch_dtype`` as the catalogue holds it (resources/models.json:
google/gemma-2-9b float32, meta-llama/Llama-2-7b-hf float16, meta-llama/Meta-Llama-3-8B bfloat16).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from core.breakdown import BucketKey
from core.catalogue import find_gpu, find_model
from core.dtypes import Autocast, Dtype
from core.estimate import estimate
from core.files.runconfig import loads_run_config, plan_from_run
from core.plan import Method, Plan
from core.presets import default_plan

WHERE = str(Path(__file__).parent.parent / "data" / "runconfigs" / "a.yaml")
HEAD = "model_name_or_path: x\nstage: sft\n"


def _plan(text: str, model_id: str) -> Plan:
    run = loads_run_config((HEAD + text).encode(), WHERE)
    base = replace(default_plan(), model=find_model(model_id).spec, model_id=model_id)
    return plan_from_run(run, base, None)


@pytest.mark.parametrize(
    ("model_id", "flags", "loaded", "autocast"),
    [
        ("gemma-2-9b", "bf16: true\n", Dtype.FP32, Autocast.BF16),  # was bf16
        ("gemma-2-9b", "fp16: true\n", Dtype.FP32, Autocast.FP16),  # was fp16
        ("gemma-2-9b", "pure_bf16: true\n", Dtype.FP32, Autocast.NONE),  # was bf16
        ("llama-2-7b", "bf16: true\n", Dtype.FP16, Autocast.BF16),  # was bf16
        ("llama-2-7b", "pure_bf16: true\n", Dtype.FP16, Autocast.NONE),  # was bf16
        ("llama-3-8b", "fp16: true\n", Dtype.BF16, Autocast.FP16),  # was fp16
        ("llama-3-8b", "bf16: true\n", Dtype.BF16, Autocast.BF16),  # unchanged
        ("llama-2-7b", "", Dtype.FP16, Autocast.NONE),  # unchanged (no flag: the checkpoint's before too)
    ],
)
def test_lora_holds_the_base_in_the_checkpoints_dtype(
    model_id: str, flags: str, loaded: Dtype, autocast: Autocast
) -> None:
    plan = _plan("finetuning_type: lora\n" + flags, model_id)
    assert (plan.base_dtype, plan.autocast) == (loaded, autocast)
    assert plan.adapter_dtype is Dtype.FP32  # peft v0.17.1 peft_model.py:132-134, unchanged


def test_freeze_keeps_its_frozen_blocks_as_loaded_and_casts_the_trained_ones() -> None:
    # adapter.py:136 casts the trained blocks to float32 (h93lfv0); the frozen ones stay in the checkpoint's float16.
    plan = _plan("finetuning_type: freeze\nbf16: true\n", "llama-2-7b")
    assert plan.method is Method.FROZEN
    assert (plan.weight_dtype, plan.base_dtype, plan.autocast) == (Dtype.FP32, Dtype.FP16, Autocast.BF16)


def test_a_float32_checkpoint_under_bf16_holds_four_bytes_a_weight() -> None:
    # google/gemma-2-9b: 9,241,705,984 parameters (resources/models.json, the safetensors count), float32 on disk.
    plan = _plan("finetuning_type: lora\nbf16: true\n", "gemma-2-9b")
    weights = next(b.bytes for b in estimate(plan, find_gpu("a100-80gb-sxm")).buckets if b.key is BucketKey.WEIGHTS)
    assert weights > 4 * 9_241_705_984 * 0.99  # was 18.6 GB (bf16), now 38.9 GB with the adapters


def test_the_import_says_where_the_loaded_dtype_comes_from() -> None:
    run = loads_run_config((HEAD + "finetuning_type: lora\nbf16: true\n").encode(), WHERE)
    assert run.settings.model_dtype is None
    read = next(f for f in run.fields if f.setting == "model_dtype")
    assert read.value == "the checkpoint's own" and "loader.py:160" in read.source
