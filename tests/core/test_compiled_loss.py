"""The cross-entropy under torch.compile as a plan setting (``compiled_loss``, issue 22).

torchtitan compiles its loss with ``--training.compile`` (pytorch/torchtitan e7c0cae,
``torchtitan/components/loss.py`` ``build_cross_entropy_loss``: ``torch.compile(cross_entropy_loss)``,
whose body is ``cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))``); it did not in
the Dec 2024 performance table (9dec370 ``train.py``: "compiling loss function causes CUDA errors,
turning off for now", from e8977b00 to d1f62be7). Inductor keeps the 16-bit logits and per-row
numbers, not the float32 log-softmax, and forms the logits' gradient in one fused kernel.

Figures: benchmarks/realgpu/memory_figures.json ``trainy-h200-8b-4nodes`` / ``-8nodes`` (torchtitan
e7c0cae, Llama 3.1 8B, local batch 2 × 8,192, compile + float8 + op SAC, 32 / 64 H200s)."""

from __future__ import annotations

import json
from pathlib import Path

from core.catalogue import find_model
from core.estimate import estimate
from core.plan import CheckpointPolicy, Plan, Stack, Workload
from core.training.activations import loss_memory
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "benchmarks" / "realgpu"

# Llama 3.1 8B: V = 128,256; 2 × 8,192 tokens: N·V = 16,384 × 128,256 = 2,101,346,304.
NV = 16_384 * 128_256


def _plan(**changes: object) -> Plan:
    base = Plan(
        model=find_model("llama-3.1-8b").spec,
        workload=Workload(micro_batch=2, seq_len=8_192),
        stack=Stack.COMPILE,
        checkpointing=True,
        checkpoint_policy=CheckpointPolicy.OP,
    )
    return base.with_changes(**changes)


def test_the_compiled_loss_keeps_the_16_bit_logits_and_forms_their_gradient_in_16_bits() -> None:
    compiled = loss_memory(_plan(compiled_loss=True))
    assert [t.bytes for t in compiled.forward] == [NV * 2]
    assert [t.bytes for t in compiled.backward] == [NV * 2, NV * 2]
    # Eager (transformers' / torchtitan Dec 2024's loss): the float32 upcast and log-softmax in the
    # forward, three float32 N·V tensors at the start of the backward.
    eager = loss_memory(_plan())
    assert sum(t.bytes for t in eager.backward) == 3 * NV * 4
    # The backward holds 16,810,770,432 bytes less at the loss.
    assert sum(t.bytes for t in eager.backward) - sum(t.bytes for t in compiled.backward) == 16_810_770_432


def test_a_compiled_loss_lowers_the_peak_by_what_the_loss_held() -> None:
    eager, compiled = estimate(_plan()), estimate(_plan(compiled_loss=True))
    assert eager.peak_bytes - compiled.peak_bytes > 0.9 * 16_810_770_432


def _mapping() -> object:
    return load_script(FOLDER / "mapping.py", "realgpu_mapping_compiled_loss")


def test_only_torchtitan_runs_that_compiled_their_loss_map_to_it() -> None:
    mapping = _mapping()
    figures = {f["id"]: f for f in json.loads((FOLDER / "memory_figures.json").read_text())["figures"]}
    trainy = mapping.map_figure(figures["trainy-h200-8b-4nodes"]).plan  # type: ignore[attr-defined]
    assert trainy.compiled_loss and trainy.stack is Stack.COMPILE
    dec_2024 = mapping.map_figure(figures["torchtitan-2412-8b-8gpu-fsdp-compile"]).plan  # type: ignore[attr-defined]
    assert dec_2024.stack is Stack.COMPILE and not dec_2024.compiled_loss
    # trainy-h200-8b-4nodes: 51.50 GB reserved; the allocated peak alone read 64.17 GB before
    # (above the published reserved figure), and now sits below it.
    published = figures["trainy-h200-8b-4nodes"]["value_bytes"]
    assert estimate(trainy).peak_bytes < published < estimate(trainy.with_changes(compiled_loss=False)).peak_bytes
