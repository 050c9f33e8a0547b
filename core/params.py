"""How many parameters a plan stores and trains."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from core.memo import fills_fields, last_answer
from core.model import HEAD_NAME, KeptLinears, kept_linears, parse_skip_modules
from core.plan import (
    VBLORA_NUM_VECTORS,
    VBLORA_VECTOR_LENGTH,
    Accounting,
    Method,
    Optimizer,
    Plan,
    RoadVariant,
)

# Enum members this module's hot paths compare with, read from their classes once: on Python 3.11 each
# ``Class.MEMBER`` read goes through EnumType.__getattr__'s slot, ~0.15 µs (core.plan's note; h74speed).
_ACCOUNTING_LESSON: Final = Accounting.LESSON
_METHOD_DORA: Final = Method.DORA
_METHOD_FROZEN: Final = Method.FROZEN
_METHOD_IA3: Final = Method.IA3
_METHOD_LN_TUNING: Final = Method.LN_TUNING
_METHOD_PREFIX_TUNING: Final = Method.PREFIX_TUNING
_METHOD_P_TUNING: Final = Method.P_TUNING
_METHOD_TRAINABLE_TOKENS: Final = Method.TRAINABLE_TOKENS
_OPTIMIZER_LORA_FA: Final = Optimizer.LORA_FA


@fills_fields
@dataclass(frozen=True)
class ParamCounts:
    total: int  # every parameter of the base model
    active: int  # parameters one token passes through (differs for mixture-of-experts)
    trainable: int  # parameters that get gradients and optimizer state
    adapter: int  # LoRA (and DoRA magnitude) parameters, 0 without adapters; ``trainable`` but LoRA-FA's lora_A
    frozen_base: int  # base parameters without gradients


def frozen_params(plan: Plan) -> int:
    """Embeddings plus the bottom ``frozen_layers`` blocks (the head stays trainable unless tied)."""
    model = plan.model
    return model.embedding_params() + plan.frozen_layers * model.layer_params()


def litgpt_adapter_tensors(plan: Plan) -> tuple[tuple[int, int], ...]:
    """Every tensor LitGPT's Adapter / Adapter v2 trains, the whole model's, as (elements, how many)
    (core.model.ModelSpec.litgpt_prompt_tensors, litgpt_v2_block_tensors, litgpt_v2_root_tensors): one
    block's tensors with their block count, never one entry per tensor (a model of thousands of blocks
    stays a handful of entries)."""
    model, lora = plan.model, plan.lora
    adapted = max(0, model.num_layers - lora.adapter_start_layer)
    one_block = model.litgpt_prompt_tensors(lora.adapter_prompt_length, model.num_layers - 1)
    groups = [(n, adapted) for n in one_block]
    if plan.method is Method.ADAPTER_V2:
        groups += [(n, copies * model.num_layers) for n, copies in model.litgpt_v2_block_tensors()]
        groups += [(n, 1) for n in model.litgpt_v2_root_tensors()]
    return tuple((n, c) for n, c in groups if c)


def bnb_kept(plan: Plan) -> KeptLinears:
    """The linears a bitsandbytes base keeps in 16 bits (core.model.kept_linears: transformers'
    llm_int8_skip_modules rule). Unsloth's loader adds its SKIP_QUANTIZATION_MODULES, ``lm_head``
    first, to the list (unslothai/unsloth-zoo ce232d6, unsloth_zoo/peft_utils.py, cited in
    docs/UNSLOTH.md), so under Unsloth the head stays 16-bit whatever the list says."""
    keys = parse_skip_modules(plan.bnb_skip_modules)
    if keys and plan.unsloth and HEAD_NAME not in keys:
        keys += (HEAD_NAME,)
    return kept_linears(plan.model, keys, not plan.bnb_16bit_experts)


def bnb_16bit_experts(plan: Plan) -> int:
    """The routed experts' weights a bitsandbytes base leaves unquantised (Plan.bnb_16bit_experts: 3-D parameters,
    which transformers' quantizer does not replace): every MoE layer's experts' projection matrices, as
    ModelSpec.matmul_params counts them (scaled with a typed P). 0 where the experts are quantised. Measured
    (tests/data/moe_bnb/bnb_transformers_5.25.0.json): a tiny Qwen3-MoE's ``mlp.experts.gate_up_proj`` /
    ``down_proj`` stay bfloat16 under NF4 and int8 while its attention is Params4bit / Int8Params."""
    if not plan.bnb_16bit_experts:
        return 0
    model = plan.model
    per_expert = (3 if model.gated_mlp else 2) * model.hidden_size * model.intermediate_size
    routed = round(model.moe_layers * model.num_experts * per_expert * model.params_scale)
    return min(routed, model.stored_matmul_params())


def quantised_block_params(plan: Plan) -> int:
    """The blocks' parameters a QLoRA base stores quantised: their projection matrices
    (bitsandbytes replaces the ``nn.Linear`` modules, and transformers' ``BitsAndBytesConfig`` keeps
    ``lm_head`` out; the norms and the embedding are no linear layers), less those the plan's
    ``bnb_skip_modules`` keeps in 16 bits (:func:`bnb_kept`) and routed experts held as 3-D parameters
    (:func:`bnb_16bit_experts`). 0 for other methods. LitGPT
    quantises its head as well (core.training.storage.litgpt_quantised_head): a root parameter, not
    a block's; so does transformers under a skip list that does not name it (:func:`bnb_quantised_head`)."""
    if not plan.quantised_base:
        return 0
    model = plan.model
    kept = round(bnb_kept(plan).elements * model.params_scale)
    return max(0, model.stored_matmul_params() - kept - bnb_16bit_experts(plan))


