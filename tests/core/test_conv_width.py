"""One definition of a recurrent mixer's convolution width: core.hybrid.RecurrentMixer.conv_dim.

Every rule that needs the conv's channels (training's saved tensors, the FLOPs, llama.cpp's tensors and graph, the
LoRA shapes, the exact parameter count) reads it from the model's RecurrentMixer. Here the definition is changed
(a synthetic mixer whose convolution is ``WIDER`` channels wider) and each consumer must move by exactly what its
own formula says a channel costs: a consumer that derived the width again would not move.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from core.hybrid import RecurrentMixer, _mamba2_params
from core.model import ModelSpec
from core.plan import Plan
from core.presets import plan_for_model
from core.serving import llamacpp_hybrid
from core.training import gdn, mamba
from core.training.activations import deltanet_shape, mixer_shape
from core.training.flops import _hybrid_gemms
from core.training.mixer_flops import mixer_flops

# Extra channels of the synthetic mixer's convolution: any positive count works; 64 keeps every width whole.
WIDER = 64
_TRUE_CONV_DIM = RecurrentMixer.conv_dim


@dataclass(frozen=True)
class Consumer:
    name: str
    value: Callable[[Plan], float]
    per_channel: Callable[[Plan], float]  # what one more conv channel adds, from the consumer's own formula


def _term(terms: list, prefix: str) -> float:
    (match,) = [t.bytes for t in terms if t.label.startswith(prefix)]
    return float(match)


def _rows(model: ModelSpec, kind: str) -> float:
    (rows,) = [rows for name, _, rows in llamacpp_hybrid._mixer_matrices(model) if name == kind]
    return float(rows)


def _gemm(model: ModelSpec, name: str) -> float:
    (out,) = [g.n for g in _hybrid_gemms(model, True) if g.name == name]
    return float(out)


def _kernel(plan: Plan) -> int:
    return plan.model.recurrent_conv_kernel


_TOKENS, _SEQUENCES = 512, 4  # a llama.cpp micro-batch of 512 tokens over 4 sequences

MAMBA2_CONSUMERS = (
    Consumer("training shape", lambda p: mixer_shape(p).conv_dim, lambda p: 1),
    Consumer("in_proj's output (training)", lambda p: mixer_shape(p).in_width, lambda p: 1),
    Consumer(
        "torch path: the conv's padded output",
        lambda p: _term(mamba.torch_path_terms(mixer_shape(p), 2.0, True, True, False), "Mamba-2: conv1d output"),
        lambda p: p.workload.micro_batch * (p.workload.seq_len + _kernel(p) - 1) * 2.0,
    ),
    Consumer("FLOPs: the conv", lambda p: mixer_flops(p.model, False).conv, lambda p: 2.0 * _kernel(p)),
    Consumer("llama.cpp: ssm_in rows", lambda p: _rows(p.model, "ssm_in"), lambda p: 1),
    Consumer(
        "llama.cpp: conv1d weights and bias", lambda p: llamacpp_hybrid._mixer_small(p.model), lambda p: _kernel(p) + 1
    ),
    Consumer(
        "llama.cpp: the recurrent graph",
        lambda p: llamacpp_hybrid.recurrent_graph_bytes(p.model, _TOKENS, _SEQUENCES),
        # float32: in_proj's output and the conv's input and output per token, the carried kernel − 1 per sequence
        lambda p: 4.0 * (3 * _TOKENS + (_kernel(p) - 1) * _SEQUENCES),
    ),
    Consumer("LoRA shape: in_proj's output", lambda p: p.model.mixer_shapes()["in_proj"][1], lambda p: 1),
    Consumer("step FLOPs: in_proj's gemm", lambda p: _gemm(p.model, "in_proj"), lambda p: 1),
    Consumer(
        "exact count: one mixer",
        lambda p: _mamba2_params(p.model.hidden_size, p.model.mixer, True, False),
        lambda p: p.model.hidden_size + _kernel(p) + 1,  # in_proj's rows, the conv's taps and bias
    ),
)

GDN_CONSUMERS = (
    Consumer("training shape", lambda p: deltanet_shape(p).conv_dim, lambda p: 1),
    Consumer(
        "torch path: the conv's input",
        lambda p: _term(gdn.torch_path_terms(deltanet_shape(p), 2.0, True, True), "Gated DeltaNet: conv1d input"),
        lambda p: p.workload.micro_batch * p.workload.seq_len * 2.0,
    ),
    Consumer(
        "kernel path: the conv's input",
        lambda p: _term(
            gdn.kernel_path_terms(deltanet_shape(p), 2.0, True, True), "Gated DeltaNet kernel: conv1d input"
        ),
        lambda p: p.workload.micro_batch * p.workload.seq_len * 2.0,
    ),
    Consumer("FLOPs: the conv", lambda p: mixer_flops(p.model, False).conv, lambda p: 2.0 * _kernel(p)),
    Consumer("LoRA shape: the input projections' output", lambda p: p.model.mixer_shapes()["in_proj"][1], lambda p: 1),
    Consumer("step FLOPs: in_proj_qkvz's gemm", lambda p: _gemm(p.model, "in_proj_qkvz"), lambda p: 1),
)

# The llama.cpp tensor fed by the conv in each GGUF layout (core.serving.llamacpp_hybrid's module docstring).
GDN_LLAMACPP = {"qwen3.5-9b": "attn_qkv", "qwen3-next-80b-a3b-instruct": "ssm_in"}


def _cases() -> list[tuple[str, Consumer]]:
    cases = [(model_id, c) for model_id in ("granite-4.0-h-tiny", "nemotron-nano-9b-v2") for c in MAMBA2_CONSUMERS]
    cases += [(model_id, c) for model_id in GDN_LLAMACPP for c in GDN_CONSUMERS]
    cases += [
        (model_id, Consumer(f"llama.cpp: {kind} rows", lambda p, kind=kind: _rows(p.model, kind), lambda p: 1))
        for model_id, kind in GDN_LLAMACPP.items()
    ]
    return cases


@pytest.mark.parametrize(("model_id", "consumer"), _cases(), ids=lambda x: x if isinstance(x, str) else x.name)
def test_every_consumer_follows_the_mixers_conv_width(
    model_id: str, consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_for_model(model_id)
    before = consumer.value(plan)
    monkeypatch.setattr(RecurrentMixer, "conv_dim", property(lambda m: _TRUE_CONV_DIM.fget(m) + WIDER))
    after = consumer.value(plan)
    assert after - before == pytest.approx(WIDER * consumer.per_channel(plan))


@pytest.mark.parametrize("model_id", ["granite-4.0-h-tiny", *GDN_LLAMACPP])
def test_the_definition_is_the_libraries_channel_count(model_id: str) -> None:
    # transformers 5.25.0: Mamba-2's conv_dim = intermediate_size + 2 · n_groups · ssm_state_size (BambaMixer,
    # GraniteMoeHybridMambaLayer); Gated DeltaNet's conv_dim = key_dim · 2 + value_dim (Qwen3NextGatedDeltaNet).
    model = plan_for_model(model_id).model
    mixer = model.mixer
    assert mixer is not None
    if mixer.kind == "mamba2":
        expected = model.recurrent_inner + 2 * model.recurrent_groups * model.recurrent_state
    else:
        key = model.recurrent_groups * model.recurrent_state
        expected = 2 * key + model.recurrent_heads * model.recurrent_head_dim
    assert mixer.conv_dim == expected
