"""llama.cpp's own choice of GPU layers when none is given (``--fit``, on by default).

Read at ggml-org/llama.cpp ``common/fit.cpp`` (commit 08033df02cc32f3706271c068aaeaeecf94922a1,
``common_params_fit_impl``; first merged as ``llama_params_fit`` in ``src/llama.cpp`` by PR #16653,
2025-12, and moved to ``common/``) and ``common/common.h`` (001d906a6d86e2490e394361e7cc6f478b100088:
``n_gpu_layers = -1`` "auto", ``fit_params = true``, ``fit_params_min_ctx = 4096``,
``fit_params_target`` 1024 MiB per device). Before the model loads, llama-server measures the
buffers the model and context would take (a trial load with ``no_alloc``) and:

1. with every layer on the GPUs (llama.cpp's own split), keeps it if each device is left at least
   the target (``free - used >= margin``);
2. lowers the context only when none was given (``n_ctx == 0``: the trained context); a plan always
   gives one (Ollama passes ``-c``), so this step changes nothing here ("context size set by user");
3. fills dense layers back to front: the last device first takes as many of the ``n_layer + 1``
   (the output layer counts as one) as keep its use at most ``free - margin``, by the method of false
   position between 0 and all the unassigned ones, then the device before it, and so on; the counts
   become ``n_gpu_layers`` and the tensor split.

Not modelled: a mixture-of-experts model (its expert tensors go to host memory first and layers are
split into parts, step 4), the context reduction of step 2, projectors and draft models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from core.catalogue import GpuSpec
from core.plan import Plan
from core.serving.llamacpp import device_overhead_bytes, llamacpp_buffers
from core.units import MiB

# common/common.h: fit_params_target = 1024 * 1024*1024 bytes per device (``-fitt`` / ``--fit-target``).
FIT_TARGET: Final = 1024 * MiB


@dataclass(frozen=True)
class LlamaCppFit:
    """What ``common_params_fit_impl`` sets: ``n_gpu_layers`` and the layers on each device."""

    gpu_layers: int  # of num_layers + 1 (the output layer counts as one)
    split: tuple[int, ...]  # layers on each GPU (the tensor split it writes; one GPU: its count)
    whole: bool  # step 1: everything fitted with the default parameters, nothing changed
    target: float  # each device's most acceptable use: free - margin


def _device_use(plan: Plan, gpu: GpuSpec, counts: list[int]) -> tuple[float, ...]:
    """Each device's buffers with ``counts`` layers on it (llama.cpp's layer split by those counts)."""
    gpus = plan.inference.pipeline_parallel
    trial = replace(plan, inference=replace(plan.inference, gpu_layers=sum(counts)))
    split = tuple(counts) if gpus > 1 else ()
    buffers = llamacpp_buffers(trial, overhead=device_overhead_bytes(gpu)[1], split=split)
    return buffers.device_totals


def _fill(use: Callable[[list[int]], tuple[float, ...]], counts: list[int], g: int, every: int, target: float) -> None:
    """The false-position search of step 3 for device ``g``, from none to all the layers (of
    ``every``) the devices after it left (``counts`` updated in place)."""
    low, high = list(counts), list(counts)
    high[g] = every - sum(counts[g + 1 :])
    if high[g] == 0:
        return
    mem_high = use(high)[g]
    if mem_high <= target:
        counts[g] = high[g]
        return
    mem_low = use(low)[g]
    delta = high[g] - low[g]
    while delta > 1:
        headroom = mem_high - mem_low  # "mem_high == mem on an already-full device: step is degenerate"
        step = int(delta * (target - mem_low) / headroom) if headroom > 0 else delta - 1
        step = min(max(step, 1), delta - 1)
        test = list(low)
        test[g] += step
        mem_test = use(test)[g]
        if mem_test <= target:
            low, mem_low = test, mem_test
        else:
            high, mem_high = test, mem_test
        delta = high[g] - low[g]
    counts[g] = low[g]


def llamacpp_fit(plan: Plan, gpu: GpuSpec, target: float = FIT_TARGET) -> LlamaCppFit:
    """llama-server's ``--fit`` for a plan without ``-ngl`` (module docstring): ``free`` is the card
    less what sits beside llama.cpp's buffers (the CUDA context) and what other processes hold
    (``hardware.held_by_others``), as the trial load reads it."""
    model = plan.model
    if model.num_experts > 1:
        raise ValueError("llama.cpp's fit of a mixture-of-experts model (its step 4) is not modelled")
    gpus = plan.inference.pipeline_parallel
    # free as cudaMemGetInfo reads it (common/fit.cpp: ggml_backend_dev_memory): less what others hold
    limit = gpu.memory_bytes - plan.hardware.held_by_others - target
    every = model.num_layers + 1
    whole = replace(plan, inference=replace(plan.inference, gpu_layers=every))
    buffers = llamacpp_buffers(whole, overhead=device_overhead_bytes(gpu)[1])
    if max(buffers.device_totals) <= limit:
        layers = [len(on) for on in buffers.layout.device_layers]
        layers[buffers.layout.output_device] += 1
        return LlamaCppFit(every, tuple(layers), True, limit)
    counts = [0] * gpus
    for g in range(gpus - 1, -1, -1):
        _fill(lambda c: _device_use(plan, gpu, c), counts, g, every, limit)
    return LlamaCppFit(sum(counts), tuple(counts), False, limit)


def auto_gpu_layers(plan: Plan, gpu: GpuSpec) -> tuple[Plan, tuple[int, ...], str]:
    """A llama.cpp plan with ``gpu_layers`` -1 ("auto", common/common.h): the plan with the fit's
    count, its tensor split (several GPUs) and the sentence the explanation starts with."""
    fit = llamacpp_fit(plan, gpu)  # an MoE model never gets here: core.plan refuses it (_check_llamacpp_fit)
    ran = replace(plan, inference=replace(plan.inference, gpu_layers=fit.gpu_layers))
    gpus = plan.inference.pipeline_parallel
    where = f" ({', '.join(f'GPU {g}: {n}' for g, n in enumerate(fit.split) if n)})" if gpus > 1 else ""
    sentence = (
        f"-ngl auto: llama.cpp's fit (common/fit.cpp) would place {fit.gpu_layers} of {plan.model.num_layers + 1} "
        f"layers on the GPU{'s' if gpus > 1 else ''}{where}, leaving at least {FIT_TARGET / MiB:,.0f} MiB free on "
        f"each (--fit-target){'' if fit.whole else ' at the context given (-c, not lowered)'}."
    )
    return ran, fit.split if gpus > 1 else (), sentence