def bnb_quantised_head(plan: Plan) -> int:
    """The head's weights transformers quantises when ``llm_int8_skip_modules`` is given and does not
    name it: the list replaces the default one, the head (core.model, SKIP rule). 0 otherwise, and
    for LitGPT's loop, whose head core.training.storage.litgpt_quantised_head counts."""
    if not plan.quantised_base or plan.litgpt or bnb_kept(plan).head_kept:
        return 0
    model = plan.model
    return min(round(model.head_params() * model.params_scale), model.total_params() - model.stored_matmul_params())


def prompt_tensor_sizes(plan: Plan) -> list[int]:
    """Elements of each tensor PEFT's prompt learning trains, all outside the blocks (huggingface/peft
    51c2ff66): prompt tuning's ``PromptEmbedding.embedding``, ``nn.Embedding(num_virtual_tokens ×
    num_transformer_submodules, token_dim)`` (src/peft/tuners/prompt_tuning/model.py; one submodule for a
    causal LM, token_dim the model's width); P-tuning's ``PromptEncoder`` (src/peft/tuners/p_tuning/model.py)
    with the MLP head: the same embedding, then Linear(d, h), ReLU, Linear(h, h), ReLU, Linear(h, d), each
    with a bias, h = encoder_hidden_size, which ``_prepare_prompt_learning_config`` (src/peft/utils/other.py)
    sets to token_dim when not given. The results files' num_trainable_params: 614,400 (200 × 3,072) and
    28,382,208 (20 × 3,072 + 3 × (3,072² + 3,072)) for Llama-3.2-3B."""
    model = plan.model
    d = model.hidden_size
    if plan.method is _METHOD_PREFIX_TUNING:
        # Prefix tuning's ``PrefixEncoder`` (src/peft/tuners/prefix_tuning/model.py), prefix_projection False
        # (PrefixTuningConfig's default, the only layout modelled): ``nn.Embedding(num_virtual_tokens,
        # num_layers * 2 * token_dim)``, token_dim the keys' width, num_key_value_heads × head_dim, under
        # grouped-query attention (``_prepare_prompt_learning_config``, "For grouped-query attention, see #1901").
        # prefixtuning--llama-3.2-3B-lr_0.001.json: token_dim 1024, "num_trainable_params": 11468800
        # (200 × 28 × 2 × 1,024).
        return [plan.lora.virtual_tokens * model.num_layers * 2 * model.kv_width]
    sizes = [plan.lora.virtual_tokens * d]
    if plan.method is _METHOD_P_TUNING:
        sizes += [d * d, d, d * d, d, d * d, d]
    return sizes


def ln_tensor_sizes(plan: Plan) -> list[int]:
    """Elements of each tensor PEFT's LN tuning trains (huggingface/peft 51c2ff66 src/peft/tuners/ln_tuning/
    layer.py ``LNTuningLayer.update_layer``: ``deepcopy(layer)`` of every targeted norm, the copy trains and
    the original stays, frozen; core.plan.LN_TUNING_FAMILIES: every norm of each block and the final one).
    A LayerNorm's weight and bias, an RMSNorm's weight. ln_tuning--llama-3.2-3B-default.json:
    "num_trainable_params": 175104 = (2 × 28 + 1) × 3,072."""
    model = plan.model
    per_norm = [model.hidden_size] * (2 if model.norm == "layernorm" else 1)
    return per_norm * (model.norms_per_layer * model.num_layers + 1)


