"""What utilisation 0 means to serving, worded for the plan's card (the Hardware form's field)."""

from __future__ import annotations

from core.estimate import serving_utilisation_text
from core.presets import default_plan


def test_each_card_is_told_its_own_serving_share() -> None:
    # core.serving.speed: SERVING_UTILISATION 0.4 (the lesson's 40 %); APPLE_MATMUL_UTILISATION
    # 0.78 (philipturner/metal-flash-attention 01e41e6 README: MPS GEMM at 78 % of an M1 Max's peak).
    plan = default_plan()
    assert serving_utilisation_text(plan.with_hardware(gpu="l4")) == "40 % (serving)"
    assert serving_utilisation_text(plan.with_hardware(gpu="apple-m2-max-96gb")) == "78 % (serving on an Apple GPU)"
    custom = plan.with_hardware(gpu="custom", custom_memory_gb=48.0)
    assert serving_utilisation_text(custom) == "40 % (serving)"
