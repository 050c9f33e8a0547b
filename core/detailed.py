"""Detailed accounting: the memory of a real training step, derived from the architecture.

The model follows what PyTorch and a Hugging Face causal-LM implementation allocate:
parameters in the dtype they are stored in, gradients in the dtype of the trainable
parameters, optimizer state per optimizer, the tensors autograd saves for the backward
pass op by op, the logits and the loss, and the phase of the step in which they coexist.
The step's peak is the largest phase, never the plain sum of the buckets.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from core.breakdown import Breakdown, BucketKey, Phase, Term, gb, make_bucket, sci
from core.model import ModelSpec
from core.params import ParamCounts
from core.plan import Attention, Method, Optimizer, Plan, Precision, Quant, Sharding
from core.serving.formats import WeightFormat, matrix_output_rows, nf4_bytes_per_weight, quantised_matrix_bytes
from core.units import MiB

# --- storage constants ---------------------------------------------------------------
# NF4/FP4 and LLM.int8 storage: core.serving.formats (one home for quantised weights).
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
    mode: str  # "fp32" | "mixed" (autocast over float32 weights) | "pure" (16 bits throughout)

    @property
    def mixed(self) -> bool:
        return self.mode == "mixed"


def dtypes_for(plan: Plan) -> Dtypes:
    p = plan.precision
    if p is Precision.FP32:
        return Dtypes(param=4, base=4, grad=4, compute=4, residual=4, mode="fp32")
    if p in MIXED:
        # PyTorch AMP: float32 parameters (they are the master copy), autocast runs
        # matmuls in 16 bits, norms and the residual stream stay in float32.
        return Dtypes(param=4, base=4, grad=4, compute=2, residual=4, mode="mixed")
    # Pure 16-bit: everything in 16 bits; LoRA adapters are upcast to float32 by PEFT
    # (autocast_adapter_dtype=True), handled where adapters are counted.
    return Dtypes(param=2, base=2, grad=2, compute=2, residual=2, mode="pure")


# --- storage -------------------------------------------------------------------------
def weight_terms(plan: Plan, counts: ParamCounts, dt: Dtypes) -> list[Term]:
    model = plan.model
    p = counts.total
    terms: list[Term] = []
    if plan.method is Method.QLORA:
        quantised = model.stored_matmul_params()
        rest = p - quantised
        if plan.quant is Quant.INT8:
            rows = matrix_output_rows(model)
            q_bytes = quantised_matrix_bytes(model, WeightFormat.INT8, quantised)
            terms.append(
                Term("int8 block weights + row scales", f"{sci(quantised)} × 1 B + {sci(rows)} × 4 B", q_bytes)
            )
        else:
            per = nf4_bytes_per_weight(plan.double_quant)
            how = "0.5 + 1/64 + 4/(64·256)" if plan.double_quant else "0.5 + 4/64"
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


@dataclass(frozen=True)
class _Ctx:
    """What decides the saved tensors: sizes, dtypes and which weights train."""

    n: int  # tokens in the micro-batch, B·S
    b: int
    s: int
    ca: float  # bytes of a matmul output (16-bit unless float32)
    mode: str  # "fp32" | "mixed" | "pure"
    trainable: bool  # the block's own weights get gradients
    lora: tuple[str, ...]  # LoRA-targeted projections

    def saves(self, name: str) -> bool:
        """A projection keeps its input only when its weight, or an adapter on it, trains."""
        return self.trainable or name in self.lora


def _context(plan: Plan, trainable: bool, lora: tuple[str, ...]) -> _Ctx:
    b, s = plan.workload.micro_batch, plan.workload.seq_len
    dt = dtypes_for(plan)
    return _Ctx(n=b * s, b=b, s=s, ca=dt.compute, mode=dt.mode, trainable=trainable, lora=lora)


def _consumer_inputs(ctx: _Ctx, width: int, names: tuple[str, ...], fused: bool, label: str) -> list[Term]:
    """The copies of one tensor that the projections reading it keep.

    Under autocast every consuming matmul casts its float32 input to 16 bits itself (the
    autocast cache only holds casts of weights), so each keeps its own copy. In pure 16
    bits a trainable projection shares the tensor; a LoRA adapter in float32 casts it up.
    """
    savers = [nm for nm in names if ctx.saves(nm)]
    if fused and savers:
        savers = savers[:1]
    if not savers:
        return []
    el = ctx.n * width
    if ctx.mode == "mixed":
        return [
            Term(f"{label}, cast to 16 bits per reading matmul", f"{len(savers)} × N·{width} × 2", len(savers) * el * 2)
        ]
    if ctx.mode == "fp32":
        return [Term(label, f"N·{width} × 4", el * 4)]
    terms = []
    base_savers = [nm for nm in savers if ctx.trainable]
    adapters = [nm for nm in savers if not ctx.trainable and nm in ctx.lora]
    if base_savers:
        terms.append(Term(label, f"N·{width} × 2", el * 2))
    if adapters:
        terms.append(
            Term(f"{label}, cast to float32 per adapter", f"{len(adapters)} × N·{width} × 4", len(adapters) * el * 4)
        )
    return terms


def _norm(model: ModelSpec, ctx: _Ctx, label: str, with_output_consumers: list[Term]) -> list[Term]:
    """What a norm keeps (PyTorch autograd on HF's RMSNorm / LayerNorm code), plus its readers."""
    n, d = ctx.n, model.hidden_size
    items: list[Term] = []
    if model.norm == "layernorm":
        x_bytes = 2.0 if ctx.mode == "pure" else 4.0
        items.append(Term(f"{label}: input", f"N·d × {x_bytes:g}", n * d * x_bytes))
        items.append(Term(f"{label}: mean, 1/std (float32)", "2 × N × 4", n * 8))
    else:
        # x.float() is kept by pow() and the scaling mul; the normalised value is kept by
        # the weight multiply only when the weight trains.
        items.append(Term(f"{label}: input in float32", "N·d × 4", n * d * 4))
        items.append(Term(f"{label}: 1/rms (float32)", "N × 4", n * 4))
        if ctx.trainable:
            gemma = model.family in ("gemma", "gemma2", "gemma3_text")
            h_bytes = 2.0 if ctx.mode == "pure" and not gemma else 4.0
            items.append(Term(f"{label}: normalised", f"N·d × {h_bytes:g}", n * d * h_bytes))
    return items + with_output_consumers


def layer_activations(plan: Plan, trainable_block: bool) -> LayerActs:
    """Saved tensors of one transformer block for micro-batch B and sequence S."""
    model = plan.model
    ctx = _context(plan, trainable_block, plan.lora.targets if plan.adapter_based else ())
    b, s, n, ca = ctx.b, ctx.s, ctx.n, ctx.ca
    d, i = model.hidden_size, model.intermediate_size
    h = model.num_heads
    items: list[Term] = []

    # --- attention sub-block ---
    qkv = ("q_proj", "k_proj", "v_proj")
    items += _norm(
        model, ctx, "attention norm", _consumer_inputs(ctx, d, qkv, model.fused_qkv, "attention norm output")
    )
    q_el, kv_el = n * model.q_width, n * model.kv_width
    if model.family == "gpt2":
        items.append(Term("q, k, v (the fused projection's output)", f"N·(q + 2kv) × {ca:g}", (q_el + 2 * kv_el) * ca))
    else:
        items.append(Term("q after RoPE", f"N·H·hd × {ca:g} = {sci(q_el)} × {ca:g}", q_el * ca))
        # Eager attention, and SDPA with a mask (no enable_gqa then), repeat k and v to every head.
        repeated = plan.attention is Attention.EAGER or (needs_mask(plan) and sdpa_kernel(plan) != "flash")
        kv_saved = n * model.q_width if repeated else kv_el
        label = "k, v repeated to every head" if repeated and model.num_kv_heads != h else "k, v"
        items.append(Term(label, f"2 × {sci(kv_saved)} × {ca:g}", 2 * kv_saved * ca))
    if plan.attention is Attention.EAGER:
        scores = b * h * s * s
        items.append(Term("attention probabilities (float32)", f"B·H·S² × 4 = {sci(scores)} × 4", scores * 4))
        if model.attn_softcap:
            items.append(Term("soft-capped scores (tanh)", f"B·H·S² × {ca:g}", scores * ca))
        if model.attention_dropout:
            items.append(
                Term("attention dropout mask + dropped probabilities", f"B·H·S² × (1 + {ca:g})", scores * (1 + ca))
            )
        elif ca == 2:
            items.append(Term("probabilities cast to 16 bits", f"B·H·S² × 2 = {sci(scores)} × 2", scores * 2))
        if ctx.saves("o_proj"):
            items.append(Term("attention output (o_proj input)", f"N·H·hd × {ca:g}", q_el * ca))
    elif sdpa_kernel(plan) == "math":
        # PyTorch's math fallback (float32 with grouped-query heads, or unsupported shapes):
        # scaled q and k, k and v repeated to every head, the probabilities, and an output
        # laid out (B, H, S, hd) that o_proj reads through a contiguous copy.
        scores = b * h * s * s
        items.append(Term("math kernel: scaled q, k and repeated v", f"3 × N·H·hd × {ca:g}", 3 * q_el * ca))
        items.append(Term("math kernel: probabilities (float32)", f"B·H·S² × 4 = {sci(scores)} × 4", scores * 4))
        items.append(Term("attention output (o_proj input)", f"N·H·hd × {ca:g}", q_el * ca))
    else:
        # Flash / memory-efficient kernels keep their output and a float32 log-sum-exp per
        # row (the efficient kernel pads the rows to a multiple of 32).
        rows = s if sdpa_kernel(plan) == "flash" else -(-s // 32) * 32
        items.append(Term("softmax log-sum-exp (float32)", f"B·H·S × 4 = {sci(b * h * rows)} × 4", b * h * rows * 4))
        items.append(Term("attention output", f"N·H·hd × {ca:g} = {sci(q_el)} × {ca:g}", q_el * ca))
    if model.fused_qkv and model.family == "gpt2" and plan.attention is not Attention.EAGER and not plan.checkpointing:
        # With use_cache on (the default outside checkpointing) the KV cache concatenates k
        # and v into fresh tensors, which attention then keeps, while q still pins the fused
        # projection output (transformers DynamicLayer.update).
        items.append(Term("k, v copies made by the KV cache", f"2 × N·kv × {ca:g}", 2 * kv_el * ca))
    if ctx.mode == "pure" and "o_proj" in ctx.lora and not ctx.trainable:
        items.append(Term("o_proj input cast to float32 (adapter)", "N·H·hd × 4", q_el * 4))
    if model.dropout:
        items.append(Term("residual dropout mask", "N·d × 1", n * d))
    if model.norms_per_layer == 4:  # Gemma-2's post-attention norm on the attention output
        items += _norm(model, ctx, "post-attention norm", [])

    # --- MLP sub-block ---
    mlp_in = ("gate_proj", "up_proj") if model.gated_mlp else ("up_proj",)
    items += _norm(model, ctx, "MLP norm", _consumer_inputs(ctx, d, mlp_in, model.fused_gate_up, "MLP norm output"))
    experts = model.experts_per_token if model.num_experts > 1 else 1
    mlp_el = n * i * experts
    if model.gated_mlp:
        items.append(Term("gate, act(gate), up", f"3 × N·I × {ca:g} = 3 × {sci(mlp_el)} × {ca:g}", 3 * mlp_el * ca))
    elif model.activation == "gelu_new":
        # NewGELUActivation is plain tensor code: pow, tanh and two multiplies each keep a
        # tensor; under autocast pow runs in float32 (it is on autocast's float32 list).
        per = {"fp32": 16.0, "mixed": 14.0, "pure": 8.0}[ctx.mode]
        items.append(Term("fc output and GELU (tanh form) intermediates", f"N·I × {per:g}", mlp_el * per))
    else:
        items.append(Term("fc output (activation input)", f"N·I × {ca:g}", mlp_el * ca))
    if ctx.saves("down_proj"):
        if ctx.mode == "pure" and not ctx.trainable:
            items.append(Term("down-projection input cast to float32 (adapter)", "N·I × 4", mlp_el * 4))
        else:
            items.append(Term("down-projection input", f"N·I × {ca:g} = {sci(mlp_el)} × {ca:g}", mlp_el * ca))
    if model.dropout:
        items.append(Term("residual dropout mask", "N·d × 1", n * d))
    if model.norms_per_layer == 4:
        items += _norm(model, ctx, "post-MLP norm", [])
    if model.num_experts > 1:
        items.append(Term("router logits (float32)", "N·E × 4", n * model.num_experts * 4))
    if ctx.lora:
        shapes = model.linear_shapes()
        rank_el = sum(n * plan.lora.rank for nm in ctx.lora if nm in shapes)
        ab = 2.0 if ctx.mode == "mixed" else 4.0
        items.append(Term("LoRA A outputs (kept for B)", f"{len(ctx.lora)} × N·r × {ab:g}", rank_el * ab))
    return LayerActs(tuple(items))


def needs_mask(plan: Plan) -> bool:
    """transformers builds an explicit mask once the sequence reaches a sliding window."""
    model = plan.model
    return model.sliding_window is not None and plan.workload.seq_len >= model.sliding_window


def sdpa_kernel(plan: Plan) -> str:
    """The kernel PyTorch's SDPA picks on an A100/H100 (sdp_utils.cpp, priority order
    flash → memory-efficient → math): flash needs 16-bit inputs, no mask and head width
    ≤ 256 and handles grouped-query heads; memory-efficient takes float32 too but not
    grouped-query heads; anything else falls back to math. transformers passes
    grouped-query heads with enable_gqa when no mask is needed, else repeats k and v."""
    if plan.attention is Attention.EAGER:
        return "eager"
    model = plan.model
    masked = needs_mask(plan)
    sixteen = plan.precision is not Precision.FP32
    if plan.attention is Attention.FLASH or (sixteen and not masked and model.head_dim <= 256):
        return "flash"
    gqa = model.num_kv_heads != model.num_heads and not masked
    if not gqa and model.head_dim % (4 if not sixteen else 8) == 0:
        return "efficient"
    return "math"


def attention_backward_workspace(plan: Plan) -> float:
    """Scratch the fused attention backward kernels allocate (FlashAttention-2 mha_bwd:
    softmax_d [B,H,⌈S⌉128] and dq_accum [B,⌈S⌉128,H,⌈hd⌉32] in float32, plus k/v gradients
    expanded to every head for grouped-query; the memory-efficient backward: delta
    [B,H,S] float32 and, in 16 bits, a float32 dq accumulator)."""
    model = plan.model
    b, s, h, hd = plan.workload.micro_batch, plan.workload.seq_len, model.num_heads, model.head_dim
    kernel = sdpa_kernel(plan)
    ca = dtypes_for(plan).compute
    if kernel == "flash":
        s128 = -(-s // 128) * 128
        hd32 = -(-hd // 32) * 32 if hd <= 192 else 256
        total = float(b * h * s128 * 4 + b * s128 * h * hd32 * 4)
        if model.num_kv_heads != h:
            total += 2 * b * s * h * hd * ca
        return float(total)
    if kernel == "efficient":
        return float(b * h * s * 4 + (b * s * h * hd * 4 if ca == 2 else 0))
    return 0.0


@dataclass(frozen=True)
class LossMemory:
    forward: list[Term]  # live at the end of the forward pass (logits, their float32 copy, log-softmax)
    backward: list[Term]  # live at the start of the backward pass


def loss_memory(plan: Plan) -> LossMemory:
    """The logits and the cross-entropy, as transformers' ForCausalLMLoss computes it.

    The forward keeps the logits (16 bits under autocast), their float32 upcast and the
    float32 log-softmax the backward needs. The training loop drops the model output before
    ``backward()`` (as the HF Trainer does), so the backward starts with the log-softmax,
    the gradient flowing into it and the gradient it produces: three float32 N·V tensors.
    """
    model = plan.model
    n = plan.workload.micro_batch * plan.workload.seq_len
    v = model.vocab_size
    nv = n * v
    if plan.chunked_loss:
        chunk = -(-nv // 8)
        fwd = [Term("loss chunk: logits and log-softmax (float32), 1/8 of N·V", "2 × (N·V/8) × 4", chunk * 8)]
        bwd = [Term("loss chunk gradients (float32), 1/8 of N·V", "3 × (N·V/8) × 4", chunk * 12)]
        return LossMemory(fwd, bwd)
    ca = dtypes_for(plan).compute
    fwd = [Term("logits", f"N·V × {ca:g} = {sci(nv)} × {ca:g}", nv * ca)]
    if model.final_softcap:
        fwd.append(Term("soft-capped logits (tanh, kept)", f"N·V × {ca:g}", nv * ca))
    if ca == 2:
        fwd.append(Term("logits upcast to float32", f"N·V × 4 = {sci(nv)} × 4", nv * 4))
    fwd.append(Term("log-softmax kept for the backward (float32)", f"N·V × 4 = {sci(nv)} × 4", nv * 4))
    bwd = [
        Term("log-softmax kept for the backward (float32)", f"N·V × 4 = {sci(nv)} × 4", nv * 4),
        Term("gradient into the log-softmax (float32)", f"N·V × 4 = {sci(nv)} × 4", nv * 4),
        Term("gradient of the logits (float32)", f"N·V × 4 = {sci(nv)} × 4", nv * 4),
    ]
    if model.final_softcap:
        bwd.append(Term("soft-capped logits (tanh, kept)", f"N·V × {ca:g}", nv * ca))
    return LossMemory(fwd, bwd)


def _outside_blocks(plan: Plan, dt: Dtypes) -> list[Term]:
    """Saved tensors outside the blocks: embedding dropout, the final norm and its reader."""
    model = plan.model
    n = plan.workload.micro_batch * plan.workload.seq_len
    d = model.hidden_size
    head_trains = plan.method is Method.FULL or (plan.method is Method.FROZEN and not model.tie_embeddings)
    ctx = _context(plan, plan.method in (Method.FULL, Method.FROZEN), ())
    head_ctx = replace(ctx, trainable=head_trains)
    readers = _consumer_inputs(head_ctx, d, ("lm_head",), False, "final norm output (head input)")
    items = _norm(model, ctx, "final norm", readers)
    if model.dropout:
        items.append(Term("embedding dropout mask", "N·d × 1", n * d))
    if needs_mask(plan) and sdpa_kernel(plan) == "efficient":
        s = plan.workload.seq_len
        mask = plan.workload.micro_batch * s * s * dt.compute
        items.append(Term("sliding-window mask kept by the attention kernel", f"B·S² × {dt.compute:g}", mask))
    return items


def autocast_copies(plan: Plan) -> float:
    """Elements of the 16-bit weight copies autocast makes and autograd keeps until the backward."""
    model = plan.model
    per_layer = model.matmul_params() // model.num_layers
    layers = model.num_layers - (plan.frozen_layers if plan.method is Method.FROZEN else 0)
    return (layers * per_layer + model.vocab_size * model.hidden_size) * model.params_scale


def training_breakdown(plan: Plan, counts: ParamCounts) -> Breakdown:
    model = plan.model
    dt = dtypes_for(plan)
    shards = plan.hardware.gpu_count
    stage = plan.hardware.sharding
    notes: list[str] = []

    weights = weight_terms(plan, counts, dt)
    copies: list[Term] = []
    if dt.mixed and plan.method is not Method.QLORA:
        el = autocast_copies(plan)
        copies.append(Term("16-bit working copies of matmul weights (autocast)", f"{sci(el)} × 2 B", el * 2))
    gbytes = trainable_bytes_per_param(plan, dt)
    grads = [Term("gradients", f"T × {gbytes:g} B = {sci(counts.trainable)} × {gbytes:g} B", counts.trainable * gbytes)]
    optim = optimizer_terms(plan, counts, dt)

    if stage is not Sharding.NONE and shards > 1:

        def shard(terms: list[Term]) -> list[Term]:
            return [Term(f"{t.label} ÷ {shards} GPUs", f"({t.formula}) ÷ {shards}", t.bytes / shards) for t in terms]

        optim = shard(optim)
        if stage in (Sharding.ZERO2, Sharding.ZERO3):
            grads = shard(grads)
        if stage is Sharding.ZERO3:
            gathered = 2 * model.layer_params() * dt.base
            weights = shard(weights)
            weights.append(
                Term("two gathered blocks (prefetch)", f"2 × {sci(model.layer_params())} × {dt.base:g} B", gathered)
            )

    # Activations: every trainable block's saved tensors, or with checkpointing only the
    # block inputs plus one block recomputed at a time in the backward.
    trainable_layers = model.num_layers - plan.frozen_layers if plan.method is Method.FROZEN else model.num_layers
    block = layer_activations(plan, trainable_block=plan.method in (Method.FULL, Method.FROZEN))
    n = plan.workload.micro_batch * plan.workload.seq_len
    block_input = n * model.hidden_size * dt.residual
    outside = _outside_blocks(plan, dt)
    if plan.checkpointing:
        # Every checkpointed block holds on to its input, frozen blocks included (measured:
        # the non-reentrant checkpoint keeps its arguments even when nothing needs a gradient).
        layers = model.num_layers
        kept = [
            Term(
                "block inputs kept by checkpointing",
                f"L × N·d × {dt.residual:g} = {layers} × {sci(n * model.hidden_size)} × {dt.residual:g}",
                layers * block_input,
            )
        ]
        recomputed = [Term("one block recomputed in the backward", "Σ of one block's saved tensors", block.bytes)]
    else:
        kept = [
            Term(
                f"{trainable_layers} blocks × saved tensors per block",
                f"{trainable_layers} × {gb(block.bytes)} GB",
                trainable_layers * block.bytes,
            )
        ]
        recomputed = []
    loss = loss_memory(plan)
    i_el = n * model.intermediate_size
    ca = dtypes_for(plan).compute
    layer_grads = Term("gradients flowing through a block's MLP", f"3 × N·I × {ca:g}", 3 * i_el * ca)
    head_trains = plan.method is Method.FULL or (plan.method is Method.FROZEN and not model.tie_embeddings)
    head_grad = []
    if head_trains:
        vd = model.vocab_size * model.hidden_size
        head_grad = [Term("output-head gradient", f"V·d × {gbytes:g}", vd * gbytes)]

    w_bucket = make_bucket(BucketKey.WEIGHTS, weights + copies)
    w_backward = w_bucket
    copies_block = None
    if copies:
        per_layer = model.stored_matmul_params() // model.num_layers
        copies_block = Term("16-bit copies of one block's weights (autocast)", f"{sci(per_layer)} × 2 B", per_layer * 2)
    if copies and plan.checkpointing:
        # Checkpointed blocks keep nothing from the forward, so their autocast copies die
        # with the autocast cache when the forward ends; only the head's copy stays, and
        # the block being recomputed makes its own.
        vd = model.vocab_size * model.hidden_size
        per_layer = model.stored_matmul_params() // model.num_layers
        w_backward = make_bucket(
            BucketKey.WEIGHTS,
            [
                *weights,
                Term("16-bit copy of the output head (autocast)", f"V·d × 2 = {sci(vd)} × 2 B", vd * 2),
                Term("16-bit copies of the recomputed block", f"{sci(per_layer)} × 2 B", per_layer * 2),
            ],
        )
    workspace = attention_backward_workspace(plan)
    if workspace:
        layer_grads = Term(
            "gradients through a block + attention backward workspace",
            f"3 × N·I × {ca:g} + kernel scratch",
            layer_grads.bytes + workspace,
        )
    o_bucket = make_bucket(BucketKey.OPTIMIZER, optim)
    g_bucket = make_bucket(BucketKey.GRADIENTS, grads)
    accumulating = plan.workload.grad_accum > 1
    g_held = g_bucket if accumulating else make_bucket(BucketKey.GRADIENTS, [])
    fwd = Phase(
        "forward + loss",
        (w_bucket, g_held, o_bucket, make_bucket(BucketKey.ACTIVATIONS, kept + outside + loss.forward)),
        "end of the forward pass: every saved activation plus the logits and the loss",
    )
    bwd_start = Phase(
        "backward",
        (w_backward, g_held, o_bucket, make_bucket(BucketKey.ACTIVATIONS, kept + outside + loss.backward)),
        "start of the backward pass: activations still held, the loss gradient being formed",
    )
    bwd_block = Phase(
        "backward",
        (
            w_backward,
            g_bucket if accumulating else make_bucket(BucketKey.GRADIENTS, head_grad),
            o_bucket,
            make_bucket(BucketKey.ACTIVATIONS, kept + outside + recomputed + [layer_grads]),
        ),
        "backward through the last block: its activations (recomputed with checkpointing) and gradients",
    )
    # The end of the backward. While the first trainable block runs its backward every
    # other gradient exists and the block's own tensors are still held; the embedding
    # gradient is formed last. A tied embedding is also the output head, whose gradient
    # already exists: AccumulateGrad adds the two out of place, so three V·d gradients
    # coexist for a moment.
    end_weights = make_bucket(BucketKey.WEIGHTS, weights + ([copies_block] if copies_block else []))
    embed_grad = model.embedding_params() * gbytes if plan.method is Method.FULL else 0.0
    first_block = make_bucket(
        BucketKey.ACTIVATIONS, [Term("the first block's saved tensors", "Σ of one block", block.bytes), layer_grads]
    )
    before_embedding = [*grads, Term("less the embedding gradient, formed last", "−V·d", -embed_grad)]
    bwd_first = Phase(
        "backward",
        (end_weights, make_bucket(BucketKey.GRADIENTS, before_embedding), o_bucket, first_block),
        "end of the backward pass: every other gradient formed, the first block's tensors still held",
    )
    tied_extra = []
    if embed_grad and model.tie_embeddings:
        tied_vd = model.vocab_size * model.hidden_size * gbytes
        tied_extra = [Term("tied embedding: head and embedding gradients summed out of place", "2 × V·d", 2 * tied_vd)]
    bwd_embed = Phase(
        "backward",
        (
            make_bucket(BucketKey.WEIGHTS, weights),
            make_bucket(BucketKey.GRADIENTS, grads + tied_extra),
            o_bucket,
            make_bucket(BucketKey.ACTIVATIONS, []),
        ),
        "end of the backward pass: the embedding gradient formed",
    )
    bwd_end = max((bwd_first, bwd_embed), key=lambda p: p.allocated_bytes)
    bwd = max((bwd_start, bwd_block, bwd_end), key=lambda p: p.allocated_bytes)
    temp = optimizer_step_temporary(plan, counts, dt)
    opt_phase = Phase(
        "optimizer step",
        (
            make_bucket(BucketKey.WEIGHTS, weights),
            g_bucket,
            make_bucket(BucketKey.OPTIMIZER, optim + ([temp] if temp else [])),
            make_bucket(BucketKey.ACTIVATIONS, []),
        ),
        "optimizer step: every gradient, the state, and the step's temporaries",
    )
    phases = (fwd, bwd, opt_phase)
    peak_phase = max(phases, key=lambda p: p.allocated_bytes)
    peak = peak_phase.allocated_bytes
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
    summary = " + ".join(gb(b.bytes) for b in peak_phase.buckets) + f" = {gb(peak)} GB at the {peak_phase.name}"
    return Breakdown(phases=phases, overhead=overhead, summary_formula=summary, notes=tuple(notes))