def lokr_factorization(dimension: int, factor: int = -1) -> tuple[int, int]:
    """PEFT's ``factorization`` (huggingface/peft 51c2ff66 src/peft/tuners/lokr/layer.py), line for line:
    ``(factor, dimension // factor)`` when a positive factor divides the dimension; else the divisor pair
    found by growing m while m + n shrinks and m stays at most the factor (-1: no bound, near the square
    root), smaller first. factorization(128, 4) = (4, 32), factorization(256) = (16, 16) (its docstring)."""
    if factor > 0 and dimension % factor == 0:
        return factor, dimension // factor
    if factor == -1:
        factor = dimension
    m, n = 1, dimension
    length = m + n
    while m < n:
        new_m = m + 1
        while dimension % new_m != 0:
            new_m += 1
        new_n = dimension // new_m
        if new_m + new_n > length or new_m > factor:
            break
        m, n = new_m, new_n
    return (n, m) if m > n else (m, n)


def lycoris_matrix_tensors(plan: Plan, fan_in: int, fan_out: int) -> tuple[list[int], int]:
    """Elements of each tensor PEFT's LoHa or LoKr trains on one (out × in) nn.Linear, and the elements of
    the intermediate product autograd keeps beside them (huggingface/peft 51c2ff66):

    LoHa (src/peft/tuners/loha/layer.py ``create_adapter_parameters``, Linear): hada_w1_a (out, r), hada_w1_b
    (r, in), hada_w2_a (out, r), hada_w2_b (r, in); the Tucker cores t1, t2 exist for convolutions only.
    ``HadaWeight.forward`` saves those four leaves and recomputes both products in its backward: 0 kept.

    LoKr (src/peft/tuners/lokr/layer.py ``update_layer``, Linear): out = a·b, in = c·d by ``factorization``
    with ``decompose_factor``; w1 (a × c) trains whole unless ``decompose_both`` and r < max(a, c) / 2
    (decompose_both is not modelled: PEFT's default False); w2 (b × d) trains whole unless r < max(b, d) / 2,
    then as lokr_w2_a (b, r) and lokr_w2_b (r, d). ``make_kron`` runs torch.kron(w1, w2), whose multiply
    keeps both operands for the gradients: w2 built from its factors (b·d) is kept; a whole w2 is the leaf.
    lokr--llama-3.2-3B-rank32-factor4 results file: "num_trainable_params": 2294656 = 28 × (q: 16 + 2 × 768
    × 32, v: 16 + 256 × 32 + 32 × 768)."""
    r = plan.lora.rank
    if plan.method is Method.LOHA:
        return [fan_out * r, r * fan_in, fan_out * r, r * fan_in], 0
    out_a, out_b = lokr_factorization(fan_out, plan.lora.lokr_factor)
    in_c, in_d = lokr_factorization(fan_in, plan.lora.lokr_factor)
    sizes = [out_a * in_c]
    if r < max(out_b, in_d) / 2:
        return [*sizes, out_b * r, r * in_d], out_b * in_d
    return [*sizes, out_b * in_d], 0


def vera_tensor_sizes(plan: Plan, dense: bool = False) -> list[int]:
    """Elements of each tensor PEFT's VeRA trains in one block: per adapted (out × in) nn.Linear,
    vera_lambda_d (r) and vera_lambda_b (out) (huggingface/peft 51c2ff66 src/peft/tuners/vera/layer.py
    ``update_layer``: ``torch.randn(r)``, ``torch.ones(self.out_features)``). vera--llama-3.2-3B-default
    results file: "num_trainable_params": 129024 = 28 × (q: 256 + 3,072, v: 256 + 1,024)."""
    r = plan.lora.rank
    sizes: list[int] = []
    for _, fan_out, copies in plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense):
        sizes += [r, fan_out] * copies
    return sizes


def miss_tensor_sizes(plan: Plan, dense: bool = False) -> list[int]:
    """Elements of the tensor PEFT's MiSS trains per adapted (out × in) nn.Linear of one block: miss_block (r ×
    out) under MissConfig's default init_weights True (huggingface/peft 51c2ff66 src/peft/tuners/miss/layer.py
    ``update_layer``: ``nn.Parameter(torch.zeros(r, self.out_features))``; an input width not a multiple of r is
    padded in the forward, the block stays r × out). miss--llama-3.2-3B-default results file:
    "num_trainable_params": 7340032 = 28 × 64 × (q: 3,072 + v: 1,024)."""
    r = plan.lora.rank
    sizes: list[int] = []
    for _, fan_out, copies in plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense):
        sizes += [r * fan_out] * copies
    return sizes


