"""The FLOPs of a training step, term by term, and the counts people compare them with.

Per token of a training step:

- **the blocks' matmuls**: forward 2·W, W the projection weights a token passes through
  (routed experts only); the backward's input gradients 2·W in every block the backward
  reaches (a frozen bottom has no backward at all: nothing below it needs a gradient); the
  weight gradients 2·W of the weights that train (Kaplan et al. 2020, arXiv:2001.08361, §2.1;
  Narayanan et al. 2021, arXiv:2104.04473, appendix);
- **attention's scores and values**: two matmuls of 2·s·H·hd per token and layer forward,
  twice that backward. Two counts of s: the Megatron / Narayanan count takes every query
  against every key (torchtitan's ``12·l·h·q·t``, llm-foundry's and lit-gpt's ``12·l·d·s``,
  Megatron-LM before core_r0.12); the FlashAttention causal count takes each query against
  the keys before it, (s + 1)/2 on average (what a causal kernel runs; Megatron-LM
  core_r0.12 and Megatron-Bridge count ``s/2``). A sliding window caps the keys at the window;
- **a hybrid's layers** (core.hybrid: Mamba-2 or Gated DeltaNet beside attention): each projection in the
  layers that hold it, from the mixer's own widths (:func:`_hybrid_gemms`: attention's q, k, v, o in the
  attention layers, the mixer's in_proj / out_proj in the recurrent ones, the MLP or experts where they are),
  attention's scores in the attention layers only, and the recurrent layers' convolution and chunked scan
  (core.training.mixer_flops, which states its convention: whole chunk blocks in the MFU count, what the path
  runs in the hardware count). Megatron-LM's own hybrid count (d98e8a64 megatron/training/training.py
  ``num_floating_point_operations`` → ``hybrid_flops``) is within 0.2 % on Bamba and Granite 4.0-H
  (tests/core/test_mixer_flops.py);
- **the logits**: 2·V·d forward, 2·V·d for the input gradient, 2·V·d for the head's weight
  gradient when it trains;
- **LoRA adapters**: 2·r·(in + out) per target and pass, and their weight gradients (the output
  head's once, when ``lm_head`` is a target);
- **the recompute** of the checkpointing policy: full re-runs every block's forward, per-op
  SAC every other matmul (torchtitan saves the attention output), layer SAC the checkpointed
  blocks, attention-only (Megatron selective) the core attention.

The MFU the app reports uses the Megatron / Narayanan count without the recompute — the
count torchtitan and Megatron-LM print — so a user can compare it with their logs. The time
runs on what the kernels do: the causal count and the recompute (the "hardware" count).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Final

from core.format import sci
from core.memo import Once, fills_fields, last_answer
from core.model import ALL_LINEAR, MLP_TARGETS, ModelSpec, normalise_lora_targets
from core.params import boft_blocks, lokr_factorization, oft_blocks, oft_neumann_bmms, param_counts, randlora_bases
from core.plan import Accounting, CheckpointPolicy, Method, Plan
from core.training.activations import randlora_keeps_input, recomputed_share
from core.training.extra_trained import head_copy_trains
from core.training.mixer_flops import MixerFlops, mixer_flops

# Enum members this module's hot paths compare with, read from their classes once: on Python 3.11 each
# ``Class.MEMBER`` read goes through EnumType.__getattr__'s slot, ~0.15 µs (core.plan's note; h74speed).
_ACCOUNTING_DETAILED: Final = Accounting.DETAILED
_ACCOUNTING_LESSON: Final = Accounting.LESSON
_METHOD_ADALORA: Final = Method.ADALORA
_METHOD_DORA: Final = Method.DORA
_METHOD_FROZEN: Final = Method.FROZEN
_METHOD_FULL: Final = Method.FULL
_METHOD_IA3: Final = Method.IA3
_METHOD_LOHA: Final = Method.LOHA
_METHOD_LOKR: Final = Method.LOKR
_METHOD_MISS: Final = Method.MISS
_METHOD_OFT: Final = Method.OFT
_METHOD_VERA: Final = Method.VERA
_METHOD_FOURIERFT: Final = Method.FOURIERFT
_METHOD_RANDLORA: Final = Method.RANDLORA
_METHOD_SHIRA: Final = Method.SHIRA
_METHOD_VBLORA: Final = Method.VBLORA
_METHOD_BOFT: Final = Method.BOFT

# The suffixes of an adapter's matmuls in block_gemms: LoRA's two, LoHa's / LoKr's delta weight applied, VeRA's two,
# OFT's block-diagonal rotation, MiSS's block, RandLoRA's two; BOFT's dense rotation last (branch h80boft: in the
# input's dtype, not the adapters': core.training.speed.float32_adapter_matmul).
BOFT_ROTATION: Final = "BOFT rotation (dense)"
ADAPTER_GEMMS: Final = (
    "LoRA A", "LoRA B", "delta weight", "VeRA A", "VeRA B", "OFT rotation", "MiSS block", "RandLoRA basis",
    "RandLoRA bases B", BOFT_ROTATION,
)  # fmt: skip


@dataclass(frozen=True, init=False)
class Gemm:
    """One projection of a block as a matmul: ``k`` inputs to ``n`` outputs, seen by ``share``
    of the tokens (an expert: top-k ÷ experts) in ``count`` copies (the experts), held by ``layers`` of the
    blocks (a hybrid's attention, mixer and MLP projections: the share of the layers that hold them; else 1)."""

    name: str
    k: int
    n: int
    split: str  # how tensor parallel splits it: "column" (n), "row" (k) or "none" (replicated)
    trains: bool  # its weight gets a gradient (a frozen base's does not; an adapter's does)
    share: float = 1.0
    count: int = 1
    layers: float = 1.0

    def __init__(
        self,
        name: str,
        k: int,
        n: int,
        split: str,
        trains: bool,
        share: float = 1.0,
        count: int = 1,
        layers: float = 1.0,
    ) -> None:
        # ~8 made per estimate: the instance dict filled directly, not through the frozen
        # __init__'s object.__setattr__ per field (still frozen, equal and hashable; core.breakdown.Term). Every
        # field is a parameter, so dataclasses.replace works (tests/core/test_memo.py).
        self.__dict__.update(name=name, k=k, n=n, split=split, trains=trains, share=share, count=count, layers=layers)

    def held_by(self, layers: float) -> Gemm:
        """The same matmul in ``layers`` of the blocks (a hybrid's projections: the share of its layers)."""
        return Gemm(self.name, self.k, self.n, self.split, self.trains, self.share, self.count, layers)

    @property
    def weight(self) -> float:
        """Multiply-adds per token and block: k·n × share × count × layers."""
        return self.k * self.n * self.share * self.count * self.layers


_WEIGHT: Final = attrgetter("weight")  # Gemm.weight, read in C by map() (token_flops)


@last_answer
def block_gemms(plan: Plan) -> tuple[Gemm, ...]:
    """One block's matmuls (a mixture of experts: the router, the experts and a shared one); a hybrid's
    attention, recurrent mixer and MLP each in the share of the layers that hold it (:func:`_hybrid_gemms`)."""
    model = plan.model
    base_trains = plan.method in (_METHOD_FULL, _METHOD_FROZEN)
    if model.recurrent_mixer:
        return _hybrid_gemms(model, base_trains) + _adapter_gemms(plan)
    d, q, kv = model.hidden_size, model.q_width, model.kv_width
    gemms: list[Gemm] = (
        [Gemm("q|k|v", d, q + 2 * kv, "column", base_trains)]
        if model.fused_qkv
        else [Gemm(name, d, width, "column", base_trains) for name, width in (("q", q), ("k", kv), ("v", kv))]
    )
    gemms.append(Gemm("o", q, d, "row", base_trains))
    gemms += _mlp_gemms(model, base_trains)
    if plan.method is _METHOD_SHIRA:
        gemms = _shira_gemms(plan, gemms)
    return tuple(gemms) + _adapter_gemms(plan)


# The projections each block matmul runs (block_gemms' names), for SHiRA's weight gradients.
_GEMM_TARGETS: Final = {
    "q": ("q_proj",), "k": ("k_proj",), "v": ("v_proj",), "q|k|v": ("q_proj", "k_proj", "v_proj"), "o": ("o_proj",),
    "gate|up": ("gate_proj", "up_proj"), "up": ("up_proj",), "down": ("down_proj",),
}  # fmt: skip


def _shira_gemms(plan: Plan, gemms: list[Gemm]) -> list[Gemm]:
    """SHiRA's targets run ``F.linear(x, new_weight)`` in place of the frozen linear (huggingface/peft 51c2ff66
    src/peft/tuners/shira/layer.py ``Linear.forward``), whose weight (a copy plus the sparse delta) needs a gradient:
    the whole in × out weight-gradient matmul, in the base's dtype, then masked by ``sparse_mask``
    (tools/measure/peft_method_cost.py: 2·m·in·out bfloat16 FLOPs more a target, backward). A fused gate|up with one
    of the two targeted splits into its halves."""
    chosen = set(normalise_lora_targets(plan.lora.targets))
    out: list[Gemm] = []
    for gemm in gemms:
        names = _GEMM_TARGETS.get(gemm.name, ())
        hit = [n for n in names if n in chosen]
        if gemm.name == "gate|up" and len(hit) == 1:
            half = gemm.n // 2
            out += [
                Gemm("gate", gemm.k, half, gemm.split, "gate_proj" in hit, gemm.share, gemm.count, gemm.layers),
                Gemm("up", gemm.k, half, gemm.split, "up_proj" in hit, gemm.share, gemm.count, gemm.layers),
            ]
            continue
        out.append(Gemm(gemm.name, gemm.k, gemm.n, gemm.split, gemm.trains or bool(hit), gemm.share, gemm.count,
                        gemm.layers))  # fmt: skip
    return out


def _mlp_gemms(model: ModelSpec, trains: bool) -> tuple[Gemm, ...]:
    """The MLP's matmuls, or a mixture of experts' (the router, the routed experts, a shared one). A mixture of
    experts' dense layers (DeepSeek-V2/V3's, GLM-4.5's and ERNIE 4.5's first ones, Llama 4's interleaved ones:
    ``first_k_dense_replace``, ModelSpec.adapter_blocks) run a plain MLP of ``dense_intermediate_size`` instead
    (DeepseekV3MLP, Glm4MoeMLP, Ernie4_5_MoeMLP, Llama4TextMLP in transformers 5.25.0): each kind in its share of the
    layers (``Gemm.layers``; tests/data/moe_flops/, torch's FlopCounterMode on the tiny configs)."""
    d, i = model.hidden_size, model.intermediate_size
    ups = 2 if model.gated_mlp else 1
    if model.num_experts > 1:
        share = model.routed_share
        gemms = [
            Gemm("router", d, model.num_experts, "none", trains),
            Gemm("experts gate|up", d, ups * i, "column", trains, share, model.num_experts),
            Gemm("experts down", i, d, "row", trains, share, model.num_experts),
        ]
        if model.shared_expert_size:
            s = model.shared_expert_size
            gemms += [Gemm("shared gate|up", d, 2 * s, "column", trains), Gemm("shared down", s, d, "row", trains)]
        dense = model.dense_layers
        if not dense:
            return tuple(gemms)
        moe, w = model.moe_layers / model.num_layers, model.dense_intermediate_size
        return tuple(g.held_by(moe) for g in gemms) + tuple(
            g.held_by(dense / model.num_layers) for g in _dense_mlp_gemms(d, w, ups, trains)
        )
    return _dense_mlp_gemms(d, i, ups, trains)


def _dense_mlp_gemms(d: int, i: int, ups: int, trains: bool) -> tuple[Gemm, ...]:
    """A plain MLP's matmuls: gate and up (fused, d → 2·i) or up alone, then down."""
    return Gemm("gate|up" if ups == 2 else "up", d, ups * i, "column", trains), Gemm("down", i, d, "row", trains)


# The hybrids whose attention layers are gated (q_proj d → 2·heads·head_dim: the query and its output gate):
# transformers 5.25.0 Qwen3NextAttention, Qwen3_5Attention (models/qwen3_next, qwen3_5 modeling files), what
# core.hybrid._gated_deltanet_stack counts.
_GATED_ATTENTION: Final = frozenset(("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"))


def _hybrid_gemms(model: ModelSpec, trains: bool) -> tuple[Gemm, ...]:
    """A hybrid's projections from its widths (core.hybrid, transformers 5.25.0), each kind in the share of the
    layers that hold it (ModelSpec.hybrid_layer_counts): attention's q, k, v, o; a Mamba-2 mixer's in_proj
    (d → 2·inner + 2·groups·state + heads) and out_proj (inner → d); a Gated DeltaNet's in_proj_qkvz
    (d → 2·key heads·key dim + 2·inner), in_proj_ba (d → 2·value heads) and out_proj (inner → d); the MLP or the
    mixture of experts. Their weights add up to the exact count less the embeddings, head, convolutions, norms
    and per-head scalars (tests/core/test_mixer_flops.py)."""
    d, q, kv, layers = model.hidden_size, model.q_width, model.kv_width, model.num_layers
    attention, recurrent, mlp = (n / layers for n in model.hybrid_layer_counts())
    gate = 2 if model.family in _GATED_ATTENTION else 1
    held = [
        Gemm("q", d, gate * q, "column", trains).held_by(attention),
        Gemm("k", d, kv, "column", trains).held_by(attention),
        Gemm("v", d, kv, "column", trains).held_by(attention),
        Gemm("o", q, d, "row", trains).held_by(attention),
    ]
    inner, heads = model.recurrent_inner, model.recurrent_heads
    # the conv's channels (core.hybrid.RecurrentMixer.conv_dim): Mamba-2's x·B·C, Gated DeltaNet's q·k·v
    conv = model.mixer.conv_dim if model.mixer is not None else 0
    if model.recurrent_mixer == "mamba2":
        mixer = [Gemm("in_proj", d, inner + conv + heads, "column", trains)]
    else:
        mixer = [
            Gemm("in_proj_qkvz", d, conv + inner, "column", trains),
            Gemm("in_proj_ba", d, 2 * heads, "column", trains),
        ]
    mixer.append(Gemm("out_proj", inner, d, "row", trains))
    held += [g.held_by(recurrent) for g in mixer]
    return tuple(held) + tuple(g.held_by(mlp) for g in _mlp_gemms(model, trains))


def _adapter_gemms(plan: Plan) -> tuple[Gemm, ...]:
    """LoRA's A (in → r) and B (r → out) of each target (PEFT ``LoraLayer``): they train. IA3's
    vectors are elementwise scalings, no matmul. LoHa / LoKr (huggingface/peft 51c2ff66
    src/peft/tuners/loha/layer.py, lokr/layer.py ``Linear._get_delta_activations``): ``F.linear(x,
    delta_weight)``, the whole in → out matmul, whose weight (the delta) gets a gradient. Building the
    delta every micro-batch is method_work's (_build_flops). VeRA
    (src/peft/tuners/vera/layer.py ``Linear.forward``: ``F.linear(lambda_d * F.linear(x, sliced_A), sliced_B)``):
    LoRA's two shapes at rank r, on the frozen shared vera_A / vera_B, which get no gradient. OFT
    (src/peft/tuners/oft/layer.py ``OFTRotationModule.forward``: ``einsum("...rk,rkc->...rc", x, R)``): r blocks of
    b × b a token, in·b multiply-adds, as an in → b matmul whose weight (R) gets a gradient; building R every
    micro-batch (three (r, b, b) bmms forward, 2·r·b³ FLOPs each, twice that backward) is method_work's. The
    non-LoRA adapter matmuls run in float32 (core.training.speed.float32_adapter_matmul). AdaLoRA
    (src/peft/tuners/adalora/layer.py ``SVDLinear.forward``: ``x @ (lora_A * lora_E).T @ lora_B.T``): LoRA's
    two trained matmuls at r = init_r (the masked singular values still multiply: nothing is resized). MiSS
    (src/peft/tuners/miss/layer.py ``MissLinear.forward``: ``sum(x.reshape(..., in // r, r), dim=-2) @ miss``): one
    r → out matmul a token whose weight (miss_block) gets a gradient; the block sum is method_work's bytes. FourierFT
    (src/peft/tuners/fourierft/layer.py ``FourierFTLinear.forward``: ``F.linear(x, delta_w)``): LoHa's whole in → out
    matmul on the delta built from the spectrum (its scatter and inverse FFT are not counted). RoAd (road/layer.py
    ``_apply_road``) multiplies elementwise: no matmul. VB-LoRA (vblora/layer.py ``Linear.forward``:
    ``F.linear(F.linear(x, A), B)`` on A and B assembled from the bank): LoRA's two trained matmuls at rank r.
    RandLoRA (randlora/layer.py ``Linear.forward``: ``F.linear(F.linear(x, update_B), update_A)``): in → r·bases →
    out, float32, the trained scaled basis the first matmul's weight where in ≤ out, the second's otherwise (the other a
    view of the frozen randlora_B, no weight gradient). SHiRA trains its targets' own matmuls (block_gemms). BOFT
    (boft/layer.py ``Linear.forward``: ``x @ boft_rotation``, branch h80boft): one dense in → in matmul a token in the
    input's dtype, whose weight (the rotation built from boft_R) gets a gradient; building it every micro-batch is
    method_work's (_build_flops)."""
    wrapped = plan.lycoris or plan.vera or plan.oft or plan.adalora or plan.miss or plan.fourierft
    if not (plan.lora_adapters or wrapped or plan.vblora or plan.randlora or plan.boft):
        return ()
    model = plan.model
    shapes = {**model.linear_shapes(), **model.mixer_shapes()}
    out: list[Gemm] = []
    for target in normalise_lora_targets(plan.lora.targets):
        if target == ALL_LINEAR:  # an MoE block's router / shared-expert gate (ModelSpec.all_linear_rows): every token
            for layers, dense in model.adapter_blocks():
                for fan_in, fan_out, _, _ in model.all_linear_rows(plan.linear_experts, dense):
                    for g in _target_gemms(plan, "router", fan_in, fan_out):
                        out.append(Gemm(g.name, g.k, g.n, g.split, g.trains, 1.0, 1, layers / model.num_layers))
            continue
        if target not in shapes:
            continue
        if target in MLP_TARGETS and model.num_experts > 1 and not model.recurrent_mixer:
            # What the target reaches on a mixture of experts (ModelSpec.adapted_rows): each routed expert's
            # adapter on top-k / experts of the tokens (transformers 4.x), a shared expert's on all of them; a dense
            # block's MLP in the share of the blocks that are dense (ModelSpec.adapter_blocks).
            share = model.routed_share
            for layers, dense in model.adapter_blocks():
                held = layers / model.num_layers
                for fan_in, fan_out, copies, routed in model.adapted_rows((target,), plan.linear_experts, dense):
                    for g in _target_gemms(plan, target, fan_in, fan_out):
                        out.append(Gemm(g.name, g.k, g.n, g.split, g.trains, share if routed else 1.0, copies, held))
            continue
        out += _target_gemms(plan, target, *shapes[target])
    if model.recurrent_mixer:
        return tuple(_in_hybrid_layers(model, g) for g in out)
    return tuple(out)


def _target_gemms(plan: Plan, target: str, fan_in: int, fan_out: int) -> list[Gemm]:
    """The adapter matmuls of one (out × in) target matrix, by method (:func:`_adapter_gemms`)."""
    r = plan.lora.rank
    row = target in ("o_proj", "down_proj", "out_proj")
    if plan.lycoris or plan.fourierft:
        return [Gemm(f"{target} {ADAPTER_GEMMS[2]}", fan_in, fan_out, "none", True)]
    if plan.oft:
        return [Gemm(f"{target} {ADAPTER_GEMMS[5]}", fan_in, oft_blocks(plan, fan_in)[1], "none", True)]
    if plan.miss:
        return [Gemm(f"{target} {ADAPTER_GEMMS[6]}", r, fan_out, "none", True)]
    if plan.boft:
        return [Gemm(f"{target} {BOFT_ROTATION}", fan_in, fan_in, "none", True)]
    if plan.randlora:
        middle, first = r * randlora_bases(fan_in, fan_out, r), randlora_keeps_input(fan_in, fan_out)
        return [
            Gemm(f"{target} {ADAPTER_GEMMS[7 if first else 8]}", fan_in, middle, "none", first),
            Gemm(f"{target} {ADAPTER_GEMMS[8 if first else 7]}", middle, fan_out, "none", not first),
        ]
    if plan.vera:
        return [
            Gemm(f"{target} {ADAPTER_GEMMS[3]}", fan_in, r, "none", False),
            Gemm(f"{target} {ADAPTER_GEMMS[4]}", r, fan_out, "none", False),
        ]
    return [
        Gemm(f"{target} LoRA A", fan_in, r, "row" if row else "none", True),
        Gemm(f"{target} LoRA B", r, fan_out, "none" if row else "column", True),
    ]


def _in_hybrid_layers(model: ModelSpec, gemm: Gemm) -> Gemm:
    """A hybrid's adapter matmul in the share of the layers that hold its target (ModelSpec._hybrid_lora_params'
    rule): attention's in the attention layers, the mixer's in the recurrent ones, the MLP's where an MLP is (a
    mixture of experts' 3-D matrices are not adapted)."""
    attention, recurrent, mlp = model.hybrid_layer_counts()
    target = gemm.name.split(" ", 1)[0]
    if target in model.mixer_shapes():
        held = recurrent
    elif target in ("q_proj", "k_proj", "v_proj", "o_proj"):
        held = attention
    else:
        held = mlp if model.num_experts == 1 else 0
    return gemm.held_by(held / model.num_layers)


def attended_keys(model: ModelSpec, seq: int, causal: bool) -> float:
    """Keys one query meets on average over the layers: s (every key), (s + 1)/2 (causal),
    and the window for the layers that attend within one (a query near the start meets fewer)."""
    full = (seq + 1) / 2 if causal else float(seq)
    window = model.sliding_window
    layers = model.sliding_window_layers
    if window is None or layers == 0 or window >= seq:
        return full
    windowed = window - window * (window - 1) / (2 * seq) if causal else float(window)
    return (full * (model.num_layers - layers) + windowed * layers) / model.num_layers


@fills_fields
@dataclass(frozen=True)
class FlopTerm:
    label: str
    per_token: float  # FLOPs per token of a training step
    # How :attr:`formula` is written when first read: a module function and its arguments (so a term still
    # pickles); the hot ones format their numbers only then (the window and the reports read them, no figure
    # does). ``_said(text)`` for a text written at once.
    _how: tuple[Callable[..., str], tuple[Any, ...]] = field(compare=False, repr=False)

    @Once
    def formula(self) -> str:
        """The term's arithmetic with the plan's numbers in."""
        write, args = self._how
        return write(*args)


def _said(text: str) -> tuple[Callable[..., str], tuple[Any, ...]]:
    """A FlopTerm's ``_how`` for a formula already written."""
    return str, (text,)


def _block_formula(layers: int, backward: int, w_base: float, hybrid: bool = False, dense: int = 0) -> str:
    mean = " (a hybrid's layers' mean: each projection in the layers that hold it)" if hybrid else ""
    if dense and not hybrid:
        mean = f" (the layers' mean: {dense} dense layers' MLP, the experts in the others)"
    return (
        f"2·W × ({layers} forward + {backward} input-gradient) + 2·W_trained × {backward} "
        f"weight-gradient blocks, W = {sci(w_base)}{mean}"
    )


def _attention_formula(model: ModelSpec, s: int, prefix: int, layers: int, backward: int) -> str:
    keys = f"4·H·hd·{'((s+1)/2 + n)' if prefix else '(s+1)/2'}"
    numbers = f"4 × {model.q_width} × {attended_keys(model, s, True) + prefix:,.0f}"
    if model.recurrent_mixer:  # a hybrid: its attention layers only
        held = model.kv_layers
        return (
            f"{keys} × {held} attention layers × ({layers} + 2 × {backward}) / {layers} = {numbers} × "
            f"{held * (layers + 2 * backward) / layers:g}"
        )
    return f"{keys} × ({layers} + 2 × {backward}) = {numbers} × {layers + 2 * backward}"


def _head_formula(passes: int, vd: float) -> str:
    return f"2·V·d × {passes} passes = 2 × {sci(vd)} × …"


@fills_fields
@dataclass(frozen=True)
class TokenFlops:
    """Training FLOPs per token: what runs (the terms, the causal attention, the recompute) and
    the counts to compare with logs."""

    terms: tuple[FlopTerm, ...]
    model: float  # Megatron / Narayanan count, no recompute: the MFU convention (torchtitan, Megatron-LM)
    model_causal: float  # the same with the causal attention count (FlashAttention, Megatron core_r0.12+)
    forward: float  # the forward's share of the hardware count (what a recompute-free forward runs)

    @property
    def hardware(self) -> float:
        """What the step's kernels run: causal attention and the policy's recompute."""
        return sum(t.per_token for t in self.terms)


@fills_fields
@dataclass(frozen=True)
class _Passes:
    """Blocks by what the backward does to them (of the model's layers)."""

    backward: int  # blocks the backward runs through (input gradients)
    frozen: int  # blocks with no backward (the frozen bottom of the frozen-layers method)


def _passes(plan: Plan) -> _Passes:
    layers = plan.model.num_layers
    frozen = plan.gradless_layers
    return _Passes(layers - frozen, frozen)


def head_trains(plan: Plan) -> bool:
    """The output head gets a gradient: full fine-tuning, frozen layers with an untied head, or PEFT's
    modules_to_save copy of it / trainable tokens on a tied head (core.training.extra_trained): the backward's
    weight-gradient matmul, 2·N·d·V FLOPs."""
    full = plan.method is _METHOD_FULL or (plan.method is _METHOD_FROZEN and not plan.model.tie_embeddings)
    return full or head_copy_trains(plan)


def head_adapter_weight(plan: Plan) -> int:
    """r·(d + V) when a LoRA adapts the output head (core.model.HEAD_TARGET), else 0. Its A and B run
    forward, input gradient and weight gradient (they train) once per token; the frozen head's own
    input gradient runs anyway (the blocks' adapters below need it), so that count is unchanged."""
    head = plan.model.head_adapter_shape(plan.lora.targets) if plan.lora_adapters else None
    return plan.lora.rank * sum(head) if head else 0


# The adapter matmuls' FLOP term's label and per-token size, by method (token_flops); LoRA's otherwise.
_ADAPTER_FLOPS_LABELS: Final = {
    Method.LOHA: ("LoHa / LoKr delta weights applied", "in·out"),
    Method.LOKR: ("LoHa / LoKr delta weights applied", "in·out"),
    Method.OFT: ("OFT block-diagonal rotations", "in·b"),
    Method.MISS: ("MiSS blocks (the block sum times miss_block)", "r·out"),
    Method.FOURIERFT: ("FourierFT delta weights applied", "in·out"),
    Method.RANDLORA: ("RandLoRA's full-rank bases (in → r·bases → out)", "r·bases·(in + out)"),
    Method.VBLORA: ("VB-LoRA's A and B (LoRA's matmuls)", "r·(in + out)"),
    Method.ADALORA: ("AdaLoRA's A and B (LoRA's matmuls at init_r)", "r·(in + out)"),
}


def _adapter_flops_label(plan: Plan) -> tuple[str, str]:
    """The adapter matmuls' FLOP term's label and per-token size (:data:`_ADAPTER_FLOPS_LABELS`)."""
    return _ADAPTER_FLOPS_LABELS.get(plan.method, ("LoRA adapters", "r·(in + out)"))


def token_flops(plan: Plan) -> TokenFlops:
    """Training FLOPs per token of ``plan`` (the lesson's rule in lesson accounting)."""
    if plan.accounting is _ACCOUNTING_LESSON:
        return _lesson_flops(plan)
    model = plan.model
    # A typed P scales the matmuls it stands for; a hybrid's are its exact widths (_hybrid_gemms).
    scale = model.shape_scale
    base: list[Gemm] = []
    adapters: list[Gemm] = []
    for gemm in block_gemms(plan):
        (adapters if gemm.name.endswith(ADAPTER_GEMMS) else base).append(gemm)
    w_base = sum(map(_WEIGHT, base)) * scale  # summed in C: the same order, the same floats
    w_adapt = sum(map(_WEIGHT, adapters))
    w_train = sum(g.weight for g in base if g.trains) * scale
    passes = _passes(plan)
    layers = model.num_layers
    s, q = plan.workload.seq_len, model.q_width
    # Prefix tuning: every query also meets the n virtual keys before the sequence (huggingface/peft 51c2ff66
    # src/peft/peft_model.py get_prompt: a cache of n positions in every layer), unmasked: 4·H·hd·n more.
    prefix = plan.prefix_tokens
    attn_full = 4.0 * q * (attended_keys(model, s, causal=False) + prefix)  # forward, one layer
    attn_causal = 4.0 * q * (attended_keys(model, s, causal=True) + prefix)
    if model.recurrent_mixer:  # a hybrid: attention in its attention layers only, as a share of every layer
        attn_full, attn_causal = (a * model.kv_layers / layers for a in (attn_full, attn_causal))
    vd = float(model.vocab_size * model.hidden_size)
    head_passes = 3 if head_trains(plan) else 2
    head = 2.0 * vd * head_passes
    w_head_adapt = head_adapter_weight(plan)
    terms = [
        FlopTerm(
            "block matmuls",
            2.0 * (w_base * layers + w_base * passes.backward + w_train * passes.backward),
            (_block_formula, (layers, passes.backward, w_base, bool(model.recurrent_mixer), model.dense_layers)),
        ),
        FlopTerm(
            "attention scores and values (causal)",
            attn_causal * (layers + 2 * passes.backward),
            (_attention_formula, (model, s, prefix, layers, passes.backward)),
        ),
        FlopTerm("logits (output head)", head, (_head_formula, (head_passes, vd))),
    ]
    if w_head_adapt:
        terms.append(
            FlopTerm(
                "LoRA on the output head",
                2.0 * w_head_adapt * 3,
                _said(f"2 · r·(d + V) × 3 passes = 2 × {sci(w_head_adapt)} × 3"),
            )
        )
    if w_adapt:
        label, per = _adapter_flops_label(plan)
        # VeRA's frozen vera_A / vera_B get no weight gradient: forward and input gradient only.
        grads = 1 if plan.vera else 2
        terms.append(
            FlopTerm(
                "VeRA's shared projections (frozen)" if plan.vera else label,
                2.0 * w_adapt * (layers + grads * passes.backward),
                _said(f"2 · {per} summed over targets = 2 × {sci(w_adapt)} × ({layers} + {grads} × {passes.backward})"),
            )
        )
    scan, scan_model, mixer_term = _mixer(plan, passes)
    runs = layers + 2 * passes.backward
    terms += mixer_term + _adalora_scaling(plan) + _method_builds(plan, passes)
    recompute = _recompute(plan, w_base + w_adapt, attn_causal + scan, passes)
    if recompute is not None:
        terms.append(recompute)
    model_count = _model_count(plan, w_base, w_adapt, w_train, attn_full, head + 6.0 * w_head_adapt, passes)
    model_count += scan_model * runs
    causal_count = model_count - (attn_full - attn_causal + scan_model - scan) * runs
    forward = 2.0 * (w_base + w_adapt) * layers + (attn_causal + scan) * layers + 2.0 * (vd + w_head_adapt)
    return TokenFlops(tuple(terms), model_count, causal_count, forward)


def _mixer(plan: Plan, passes: _Passes) -> tuple[float, float, list[FlopTerm]]:
    """A hybrid's recurrent layers' convolution and scan as a share of every block, forward (as attention's is):
    what the path runs, what the MFU counts, and the term (core.training.mixer_flops); zeros and none otherwise."""
    model = plan.model
    mixer = mixer_flops(model, plan.mamba_kernels)
    if mixer is None:
        return 0.0, 0.0, []
    layers = model.num_layers
    share = model.recurrent_layers / layers
    scan, scan_model = (mixer.conv + mixer.scan) * share, (mixer.conv + mixer.scan_model) * share
    term = FlopTerm(
        f"{mixer.name} convolution and chunked scan",
        scan * (layers + 2 * passes.backward),
        (_mixer_formula, (mixer, model.recurrent_layers, share, layers, passes.backward)),
    )
    return scan, scan_model, [term]


def _mixer_formula(mixer: MixerFlops, recurrent: int, share: float, layers: int, backward: int) -> str:
    """The recurrent layers' term: conv + scan a layer, over the forward and twice the backward."""
    return (
        f"(2·conv_dim·kernel + scan) × {recurrent} recurrent layers × ({layers} + 2 × {backward}) / {layers} "
        f"= ({sci(mixer.conv)} + {sci(mixer.scan)}) × {share * (layers + 2 * backward):g}; scan {mixer.formula}"
    )


def _adalora_scaling(plan: Plan) -> list[FlopTerm]:
    """AdaLoRA's singular values (huggingface/peft 51c2ff66 src/peft/tuners/adalora/layer.py ``SVDLinear.forward``):
    ``lora_A * lora_E`` once a micro-batch (r·in multiplies forward; lora_A's and lora_E's gradients twice that
    backward) and ``* scaling / ranknum`` on each token's output (2·out forward, 2·out backward): elementwise,
    per token 3·r·Σin / N + 4·Σout a block, under 0.1 % of the adapters' matmuls at the corpus row's shapes."""
    if not plan.adalora:
        return []
    model = plan.model
    kinds = [  # each kind of block's matrices (ModelSpec.adapter_blocks) as its share of the blocks
        (layers / model.num_layers, model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense))
        for layers, dense in model.adapter_blocks()
    ]
    ins = sum(held * fan_in * c for held, matrices in kinds for fan_in, _, c in matrices)
    outs = sum(held * fan_out * c for held, matrices in kinds for _, fan_out, c in matrices)
    n = plan.workload.micro_batch * plan.workload.seq_len
    per = 3.0 * plan.lora.rank * ins / n + 4.0 * outs
    formula = f"(3·r·Σin / N + 4·Σout) × {model.num_layers} = {per:,.1f} × {model.num_layers}"
    return [FlopTerm("AdaLoRA: A·E and the output's scaling (elementwise)", per * model.num_layers, _said(formula))]


