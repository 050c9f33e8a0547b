"""Detailed accounting: the memory of a real training step, derived from the architecture.

The model follows what PyTorch and a Hugging Face causal-LM implementation allocate:
parameters in the dtype they are stored in, gradients in the dtype of the trainable
parameters, optimizer state per optimizer, the tensors autograd saves for the backward
pass op by op, the logits and the loss, and the phase of the step in which they coexist.
The step's peak is the largest phase, never the plain sum of the buckets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from core.accounting import Breakdown, BucketKey, Phase, Term, gb, make_bucket, sci
from core.model import ModelSpec
from core.params import ParamCounts
from core.plan import Attention, Method, Optimizer, Plan, Precision, Quant, Sharding
from core.units import MiB

# --- storage constants ---------------------------------------------------------------
# NF4/FP4 (bitsandbytes, QLoRA): 4 bits per weight in blocks of 64 with one absmax per
# block; double quantisation stores the absmax in 8 bits with one float32 constant per 256
# absmax values: 8/64 + 32/(64·256) = 0.127 bits per weight instead of 32/64 = 0.5
# (Dettmers et al. 2023, arXiv:2305.14314, section 3).
NF4_BLOCK: Final = 64
NF4_DQ_BLOCK: Final = 256
# LLM.int8 (bitsandbytes Int8Params): int8 weights plus one float32 scale per output row
# (Dettmers et al. 2022, arXiv:2208.07339).
INT8_ROW_SCALE_BYTES: Final = 4
# 8-bit optimizers (bitsandbytes): blockwise quantisation with blocks of 256 and one
# float32 absmax per block; tensors under 4096 elements stay in 32 bits
# (Dettmers et al. 2022, arXiv:2110.02861; bnb Optimizer8bit min_8bit_size=4096).
OPT8_BLOCK: Final = 256
OPT8_MIN_SIZE: Final = 4096

# --- overhead constants --------------------------------------------------------------
# The CUDA context of a PyTorch process (driver, kernels of the loaded libraries with lazy
# loading) sits outside the caching allocator: about 300-600 MiB on current drivers
# (PyTorch "CUDA semantics" notes; nvidia-smi of an idle process). 512 MiB is assumed.
CUDA_CONTEXT_BYTES: Final = 512 * MiB
# cuBLAS workspace PyTorch keeps per handle: ":4096:8" = 8 × 4 MiB on Hopper and newer,
# 4096 KiB × 2 + 16 KiB × 8 elsewhere (c10/cuda CublasHandlePool.cpp); 32 MiB assumed.
CUBLAS_WORKSPACE_BYTES: Final = 32 * MiB
# Caching-allocator reserve: reserved minus allocated at the peak, from splitting 2 MiB
# and larger segments (PyTorch "CUDA memory management"). Assumed 5 % of the peak.
ALLOCATOR_RESERVE_FRACTION: Final = 0.05

MIXED: Final = (Precision.BF16_MIXED, Precision.FP16_MIXED)


@dataclass(frozen=True)
class Dtypes:
    param: float  # bytes of a stored trainable parameter
    base: float  # bytes of a stored frozen base weight (before quantisation)
    grad: float
    compute: float  # matmul outputs
    residual: float  # the residual stream between blocks
    mixed: bool


def dtypes_for(plan: Plan) -> Dtypes:
    p = plan.precision
    if p is Precision.FP32:
        return Dtypes(param=4, base=4, grad=4, compute=4, residual=4, mixed=False)
    if p in MIXED:
        # PyTorch AMP: float32 parameters (they are the master copy), autocast runs
        # matmuls in 16 bits, norms and the residual stream stay in float32.
        return Dtypes(param=4, base=4, grad=4, compute=2, residual=4, mixed=True)
    # Pure 16-bit: everything in 16 bits; LoRA adapters are upcast to float32 by PEFT
    # (autocast_adapter_dtype=True), handled where adapters are counted.
    return Dtypes(param=2, base=2, grad=2, compute=2, residual=2, mixed=False)


# --- storage -------------------------------------------------------------------------
def weight_terms(plan: Plan, counts: ParamCounts, dt: Dtypes) -> list[Term]:
    model = plan.model
    p = counts.total
    terms: list[Term] = []
    if plan.method is Method.QLORA:
        quantised = model.matmul_params()
        rest = p - quantised
        if plan.quant is Quant.INT8:
            rows = model.num_layers * sum(out for _, out in model.linear_shapes().values())
            q_bytes = quantised * 1 + rows * INT8_ROW_SCALE_BYTES
            terms.append(
                Term("int8 block weights + row scales", f"{sci(quantised)} × 1 B + {sci(rows)} × 4 B", q_bytes)
            )
        else:
            if plan.double_quant:
                per = 0.5 + 1 / NF4_BLOCK + 4 / (NF4_BLOCK * NF4_DQ_BLOCK)
                how = "0.5 + 1/64 + 4/(64·256)"
            else:
                per = 0.5 + 4 / NF4_BLOCK
                how = "0.5 + 4/64"
            terms.append(Term(f"{plan.quant.value} block weights", f"{sci(quantised)} × ({how}) B", quantised * per))
        # bitsandbytes leaves embeddings, the output head and norms in the compute dtype.
        terms.append(Term("unquantised (embeddings, head, norms)", f"{sci(rest)} × 2 B", rest * 2))
    else:
        terms.append(Term("base weights", f"P × {dt.base:g} B = {sci(p)} × {dt.base:g} B", p * dt.base))
    if counts.adapter:
        terms.append(Term("LoRA adapters (float32)", f"{sci(counts.adapter)} × 4 B", counts.adapter * 4))
    return terms


def trainable_bytes_per_param(plan: Plan, dt: Dtypes) -> float:
    return 4.0 if plan.adapter_based else dt.param


def optimizer_terms(plan: Plan, counts: ParamCounts, dt: Dtypes) -> list[Term]:
    t = counts.trainable
    b = trainable_bytes_per_param(plan, dt)
    opt = plan.optimizer
    if opt in (Optimizer.ADAMW, Optimizer.PAGED_ADAMW):
        return [Term("Adam moments m, v", f"2 × T × {b:g} B = 2 × {sci(t)} × {b:g} B", 2 * t * b)]
    if opt in (Optimizer.ADAMW_8BIT, Optimizer.PAGED_ADAMW_8BIT):
        per = 2 * (1 + 4 / OPT8_BLOCK)
        return [Term("8-bit Adam moments + block absmax", f"{sci(t)} × 2 × (1 + 4/256) B", t * per)]
    if opt is Optimizer.SGD_MOMENTUM:
        return [Term("momentum buffer", f"T × {b:g} B = {sci(t)} × {b:g} B", t * b)]
    if opt is Optimizer.ADAFACTOR:
        factored = adafactor_state_elements(plan)
        return [Term("factored second moment (rows + columns)", f"{sci(factored)} × 4 B", factored * 4)]
    return []


def adafactor_state_elements(plan: Plan) -> int:
    """Row + column statistics for every trainable matrix (Shazeer & Stern 2018)."""
    model = plan.model
    if plan.adapter_based:
        targets = plan.lora.targets
        shapes = model.linear_shapes()
        r = plan.lora.rank
        per_layer = sum((fi + r) + (r + fo) for name, (fi, fo) in shapes.items() if name in targets)
        return model.num_layers * per_layer
    per_layer = sum(fi + fo for fi, fo in model.linear_shapes().values())
    per_layer += model.norms_per_layer * model.hidden_size
    layers = model.num_layers - plan.frozen_layers
    embeds = 0 if plan.method is Method.FROZEN else model.vocab_size + model.hidden_size
    head = 0 if model.tie_embeddings else model.vocab_size + model.hidden_size
    return layers * per_layer + embeds + head + model.hidden_size


def optimizer_step_temporary(plan: Plan, counts: ParamCounts, dt: Dtypes) -> Term | None:
    """PyTorch's foreach AdamW computes sqrt(v) for every parameter at once: one more copy."""
    if plan.optimizer in (Optimizer.ADAMW, Optimizer.PAGED_ADAMW):
        b = trainable_bytes_per_param(plan, dt)
        t = counts.trainable
        return Term("foreach AdamW sqrt(v) temporary", f"T × {b:g} B = {sci(t)} × {b:g} B", t * b)
    return None