def fourierft_tensor_sizes(plan: Plan, dense: bool = False) -> list[int]:
    """Elements of the tensor PEFT's FourierFT trains per adapted nn.Linear of one block: fourierft_spectrum, n
    (``lora.rank``, FourierFTConfig.n_frequency) per target (huggingface/peft 51c2ff66 src/peft/tuners/fourierft/
    layer.py ``update_layer``: ``nn.Parameter(torch.randn(n_frequency))``; its ``indices``, 2 × n int64, are a plain
    dict entry, no parameter or buffer). fourierft--llama-3.2-3B-default results file: "num_trainable_params": 56000
    = 28 × 2 targets × 1,000."""
    n = plan.lora.rank
    return [n * copies for _, _, copies in plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense)]


# RoadConfig.variant's trained angles (and as many scales) per output feature (huggingface/peft 51c2ff66
# src/peft/tuners/road/layer.py ``update_layer``: road_1 ``out_features // 2``, road_2 ``out_features``, road_4
# ``out_features * 2``), as (numerator, denominator).
_ROAD_SHARE: Final = {RoadVariant.ROAD_1: (1, 2), RoadVariant.ROAD_2: (1, 1), RoadVariant.ROAD_4: (2, 1)}


def road_tensor_sizes(plan: Plan, dense: bool = False) -> list[int]:
    """Elements of the tensors PEFT's RoAd trains per adapted nn.Linear of one block: road_theta and road_alpha,
    each out/2, out or 2·out by variant (huggingface/peft 51c2ff66 src/peft/tuners/road/layer.py ``update_layer``).
    road--llama-3.2-3B-lr_0.001 results file (variant road_2): "num_trainable_params": 229376 = 28 × 2 × (q: 3,072 +
    v: 1,024)."""
    num, den = _ROAD_SHARE[plan.lora.road_variant]
    sizes: list[int] = []
    for _, fan_out, copies in plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense):
        sizes += [fan_out * num // den] * (2 * copies)
    return sizes


def vblora_tensor_sizes(plan: Plan, dense: bool = False) -> list[int]:
    """Elements of the tensors PEFT's VB-LoRA trains per adapted nn.Linear of one block: vblora_logits_A (r, in / L,
    V) and vblora_logits_B (out / L, r, V), L the bank's vector length and V its number of vectors (huggingface/peft
    51c2ff66 src/peft/tuners/vblora/layer.py ``update_layer``; core.plan.VBLORA_VECTOR_LENGTH, VBLORA_NUM_VECTORS).
    The bank itself trains once for the model (:func:`vblora_bank_elements`)."""
    r, length, vectors = plan.lora.rank, VBLORA_VECTOR_LENGTH, VBLORA_NUM_VECTORS
    sizes: list[int] = []
    for fan_in, fan_out, copies in plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense):
        sizes += [r * (fan_in // length) * vectors, (fan_out // length) * r * vectors] * copies
    return sizes


def vblora_bank_elements(plan: Plan) -> int:
    """Elements of VB-LoRA's shared vector bank, V × L, one trained parameter for the whole model (huggingface/peft
    51c2ff66 src/peft/tuners/vblora/model.py ``_init_vblora_vector_bank``: ``torch.zeros(config.num_vectors,
    config.vector_length)``, a ParameterDict entry every layer reads); 0 for every other method.
    vblora--llama-3.2-3B-default results file: "num_trainable_params": 1212416 = 28 × (q: 12,288 + 12,288, v: 12,288
    + 4,096) + 256 × 256."""
    return VBLORA_NUM_VECTORS * VBLORA_VECTOR_LENGTH if plan.vblora else 0


def randlora_bases(fan_in: int, fan_out: int, r: int) -> int:
    """RandLoRA's number of bases on one (out × in) linear: ceil(min(in, out) / r), "full rank" (huggingface/peft
    51c2ff66 src/peft/tuners/randlora/layer.py ``update_layer``: ``num_bases = min(in, out) / r``, rounded up)."""
    return -(-min(fan_in, fan_out) // r)


def randlora_tensor_sizes(plan: Plan, dense: bool = False) -> list[int]:
    """Elements of the tensors PEFT's RandLoRA trains per adapted nn.Linear of one block: randlora_lambda (r ×
    bases) and randlora_gamma (bases × min(in, out)) (huggingface/peft 51c2ff66 src/peft/tuners/randlora/layer.py
    ``update_layer``). randlora--llama-3.2-3B-default results file: "num_trainable_params": 9289728 = 28 × (q: 32 ×
    96 + 96 × 3,072, v: 32 × 32 + 32 × 1,024)."""
    r = plan.lora.rank
    sizes: list[int] = []
    for fan_in, fan_out, copies in plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense):
        bases = randlora_bases(fan_in, fan_out, r)
        sizes += [r * bases, bases * min(fan_in, fan_out)] * copies
    return sizes


def randlora_projection_elements(plan: Plan) -> int:
    """Elements of RandLoRA's shared frozen random bases, one pair for the whole model (huggingface/peft 51c2ff66
    src/peft/tuners/randlora/model.py ``_find_dim``, ``_init_randlora_A_randlora_B``): randlora_A (r, 1, min) and
    randlora_B (max, bases, r), min and max the smaller and larger of the largest out and the largest in over the
    targets, bases ceil(min / r); buffers every layer slices (views). 0 for every other method."""
    sides = _largest_sides(plan) if plan.randlora else None
    if sides is None:
        return 0
    low, high, r = min(sides), max(sides), plan.lora.rank
    return r * low + high * randlora_bases(low, high, r) * r


def _largest_sides(plan: Plan) -> tuple[int, int] | None:
    """(largest in, largest out) over the targets' matrices, PEFT's ``_find_dim`` for the shared projections of VeRA
    and RandLoRA (huggingface/peft 51c2ff66 src/peft/tuners/vera/model.py, randlora/model.py); None without one."""
    shapes = plan.model.adapted_shapes(plan.lora.targets, plan.linear_experts)
    if not shapes:
        return None
    return max(fan_in for fan_in, _ in shapes), max(fan_out for _, fan_out in shapes)


def shira_tensor_sizes(plan: Plan, dense: bool = False) -> list[int]:
    """Elements of the tensor PEFT's SHiRA trains per adapted nn.Linear of one block: shira_weight, r·(in + out)
    values of the weight's entries the mask picks (huggingface/peft 51c2ff66 src/peft/tuners/shira/layer.py
    ``update_layer``: ``num_shira_weight = r * (self.in_features + self.out_features)``).
    shira--llama-3.2-3B-lr_0.0003-random_seed_42 results file: "num_trainable_params": 9175040 = 28 × 32 × (q: 6,144
    + v: 4,096), LoRA r 32's count."""
    r = plan.lora.rank
    return [
        r * (fan_in + fan_out) * copies
        for fan_in, fan_out, copies in plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense)
    ]


def shira_index_elements(plan: Plan, dense: bool = False) -> int:
    """int32 elements of SHiRA's index tensors in one block: 2 × r·(in + out) a target, a plain dict entry
    (``shira_indices``) moved to the base weight's device at ``update_layer`` (huggingface/peft 51c2ff66
    src/peft/tuners/shira/layer.py: ``torch.cat([...]).to(torch.int)``, ``.to(self.base_layer.weight.device)``), kept
    on the GPU for the run; 0 for every other method."""
    return 2 * sum(shira_tensor_sizes(plan, dense)) if plan.shira else 0


def adalora_tensor_sizes(plan: Plan, dense: bool = False) -> list[int]:
    """Elements of each tensor PEFT's AdaLoRA trains in one block: per adapted (out × in) nn.Linear, lora_A
    (r × in), lora_E (r × 1) and lora_B (out × r) at r = init_r (huggingface/peft 51c2ff66
    src/peft/tuners/adalora/layer.py ``AdaLoraLayer.update_layer``; model.py ``_create_and_replace`` passes
    ``lora_config.init_r``); ``ranknum`` (one float) is a parameter with requires_grad False. The RankAllocator
    masks lora_E to the budget and never resizes (``resize_modules_by_rank_pattern`` is left commented out in
    ``update_and_allocate``), so these are the sizes for the whole run. adalora--llama-3.2-3B-rank32 results
    file: "num_trainable_params": 18353664 = 28 × (q: 64·3,072 + 64 + 3,072·64, v: 64·3,072 + 64 + 1,024·64)."""
    r = plan.lora.rank
    sizes: list[int] = []
    for fan_in, fan_out, copies in plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense):
        sizes += [r * fan_in, r, fan_out * r] * copies
    return sizes


