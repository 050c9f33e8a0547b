"""SDPA's math kernel works in float32 on 16-bit inputs from PyTorch 2.5 (pytorch/pytorch PR 128922,
"Always use high precision for SDPA math backend", merged 2024-07, released in 2.5.0;
aten/src/ATen/native/transformers/attention.cpp ``_scaled_dot_product_attention_math``: ``query_.to(at::kFloat)``
for kHalf / kBFloat16 inputs unless ``allowFP16BF16ReductionMathSDP``, read through the file index, a 2.5+ copy,
id 40065839). Before, a 2.4-era copy (id 2466291) matmuls and soft-maxes in the inputs' dtype."""

from __future__ import annotations

import pytest

from core.estimate import estimate
from core.inputs import input_at
from core.plan import Plan, TorchVersion
from core.presets import plan_for_model
from core.training.activations import layer_activations
from core.training.attention import Kernel, sdpa_kernel
from core.training.speed import attention_kernel
from core.verdict import Mode

MAC = "apple-m2-ultra-192gb"


def _terms(plan: Plan) -> dict[str, float]:
    return {t.label: t.bytes for t in layer_activations(plan, False).items if t.label.startswith("math kernel")}


@pytest.mark.parametrize(
    ("release", "inner"), [(TorchVersion.V2_8, 4), (TorchVersion.V2_5_TO_2_7, 4), (TorchVersion.V2_4, 2)]
)
def test_a_mac_s_math_kernel_keeps_float32_from_2_5(release: TorchVersion, inner: int) -> None:
    # Llama 3.1 8B (32 heads × 128, config.json), bf16 weights, no autocast: q, k, v reach SDPA in 16 bits.
    plan = plan_for_model("llama-3.1-8b", preset="pure-bf16").with_workload(micro_batch=2, seq_len=256)
    plan = plan.with_hardware(gpu=MAC, torch_version=release)
    assert sdpa_kernel(plan) is Kernel.MATH
    tokens = 2 * 256
    width = "float32" if inner == 4 else "2 bytes"
    assert _terms(plan) == {
        "math kernel: scaled q, k and repeated v": 3 * tokens * 32 * 128 * inner,
        f"math kernel: probabilities ({width})": 2 * 32 * 256**2 * inner,
    }
    assert attention_kernel(plan) == ("eager-fp32" if inner == 4 else "eager")  # the matmuls' rate


def test_float32_inputs_are_float32_in_every_release() -> None:
    # On CUDA through 2.13 the math kernel is reached with float32 inputs (grouped-query heads rule out flash and
    # the efficient kernel, sdp_utils.cpp; from 2.14 the efficient kernel takes them, tests/core/test_torch_2_14.py);
    # with 16-bit ones flash or the efficient kernel runs first.
    plan = plan_for_model("llama-3.1-8b", preset="fp32").with_workload(micro_batch=1, seq_len=128)
    plan = plan.with_hardware(torch_version=TorchVersion.V2_8)
    assert sdpa_kernel(plan) is Kernel.MATH
    for gpu in ("a100-80gb-sxm", MAC):
        on = plan.with_hardware(gpu=gpu)
        assert _terms(on) == _terms(on.with_hardware(torch_version=TorchVersion.V2_4))
        assert _terms(on)["math kernel: probabilities (float32)"] == 32 * 128**2 * 4
        assert attention_kernel(on.with_hardware(torch_version=TorchVersion.V2_4)) == "eager-fp32"


def test_the_release_is_shown_where_it_changes_a_mac_s_figures() -> None:
    # It moves the math kernel's bytes (above) and a Mac's autocast warnings (core.mac), so the window
    # and `--help` show it for a Mac; a one-GPU CUDA plan with flash attention has no rule that reads it.
    field = input_at("hardware.torch_version")
    plan = plan_for_model("llama-3.1-8b")
    assert field.matters(plan.with_hardware(gpu=MAC))
    assert not field.matters(plan)


def test_the_cuda_allocator_setting_is_hidden_and_said_to_do_nothing_on_a_mac() -> None:
    # PYTORCH_CUDA_ALLOC_CONF is the CUDA caching allocator's (c10/cuda); MPS has its own watermark settings.
    field = input_at("hardware.alloc_conf")
    mac = plan_for_model("llama-3.1-8b").with_hardware(gpu=MAC)
    assert not field.matters(mac) and field.matters(plan_for_model("llama-3.1-8b"))
    expandable = mac.with_hardware(alloc_conf="expandable_segments:True")
    said = estimate(expandable).warnings_for(Mode.TRAINING)
    assert any("PYTORCH_CUDA_ALLOC_CONF" in text for text in said), said
    assert not any("PYTORCH_CUDA_ALLOC_CONF" in text for text in estimate(mac).warnings_for(Mode.TRAINING))
    assert estimate(expandable).peak_bytes == estimate(mac).peak_bytes  # the MPS heaps, either way