def _method_builds(plan: Plan, passes: _Passes) -> list[FlopTerm]:
    """A PEFT method's weight builds, once a micro-batch (method_work: DoRA's lora_B·lora_A·I, LoHa's / LoKr's delta,
    OFT's Neumann series in float32, BOFT's dense rotation in the input's dtype), per token of the micro-batch; their
    recompute under checkpointing is in the step's time (core.training.speed.method_build_flops), not here."""
    work = method_work(plan)
    if work is None or not (work.build_forward or work.build_backward):
        return []
    m = plan.workload.micro_batch * plan.workload.seq_len
    layers = plan.model.num_layers
    per = (work.build_forward * layers + work.build_backward * passes.backward) / m
    dtype = "the input's dtype" if work.builds_as_blocks else "float32"  # BOFT's dense rotation: the input's
    return [
        FlopTerm(
            f"{plan.method.value}: weight builds ({dtype}, once a micro-batch)",
            per,
            _said(
                f"({sci(work.build_forward)} forward × {layers} + {sci(work.build_backward)} backward × "
                f"{passes.backward}) a block's targets ÷ {m:,} tokens"
            ),
        )
    ]


def _model_count(
    plan: Plan, w_base: float, w_adapt: float, w_train: float, attn_full: float, head: float, passes: _Passes
) -> float:
    """The Megatron / Narayanan count: 6·N + 12·l·s·H·hd for full training (N the matmul
    weights a token meets, the head's included, the input embedding's not), what the frozen
    parts skip removed, no recompute."""
    layers = plan.model.num_layers
    blocks = 2.0 * w_base * (layers + passes.backward) + 2.0 * w_train * passes.backward
    adapters = 2.0 * w_adapt * (layers + 2 * passes.backward)
    return blocks + adapters + attn_full * (layers + 2 * passes.backward) + head