def vera_projection_elements(plan: Plan) -> int:
    """Elements of VeRA's shared frozen projections, one pair for the whole model (huggingface/peft 51c2ff66
    src/peft/tuners/vera/model.py ``_init_vera_A_vera_B``): vera_A (r × largest in) and vera_B (largest out ×
    r) over the targets (``_find_dim``), buffers every layer slices (``vera_A[:, :in]``, ``vera_B[:out, :]``:
    views, no copy); 0 for every other method."""
    sides = _largest_sides(plan) if plan.vera else None
    return plan.lora.rank * sum(sides) if sides is not None else 0


# OFTConfig's rotation (huggingface/peft 51c2ff66 src/peft/tuners/oft/config.py): ``use_cayley_neumann: bool =
# True``, ``num_cayley_neumann_terms: int = 5``. The planner models this default; read configs refuse the others.
OFT_NEUMANN_TERMS: Final = 5


def oft_neumann_bmms(terms: int = OFT_NEUMANN_TERMS) -> int:
    """The (r, b, b) batched matmuls OFTRotationModule._cayley_batch runs for R = I + 2Q + 2Q² + … (huggingface/
    peft 51c2ff66 src/peft/tuners/oft/layer.py): none up to 2 terms; else Q² = bmm(Q, Q), one bmm per pass of
    ``range(3, terms - 1)`` and a last one: max(2, terms − 2) (5 terms: Q², Q³, Q⁴)."""
    return 0 if terms <= 2 else max(2, terms - 2)