# --- activations ---------------------------------------------------------------------
@dataclass(frozen=True)
class LayerActs:
    """Bytes one block keeps for the backward pass, itemised."""

    items: tuple[Term, ...]

    @property
    def bytes(self) -> float:
        return float(sum(t.bytes for t in self.items))


def norm_saved(model: ModelSpec, n: int, dt: Dtypes, consumers: int, consumer_saves: bool) -> list[Term]:
    """What a pre-block norm keeps: its float32 input and normalised value, and the copy
    of its output the next matmul(s) keep (autocast casts once per consuming matmul)."""
    d = model.hidden_size
    items = [Term("norm input (float32)", f"N·d × 4 = {sci(n * d)} × 4", n * d * 4)]
    if model.norm == "rmsnorm":
        items.append(Term("norm: normalised (float32)", f"N·d × 4 = {sci(n * d)} × 4", n * d * 4))
        if dt.residual == 2:
            items.append(Term("norm: cast back to 16-bit", f"N·d × 2 = {sci(n * d)} × 2", n * d * 2))
    else:
        items.append(Term("norm: mean, rstd", f"2 × N × 4 = 2 × {sci(n)} × 4", n * 8))
    if consumer_saves:
        if dt.mixed:
            items.append(Term("norm output, cast per matmul", f"{consumers} × N·d × 2", consumers * n * d * 2))
        else:
            items.append(Term("norm output (matmul input)", f"N·d × {dt.compute:g}", n * d * dt.compute))
    return items