def _recompute(plan: Plan, w_fwd: float, attn_causal: float, passes: _Passes) -> FlopTerm | None:
    """The forward work the checkpointing policy runs again in the backward (blocks the
    backward does not reach are not recomputed); ``attn_causal``: a block's attention, and a
    hybrid's convolution and scan, as shares of every block."""
    if not plan.checkpointing:
        return None
    blocks = passes.backward
    policy = plan.checkpoint_policy
    if policy is CheckpointPolicy.ATTENTION:
        return FlopTerm(
            "recomputed core attention (Megatron selective)",
            attn_causal * blocks,
            _said(f"4·H·hd·(s+1)/2 × {blocks} blocks"),
        )
    if policy is CheckpointPolicy.OP:
        share = recomputed_share(plan)
        return FlopTerm(
            "recomputed matmuls (per-op SAC: every other one)",
            2.0 * w_fwd * share * blocks,
            _said(f"2·W × {share:.2f} × {blocks} blocks"),
        )
    recomputed = min(blocks, plan.checkpointed_blocks(plan.model.num_layers))
    scan = " + conv and scan" if plan.model.recurrent_mixer else ""
    return FlopTerm(
        "recomputed forward of the checkpointed blocks",
        (2.0 * w_fwd + attn_causal) * recomputed,
        _said(f"(2·W + attention{scan}) × {recomputed} blocks"),
    )