def oft_adjust(in_features: int, params: int) -> int:
    """PEFT's ``OFTLayer.adjust_oft_parameters`` (huggingface/peft 51c2ff66 src/peft/tuners/oft/layer.py), line for
    line: the divisor of ``in_features`` nearest ``params`` (the lower one on a tie), ``in_features`` when
    ``params`` is not below it. oft_adjust(3072, 100) = 96; oft_adjust(3072, 32) = 32."""
    if params >= in_features:
        return in_features
    higher = params
    while higher <= in_features and in_features % higher != 0:
        higher += 1
    lower = params
    while lower > 1 and in_features % lower != 0:
        lower -= 1
    return lower if (params - lower) <= (higher - params) else higher


def oft_blocks(plan: Plan, fan_in: int) -> tuple[int, int]:
    """(r, block size) of PEFT's OFT on one nn.Linear reading ``fan_in`` features (huggingface/peft 51c2ff66
    src/peft/tuners/oft/layer.py ``OFTLayer.update_layer``): with ``oft_block_size`` set (r 0), the block
    size moved to a divisor of in (``adjust_oft_parameters``) and r = in // block; with it 0, r moved to a
    divisor of in and block = in // r."""
    block = plan.lora.oft_block_size
    if block:
        if fan_in % block or block > fan_in:
            block = oft_adjust(fan_in, block)
        return fan_in // block, block
    r = plan.lora.rank
    if fan_in % r or r > fan_in:
        r = oft_adjust(fan_in, r)
    return r, fan_in // r