def layer_activations(plan: Plan, trainable_block: bool) -> LayerActs:
    """Saved tensors of one transformer block for micro-batch B and sequence S."""
    model = plan.model
    wl = plan.workload
    b, s = wl.micro_batch, wl.seq_len
    n = b * s
    i = model.intermediate_size
    h, kv = model.num_heads, model.num_kv_heads
    ca = 2.0 if dt_compute_16(plan) else 4.0
    dt = dtypes_for(plan)
    lora = plan.lora.targets if plan.adapter_based else ()

    # A matmul keeps its input only when its weight (or an adapter on it) trains.
    def saves(name: str) -> bool:
        return trainable_block or name in lora

    items: list[Term] = []
    qkv_consumers = sum(1 for nme in ("q_proj", "k_proj", "v_proj") if saves(nme))
    if model.fused_qkv:
        qkv_consumers = min(qkv_consumers, 1)
    items += norm_saved(model, n, dt, qkv_consumers, qkv_consumers > 0)

    # Attention.
    q_el = n * model.q_width
    kv_el = n * model.kv_width
    if model.family == "gpt2":
        items.append(Term("q, k, v (fused projection output)", f"3 × N·d × {ca:g}", (q_el + 2 * kv_el) * ca))
    else:
        items.append(Term("q after RoPE", f"N·H·hd × {ca:g} = {sci(q_el)} × {ca:g}", q_el * ca))
        kv_saved = kv_el if plan.attention is not Attention.EAGER else n * model.q_width
        label = "k, v" if plan.attention is not Attention.EAGER or kv == h else "k, v repeated to all heads"
        items.append(Term(label, f"2 × {sci(kv_saved)} × {ca:g}", 2 * kv_saved * ca))
    if plan.attention is Attention.EAGER:
        scores = b * h * s * s
        items.append(Term("attention probabilities (float32)", f"B·H·S² × 4 = {sci(scores)} × 4", scores * 4))
        if ca == 2:
            items.append(Term("probabilities cast to 16-bit", f"B·H·S² × 2 = {sci(scores)} × 2", scores * 2))
    else:
        items.append(Term("softmax log-sum-exp (float32)", f"B·H·S × 4 = {sci(b * h * s)} × 4", b * h * s * 4))
    items.append(Term("attention output", f"N·H·hd × {ca:g} = {sci(q_el)} × {ca:g}", q_el * ca))

    # MLP.
    up_consumers = sum(1 for nme in ("gate_proj", "up_proj") if saves(nme) and nme in model.linear_shapes())
    if model.fused_gate_up:
        up_consumers = min(up_consumers, 1)
    items += [t for t in norm_saved(model, n, dt, up_consumers, up_consumers > 0)]
    mlp_el = n * i * (model.experts_per_token if model.num_experts > 1 else 1)
    if model.gated_mlp:
        items.append(Term("gate, act(gate), up", f"3 × N·I × {ca:g} = 3 × {sci(mlp_el)} × {ca:g}", 3 * mlp_el * ca))
    else:
        items.append(Term("fc output and GELU intermediates", f"4 × N·I × {ca:g}", 4 * mlp_el * ca))
    if saves("down_proj"):
        items.append(Term("down-projection input", f"N·I × {ca:g} = {sci(mlp_el)} × {ca:g}", mlp_el * ca))
    if model.num_experts > 1:
        items.append(Term("router logits (float32)", "N·E × 4", n * model.num_experts * 4))
    return LayerActs(tuple(items))