def _lesson_flops(plan: Plan) -> TokenFlops:
    """The lesson's rule: 6·P for full training, 4·P with a frozen base (its LoRA figure); the
    frozen-layers method 4·P + 2·T, with the recompute its checkpointing adds."""
    counts = param_counts(plan)
    p = float(counts.active)
    if plan.method is Method.FULL:
        per, how = 6.0 * p, "6 · P"
    elif plan.adapter_based:
        per, how = 4.0 * p, "4 · P (frozen base)"
    else:
        per, how = 4.0 * p + 2.0 * float(min(counts.trainable, counts.active)), "4 · P + 2 · T"
        share = recomputed_share(plan)
        if share > 0.0:
            per += 2.0 * p * share
            how += f" + 2 · P × {share:.2f} (recomputed forward)"
    return TokenFlops((FlopTerm("the lesson's rule", per, _said(how)),), per, per, 2.0 * p)


# ---- what a PEFT method's step runs beyond the matmul terms (issue 24, items 1–2) -----------------------------------
# Per adapted linear and micro-batch of m tokens, counted by tools/measure/peft_method_cost.py (torch 2.13.0,
# peft 0.18.0, adapters in float32 on a bfloat16 base, PEFT's autocast_adapter_dtype default; the method
# comparison's settings; each source file read at huggingface/peft 51c2ff66): the kernels the method's ops launch
# (forward, backward) and the bytes they read and write, forward and backward, as bytes per element of
# (m·in, m·out, in·out, X), X the method's own term (DoRA in², OFT r·b², VeRA m·r, AdaLoRA r·in): least squares
# over six single-linear shapes (``--bytes --shape``, 128 / 256 tokens, 256 to 1,024 wide); LoRA's own come out
# exact at (6, 24) forward and (12, 20) backward. DoRA's are beyond LoRA's path (eager_block_kernels counts its
# kernels as LORA_LINEAR_KERNELS; LoRA's own bytes are not counted: counting them moves the fit, whose torchtune
# LoRA rows would carry them, docs/TRAINING_TIME.md "What each PEFT method costs in time"); the others' are the
# whole adapter's, its matmuls apart (block_gemms, and _build_flops).
@dataclass(frozen=True)
class MethodPasses:
    kernels: tuple[int, int]  # per adapted linear: forward, backward
    forward: tuple[float, float, float, float]  # bytes per element of (m·in, m·out, in·out, X)
    backward: tuple[float, float, float, float]