def oft_tensor_sizes(plan: Plan, dense: bool = False) -> list[int]:
    """Elements of the tensor PEFT's OFT trains per adapted nn.Linear of one block: OFTRotationModule.weight,
    (r, block·(block − 1)/2), the upper triangle of each block's skew-symmetric matrix (huggingface/peft 51c2ff66
    src/peft/tuners/oft/layer.py ``update_layer``: ``n_elements = oft_block_size * (oft_block_size - 1) // 2``;
    block_share is not modelled). oft--llama-3.2-3B-rank32 results file: "num_trainable_params": 8171520 = 28 ×
    2 targets × 32 blocks × (96 · 95 / 2) (q_proj and v_proj both read 3,072 features: blocks of 96)."""
    sizes: list[int] = []
    for fan_in, _, copies in plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense):
        r, block = oft_blocks(plan, fan_in)
        sizes += [r * (block * (block - 1) // 2)] * copies
    return sizes


def oft_index_elements(plan: Plan, dense: bool = False) -> int:
    """int64 elements of OFT's index buffers in one block: each target's OFTRotationModule registers ``rows``
    and ``cols`` of ``torch.triu_indices(block, block, 1)``, block·(block − 1)/2 each (huggingface/peft 51c2ff66
    src/peft/tuners/oft/layer.py ``OFTRotationModule.__init__``; cast_adapter_dtype casts floats only); 0 for
    every other method."""
    if not plan.oft:
        return 0
    total = 0
    for fan_in, _, copies in plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense):
        block = oft_blocks(plan, fan_in)[1]
        total += 2 * (block * (block - 1) // 2) * copies
    return total


def boft_blocks(plan: Plan, fan_in: int) -> tuple[int, int]:
    """(boft_block_num, boft_block_size) of PEFT's BOFT on one nn.Linear reading ``fan_in`` features (huggingface/
    peft 51c2ff66 src/peft/tuners/boft/layer.py ``BOFTLayer.update_layer``): the size set, num = in // size; the size
    0, num = ``lora.rank`` and size = in // num. No adjustment as OFT's: Plan._check_boft refuses what does not
    divide."""
    size = plan.lora.oft_block_size
    if size:
        return fan_in // size, size
    return plan.lora.rank, fan_in // plan.lora.rank


def boft_tensor_sizes(plan: Plan, dense: bool = False) -> list[int]:
    """Elements of the tensors PEFT's BOFT trains per adapted nn.Linear of one block, one butterfly factor: boft_R
    (1, in / b, b, b), the whole b × b of each block (``cayley_batch`` takes its skew-symmetric part), and boft_s
    (out, 1) (huggingface/peft 51c2ff66 src/peft/tuners/boft/layer.py ``update_layer``). boft--llama-3.2-3B-default
    results file: "num_trainable_params": 802816 = 28 × (768·4·4 + 3,072 + 768·4·4 + 1,024)."""
    sizes: list[int] = []
    for fan_in, fan_out, copies in plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense):
        blocks, size = boft_blocks(plan, fan_in)
        sizes += [blocks * size * size, fan_out] * copies
    return sizes


# The PEFT methods whose trained tensors in one block are their own (not LoRA's A and B): each function lists them
# for one block of the kind ``dense`` (core.model.ModelSpec.adapter_blocks), read by the adapter count here and by the
# optimizer's rules (core.training.optimizer.adapter_tensor_sizes).
BLOCK_TENSOR_SIZES: Final[dict[Method, Callable[[Plan, bool], list[int]]]] = {
    Method.MISS: miss_tensor_sizes,
    Method.VBLORA: vblora_tensor_sizes,
    Method.RANDLORA: randlora_tensor_sizes,
    Method.SHIRA: shira_tensor_sizes,
    Method.FOURIERFT: fourierft_tensor_sizes,
    Method.ROAD: road_tensor_sizes,
    Method.VERA: vera_tensor_sizes,
    Method.ADALORA: adalora_tensor_sizes,
    Method.OFT: oft_tensor_sizes,
    Method.BOFT: boft_tensor_sizes,
}


def flat_trained_sizes(plan: Plan) -> list[int] | None:
    """The trained tensors of the PEFT methods whose tensors are not one adapter per block (prompt learning,
    LN tuning, trainable tokens), listed whole for the optimizer's rules; None for every other method."""
    if plan.prompt_learning:
        return prompt_tensor_sizes(plan)
    if plan.method is _METHOD_LN_TUNING:
        return ln_tensor_sizes(plan)
    if plan.method is _METHOD_TRAINABLE_TOKENS:
        # TrainableTokensLayer's one parameter, trainable_tokens_delta, k × d (huggingface/peft 5d602fdb
        # src/peft/tuners/trainable_tokens/layer.py); its buffer of the original rows is no parameter.
        return [plan.lora.trainable_tokens * plan.model.hidden_size]
    return None


@last_answer
def param_counts(plan: Plan) -> ParamCounts:
    model = plan.model
    total = model.total_params()
    active = model.active_params()
    if plan.adapter_based:
        if plan.method is _METHOD_IA3:
            adapter = model.ia3_params(plan.lora.targets, plan.lora.ia3_feedforward, plan.linear_experts)
        elif plan.litgpt_adapter:
            adapter = sum(n * c for n, c in litgpt_adapter_tensors(plan))
        elif plan.peft_flat_trained:
            adapter = sum(flat_trained_sizes(plan) or [])
        elif plan.lycoris:
            adapter = model.over_blocks(
                lambda dense: sum(
                    sum(lycoris_matrix_tensors(plan, fan_in, fan_out)[0]) * copies
                    for fan_in, fan_out, copies in model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense)
                )
            )
        elif plan.method in BLOCK_TENSOR_SIZES:  # one block's tensors of a method of its own, over the blocks
            sizes = BLOCK_TENSOR_SIZES[plan.method]
            adapter = model.over_blocks(lambda dense: sum(sizes(plan, dense))) + vblora_bank_elements(plan)
        else:
            adapter = model.lora_params(plan.lora.rank, plan.lora.targets, plan.linear_experts)
        if plan.method is _METHOD_DORA:
            adapter += model.dora_magnitude_params(plan.lora.targets, plan.linear_experts)
        if plan.accounting is _ACCOUNTING_LESSON and plan.lesson.trainable_override:
            adapter = plan.lesson.trainable_override
        trainable = max(0, adapter - lora_fa_frozen_elements(plan))
        return ParamCounts(total=total, active=active, trainable=trainable, adapter=adapter, frozen_base=total)
    if plan.method is _METHOD_FROZEN:
        frozen = min(total, frozen_params(plan))
        trainable = total - frozen
        if plan.accounting is _ACCOUNTING_LESSON and plan.lesson.trainable_override:
            trainable = min(total, plan.lesson.trainable_override)
        return ParamCounts(total=total, active=active, trainable=trainable, adapter=0, frozen_base=total - trainable)
    return ParamCounts(total=total, active=active, trainable=total, adapter=0, frozen_base=0)