def dt_compute_16(plan: Plan) -> bool:
    return plan.precision is not Precision.FP32


def logits_terms(plan: Plan, dt: Dtypes) -> tuple[list[Term], list[Term]]:
    """(held after the forward, extra held at the start of the backward) for the loss."""
    model = plan.model
    b, s = plan.workload.micro_batch, plan.workload.seq_len
    n = b * s
    v = model.vocab_size
    if plan.chunked_loss:
        # Chunked cross-entropy keeps one chunk of float32 logits at a time (assume 8 chunks).
        chunk = max(1, n // 8)
        held = [Term("loss chunk (float32 logits + log-softmax)", "2 × (N/8)·V × 4", 2 * chunk * v * 4)]
        return held, [Term("loss chunk gradient", "(N/8)·V × 4", chunk * v * 4)]
    ca = 2.0 if dt_compute_16(plan) else 4.0
    held = [Term("logits", f"N·V × {ca:g} = {sci(n * v)} × {ca:g}", n * v * ca)]
    held.append(Term("log-softmax kept for the backward (float32)", f"N·V × 4 = {sci(n * v)} × 4", n * v * 4))
    backward = [
        Term("gradient of log-softmax output (float32)", f"N·V × 4 = {sci(n * v)} × 4", n * v * 4),
        Term("gradient of logits (float32)", f"N·V × 4 = {sci(n * v)} × 4", n * v * 4),
    ]
    return held, backward


def training_breakdown(plan: Plan, counts: ParamCounts) -> Breakdown:
    model = plan.model
    dt = dtypes_for(plan)
    shards = plan.hardware.gpu_count
    stage = plan.hardware.sharding
    notes: list[str] = []

    weights = weight_terms(plan, counts, dt)
    if dt.mixed and plan.method is not Method.QLORA:
        copies = model.matmul_params() + model.vocab_size * model.hidden_size
        weights.append(Term("16-bit working copies of matmul weights (autocast)", f"{sci(copies)} × 2 B", copies * 2))
    gbytes = trainable_bytes_per_param(plan, dt)
    grads = [Term("gradients", f"T × {gbytes:g} B = {sci(counts.trainable)} × {gbytes:g} B", counts.trainable * gbytes)]
    optim = optimizer_terms(plan, counts, dt)

    if stage is not Sharding.NONE and shards > 1:

        def shard(terms: list[Term], what: str) -> list[Term]:
            return [Term(f"{t.label} ÷ {shards} GPUs", f"({t.formula}) ÷ {shards}", t.bytes / shards) for t in terms]

        optim = shard(optim, "optimizer")
        if stage in (Sharding.ZERO2, Sharding.ZERO3):
            grads = shard(grads, "gradients")
        if stage is Sharding.ZERO3:
            gathered = 2 * model.layer_params() * dt.base
            weights = shard(weights, "weights")
            weights.append(
                Term("two gathered blocks (prefetch)", f"2 × {sci(model.layer_params())} × {dt.base:g} B", gathered)
            )

    # Activations of every block, then what sits outside the blocks.
    trainable_layers = model.num_layers - plan.frozen_layers if plan.method is Method.FROZEN else model.num_layers
    full_layer = layer_activations(plan, trainable_block=plan.method in (Method.FULL, Method.FROZEN))
    n = plan.workload.micro_batch * plan.workload.seq_len
    residual = n * model.hidden_size * dt.residual
    if plan.checkpointing:
        acts = [
            Term(
                "block inputs kept by checkpointing",
                f"L × N·d × {dt.residual:g} = {trainable_layers} × {sci(n * model.hidden_size)} × {dt.residual:g}",
                trainable_layers * residual,
            ),
            Term("one block recomputed in the backward", "Σ of one block's saved tensors", full_layer.bytes),
        ]
    else:
        acts = [
            Term(
                f"{trainable_layers} blocks × saved tensors per block",
                f"{trainable_layers} × {gb(full_layer.bytes)} GB",
                trainable_layers * full_layer.bytes,
            )
        ]
    acts += norm_saved(model, n, dt, 1, True)[:2]  # final norm
    held, bwd_extra = logits_terms(plan, dt)

    w_bucket = make_bucket(BucketKey.WEIGHTS, weights)
    o_bucket = make_bucket(BucketKey.OPTIMIZER, optim)
    g_bucket = make_bucket(BucketKey.GRADIENTS, grads)
    zero_g = make_bucket(BucketKey.GRADIENTS, [])
    accumulating = plan.workload.grad_accum > 1
    fwd = Phase(
        "forward + loss",
        (w_bucket, g_bucket if accumulating else zero_g, o_bucket, make_bucket(BucketKey.ACTIVATIONS, acts + held)),
        "end of the forward pass: every saved activation plus the logits and the loss",
    )
    bwd = Phase(
        "backward",
        (
            w_bucket,
            g_bucket if accumulating else zero_g,
            o_bucket,
            make_bucket(BucketKey.ACTIVATIONS, acts + held + bwd_extra),
        ),
        "start of the backward pass: activations still held, the loss gradient being formed",
    )
    temp = optimizer_step_temporary(plan, counts, dt)
    step_weights = [t for t in weights if "autocast" not in t.label]
    opt_phase = Phase(
        "optimizer step",
        (
            make_bucket(BucketKey.WEIGHTS, step_weights),
            g_bucket,
            make_bucket(BucketKey.OPTIMIZER, optim + ([temp] if temp else [])),
            make_bucket(BucketKey.ACTIVATIONS, []),
        ),
        "optimizer step: every gradient, the state, and the step's temporaries",
    )
    phases = (fwd, bwd, opt_phase)
    peak = max(p.allocated_bytes for p in phases)
    overhead = make_bucket(
        BucketKey.OVERHEAD,
        [
            Term("CUDA context", "≈ 512 MiB per process", CUDA_CONTEXT_BYTES),
            Term("cuBLAS workspace", "≈ 32 MiB", CUBLAS_WORKSPACE_BYTES),
            Term("allocator reserve", f"5 % of the {gb(peak)} GB peak", peak * ALLOCATOR_RESERVE_FRACTION),
        ],
        note="outside max_memory_allocated(); nvidia-smi shows it",
    )
    if plan.optimizer in (Optimizer.PAGED_ADAMW, Optimizer.PAGED_ADAMW_8BIT):
        notes.append(
            "Paged optimizer: its state can be evicted to CPU memory under pressure, so the card may hold less."
        )
    peak_phase = max(phases, key=lambda p: p.allocated_bytes)
    summary = " + ".join(gb(b.bytes) for b in peak_phase.buckets) + f" = {gb(peak)} GB at the {peak_phase.name}"
    return Breakdown(phases=phases, overhead=overhead, summary_formula=summary, notes=tuple(notes))