# The tool's per-linear figures (the least squares' coefficients, rounded to the half byte; residuals under 0.1 %
# but VeRA's 0.02 %, AdaLoRA's 0.01 % of their bytes), kernels at 512 → 512.
PEFT_METHOD_PASSES: Final[dict[Method, MethodPasses]] = {
    # DoRA less LoRA: 18 / 19 kernels less 6 / 9; forward (5.9, 50.1, 30.0, 4.0) less (6, 24, 0, 0).
    Method.DORA: MethodPasses((12, 10), (0.0, 26.0, 30.0, 4.0), (0.0, 58.0, 0.0, 0.0)),
    Method.IA3: MethodPasses((3, 6), (0.0, 12.0, 0.0, 0.0), (0.0, 34.0, 0.0, 0.0)),
    Method.LOHA: MethodPasses((11, 15), (6.0, 16.0, 20.0, 0.0), (12.0, 12.0, 32.0, 0.0)),
    Method.LOKR: MethodPasses((13, 13), (6.0, 16.0, 21.0, 0.0), (12.0, 12.0, 32.5, 0.0)),
    Method.VERA: MethodPasses((7, 12), (6.0, 24.0, 0.0, 8.0), (12.0, 36.0, 0.0, 24.0)),
    Method.OFT: MethodPasses((17, 24), (28.0, 0.0, 0.0, 78.5), (28.0, 0.0, 0.0, 122.0)),
    # AdaLoRA: SVDLinear's 8 / 12 and its orthogonal regularisation's 10 / 16 a target (AdaLoraModel.forward: AᵀA − I,
    # BᵀB − I and their norms, with the tool's tuner forward; 21 / 30 at 512 → 512 less the three / two a micro-batch
    # that sum them into the loss, not counted).
    Method.ADALORA: MethodPasses((18, 28), (6.0, 24.0, 0.0, 8.0), (12.0, 22.0, 0.0, 24.0)),
    # MiSS (branch h58peft; MissConfig r 64, init_weights True): forward the input's float32 cast, the block sum,
    # the add onto the base output and its cast back (5 with the matmul: 10 m·in + 16 m·out + 4 m·r bytes, exact
    # from the ops); backward the block sum's gradient expanded (clone), the casts and the add (8 with two matmuls:
    # 28 m·in + 12 m·out, exact). tools/measure/peft_method_cost.py --methods miss --bytes --shape IN OUT over
    # (256, 512), (512, 256), (512, 512), (1024, 512), (512, 1024) at 128 and 256 tokens: every figure exact.
    Method.MISS: MethodPasses((5, 8), (10.0, 16.0, 0.0, 4.0), (28.0, 12.0, 0.0, 0.0)),
    # Branch h78peft, the method comparison's settings (n_frequency 1000; road_2; VB-LoRA r 4 on a bank of 256 × 256,
    # top 2; RandLoRA r 32; SHiRA r 32): tools/measure/peft_method_cost.py --methods ... --bytes --shape IN OUT over
    # the same ten shapes and token counts. FourierFT (X = n): the float32 zeros, the scatter, both inverse FFTs'
    # complex in·out, the input cast and the add (9 / 10 kernels), exact. RoAd: its float32 output cast, cos / sin,
    # the rotation's multiplies, stack and add, all per m·out (11 / 24), within 0.5 % (its out-long columns left out).
    # VB-LoRA (X = r·(in + out)): LoRA's casts and adds per m·in, m·out, topk / softmax / gather / sum over the logits
    # and the bank (20 / 25); the bank's own constant (7.8 / 36 B a bank element a target) is left out, within 0.8 % /
    # 0.3 % of the bytes at 840 tokens on Llama's shapes. RandLoRA (X = r·bases·min(in, out), UniqueBaseGrad's product):
    # the input cast, the scaled basis, the add (8 / 14), within 1.2 %. SHiRA (X = r·(in + out)): the weight's deepcopy,
    # the sparse values scaled and coalesced, the add into the copy (9 / 4), exact; its weight gradient is a block
    # matmul (block_gemms).
    Method.FOURIERFT: MethodPasses((9, 10), (6.0, 16.0, 48.0, 20.0), (12.0, 12.0, 40.0, 20.0)),
    Method.ROAD: MethodPasses((11, 24), (0.0, 52.0, 0.0, 0.0), (0.0, 100.5, 0.0, 0.0)),
    Method.VBLORA: MethodPasses((20, 25), (6.0, 16.0, 0.0, 50.5), (12.0, 12.0, 0.0, 76.5)),
    Method.RANDLORA: MethodPasses((8, 14), (6.0, 24.0, 0.0, 12.5), (12.0, 20.0, 0.0, 16.5)),
    Method.SHIRA: MethodPasses((9, 4), (0.0, 0.0, 32.0, 52.0), (0.0, 0.0, 18.0, 8.0)),
    # Branch h80boft, boft--llama-3.2-3B-default's settings (blocks of 4, one butterfly factor; PEFT's torch.block_diag
    # path): X = in², the identity, block_diag's float32 zeros and its cast, boft_P's cast, the scale's products (19 /
    # 23 kernels a target, and torch.block_diag's one copy_ per block forward: method_work). Over the same ten shapes
    # exact with two more terms, 262.1·in + 16.1·out forward and 340·in + 18·out backward (the solve's blocks, the scale
    # vectors: under 0.5 % of the bytes at Llama 3.2 3B's widths), left out.
    Method.BOFT: MethodPasses((19, 23), (0.0, 12.0, 0.0, 18.0), (0.0, 34.0, 0.0, 10.0)),
}
# AdaLoRA's rank allocator once an optimizer step (huggingface/peft 51c2ff66 src/peft/tuners/adalora/layer.py
# ``RankAllocator.update_and_allocate`` at a step of its masking phase: ``update_ipt``'s sensitivity and uncertainty
# averages of lora_A, lora_E and lora_B, ``mask_to_budget``'s scores, the kthvalue and the masks): 42 ops a target
# (tools/measure/peft_method_cost.py --methods adalora --shape 512 512: 54 ops, less the first call's 9 zeros_like
# and the step's cat, kthvalue and .item()). Its .item() and one .tolist() a target wait for the device: not modelled
# (the host's count joins the step's max(device, host)).
ADALORA_ALLOCATOR_KERNELS: Final = 42