# Muon (torch.optim.Muon, torch 2.13.0 torch/optim/_muon.py) steps the blocks' 2-D weight matrices; these counts
# live here, beside the other parameter counts, so that core.training and core.parallel read one rule.
def muon_matrices(plan: Plan) -> list[tuple[int, int]]:
    """(in, out) of each 2-D weight matrix of one block that Muon steps: the attention projections (q|k|v fused or
    not), o, and the MLP's (gate and up fused or not); biases and norms are 1-D (AdamW's). Dense models only (the
    Plan refuses Muon on experts and latent attention)."""
    m = plan.model
    d, q, kv, i = m.hidden_size, m.q_width, m.kv_width, m.intermediate_size
    shapes = [(d, q + 2 * kv)] if m.fused_qkv else [(d, q), (d, kv), (d, kv)]
    shapes.append((q, d))
    if m.fused_gate_up or not m.gated_mlp:
        shapes += [(d, 2 * i if m.gated_mlp else i), (i, d)]
    else:
        shapes += [(d, i), (d, i), (i, d)]
    return shapes


def muon_layers(plan: Plan) -> int:
    """Blocks whose matrices train (frozen-layer training freezes the first ones)."""
    return plan.model.num_layers - (plan.frozen_layers if plan.method is Method.FROZEN else 0)


def muon_elements(plan: Plan) -> int:
    """Elements Muon steps, scaled with a parameter count given instead of derived."""
    model = plan.model
    n = muon_layers(plan) * sum(a * b for a, b in muon_matrices(plan))
    return round(n * model.params_scale) if model.params_override else n


def galore_shapes(plan: Plan) -> list[tuple[int, int, int]]:
    """(big, small, r) of each block matrix GaLore projects (galore-torch 1.0 galore_torch/galore_projector.py,
    proj_type "std"): a weight of out × in is projected on its smaller side, so the low-rank gradient is
    max(out, in) × r and the projector r × min(out, in); r no more than the smaller side (the SVD's
    ``full_matrices=False`` gives min(out, in) singular vectors, ``U[:, :rank]`` keeps at most that many). The targets
    are the blocks' Linear weights, muon_matrices (HF optim_target_modules ["attn", "mlp"]); the rest is plain AdamW."""
    out: list[tuple[int, int, int]] = []
    for a, b in muon_matrices(plan):
        small = min(a, b)
        out.append((max(a, b), small, min(plan.galore_rank, small)))
    return out


def galore_state_elements(plan: Plan, float32_grads: bool) -> tuple[int, int]:
    """Elements of GaLore's low-rank gradients (each moment's) and of its projectors over the trained blocks,
    scaled with a parameter count given instead of derived (as muon_elements). A float32 gradient's projector is a
    view (``Vh[:rank, :]`` or ``U[:, :rank]``, galore_projector.py get_orthogonal_matrix returns it uncast) that
    keeps the SVD's whole min(m, n) × min(m, n) factor alive; any other dtype's is cast, a copy of r × min(m, n)
    (tools/measure/galore_step_check.py: the storages measured)."""
    shapes = galore_shapes(plan)
    layers = muon_layers(plan)
    low = layers * sum(big * r for big, _, r in shapes)
    proj = layers * sum((small if float32_grads else r) * small for _, small, r in shapes)
    if plan.model.params_override:
        return round(low * plan.model.params_scale), round(proj * plan.model.params_scale)
    return low, proj


def lora_fa_frozen_elements(plan: Plan) -> int:
    """The lora_A elements PEFT's LoRA-FA freezes (huggingface/peft 5d602fdb src/peft/optimizers/lorafa.py
    ``create_lorafa_optimizer``: ``requires_grad_(False)`` on every parameter named lora_A): r·in per adapted
    matrix, the head's r·d when it is adapted; stored with the adapters, no gradient or optimizer state. 0 unless
    the plan's optimizer is LoRA-FA (Plan._check_lora_fa: LoRA and QLoRA only)."""
    if plan.optimizer is not _OPTIMIZER_LORA_FA or plan.accounting is _ACCOUNTING_LESSON:  # the lesson's T: adapters
        return 0
    model, r = plan.model, plan.lora.rank
    head = model.head_adapter_shape(plan.lora.targets)
    blocks = model.over_blocks(
        lambda dense: sum(
            r * fan_in * copies
            for fan_in, _, copies in model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense)
        )
    )
    return blocks + (r * head[0] if head else 0)


def modules_to_save_elements(plan: Plan) -> int:
    """Elements of PEFT's modules_to_save copies: V × d for each module listed, the embedding's and the head's
    (huggingface/peft 51c2ff66 src/peft/utils/other.py ``ModulesToSaveWrapper``: a ``copy.deepcopy`` of each,
    a tied model's too). The one count the trained copies' pricing (core.training.extra_trained) and their
    sharding (core.parallel.state) read."""
    setting, model = plan.lora.modules_to_save, plan.model
    copies = (1 if setting.embedding else 0) + (1 if setting.head else 0)
    return copies * model.vocab_size * model.hidden_size
