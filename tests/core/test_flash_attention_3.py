"""FlashAttention-3 (flash-attn's hopper/ package; transformers' attn_implementation="flash_attention_3") as an
attention kernel: Hopper only, FlashAttention-2's memory, its speed from the kernels' own benchmark
(core.training.efficiency FLASH3_OVER_FLASH; docs/TRAINING_TIME.md, "FlashAttention-3 on Hopper").

- Dao-AILab/flash-attention PR 1791 (2025-07-31), hopper/benchmark_attn.py on main, head dim 128, 8k tokens, causal:
  Fav2 fwd 284.1 / bwd 287.1 TFLOP/s, Fav3 fwd 630.0 / bwd 531.6.
- transformers ``_flash_attn_3_can_dispatch``: "Flash Attention 3 requires compute capability >= 9.0"; the package's
  README (Dao-AILab/flash-attention 0251105a): "Requirements: H100 / H800 GPU".
"""

from __future__ import annotations

import pytest
import yaml

from core.catalogue import find_gpu
from core.errors import PlanError
from core.estimate import estimate
from core.files.launch import Target, export
from core.inputs import ATTENTION_LABELS
from core.params import param_counts
from core.plan import Attention, Plan
from core.presets import plan_for_model
from core.training.efficiency import FITTED, FLASH3_OVER_FLASH, coefficient
from core.training.speed import attention_kernel, step_work
from core.verdict import Mode


def _plan(gpu: str = "h100-sxm", attention: Attention = Attention.FLASH3) -> Plan:
    plan = plan_for_model("qwen3-4b").with_workload(micro_batch=1, seq_len=8192).with_hardware(gpu=gpu)
    return plan.with_changes(attention=attention, checkpointing=True)


def test_flash3_is_a_kernel_of_its_own() -> None:
    assert Attention("flash3") is Attention.FLASH3
    assert ATTENTION_LABELS[Attention.FLASH3] == "FlashAttention-3 (Hopper)"


def test_its_speed_is_the_kernels_own_benchmark_against_flashattention_2() -> None:
    # Forward + backward at 2.5 x the forward's FLOPs: 3.5 / (1/f + 2.5/b). FA2 286.2, FA3 556.4 TFLOP/s: 1.944 x.
    fa2 = 3.5 / (1 / 284.1 + 2.5 / 287.1)
    fa3 = 3.5 / (1 / 630.0 + 2.5 / 531.6)
    assert FLASH3_OVER_FLASH == pytest.approx(fa3 / fa2) == pytest.approx(1.944, abs=5e-4)
    for gpu, family in (("h100-sxm", "hopper"), ("h200-sxm", "hopper"), ("gh200-96gb", "hopper")):
        plan = _plan(gpu)
        assert attention_kernel(plan, gpu) == "flash3"
        work = step_work(plan, param_counts(plan), find_gpu(gpu))
        assert f"attention:{family}/flash3" in work.features
    assert coefficient("attention:hopper/flash3") == pytest.approx(FITTED["attention:hopper/flash"] / FLASH3_OVER_FLASH)
    # The same plan's step is faster than under FlashAttention-2, and its memory the same.
    fa3_estimate, fa2_estimate = estimate(_plan()), estimate(_plan(attention=Attention.FLASH))
    assert fa3_estimate.compute.tokens_per_second > fa2_estimate.compute.tokens_per_second
    assert fa3_estimate.peak_bytes == fa2_estimate.peak_bytes


def test_off_hopper_it_cannot_run_and_is_timed_as_flashattention_2() -> None:
    for gpu, kernel in (("a100-80gb-sxm", "flash"), ("rtx-4090", "flash"), ("b200", "flash-sm80")):
        plan, fa2 = _plan(gpu), _plan(gpu, Attention.FLASH)
        assert attention_kernel(plan, gpu) == kernel
        assert step_work(plan, param_counts(plan), find_gpu(gpu)).features == pytest.approx(
            step_work(fa2, param_counts(fa2), find_gpu(gpu)).features
        )
        warnings = estimate(plan).warnings_for(Mode.TRAINING)
        assert any(w.startswith("FlashAttention-3 runs on Hopper only") for w in warnings), gpu
    assert not any("FlashAttention-3" in w for w in estimate(_plan()).warnings_for(Mode.TRAINING))
    # An Apple GPU has no flash-attn at all: the plan is refused, as FlashAttention-2's.
    with pytest.raises(PlanError):
        _plan("apple-m2-ultra-192gb")


def test_the_exporters_write_it_where_the_target_has_it() -> None:
    plan = _plan()
    assert '"attn_implementation": "flash_attention_3"' in export(plan, Target.TRL).text
    assert yaml.safe_load(export(plan, Target.LLAMA_FACTORY).text)["flash_attn"] == "fa3"
    axolotl = export(plan, Target.AXOLOTL)
    assert yaml.safe_load(axolotl.text)["flash_attention"] is True and axolotl.cannot("method.attention")