# Where a PEFT method's terms come from, as the Compute & time arithmetic says it.
METHOD_SOURCE: Final = (
    "read at huggingface/peft 51c2ff66, counted by tools/measure/peft_method_cost.py (torch 2.13, peft 0.18)"
)

_OWN_TERM: Final = {
    Method.DORA: "in²",
    Method.OFT: "r·b²",
    Method.VERA: "m·r",
    Method.ADALORA: "r·in",
    Method.MISS: "m·r",
    Method.FOURIERFT: "n",
    Method.VBLORA: "r·(in + out)",
    Method.RANDLORA: "r·bases·min(in, out)",
    Method.SHIRA: "r·(in + out)",
    Method.BOFT: "in²",
}

_METHOD_LABELS: Final = {
    Method.DORA: "DoRA's weight norm (lora_B·lora_A·I added to W, row norms) and rescaling",
    Method.LOHA: "LoHa's float32 delta weight built and scaled every micro-batch, the input cast",
    Method.LOKR: "LoKr's float32 Kronecker delta weight built every micro-batch, the input cast",
    Method.OFT: "OFT's rotation built (Neumann series) and the input cast and rotated in float32",
    Method.VERA: "VeRA's input cast, shared projections sliced, λ_d and λ_b scalings",
    Method.IA3: "IA3's elementwise scalings",
    Method.ADALORA: "AdaLoRA's A·E product, scaling / ranknum and orthogonal regularisation",
    Method.MISS: "MiSS's float32 input cast, block sum, and the float32 add onto the base output",
    Method.FOURIERFT: "FourierFT's spectrum scattered and inverse-FFT'd into a float32 delta weight, the input cast",
    Method.ROAD: "RoAd's float32 output cast and elementwise rotation (cos, sin, multiplies)",
    Method.VBLORA: "VB-LoRA's A and B assembled from the bank (top-k, softmax, gather), the input cast",
    Method.RANDLORA: "RandLoRA's scaled basis λ·A·γ and the float32 input cast",
    Method.SHIRA: "SHiRA's weight copy and its sparse delta added every micro-batch",
    Method.BOFT: "BOFT's dense in × in rotation built every micro-batch (block_diag, boft_P), the output scaled",
}


