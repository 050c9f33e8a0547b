"""The serving estimate and its speed are worked out when first read (issue 26, latency).

A training plan's views seldom read them, and they were a third of ``estimate()``'s time
(the queue curve of the serving speed alone a fifth). Same figures, later: the golden test
(tests/golden.py) checks every one of them byte for byte; these check the laziness itself.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import core.serving.inference as inference_module
from core.estimate import estimate
from core.presets import plan_for_model
from core.verdict import Mode


class Counted:
    """Counts the calls of ``function`` and passes them on."""

    def __init__(self, function: Any) -> None:
        self.function, self.calls = function, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.function(*args, **kwargs)


def test_a_training_estimate_works_out_serving_once_and_only_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    serving = Counted(inference_module.inference_estimate)
    speed = Counted(inference_module.serving_speed)
    monkeypatch.setattr(inference_module, "inference_estimate", serving)
    monkeypatch.setattr(inference_module, "serving_speed", speed)
    est = estimate(plan_for_model("llama-3.1-8b"))
    assert (serving.calls, speed.calls) == (0, 0)
    assert est.fits in (True, False)  # the training verdict needs neither
    kv = est.inference.kv_cache_bytes
    assert kv > 0 and (serving.calls, speed.calls) == (1, 0)
    assert est.inference.speed.total_tokens_per_s > 0
    assert est.inference.ttft_s > 0
    assert (serving.calls, speed.calls) == (1, 1)  # each worked out once, then kept


def test_llama_cpp_works_out_serving_at_once_for_its_host_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its host part (layers not offloaded) is judged against the host RAM given, a warning of
    # the estimate itself: serving is worked out in estimate(), and not again when read.
    serving = Counted(inference_module.inference_estimate)
    monkeypatch.setattr(inference_module, "inference_estimate", serving)
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090")
    plan = plan.with_inference(engine="llamacpp", context=8192, gpu_layers=20).with_parallel(host_ram_gb=2)
    est = estimate(plan)
    assert serving.calls == 1 and est.warnings_for(Mode.INFERENCE)
    assert est.inference.host_ram_short and serving.calls == 1


@pytest.mark.parametrize("read_first", [False, True])
def test_an_estimate_pickles_with_the_same_serving_figures(read_first: bool) -> None:
    # The GUI sends estimates to its worker process (reports, comparisons): before or after
    # the serving figures were read, the copy gives the same ones.
    plan = plan_for_model("llama-3.1-8b").with_inference(engine="vllm")
    est = estimate(plan)
    if read_first:
        assert est.inference.speed.ttft_s > 0
    copy = pickle.loads(pickle.dumps(est))
    fresh = estimate(plan)
    assert copy.inference == fresh.inference
    assert copy.inference.speed == fresh.inference.speed