@fills_fields
@dataclass(frozen=True)
class MethodWork:
    """One block's work of a PEFT method beyond the matmul terms, per micro-batch: its float32 weight builds
    (matmuls), the bytes its other ops move and the kernels they launch."""

    label: str
    build_forward: float  # float32 matmul FLOPs of the builds, forward
    build_backward: float
    bytes_forward: float
    bytes_backward: float
    kernels: tuple[float, float]  # forward, backward
    formula: str
    step_kernels: float = 0.0  # ops the host issues once an optimizer step (AdaLoRA's rank allocator)
    # The builds' matmuls run in the input's dtype (the block's compute dtype), not float32 (BOFT's): timed with the
    # block's matmuls (core.training.speed._matmuls), not at the float32 peak.
    builds_as_blocks: bool = False


def _build_flops(plan: Plan, fan_in: int, fan_out: int) -> tuple[float, float]:
    """(forward, backward) float32 matmul FLOPs of one target's weight build, once a micro-batch (huggingface/peft
    51c2ff66; tools/measure/peft_method_cost.py counts the same): DoRA's lora_B(lora_A(eye(in))) 2·in·r·(in + out),
    forward only (the norm is detached); LoHa's two (out × r)·(r × in) products forward and six backward
    (``HadaWeight.backward`` rebuilds both, then four gradients): 4·r·in·out and 12·r·in·out; LoKr's w2 = w2a @ w2b
    (b × r)·(r × d) when r < max(b, d) / 2, 2·b·r·d forward and twice that backward; OFT's Neumann series, bmms
    (core.params.oft_neumann_bmms) of 2·r·b³ each, twice that backward; AdaLoRA's orthogonal regularisation
    (adalora/model.py ``AdaLoraModel.forward``) 2·r²·(in + out), twice that backward; BOFT's (boft/layer.py
    ``Linear.forward``, one butterfly factor) three dense in × in × in matmuls in the input's dtype, ``bmm(block_diag,
    Pᵀ)``, ``bmm(P, ·)`` and ``· @ eye(in)``, 6·in³ forward, and one gradient each (P and the identity need none)
    backward, 6·in³ (method_work's ``builds_as_blocks``)."""
    r = plan.lora.rank
    method = plan.method
    if method is _METHOD_DORA:
        return 2.0 * fan_in * r * (fan_in + fan_out), 0.0
    if method is _METHOD_LOHA:
        return 4.0 * r * fan_in * fan_out, 12.0 * r * fan_in * fan_out
    if method is _METHOD_LOKR:
        (_, out_b), (_, in_d) = (
            lokr_factorization(fan_out, plan.lora.lokr_factor),
            lokr_factorization(fan_in, plan.lora.lokr_factor),
        )
        built = 2.0 * out_b * r * in_d if r < max(out_b, in_d) / 2 else 0.0
        return built, 2.0 * built
    if method is _METHOD_OFT:
        blocks, size = oft_blocks(plan, fan_in)
        bmms = 2.0 * blocks * size**3 * oft_neumann_bmms()
        return bmms, 2.0 * bmms
    if method is _METHOD_BOFT:
        dense = 6.0 * fan_in**3
        return dense, dense
    if method is _METHOD_ADALORA:  # the orthogonal regularisation's A·Aᵀ (r × in) and Bᵀ·B (out × r)
        cov = 2.0 * r * r * (fan_in + fan_out)
        return cov, 2.0 * cov
    return 0.0, 0.0


def _own_term(plan: Plan, m: float, fan_in: int, fan_out: int) -> float:
    """The elements of a method's own term of PEFT_METHOD_PASSES: DoRA's in × in identity, OFT's r blocks of b × b,
    VeRA's m × r activations, MiSS's m × r block sums, AdaLoRA's r × in product A·E, FourierFT's n coefficients,
    VB-LoRA's and SHiRA's r·(in + out), RandLoRA's scaled basis; 0 for the others."""
    r = plan.lora.rank
    if plan.method is _METHOD_DORA:
        return float(fan_in * fan_in)
    if plan.method is _METHOD_OFT:
        blocks, size = oft_blocks(plan, fan_in)
        return float(blocks * size * size)
    if plan.method in (_METHOD_VERA, _METHOD_MISS):
        return m * r
    if plan.method is _METHOD_ADALORA:
        return float(r * fan_in)
    if plan.method is _METHOD_FOURIERFT:
        return float(r)
    if plan.method in (_METHOD_VBLORA, _METHOD_SHIRA):
        return float(r * (fan_in + fan_out))
    if plan.method is _METHOD_RANDLORA:
        return float(r * randlora_bases(fan_in, fan_out, r) * min(fan_in, fan_out))
    if plan.method is _METHOD_BOFT:
        return float(fan_in * fan_in)
    return 0.0


@last_answer
def method_work(plan: Plan) -> MethodWork | None:
    """What one block of ``plan`` (the run's plan: prompt tokens in its sequence) runs for its PEFT method beyond the
    matmul terms, per micro-batch (PEFT_METHOD_PASSES, _build_flops); None for methods with none counted (LoRA,
    QLoRA, full, frozen layers, prompt learning, LN tuning, LitGPT's adapters) and outside the detailed accounting."""
    passes = PEFT_METHOD_PASSES.get(plan.method)
    if passes is None or plan.accounting is not _ACCOUNTING_DETAILED:
        return None
    m = float(plan.workload.micro_batch * plan.workload.seq_len)
    feedforward = set(plan.lora.ia3_feedforward) if plan.method is _METHOD_IA3 else set()
    model = plan.model
    build_f = build_b = bytes_f = bytes_b = 0.0
    targets = 0.0
    copies = 0.0  # BOFT: torch.block_diag's copy_ of each of a target's in / b blocks (TensorShape.cpp block_diag)
    # What each target adapts, per kind of block (ModelSpec.target_rows: a mixture of experts' dense layers their own
    # MLP, its routed experts each on top-k / experts of the tokens, all-linear its router), as a block's mean.
    for name in normalise_lora_targets(plan.lora.targets):
        for held, fan_in, fan_out, n, routed in model.target_rows(name, plan.linear_experts):
            tokens, times = m * (model.routed_share if routed else 1.0), held * n
            # IA3 scales a feedforward target's input (m·in elements), any other's output (m·out).
            per_in, per_out = (fan_out, fan_in) if name in feedforward else (fan_in, fan_out)
            own = _own_term(plan, tokens, fan_in, fan_out)
            terms = (tokens * per_in, tokens * per_out, float(fan_in * fan_out), own)
            bytes_f += times * sum(c * t for c, t in zip(passes.forward, terms, strict=True))
            bytes_b += times * sum(c * t for c, t in zip(passes.backward, terms, strict=True))
            f, b = _build_flops(plan, fan_in, fan_out)
            build_f, build_b = build_f + times * f, build_b + times * b
            targets += times
            if plan.method is _METHOD_BOFT:
                copies += times * boft_blocks(plan, fan_in)[0]
    if not targets:
        return None
    kf, kb = passes.kernels
    return MethodWork(
        _METHOD_LABELS[plan.method],
        build_f,
        build_b,
        bytes_f,
        bytes_b,
        (kf * targets + copies, kb * targets),
        f"{targets:g} adapted linears a block × ({kf} + {kb} kernels; bytes per element of (m·in, m·out, in·out, "
        f"{_OWN_TERM.get(plan.method, 'X')}) {passes.forward} forward, {passes.backward} backward; "
        f"m = {m:,.0f} tokens)",
        ADALORA_ALLOCATOR_KERNELS * targets if plan.method is _METHOD_ADALORA else 0.0,
        plan.method is _METHOD_BOFT,
    )
