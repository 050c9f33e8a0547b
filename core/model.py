"""Transformer architecture: dimensions, parameter counts and LoRA adapter counts.

Everything here is derived from the shapes of the weight matrices a Hugging Face
implementation creates for each family (``modeling_<family>.py`` in transformers), so the
counts are exact rather than the 12·L·d² rule of thumb.

One concern past 400 lines: the spec's validation and the count of each kind of weight
(attention, dense and expert MLPs, norms, adapters) read against the same fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any, Final

from core.errors import PlanError
from core.hybrid import (
    ATTENTION,
    LAYER_CHARS,
    MIXER_NAMES,
    MLP,
    MOE,
    PARALLEL,
    PATTERN_KINDS,
    RECURRENT,
    HybridSpec,
    RecurrentMixer,
)
from core.units import finite_number

# "layernorm_nobias": a LayerNorm with a weight and no bias, in float32 by hand (Cohere's CohereLayerNorm and
# Cohere2LayerNorm: huggingface/transformers 5.25.0 src/transformers/models/cohere/modeling_cohere.py, mean and
# variance over the last dimension, ``self.weight.to(torch.float32) * hidden_states``): one d-wide tensor per norm,
# as an RMSNorm's; what autograd keeps of it in core.training.activations._norm.
NORMS: Final = ("layernorm", "rmsnorm", "layernorm_nobias")
# RMSNorm on q and k before RoPE: "" none; "head" one weight of head_dim shared by the heads
# (Qwen3Attention.q_norm, Gemma3Attention.q_norm); "projection" one weight over the whole
# projection width (Olmo2Attention.q_norm = Olmo2RMSNorm(num_heads * head_dim)); "per_head" a weight of its own
# for every head, each head normalised over head_dim (Command R+'s CohereAttention.q_norm = CohereLayerNorm((
# num_heads, head_dim)) when use_qk_norm: huggingface/transformers 5.25.0 models/cohere/modeling_cohere.py).
QK_NORMS: Final = ("", "head", "projection", "per_head")

# Canonical LoRA target names (Llama naming, as PEFT's target_modules uses them).
LORA_TARGETS: Final = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ALL_LINEAR: Final = "all-linear"
# The output head (the lm_head linear, hidden → vocabulary), one matrix outside the blocks: litgpt's
# ``lora_head: true`` (Lightning-AI/litgpt 00af8b0d litgpt/lora.py ``GPT.__init__``: ``self.lm_head =
# LoRALinear(config.n_embd, config.padded_vocab_size, r=(config.lora_r if config.lora_head else 0))``),
# torchtune's ``apply_lora_to_output`` (pytorch/torchtune ff594c23 torchtune/models/llama2/_component_builders.py
# ``lora_llama2``: ``output_proj = LoRALinear(embed_dim, vocab_size, ...) if apply_lora_to_output``) and
# PEFT's ``target_modules=[..., "lm_head"]``. ``all-linear`` leaves it out, as PEFT does: huggingface/peft
# 51c2ff66 src/peft/tuners/tuners_utils.py ``_maybe_include_all_linear_layers`` removes
# ``model.get_output_embeddings()``'s name from the set.
HEAD_TARGET: Final = "lm_head"
# A hybrid's Mamba-2 mixer's projections (transformers 5.25.0 GraniteMoeHybridMambaLayer, BambaMixer,
# NemotronHMamba2Mixer: ``in_proj``, ``out_proj``), which PEFT adapts by these names; no other model has them
# (ModelSpec.adapter_targets), and ``all-linear`` does not name them (a hybrid's targets are named: plan.lora_on).
MIXER_TARGETS: Final = ("in_proj", "out_proj")
# A Gated DeltaNet layer's input projections by family (transformers 5.25.0 Qwen3NextGatedDeltaNet: in_proj_qkvz,
# in_proj_ba; Qwen3_5GatedDeltaNet and Qwen3.5-MoE's: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a). A plan names
# them all ``in_proj`` (the mixer's input side, as a Mamba-2 mixer's one in_proj); the exporters write the
# family's own names (ModelSpec.peft_target_names), which PEFT matches, and the importers read them back.
GDN_IN_PROJ: Final[dict[str, tuple[str, ...]]] = {
    "qwen3_next": ("in_proj_qkvz", "in_proj_ba"),
    "qwen3_5_text": ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"),
    "qwen3_5_moe_text": ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"),
}
# The MLP's targets: on a mixture of experts, each routed expert's (where transformers builds them as nn.Linear) and
# a shared expert's projections.
MLP_TARGETS: Final = ("gate_proj", "up_proj", "down_proj")
# The families whose routed experts transformers 4.x built as a ModuleList of nn.Linear experts, which PEFT's
# target_modules reach by name (huggingface/transformers v4.57.1 models/<family>/modeling_<family>.py:
# ``MixtralSparseMoeBlock.experts``, Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock, OlmoeSparseMoeBlock,
# DeepseekV3MoE, Glm4MoeMoE, Ernie4_5_MoeSparseMoeBlock; tests/data/moe_lora/peft_transformers_4.57.1.json). From
# 5.0 each family keeps them as 3-D parameters of one experts module (v5.25.0 ``MixtralExperts.gate_up_proj`` /
# ``down_proj``, experts × out × in; peft_transformers_5.25.0.json): no target reaches them. gpt-oss (since 4.55)
# and Llama 4 were 3-D in 4.x already. DeepSeek-V2 and Kimi K2 (DeepSeek-V3's modelling) read as DeepSeek-V3:
# not measured. Phi-MoE (branch h87moe): v4.57.1 PhimoeSparseMoeBlock.experts, a ModuleList of PhimoeBlockSparseTop2MLP
# named w1 / w2 / w3 as Mixtral's (peft_transformers_4.57.1.json "w1,w2,w3": 18,432 = 4 experts × 3 × 8 × 96 × 2).
LINEAR_EXPERTS_4X: Final = frozenset(
    (
        "mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v2", "deepseek_v3", "kimi_k2", "glm4_moe",
        "ernie4_5_moe", "phimoe",
    )
)  # fmt: skip
# The families whose routed experts bitsandbytes quantises under transformers 4.x: ``replace_with_bnb_linear`` swaps
# nn.Linear (and Conv1D) modules only (v4.57.1 integrations/bitsandbytes.py ``_replace_with_bnb_linear``: ``isinstance(
# module, (nn.Linear, Conv1D))``; v5.25.0 the same with ``type(module) is nn.Linear``), so experts held as 3-D
# parameters stay in the model's dtype. 4.x held them as nn.Linear for LINEAR_EXPERTS_4X's families and Qwen3-Next
# (v4.57.1 models/qwen3_next/modeling_qwen3_next.py ``Qwen3NextSparseMoeBlock.experts``, a ModuleList of
# Qwen3NextMLP); gpt-oss, Llama 4 and Granite 4.0-H (``GraniteMoeHybridParallelExperts.weight``) were 3-D in 4.x
# too, every family from 5.0. Measured: tools/measure/moe_bnb_quant.py, tests/data/moe_bnb/ (NF4 and int8, 4.57.1
# and 5.25.0, bitsandbytes 0.50.2 on the CPU). A pre-quantised Llama 4 checkpoint is loaded into a ModuleList
# (quantizers/base.py ``SequentialLlama4TextExperts``, pre_quantized only): not modelled.
BNB_LINEAR_EXPERTS_4X: Final = LINEAR_EXPERTS_4X | {"qwen3_next"}
# Mixtral's expert MLP under transformers 4.x: ``MixtralBlockSparseTop2MLP`` w1 (gate), w3 (up), w2 (down)
# (huggingface/transformers v4.57.1 models/mixtral/modeling_mixtral.py; tests/data/moe_lora/
# peft_transformers_4.57.1.json: "w1,w2,w3" adapts block_sparse_moe.experts.*.w1 / w2 / w3, "gate_proj,up_proj,
# down_proj" is refused). Under 5.x the experts are 3-D (MixtralExperts) and no name reaches them.
MIXTRAL_4X_MLP_NAMES: Final = {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}
# PEFT's ``all-linear`` (huggingface/peft 51c2ff66 src/peft/tuners/tuners_utils.py ``_maybe_include_all_linear_layers``,
# lines 1998-2043): every nn.Linear / Conv1D but the output head. A plan keeps it as a target of its own beside the
# seven names it always covers (normalise_lora_targets adds them), so that the modules no plan name reaches are
# counted where the release builds them as nn.Linear (ModelSpec.all_linear_rows) and the exports write each tool's
# own spelling of it; a plan on the seven names alone is another plan (TRL's list reaches no router).
# The MoE routers PEFT's all-linear adapts, measured (tools/measure/moe_lora_targets.py, peft 0.18.0, torch 2.13.0
# CPU; tests/data/moe_lora/ "all-linear" rows): under transformers 4.57.1 Mixtral's ``block_sparse_moe.gate``,
# Qwen2-MoE's, Qwen3-MoE's, OLMoE's and ERNIE 4.5's ``mlp.gate`` (nn.Linear(d, E)), the release whose routed experts
# are nn.Linear too (Plan.linear_experts); Llama 4's ``feed_forward.router`` (Llama4Router, an nn.Linear) under
# 4.57.1 and 5.25.0. Under 5.25.0 the others are modules of their own holding a ``weight`` (not nn.Linear), as
# DeepSeek-V3's, GLM-4.5's and gpt-oss's routers are in both. Qwen2-MoE's ``shared_expert_gate`` (nn.Linear(d, 1))
# is adapted in both releases. DeepSeek-V2 and Kimi K2 read as DeepSeek-V3. Phi-MoE's router is an nn.Linear in
# both (4.57.1 ``block_sparse_moe.gate``; 5.25.0 ``mlp.router``, PhimoeTopKRouter(nn.Linear)): all-linear adapts it
# (branch h87moe, the same data's phimoe rows: 8 × (64 + 4) × 2 layers beyond the seven names). GraniteMoE's is
# adapted under 4.57.1 alone (``block_sparse_moe.router.layer``, an nn.Linear inside GraniteMoeTopKGating; 5.25.0
# GraniteMoeTopKRouter holds a ``weight``): its experts are 3-D in both releases, so ``linear_experts`` cannot tell
# the releases apart here and that router is not counted (r·(d + E) a layer under 4.x; granitemoe rows).
ROUTER_LINEAR_4X: Final = frozenset(("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "ernie4_5_moe"))
ROUTER_LINEAR: Final = frozenset(("llama4_text", "phimoe"))
SHARED_GATE_LINEAR: Final = frozenset(("qwen2_moe",))
# Every name a plan may carry, in the order plans list them (the head last).
ACCEPTED_TARGETS: Final = (*LORA_TARGETS, ALL_LINEAR, *MIXER_TARGETS, HEAD_TARGET)
# Other spellings people type or other families use for the same matrices.
_TARGET_ALIASES: Final[dict[str, tuple[str, ...]]] = {
    "q": ("q_proj",),
    "k": ("k_proj",),
    "v": ("v_proj",),
    "o": ("o_proj",),
    "gate": ("gate_proj",),
    "up": ("up_proj",),
    "down": ("down_proj",),
    "c_attn": ("q_proj", "k_proj", "v_proj"),  # GPT-2 fused qkv
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),  # Phi-3 fused qkv
    "gate_up_proj": ("gate_proj", "up_proj"),  # Phi-3 fused gate/up
    "c_fc": ("up_proj",),  # GPT-2 MLP in
    # GPT-NeoX and Falcon (query_key_value, dense, dense_h_to_4h, dense_4h_to_h) and Phi (fc1, fc2), as
    # transformers' modeling_gpt_neox.py / modeling_falcon.py / modeling_phi.py name them.
    "query_key_value": ("q_proj", "k_proj", "v_proj"),
    "dense_h_to_4h": ("up_proj",),
    "dense_4h_to_h": ("down_proj",),
    "fc1": ("up_proj",),
    "fc2": ("down_proj",),
    "out_proj": ("o_proj",),
    # A Gated DeltaNet layer's input projections (GDN_IN_PROJ): one plan target, in_proj.
    "in_proj_qkvz": ("in_proj",),
    "in_proj_ba": ("in_proj",),
    "in_proj_qkv": ("in_proj",),
    "in_proj_z": ("in_proj",),
    "in_proj_b": ("in_proj",),
    "in_proj_a": ("in_proj",),
    "dense": ("o_proj",),
    "w1": ("gate_proj",),  # Mixtral expert naming
    "w3": ("up_proj",),
    "w2": ("down_proj",),
    "head": (HEAD_TARGET,),  # litgpt's lora_head
    "output": (HEAD_TARGET,),  # torchtune's output projection (apply_lora_to_output)
    "all-linear": (*LORA_TARGETS, ALL_LINEAR),
    "all_linear": (*LORA_TARGETS, ALL_LINEAR),
    "all": (*LORA_TARGETS, ALL_LINEAR),  # LLaMA-Factory's lora_target: all (find_all_linear_modules)
}


def normalise_lora_targets(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Map any accepted spelling onto the canonical names, in canonical order."""
    try:
        return _normalised_targets(tuple(names))
    except TypeError:  # an unhashable entry (a hostile file's list in the list): reported below
        return _normalise_targets(names)


@lru_cache(maxsize=256)
def _normalised_targets(names: tuple[str, ...]) -> tuple[str, ...]:
    # Every estimate asks several times for the same few target lists (flops, activations,
    # the adapter's size): the answer depends only on the names, so it is kept.
    return _normalise_targets(names)


def spelled_targets(targets: tuple[str, ...]) -> tuple[str, ...]:
    """Canonical ``targets`` as a plan file, the command line and the window write them: all-linear for itself and
    the seven names it covers, the others (the head, a mixer's) after it."""
    if ALL_LINEAR not in targets:
        return targets
    return (ALL_LINEAR, *(t for t in targets if t != ALL_LINEAR and t not in LORA_TARGETS))


def toggled_targets(targets: tuple[str, ...], name: str, on: bool) -> tuple[str, ...]:
    """Canonical ``targets`` with ``name`` put on or taken off, as the window's boxes do: all-linear on brings the
    seven names it covers; taken off, it leaves them (the seven names alone, which reach no MoE router); one of the
    seven taken off takes all-linear with it (it no longer adapts every linear)."""
    chosen = set(targets) - {name} | ({name} if on else set())
    if not on and name in LORA_TARGETS:
        chosen.discard(ALL_LINEAR)
    if ALL_LINEAR in chosen:
        chosen.update(LORA_TARGETS)
    return tuple(t for t in ACCEPTED_TARGETS if t in chosen)


def normalise_ia3_feedforward(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """IA3's feedforward modules in canonical names; none is allowed (PEFT's mt5 default is [])."""
    if not names:
        return ()
    try:  # names, not all-linear's router: all-linear here is the seven names
        return tuple(t for t in normalise_lora_targets(names) if t != ALL_LINEAR)
    except PlanError as error:
        raise PlanError("lora.ia3_feedforward", error.value, error.allowed) from None


def _normalise_targets(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    wanted: set[str] = set()
    for raw in names:
        name = str(raw).strip().lower()
        if name in ACCEPTED_TARGETS:
            wanted.add(name)
        elif name in _TARGET_ALIASES:
            wanted.update(_TARGET_ALIASES[name])
        else:
            raise PlanError(
                "lora.targets",
                raw,
                "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, in_proj, out_proj, lm_head "
                "or all-linear",
            )
    if not wanted:
        raise PlanError("lora.targets", list(names), "at least one target module")
    if ALL_LINEAR in wanted:  # it always covers the seven names
        wanted.update(LORA_TARGETS)
    return tuple(t for t in ACCEPTED_TARGETS if t in wanted)


@dataclass(frozen=True)
class ModelSpec:
    """The dimensions of a decoder-only transformer that decide its memory."""

    name: str
    family: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    gated_mlp: bool = True
    tie_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    norm: str = "rmsnorm"
    norms_per_layer: int = 2
    learned_positions: int = 0  # rows of a learned position table (GPT-2); 0 for RoPE or ALiBi
    num_experts: int = 1
    experts_per_token: int = 1
    sliding_window: int | None = None
    sliding_window_layers: int = 0  # how many layers attend within the window
    # Chunked local attention (Llama 4's iRoPE): ``chunked_layers`` layers attend only within their own block of
    # ``attention_chunk`` positions (a query at position p sees keys from chunk_start(p) = p // chunk · chunk up to
    # p), the others attend to everything. transformers 5.25.0 models/llama4/configuration_llama4.py
    # Llama4TextConfig.__post_init__ types a layer "chunked_attention" when it has RoPE (no_rope_layers[i] 1) and
    # attention_chunk_size is set; vllm-project/vllm 0.19.0 (2a69949bd) model_executor/models/llama4.py
    # Llama4Attention builds ChunkedLocalAttention on the same layers (``not self.nope and
    # config.attention_chunk_size``). 0 / 0: none. A model has a sliding window or chunks, not both.
    attention_chunk: int = 0
    chunked_layers: int = 0
    max_position_embeddings: int = 4096
    fused_qkv: bool = False  # one q|k|v matrix (GPT-2 c_attn, Phi-3 qkv_proj)
    fused_gate_up: bool = False  # one gate|up matrix (Phi-3)
    activation: str = "silu"  # the MLP's activation as config.json names it
    dropout: float = 0.0  # embedding and residual dropout in training (GPT-2: 0.1)
    attention_dropout: float = 0.0
    attn_softcap: float = 0.0  # Gemma-2 tanh soft-capping of attention scores (0: none)
    final_softcap: float = 0.0  # Gemma-2 tanh soft-capping of the logits (0: none)
    qk_norm: str = ""  # see QK_NORMS
    post_norm: bool = False  # OLMo-2: norms on the sub-block outputs only, none before q/k/v or the MLP
    shared_expert_size: int = 0  # Qwen2-MoE: intermediate size of the always-on shared expert (0: none)
    router_bias: bool = False  # gpt-oss: GptOssTopKRouter.bias, one per expert
    attention_sinks: bool = False  # gpt-oss: GptOssAttention.sinks, one learned logit per head
    # ALiBi (Press et al. 2021, arXiv:2108.12409): a fixed per-head linear bias added to the
    # attention scores instead of rotating q and k (BLOOM: transformers BloomAttention's alibi;
    # MPT: attn_config.alibi). No parameters, so it moves no memory figure; only the training
    # time's rotary-embedding traffic (speed._elementwise_bytes) depends on it.
    alibi: bool = False
    # MPT's LPLayerNorm (llm-foundry's ``norm_type: low_precision_layernorm``, MosaicGPT's
    # ``low_precision_layernorm: true``): under autocast it casts the input, weight and bias to the
    # autocast dtype and runs F.layer_norm with autocast off (mosaicml/composer v0.13.2
    # composer/algorithms/low_precision_layernorm/low_precision_layernorm.py and mosaicml/llm-foundry
    # b2a43a147 llmfoundry/models/layers/norm.py, LPLayerNorm.forward), so the norm keeps a 16-bit
    # input and writes a 16-bit output where nn.LayerNorm, on autocast's float32 list, keeps and writes
    # float32. A LayerNorm only; its memory in core.training.activations._norm. No parameters.
    low_precision_layernorm: bool = False
    # A parallel block: attention and the MLP both read the block input and add to the same
    # residual, ``x + attn(norm_1(x)) + mlp(norm_2(x))`` (GPT-NeoX ``use_parallel_residual``, Falcon's
    # ``parallel_attn``, Phi-1.5 / Phi-2; litgpt's ``Config.parallel_residual``). ``norms_per_layer``
    # 1 is one LayerNorm both read (litgpt's ``shared_attention_norm``: Falcon-7B, Phi), 2 a norm each
    # (GPT-NeoX, StableLM-alpha). Lightning-AI/litgpt 5895df1 litgpt/model.py ``Block.forward``;
    # the saved tensors it changes in core.training.activations.layer_activations.
    parallel_residual: bool = False
    # A bias on the output head (Phi-1.5 / Phi-2: ``lm_head = nn.Linear(..., bias=True)``,
    # transformers models/phi/modeling_phi.py PhiForCausalLM; litgpt ``Config.lm_head_bias``).
    head_bias: bool = False
    # Multi-head latent attention (DeepSeek-V2 / V3, Kimi K2): huggingface/transformers 00b676f8
    # src/transformers/models/deepseek_v3/modeling_deepseek_v3.py ``DeepseekV3Attention.__init__``. The
    # query is ``q_proj`` (d → H·qk) without a q_lora_rank (DeepSeek-V2-Lite's null), else ``q_a_proj`` (d →
    # q_lora_rank), ``q_a_layernorm`` and ``q_b_proj`` (q_lora_rank → H·qk); keys and values come from one
    # latent: ``kv_a_proj_with_mqa`` (d → kv_lora_rank + qk_rope_head_dim), ``kv_a_layernorm`` (kv_lora_rank)
    # and ``kv_b_proj`` (kv_lora_rank → H·(qk_nope_head_dim + v_head_dim)); ``o_proj`` reads H·v_head_dim.
    # For such a model ``head_dim`` is the q·k width of a head, qk_nope_head_dim + qk_rope_head_dim (HF's
    # ``qk_head_dim``), and ``num_kv_heads`` equals ``num_heads`` (every head gets its own decompressed K
    # and V). ``kv_lora_rank`` 0: ordinary attention, the other four unread.
    kv_lora_rank: int = 0
    q_lora_rank: int = 0  # 0: plain q_proj (config.json's null)
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # DeepSeek's dense first layers: ``DeepseekV3DecoderLayer.__init__`` builds ``DeepseekV3MLP(config)``
    # (a gated MLP of ``dense_intermediate_size``, config.json's ``intermediate_size``) for layer_idx <
    # ``first_k_dense_replace`` and the MoE (experts of ``intermediate_size``, config.json's
    # ``moe_intermediate_size``) after. 0: every layer alike.
    first_k_dense_replace: int = 0
    dense_intermediate_size: int = 0
    # Qwen2-MoE's shared expert has a sigmoid gate (d → 1, ``shared_expert_gate``); DeepSeek's
    # ``DeepseekV3MoE.shared_experts`` (an MLP of n_shared_experts × moe_intermediate_size) has none.
    shared_expert_gate: bool = True
    # A parameter count given instead of derived: typed by the user (the lesson's
    # P = 6.7·10⁹) or read exactly from a checkpoint's safetensors headers. The
    # architecture-derived count stays available beside it.
    params_override: int | None = None
    # The vision tower + projector of an image-text checkpoint (core.vision.vision_tower): parameters vLLM,
    # SGLang and transformers load, and training keeps frozen, beside the language model. No part of the
    # counts above: architecture_params() is the language model's. ``vision_linear_params``: its nn.Linear
    # weight matrices (what bitsandbytes quantises); ``vision_kind`` names the tower. 0 / "": text only.
    vision_params: int = 0
    vision_linear_params: int = 0
    vision_kind: str = ""
    # The wrapper's model_type (core.vision.VISION_FAMILIES: which engine release skips the tower in text-only
    # serving) and one dummy image of vLLM's encoder profile (core.vision.EncoderGeometry: the embeddings it
    # gives the language model, the positions through the tower, its pixel values, the tower's width and MLP
    # width); 0: not modelled (a dynamic-resolution tower, or a plan file written before them).
    vision_family: str = ""
    vision_embeddings: int = 0
    vision_patches: int = 0
    vision_pixels: int = 0
    vision_width: int = 0
    vision_inner: int = 0
    # vision_config's num_hidden_layers and hidden_size as transformers' config object answers them
    # (core.vision.VisionTower.config_layers / config_hidden: SGLang's multimodal reduction of its default
    # mem_fraction_static reads them); 0: no such attribute, or a plan file written before them.
    vision_config_layers: int = 0
    vision_config_hidden: int = 0
    # A hybrid recurrent model (core.hybrid: Granite 4.0-H, Bamba, Nemotron-H, Falcon-H1, Qwen3-Next): the
    # recurrent mixer ("mamba2", "gated_deltanet"; "": attention only), how many layers hold a KV cache and how
    # many a recurrent state (Falcon-H1's layers hold both), and the mixer's widths as core.hybrid.RecurrentMixer
    # names them; ``recurrent_state_float32``: the checkpoint asks for a float32 SSM state (Nemotron-H's
    # config.json ``mamba_ssm_cache_dtype``). Such a spec's other fields describe its attention layers and MLP
    # only: its counts are the exact ones core.hybrid reads (``params_override`` and ``active_params_override``),
    # and serving rules read :attr:`hybrid`. 0 / "": not a hybrid (every plan file written before them).
    recurrent_mixer: str = ""
    attention_layers: int = 0
    recurrent_layers: int = 0
    recurrent_heads: int = 0
    recurrent_head_dim: int = 0
    recurrent_state: int = 0
    recurrent_groups: int = 0
    recurrent_conv_kernel: int = 0
    recurrent_inner: int = 0
    recurrent_state_float32: bool = False
    # The Mamba-2 scan's chunk of positions (transformers 5.25.0 mamba_chunk_size, Nemotron-H's chunk_size; the
    # config classes' defaults 256 and 128), which sizes what the torch path keeps in training
    # (core.training.mamba); 0: not read (a plan file written before it: core.plan.training_refusal says so).
    recurrent_chunk: int = 0
    # A hybrid's layers in module order, one core.hybrid.LAYER_CHARS character a layer (Nemotron-H's
    # hybrid_override_pattern characters: "M" recurrent, "*" attention, "-" MLP, "E" MoE; "P" Falcon-H1's layer
    # with both), as core.hybrid reads config.json's layer_types / layers_block_type / hybrid_override_pattern.
    # FSDP's neighbouring units follow it (core.parallel.layout.fsdp_block_units). "": not known (a typed model,
    # a plan file written before it), read from the counts alone, attention layers first.
    layer_pattern: str = ""
    # Parameters one token passes through, given instead of derived (a hybrid's, from core.hybrid); None: derived.
    active_params_override: int | None = None

    def __post_init__(self) -> None:
        positive = (
            "vocab_size",
            "hidden_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "intermediate_size",
            "norms_per_layer",
            "num_experts",
            "experts_per_token",
            "max_position_embeddings",
        )
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= LIMITS[name]:
                raise PlanError(f"model.{name}", value, f"an integer from 1 to {LIMITS[name]:,}")
        if self.num_heads % self.num_kv_heads:
            raise PlanError(
                "model.num_kv_heads",
                self.num_kv_heads,
                f"a divisor of num_heads ({self.num_heads})",
            )
        if self.experts_per_token > self.num_experts:
            raise PlanError(
                "model.experts_per_token", self.experts_per_token, f"at most num_experts ({self.num_experts})"
            )
        if not isinstance(self.norm, str) or self.norm not in NORMS:
            raise PlanError("model.norm", self.norm, " or ".join(NORMS))
        if not isinstance(self.qk_norm, str) or self.qk_norm not in QK_NORMS:
            raise PlanError("model.qk_norm", self.qk_norm, "'' (none), 'head', 'projection' or 'per_head'")
        if not is_int(self.shared_expert_size) or not 0 <= self.shared_expert_size <= LIMITS["intermediate_size"]:
            raise PlanError(
                "model.shared_expert_size",
                self.shared_expert_size,
                f"an integer from 0 to {LIMITS['intermediate_size']:,}",
            )
        for name in _FLAGS:
            if not isinstance(getattr(self, name), bool):
                raise PlanError(f"model.{name}", getattr(self, name), "true or false")
        if self.low_precision_layernorm and self.norm != "layernorm":
            raise PlanError("model.low_precision_layernorm", True, "false for an RMSNorm model (LPLayerNorm)")
        if self.parallel_residual and (self.post_norm or self.norms_per_layer > 2):
            raise PlanError(
                "model.parallel_residual", True, "false with post-norms or over two norms a block (a pre-norm block)"
            )
        if not is_int(self.learned_positions) or not 0 <= self.learned_positions <= LIMITS["max_position_embeddings"]:
            raise PlanError(
                "model.learned_positions",
                self.learned_positions,
                f"an integer from 0 to {LIMITS['max_position_embeddings']:,}",
            )
        if self.sliding_window is not None and (not is_int(self.sliding_window) or self.sliding_window < 1):
            raise PlanError("model.sliding_window", self.sliding_window, "a positive integer or null")
        if not is_int(self.sliding_window_layers) or not 0 <= self.sliding_window_layers <= self.num_layers:
            raise PlanError("model.sliding_window_layers", self.sliding_window_layers, f"0 to {self.num_layers}")
        self._check_chunks()
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise PlanError(f"model.{name}", value, "a probability from 0 to below 1")
        for name in ("attn_softcap", "final_softcap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1e6:
                raise PlanError(f"model.{name}", value, "0 (none) or a positive cap")
        if not isinstance(self.activation, str) or not self.activation:
            raise PlanError("model.activation", self.activation, "an activation name such as silu or gelu_new")
        if self.params_override is not None and (
            not is_int(self.params_override) or not 0 <= self.params_override <= MAX_PARAMS
        ):
            raise PlanError("model.params_override", self.params_override, f"a count from 0 to {MAX_PARAMS:,} or null")
        check_text("model.name", self.name)
        check_text("model.family", self.family, allow_empty=True)
        self._check_vision()
        check_text("model.activation", self.activation)
        self._check_latent()
        self._check_hybrid()

    def _check_hybrid(self) -> None:
        """A hybrid's recurrent widths (see the fields); every one 0 for an attention-only model."""
        widths = (
            "attention_layers",
            "recurrent_layers",
            "recurrent_heads",
            "recurrent_head_dim",
            "recurrent_state",
            "recurrent_groups",
            "recurrent_conv_kernel",
            "recurrent_inner",
        )
        if not is_int(self.recurrent_chunk) or not 0 <= self.recurrent_chunk <= LIMITS["intermediate_size"]:
            raise PlanError("model.recurrent_chunk", self.recurrent_chunk, f"0 to {LIMITS['intermediate_size']:,}")
        if not isinstance(self.recurrent_mixer, str) or self.recurrent_mixer not in ("", *MIXER_NAMES):
            raise PlanError("model.recurrent_mixer", self.recurrent_mixer, "'' (none), " + " or ".join(MIXER_NAMES))
        active = self.active_params_override
        if active is not None and (not is_int(active) or not 0 <= active <= MAX_PARAMS):
            raise PlanError("model.active_params_override", active, f"a count from 0 to {MAX_PARAMS:,} or null")
        low = 1 if self.recurrent_mixer else 0
        for name in widths:
            value = getattr(self, name)
            top = self.num_layers if name.endswith("layers") else LIMITS["intermediate_size"]
            if not is_int(value) or not (low <= value <= top if low else value == 0):
                allowed = f"an integer from 1 to {top:,}" if low else "0 (the model has no recurrent layers)"
                raise PlanError(f"model.{name}", value, allowed)
        self._check_pattern()
        if not self.recurrent_mixer:
            return
        # Falcon-H1: every layer holds both; Nemotron-H: its MLP and MoE layers hold neither.
        parallel = self.attention_layers == self.recurrent_layers == self.num_layers
        if not parallel and self.attention_layers + self.recurrent_layers > self.num_layers:
            raise PlanError(
                "model.recurrent_layers",
                self.recurrent_layers,
                f"at most num_layers ({self.num_layers}) less attention_layers, or every layer with both",
            )
        if self.params_override is None:
            raise PlanError("model.params_override", None, "the hybrid's exact count (core.hybrid)")

    def _check_pattern(self) -> None:
        """``layer_pattern`` (see it): "" or one known character a layer, agreeing with the layer counts."""
        pattern = self.layer_pattern
        if not isinstance(pattern, str):
            raise PlanError("model.layer_pattern", pattern, "a string of layer characters, or ''")
        if not pattern:
            return
        chars = "".join(PATTERN_KINDS)
        if not self.recurrent_mixer:
            raise PlanError("model.layer_pattern", pattern, "'' for a model without recurrent layers")
        if len(pattern) != self.num_layers or set(pattern) - set(chars):
            raise PlanError("model.layer_pattern", pattern, f"{self.num_layers} characters of {chars}, one a layer")
        both = pattern.count(LAYER_CHARS[PARALLEL])
        attention = pattern.count(LAYER_CHARS[ATTENTION]) + both
        recurrent = pattern.count(LAYER_CHARS[RECURRENT]) + both
        if (attention, recurrent) != (self.attention_layers, self.recurrent_layers):
            raise PlanError(
                "model.layer_pattern",
                pattern,
                f"{self.attention_layers} attention and {self.recurrent_layers} recurrent layers "
                f"(attention_layers, recurrent_layers); it has {attention} and {recurrent}",
            )
        mlp_only = set(pattern) & {LAYER_CHARS[MLP], LAYER_CHARS[MOE]}
        if mlp_only and self.family != "nemotron_h":
            raise PlanError("model.layer_pattern", pattern, "MLP-only layers ('-', 'E') in a Nemotron-H stack only")

    def _check_chunks(self) -> None:
        """Chunked local attention's two fields (see them): both set or both 0, never beside a sliding window."""
        chunk_limit = LIMITS["max_position_embeddings"]
        if not is_int(self.attention_chunk) or not 0 <= self.attention_chunk <= chunk_limit:
            raise PlanError("model.attention_chunk", self.attention_chunk, f"an integer from 0 to {chunk_limit:,}")
        if not is_int(self.chunked_layers) or not 0 <= self.chunked_layers <= self.num_layers:
            raise PlanError("model.chunked_layers", self.chunked_layers, f"0 to {self.num_layers}")
        if bool(self.attention_chunk) != bool(self.chunked_layers):
            raise PlanError(
                "model.chunked_layers", self.chunked_layers, "0 without an attention_chunk, at least 1 with one"
            )
        if self.attention_chunk and self.sliding_window:
            raise PlanError("model.attention_chunk", self.attention_chunk, "0 with a sliding window (not modelled)")

    @property
    def routed_share(self) -> float:
        """The share of the tokens each routed expert sees, top-k / experts (1.0 for a dense MLP): the one ratio the
        experts' matmuls, their adapters' passes and llama.cpp's expert reads take."""
        return self.experts_per_token / self.num_experts if self.num_experts > 1 else 1.0

    @property
    def chunked_attention(self) -> bool:
        """Some layers attend within chunks of ``attention_chunk`` positions (Llama 4): see the fields."""
        return self.attention_chunk > 0

    def _check_vision(self) -> None:
        if not is_int(self.vision_params) or not 0 <= self.vision_params <= MAX_PARAMS:
            raise PlanError("model.vision_params", self.vision_params, f"a count from 0 to {MAX_PARAMS:,}")
        if not is_int(self.vision_linear_params) or not 0 <= self.vision_linear_params <= self.vision_params:
            raise PlanError("model.vision_linear_params", self.vision_linear_params, "a count from 0 to vision_params")
        check_text("model.vision_kind", self.vision_kind, allow_empty=True)
        check_text("model.vision_family", self.vision_family, allow_empty=True)
        for name in (
            "vision_embeddings",
            "vision_patches",
            "vision_pixels",
            "vision_width",
            "vision_inner",
            "vision_config_layers",
            "vision_config_hidden",
        ):
            value = getattr(self, name)
            if not is_int(value) or not 0 <= value <= MAX_PARAMS:
                raise PlanError(f"model.{name}", value, f"a count from 0 to {MAX_PARAMS:,}")

    def _check_latent(self) -> None:
        """Multi-head latent attention's widths and DeepSeek's dense first layers (see the fields)."""
        for name in ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim", "dense_intermediate_size"):
            value = getattr(self, name)
            if not is_int(value) or not 0 <= value <= LIMITS["intermediate_size"]:
                raise PlanError(f"model.{name}", value, f"an integer from 0 to {LIMITS['intermediate_size']:,}")
        if not is_int(self.first_k_dense_replace) or not 0 <= self.first_k_dense_replace <= self.num_layers:
            raise PlanError("model.first_k_dense_replace", self.first_k_dense_replace, f"0 to {self.num_layers}")
        if self.first_k_dense_replace and (self.num_experts == 1 or not self.dense_intermediate_size):
            raise PlanError(
                "model.first_k_dense_replace",
                self.first_k_dense_replace,
                "0 unless the model has experts and a dense_intermediate_size",
            )
        if not self.kv_lora_rank:
            return
        if not 1 <= self.qk_rope_head_dim < self.head_dim or not self.v_head_dim:
            raise PlanError(
                "model.qk_rope_head_dim",
                self.qk_rope_head_dim,
                f"1 to {self.head_dim - 1} (head_dim is qk_nope + qk_rope) with a v_head_dim",
            )
        if self.num_kv_heads != self.num_heads:
            raise PlanError(
                "model.num_kv_heads", self.num_kv_heads, f"num_heads ({self.num_heads}) with latent attention"
            )
        refused = ("qkv_bias", "o_bias", "fused_qkv", "attention_sinks", "post_norm", "parallel_residual")
        for name in refused:
            if getattr(self, name):
                raise PlanError(f"model.{name}", True, "false with latent attention (not modelled with it)")
        if self.qk_norm or self.sliding_window or self.attention_chunk:
            raise PlanError("model.kv_lora_rank", self.kv_lora_rank, "0 with q/k norms, a sliding window or chunks")

    # ---- hybrid recurrent models ---------------------------------------------------------
    @property
    def mixer(self) -> RecurrentMixer | None:
        """The recurrent mixer's widths as core.hybrid.RecurrentMixer (None: attention only): the one home of
        its derived widths (``conv_dim``) that training, FLOPs and serving rules read. Cheaper than
        :attr:`hybrid`, which also counts the parameters."""
        if not self.recurrent_mixer:
            return None
        return RecurrentMixer(
            self.recurrent_mixer,
            self.recurrent_heads,
            self.recurrent_head_dim,
            self.recurrent_state,
            self.recurrent_groups,
            self.recurrent_conv_kernel,
            self.recurrent_inner,
        )

    @property
    def hybrid(self) -> HybridSpec | None:
        """The hybrid's stack and recurrent mixer as core.hybrid reads them (None: attention only); what the
        serving rules read: the layer counts and one sequence's state (HybridSpec.state_elements)."""
        mixer = self.mixer
        if mixer is None:
            return None
        if self.layer_pattern:
            layers: tuple[str, ...] = tuple(PATTERN_KINDS[c] for c in self.layer_pattern)
        elif self.attention_layers == self.recurrent_layers == self.num_layers:
            layers = (PARALLEL,) * self.num_layers
        else:
            rest = self.num_layers - self.attention_layers - self.recurrent_layers
            layers = (ATTENTION,) * self.attention_layers + (RECURRENT,) * self.recurrent_layers + (MLP,) * rest
        return HybridSpec(
            self.family,
            layers,
            self.hidden_size,
            self.vocab_size,
            self.num_heads,
            self.num_kv_heads,
            self.head_dim,
            mixer,
            self.total_params(),
            self.active_params(),
            self.recurrent_state_float32,
        )

    @property
    def kv_layers(self) -> int:
        """Layers that keep a KV cache: every layer, or a hybrid's attention layers."""
        return self.attention_layers if self.recurrent_mixer else self.num_layers

    # ---- latent attention ------------------------------------------------------------
    @property
    def latent_attention(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2 / V3, Kimi K2): see the kv_lora_rank field."""
        return self.kv_lora_rank > 0

    @property
    def qk_nope_head_dim(self) -> int:
        """The part of a head's q·k width that carries no rotary position (MLA only)."""
        return self.head_dim - self.qk_rope_head_dim

    @property
    def latent_width(self) -> int:
        """What MLA caches per token and layer: the compressed latent and the shared rotary key,
        kv_lora_rank + qk_rope_head_dim elements (0 without MLA)."""
        return self.kv_lora_rank + self.qk_rope_head_dim if self.kv_lora_rank else 0

    @property
    def dense_layers(self) -> int:
        """A mixture of experts' dense layers (``first_k_dense_replace``: a plain MLP of ``dense_intermediate_size``,
        :meth:`adapter_blocks`); 0 for a dense model and a hybrid (its layers keep their own rule)."""
        return self.first_k_dense_replace if self.num_experts > 1 and not self.recurrent_mixer else 0

    @property
    def moe_layers(self) -> int:
        """Layers with experts (all of a MoE model's but DeepSeek's dense first ones)."""
        return self.num_layers - self.first_k_dense_replace if self.num_experts > 1 else 0

    def latent_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of MLA's projections in one block, named as transformers names them."""
        d, h, qk = self.hidden_size, self.num_heads, self.head_dim
        shapes = (
            {"q_a_proj": (d, self.q_lora_rank), "q_b_proj": (self.q_lora_rank, h * qk)}
            if self.q_lora_rank
            else {"q_proj": (d, h * qk)}
        )
        shapes["kv_a_proj_with_mqa"] = (d, self.latent_width)
        shapes["kv_b_proj"] = (self.kv_lora_rank, h * (self.qk_nope_head_dim + self.v_head_dim))
        shapes["o_proj"] = (h * self.v_head_dim, d)
        return shapes

    def adapter_targets(self) -> tuple[str, ...]:
        """The canonical adapter targets this model has a matrix for (LORA_TARGETS order). A latent-attention
        model has no k_proj or v_proj, and q_proj only without a q_lora_rank (DeepSeek-V2-Lite): PEFT matches
        module names, so those targets would adapt nothing."""
        present = set(self.latent_shapes()) if self.kv_lora_rank else set(self.linear_shapes())
        present |= {"up_proj", "down_proj"} | ({"gate_proj"} if self.gated_mlp else set())
        return tuple(t for t in LORA_TARGETS if t in present)

    def replicated_latent_params(self) -> int:
        """MLA's weights every tensor-parallel rank holds whole in vLLM (vllm-project/vllm 002d6073
        vllm/model_executor/models/deepseek_v2.py ``DeepseekV2MLAAttention.__init__``: ``fused_qkv_a_proj``
        (q_a_proj | kv_a_proj_with_mqa, ``disable_tp=True``) or the ReplicatedLinear ``kv_a_proj_with_mqa``,
        and the RMSNorms ``q_a_layernorm`` / ``kv_a_layernorm``), per layer; 0 without MLA."""
        if not self.kv_lora_rank:
            return 0
        q_a = self.hidden_size * self.q_lora_rank + self.q_lora_rank
        return q_a + self.hidden_size * self.latent_width + self.kv_lora_rank

    # ---- shapes -------------------------------------------------------------------
    @property
    def q_width(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.num_kv_heads * self.head_dim

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in_features, out_features) of each projection in one block (one expert's MLP).

        Multi-head latent attention: the ordinary attention it decompresses to (q and k of H · qk_head_dim,
        v and o of H · v_head_dim), which the training rules read as an approximation (core.checks warns);
        its real matrices are :meth:`latent_shapes`, which the counts, the weights and the serving rules read,
        and the adapter targets it has are :meth:`adapter_targets`."""
        d, i = self.hidden_size, self.intermediate_size
        if self.kv_lora_rank:
            h, qk, v = self.num_heads, self.head_dim, self.v_head_dim
            shapes = {"q_proj": (d, h * qk), "k_proj": (d, h * qk), "v_proj": (d, h * v), "o_proj": (h * v, d)}
            shapes.update(up_proj=(d, i), down_proj=(i, d), gate_proj=(d, i))
            return shapes
        shapes = {
            "q_proj": (d, self.q_width),
            "k_proj": (d, self.kv_width),
            "v_proj": (d, self.kv_width),
            "o_proj": (self.q_width, d),
            "up_proj": (d, i),
            "down_proj": (i, d),
        }
        if self.gated_mlp:
            shapes["gate_proj"] = (d, i)
        return shapes

    # ---- parameter counts ----------------------------------------------------------
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size + self.learned_positions * self.hidden_size

    def head_params(self) -> int:
        if self.tie_embeddings:
            return 0
        return self.vocab_size * self.hidden_size + (self.vocab_size if self.head_bias else 0)

    def norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm == "layernorm" else 1)

    def attention_params(self) -> int:
        d = self.hidden_size
        if self.kv_lora_rank:  # the projections and the q_a / kv_a RMSNorms (DeepseekV3Attention)
            norms = self.q_lora_rank + self.kv_lora_rank
            return sum(a * b for a, b in self.latent_shapes().values()) + norms
        n = 2 * d * self.q_width + 2 * d * self.kv_width
        if self.qkv_bias:
            n += self.q_width + 2 * self.kv_width
        if self.o_bias:
            n += d
        return n + self.qk_norm_params() + (self.num_heads if self.attention_sinks else 0)

    def qk_norm_params(self) -> int:
        if self.qk_norm == "head":
            return 2 * self.head_dim
        if self.qk_norm in ("projection", "per_head"):
            return self.q_width + self.kv_width
        return 0

    def shared_expert_params(self) -> int:
        """Qwen2-MoE's shared expert (gate, up, down of its own size) and its sigmoid gate (d → 1);
        DeepSeek's shared experts have no gate (``shared_expert_gate`` false)."""
        if not self.shared_expert_size:
            return 0
        return 3 * self.hidden_size * self.shared_expert_size + (self.hidden_size if self.shared_expert_gate else 0)

    def expert_mlp_params(self) -> int:
        d, i = self.hidden_size, self.intermediate_size
        n = (3 if self.gated_mlp else 2) * d * i
        if self.mlp_bias:
            n += (2 * i if self.gated_mlp else i) + d
        return n

    def router_params(self) -> int:
        if self.num_experts == 1:
            return 0
        return (self.hidden_size + (1 if self.router_bias else 0)) * self.num_experts

    def layer_params(self) -> int:
        """One block's parameters (a MoE model's: one with experts; see :meth:`blocks_params`)."""
        return (
            self.attention_params()
            + self.num_experts * self.expert_mlp_params()
            + self.router_params()
            + self.shared_expert_params()
            + self.norms_per_layer * self.norm_params()
        )

    def dense_layer_params(self) -> int:
        """One of DeepSeek's dense first blocks: attention, a gated MLP of dense_intermediate_size, norms."""
        mlp = 3 * self.hidden_size * self.dense_intermediate_size
        return self.attention_params() + mlp + self.norms_per_layer * self.norm_params()

    def blocks_params(self) -> int:
        """Every block's parameters: the dense first layers and the rest."""
        dense = self.first_k_dense_replace
        return (self.num_layers - dense) * self.layer_params() + dense * self.dense_layer_params()

    def architecture_params(self) -> int:
        """Total parameters implied by the dimensions (what ``model.num_parameters()`` says)."""
        # Asked for a dozen times per estimate; the spec is frozen, so the count is kept on the
        # instance (outside the dataclass fields: equality, hashing and replace() ignore it).
        cached = self.__dict__.get("_architecture_params")
        if cached is None:
            cached = (
                self.embedding_params()
                + self.blocks_params()
                + self.norm_params()  # final norm
                + self.head_params()
            )
            object.__setattr__(self, "_architecture_params", cached)
        return cached

    def total_params(self) -> int:
        return self.params_override if self.params_override else self.architecture_params()

    def checkpoint_params(self) -> int:
        """The language model's parameters and the vision tower's: what the checkpoint stores."""
        return self.total_params() + self.vision_params

    @property
    def params_scale(self) -> float:
        """Given count ÷ architecture-derived count (1 without an override).

        A typed P (the lesson's 6.7·10⁹) keeps the architecture's proportions: every part
        derived from the shape (projection matrices, idle experts) scales with it, so no
        part can exceed the whole.
        """
        derived = self.architecture_params()
        return self.total_params() / derived if self.params_override and derived else 1.0

    @property
    def shape_scale(self) -> float:
        """What a tensor counted from the model's own shapes (the embedding, the head, a GGUF tensor) is scaled by:
        :attr:`params_scale` for a typed P, 1 for a hybrid recurrent model, whose given count is its exact one
        (core.hybrid) and whose embedding and head are their shapes, not a share of a typed whole."""
        return 1.0 if self.recurrent_mixer else self.params_scale

    def active_params(self) -> int:
        """Parameters one token passes through (MoE: only the routed experts)."""
        if self.active_params_override is not None:
            return self.active_params_override
        idle = (self.num_experts - self.experts_per_token) * self.expert_mlp_params() * self.moe_layers
        return self.total_params() - round(idle * self.params_scale)

    def stored_matmul_params(self) -> int:
        """The projection matrices' share of the stored parameters (scaled with a given P)."""
        return min(self.total_params(), round(self.matmul_params() * self.params_scale))

    def matmul_params(self) -> int:
        """Parameters in the projection matrices of the blocks (what LoRA and quantisation touch)."""
        d, i = self.hidden_size, self.intermediate_size
        if self.kv_lora_rank:
            attn = sum(a * b for a, b in self.latent_shapes().values())
        else:
            attn = 2 * d * self.q_width + 2 * d * self.kv_width
        mlp = (3 if self.gated_mlp else 2) * d * i * self.num_experts
        shared = 3 * d * self.shared_expert_size
        dense = self.first_k_dense_replace
        dense_mlp = 3 * d * self.dense_intermediate_size
        return self.num_layers * attn + (self.num_layers - dense) * (mlp + shared) + dense * dense_mlp

    def layer_tensors(self) -> int:
        """Parameter tensors of one block as transformers creates them (weights and biases
        apart, fused projections as one, each MoE projection of all experts as one 3-D tensor)."""
        norm = 2 if self.norm == "layernorm" else 1
        attn = (2 if self.fused_qkv else 4) + (0 if not self.qkv_bias else 1 if self.fused_qkv else 3)
        if self.kv_lora_rank:  # the projections and the q_a / kv_a norms
            attn = len(self.latent_shapes()) + (2 if self.q_lora_rank else 1)
        attn += (1 if self.o_bias else 0) + (2 if self.qk_norm else 0) + (1 if self.attention_sinks else 0)
        if self.num_experts > 1:
            mlp = 2 + (2 if self.mlp_bias else 0) + 1 + (1 if self.router_bias else 0)
            # the shared expert: gate, up, down (and its sigmoid gate, Qwen2-MoE)
            mlp += (4 if self.shared_expert_gate else 3) if self.shared_expert_size else 0
        else:
            mlp = (2 if self.fused_gate_up or not self.gated_mlp else 3) * (2 if self.mlp_bias else 1)
        return attn + mlp + self.norms_per_layer * norm

    def outside_tensors(self, embedding: bool = True, head: bool = True) -> int:
        """Embedding (and learned positions), the final norm and an untied head."""
        n = 2 if self.norm == "layernorm" else 1
        if embedding:
            n += 1 + (1 if self.learned_positions else 0)
        if head and not self.tie_embeddings:
            n += 2 if self.head_bias else 1
        return n

    def layer_tensor_sizes(self) -> tuple[int, ...]:
        """Elements of each parameter tensor of one block, the tensors :meth:`layer_tensors`
        counts (weights and biases apart, fused projections as one, each MoE projection of all
        experts as one 3-D tensor); they sum to :meth:`layer_params`."""
        d, q, kv = self.hidden_size, self.q_width, self.kv_width
        if self.kv_lora_rank:  # MLA's projections, then its q_a / kv_a norms
            sizes = [a * b for a, b in self.latent_shapes().values()]
            sizes += [self.q_lora_rank, self.kv_lora_rank] if self.q_lora_rank else [self.kv_lora_rank]
            sizes += self._mlp_tensor_sizes()
            return tuple(sizes + [d] * (self.norms_per_layer * (2 if self.norm == "layernorm" else 1)))
        sizes = [d * (q + 2 * kv)] if self.fused_qkv else [d * q, d * kv, d * kv]
        if self.qkv_bias:
            sizes += [q + 2 * kv] if self.fused_qkv else [q, kv, kv]
        sizes.append(q * d)
        if self.o_bias:
            sizes.append(d)
        if self.qk_norm == "head":
            sizes += [self.head_dim, self.head_dim]
        elif self.qk_norm in ("projection", "per_head"):
            sizes += [q, kv]
        if self.attention_sinks:
            sizes.append(self.num_heads)
        sizes += self._mlp_tensor_sizes()
        sizes += [d] * (self.norms_per_layer * (2 if self.norm == "layernorm" else 1))
        return tuple(sizes)

    def _mlp_tensor_sizes(self) -> list[int]:
        d, i, e = self.hidden_size, self.intermediate_size, self.num_experts
        inputs = 2 * i if self.gated_mlp else i  # gate and up, or up
        if e > 1:  # transformers 5: gate_up_proj and down_proj of every expert, the router
            sizes = [e * d * inputs, e * i * d] + ([e * inputs, e * d] if self.mlp_bias else [])
            sizes += [e * d] + ([e] if self.router_bias else [])
        elif self.fused_gate_up or not self.gated_mlp:
            sizes = [d * inputs, i * d] + ([inputs, d] if self.mlp_bias else [])
        else:
            sizes = [d * i, d * i, i * d] + ([i, i, d] if self.mlp_bias else [])
        if self.shared_expert_size:  # Qwen2-MoE: shared gate, up, down and its sigmoid gate (d → 1)
            sizes += [d * self.shared_expert_size] * 3 + ([d] if self.shared_expert_gate else [])
        return sizes

    def outside_tensor_sizes(self, embedding: bool = True, head: bool = True) -> tuple[int, ...]:
        """Elements of the tensors :meth:`outside_tensors` counts: the embedding and learned
        positions, the final norm, an untied head."""
        d = self.hidden_size
        sizes = [d] * (2 if self.norm == "layernorm" else 1)
        if embedding:
            sizes += [self.vocab_size * d] + ([self.learned_positions * d] if self.learned_positions else [])
        if head and not self.tie_embeddings:
            sizes += [self.vocab_size * d] + ([self.vocab_size] if self.head_bias else [])
        return tuple(sizes)

    # ---- LoRA -------------------------------------------------------------------
    def lora_params(self, rank: int, targets: tuple[str, ...], linear_experts: bool) -> int:
        """Exact adapter size: r·(in + out) per adapted matrix (PEFT's lora_A and lora_B), over
        :meth:`adapted_rows` (``linear_experts``: whether the routed experts are nn.Linear modules a target
        reaches, ``Plan.linear_experts``).

        Fused matrices (GPT-2's c_attn, Phi-3's qkv_proj and gate_up_proj) get one adapter
        over the fused width when any of their parts is targeted, as PEFT does when the
        fused module is named.
        """
        head = self.head_adapter_shape(targets)
        head_params = rank * sum(head) if head else 0
        if self.recurrent_mixer:  # a hybrid: each target only in the layers that hold its matrix
            chosen = set(normalise_lora_targets(targets))
            if self.fused_qkv and chosen & {"q_proj", "k_proj", "v_proj"}:
                chosen -= {"q_proj", "k_proj", "v_proj"}
            return self._hybrid_lora_params(rank, chosen) + head_params
        return head_params + self.over_blocks(
            lambda dense: sum(
                copies * rank * (fan_in + fan_out)
                for fan_in, fan_out, copies in self.adapted_matrices(targets, linear_experts, dense)
            )
        )

    def mixer_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of a hybrid's Mamba-2 in_proj (d → 2·inner + 2·groups·state + heads) and out_proj
        (inner → d), core.hybrid._mamba2_params' widths; empty for any other model. A Gated DeltaNet layer's
        ``in_proj`` stands for its input projections together (GDN_IN_PROJ: each reads d; their outputs are
        q, k, v, the gate z and b, a: 2·Hk·dk + 2·H·dv + 2·H), so (k·d, Σ out) for k of them: a LoRA of rank r
        on each has r·(k·d + Σ out) parameters."""
        mixer = self.mixer
        if mixer is None:
            return {}
        inner, conv = mixer.inner, mixer.conv_dim  # conv: q·k·v or x·B·C, RecurrentMixer.conv_dim
        if mixer.kind == "gated_deltanet":
            k = len(GDN_IN_PROJ.get(self.family, ("in_proj",)))
            width = conv + inner + 2 * mixer.heads
            return {"in_proj": (k * self.hidden_size, width), "out_proj": (inner, self.hidden_size)}
        width = inner + conv + mixer.heads
        return {"in_proj": (self.hidden_size, width), "out_proj": (inner, self.hidden_size)}

    def hybrid_layer_counts(self) -> tuple[int, int, int]:
        """(attention layers, Mamba-2 layers, layers with an MLP) of a hybrid: Granite 4.0-H and Bamba run their
        MLP in every layer, Nemotron-H (family nemotron_h) in the layers that hold neither mixer."""
        a, r = self.attention_layers, self.recurrent_layers
        return a, r, self.num_layers - a - r if self.family == "nemotron_h" else self.num_layers

    def hybrid_layer_params(self) -> tuple[tuple[int, int], ...]:
        """(layers, one layer's parameters) of each kind of a hybrid's decoder layers (attention, recurrent, then
        Nemotron-H's MLP-only ones), as core.hybrid counts them from the config (transformers 5.25.0: the
        mixer with a conv bias and no projection bias, the released configs' setting); empty for any other
        model. FSDP and accelerate wrap each decoder layer as one unit (``_no_split_modules``:
        GraniteMoeHybridDecoderLayer, BambaDecoderLayer, NemotronHBlock, Qwen3NextDecoderLayer,
        Qwen3_5DecoderLayer), so a hybrid's units differ in size by kind."""
        kind = self._hybrid_kind_params()
        if not kind:
            return ()
        attention_layers, recurrent_layers, mlp_layers = self.hybrid_layer_counts()
        kinds: tuple[tuple[int, int], ...] = ((attention_layers, kind[ATTENTION]), (recurrent_layers, kind[RECURRENT]))
        if self.family == "nemotron_h":
            kinds += ((mlp_layers, kind[MLP]),)
        return tuple((count, params) for count, params in kinds if count)

    def hybrid_unit_params(self) -> tuple[int, ...]:
        """One decoder layer's parameters for each of a hybrid's layers in module order (``layer_pattern``, the
        sizes of :meth:`hybrid_layer_params`): the units FSDP gathers one after another, each beside its
        neighbour. Empty where the order is not known ("" pattern) or the model is no hybrid; Falcon-H1's
        layers (both mixers) are not counted here either."""
        kind = self._hybrid_kind_params()
        if not kind or not self.layer_pattern or LAYER_CHARS[PARALLEL] in self.layer_pattern:
            return ()
        return tuple(kind[{MOE: MLP}.get(PATTERN_KINDS[c], PATTERN_KINDS[c])] for c in self.layer_pattern)

    def _hybrid_kind_params(self) -> dict[str, int]:
        """One decoder layer's parameters by kind (ATTENTION, RECURRENT, Nemotron-H's MLP for its MLP or MoE
        layers); see :meth:`hybrid_layer_params`. Empty for any other model."""
        if not self.recurrent_mixer:
            return {}
        d, m = self.hidden_size, self.hybrid
        assert m is not None
        mix = m.mixer
        if mix.kind == "gated_deltanet":  # core.hybrid._gated_deltanet_stack
            inner = mix.heads * mix.head_dim
            mixer = d * (2 * mix.groups * mix.state + 2 * inner) + d * 2 * mix.heads
            mixer += mix.conv_dim * mix.conv_kernel + 2 * mix.heads + mix.head_dim + inner * d
            q = self.q_width  # gated attention: q_proj's output is q and its gate; per-head q / k RMSNorms
            attention = 2 * d * q + 2 * d * self.kv_width + q * d + 2 * self.head_dim
        else:  # core.hybrid._mamba2_params: in_proj, conv1d with bias, dt_bias / A_log / D, gated norm, out_proj
            width = 2 * mix.inner + 2 * mix.groups * mix.state + mix.heads
            mixer = d * width + mix.inner * d + mix.conv_dim * (mix.conv_kernel + 1) + 3 * mix.heads + mix.inner
            attention = 2 * d * self.q_width + 2 * d * self.kv_width
        up = 3 if self.gated_mlp else 2  # Nemotron-H's MLP and experts: up and down (relu2), no gate
        experts = self.num_experts * up * d * self.intermediate_size if self.num_experts > 1 else 0
        shared = up * d * self.shared_expert_size + (d if self.shared_expert_size and self.shared_expert_gate else 0)
        mlp = experts + self.router_params() + shared if self.num_experts > 1 else up * d * self.intermediate_size
        if self.family == "nemotron_h":  # NemotronHBlock: one RMSNorm, then one of the four
            return {ATTENTION: attention + d, RECURRENT: mixer + d, MLP: mlp + d}
        return {ATTENTION: attention + mlp + 2 * d, RECURRENT: mixer + mlp + 2 * d}

    def _hybrid_lora_params(self, rank: int, chosen: set[str]) -> int:
        attention, recurrent, mlp = self.hybrid_layer_counts()
        shapes = self.linear_shapes()
        total = 0
        for name in chosen:
            if name in self.mixer_shapes():
                total += recurrent * rank * sum(self.mixer_shapes()[name])
            elif name == "q_proj" and self.family in GDN_IN_PROJ:  # gated attention: q_proj's output is q and gate
                total += attention * rank * (self.hidden_size + 2 * self.q_width)
            elif name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                total += attention * rank * sum(shapes[name])
            elif name in shapes:  # the MLP's (a mixture of experts' matrices are 3-D parameters: not adapted)
                total += (mlp * rank * sum(shapes[name])) if self.num_experts == 1 else 0
        return total

    def peft_target_names(self, targets: tuple[str, ...], linear_experts: bool) -> tuple[str, ...]:
        """``targets`` as PEFT's target_modules must name them on this model: a Gated DeltaNet hybrid's ``in_proj``
        is its family's input projections (GDN_IN_PROJ); Mixtral's and Phi-MoE's experts under transformers 4.x
        (``linear_experts``, Plan.linear_experts) are w1 / w3 / w2 (MIXTRAL_4X_MLP_NAMES: gate_proj, up_proj and
        down_proj match nothing there); every other name as it is."""
        if self.family in ("mixtral", "phimoe") and linear_experts and self.num_experts > 1:
            return tuple(MIXTRAL_4X_MLP_NAMES.get(t, t) for t in targets)
        names = GDN_IN_PROJ.get(self.family) if self.recurrent_mixer == "gated_deltanet" else None
        if not names:
            return targets
        return tuple(n for t in targets for n in (names if t == "in_proj" else (t,)))

    def head_adapter_shape(self, targets: tuple[str, ...]) -> tuple[int, int] | None:
        """(in, out) of the output head when a LoRA adapts it: (d, V), one matrix outside the blocks,
        tied head or not. A head tied to the embedding keeps its one frozen weight and gets an adapter of
        its own all the same: huggingface/peft 51c2ff66 src/peft/tuners/tuners_utils.py
        ``inject_adapter`` wraps the matched ``lm_head`` like any linear (``_create_and_replace``) and
        only warns (``_check_tied_modules`` → ``_get_tied_target_modules``); the embedding gets an
        adapter too only when it is targeted as well and ``ensure_weight_tying`` is set."""
        if HEAD_TARGET not in normalise_lora_targets(targets):
            return None
        return self.hidden_size, self.vocab_size

    def adapter_blocks(self) -> tuple[tuple[int, bool], ...]:
        """(layers, dense) of each kind of block whose adapters differ, the ``dense`` :meth:`adapted_rows` takes: a
        mixture of experts' MoE blocks, then its dense ones (DeepSeek-V2/V3's, GLM-4.5's and ERNIE 4.5's first
        layers, Llama 4's interleaved ones: ``first_k_dense_replace`` of them, whatever their order); every other
        model's blocks as one kind. A hybrid's layers keep their own rule (:meth:`_hybrid_lora_params`) and are one
        kind here. Every count over the model's blocks is Σ layers × one such block's (:meth:`over_blocks`)."""
        # Asked a few dozen times per estimate; the spec is frozen, so the answer is kept on the instance (outside the
        # dataclass fields, as architecture_params').
        kinds = self.__dict__.get("_adapter_blocks")
        if kinds is None:
            dense = self.dense_layers
            both = ((self.num_layers - dense, False), (dense, True))
            kinds = tuple((n, kind) for n, kind in both if n) if dense else ((self.num_layers, False),)
            object.__setattr__(self, "_adapter_blocks", kinds)
        return kinds

    def over_blocks(self, per_block: Callable[[bool], int]) -> int:
        """Σ layers × ``per_block(dense)`` over :meth:`adapter_blocks`: a block's count, over the model."""
        return sum(layers * per_block(dense) for layers, dense in self.adapter_blocks())

    def adapted_rows(
        self, targets: tuple[str, ...], linear_experts: bool, dense: bool = False
    ) -> list[tuple[int, int, int, bool]]:
        """(in, out, copies, routed) of every matrix one block adapts, fused ones as one matrix: the one rule of
        what PEFT's target_modules reach, which the adapters' sizes, their gradients and optimizer state, their
        activations and their FLOPs all read; ``dense`` picks the kind of block (:meth:`adapter_blocks`).

        On a mixture of experts the MLP's targets reach each routed expert (``routed``: ``num_experts`` copies,
        each seeing top-k / experts of the tokens) only where transformers builds them as nn.Linear
        (``linear_experts``: 4.x, LINEAR_EXPERTS_4X), and a shared expert's gate, up and down (its own width,
        ``shared_expert_size``) in either release (tests/data/moe_lora/: Qwen2-MoE, DeepSeek-V3, GLM-4 MoE, ERNIE
        4.5 and Llama 4 under 5.25.0 adapt the shared expert alone). A dense block of such a model (``dense``)
        holds a plain gated MLP of ``dense_intermediate_size`` instead, nn.Linear in every release
        (DeepseekV3MLP, Glm4MoeMLP, Ernie4_5_MoeMLP, Llama4TextMLP in transformers 4.57.1 and 5.25.0), which the
        MLP targets adapt at that width (tests/data/moe_lora/'s dense_first rows): the counts (adapters, gradients,
        optimizer state), FLOPs, kernel counts and one block's kept activations (a mean over the kinds, as its base
        MLP's: :meth:`target_rows`) read every kind. Under all-linear an MoE block also adapts its
        router and Qwen2-MoE's shared-expert gate where the release builds them as nn.Linear
        (:meth:`all_linear_rows`); the seven names alone reach neither."""
        shapes = self.linear_shapes()
        chosen = set(normalise_lora_targets(targets))
        moe = self.num_experts > 1 and not dense
        if dense:  # the dense block's MLP: one gated MLP of dense_intermediate_size
            d, w = self.hidden_size, self.dense_intermediate_size
            shapes = {**shapes, "gate_proj": (d, w), "up_proj": (d, w), "down_proj": (w, d)}
        experts = 1 if not moe else self.num_experts if linear_experts else 0
        out: list[tuple[int, int, int, bool]] = []
        if self.fused_qkv and chosen & {"q_proj", "k_proj", "v_proj"}:
            out.append((self.hidden_size, self.q_width + 2 * self.kv_width, 1, False))
            chosen -= {"q_proj", "k_proj", "v_proj"}
        if self.fused_gate_up and self.gated_mlp and chosen & {"gate_proj", "up_proj"}:
            if experts:
                out.append((self.hidden_size, 2 * shapes["up_proj"][1], experts, moe))
            chosen -= {"gate_proj", "up_proj"}
        d, s = self.hidden_size, self.shared_expert_size
        for name in LORA_TARGETS:
            if name not in chosen or name not in shapes:
                continue
            fan_in, fan_out = shapes[name]
            if name not in MLP_TARGETS:
                out.append((fan_in, fan_out, 1, False))
                continue
            if experts:
                out.append((fan_in, fan_out, experts, moe))
            if moe and s:  # the shared expert: a gated MLP of its own width
                out.append((s, d, 1, False) if name == "down_proj" else (d, s, 1, False))
        if ALL_LINEAR in chosen:
            out += self.all_linear_rows(linear_experts, dense)
        return out

    def all_linear_rows(self, linear_experts: bool, dense: bool = False) -> list[tuple[int, int, int, bool]]:
        """(in, out, copies, routed) of the matrices PEFT's all-linear adapts in one block beyond the seven names: a
        mixture of experts' router (d → E, one copy that sees every token) and Qwen2-MoE's shared-expert gate (d → 1)
        where the release builds them as nn.Linear (ROUTER_LINEAR_4X under 4.x, ``linear_experts``; ROUTER_LINEAR in
        either; SHARED_GATE_LINEAR), in its MoE blocks only (ERNIE 4.5's dense-first row: ``mlp.gate`` in layer 1
        alone). A dense model, a dense block or a hybrid (its own rule): none."""
        if self.num_experts == 1 or dense or self.recurrent_mixer:
            return []
        d = self.hidden_size
        rows: list[tuple[int, int, int, bool]] = []
        if self.family in ROUTER_LINEAR or (linear_experts and self.family in ROUTER_LINEAR_4X):
            rows.append((d, self.num_experts, 1, False))
        if self.family in SHARED_GATE_LINEAR and self.shared_expert_size and self.shared_expert_gate:
            rows.append((d, 1, 1, False))
        return rows

    def adapted_matrices(
        self, targets: tuple[str, ...], linear_experts: bool, dense: bool = False
    ) -> list[tuple[int, int, int]]:
        """(in, out, copies) of every matrix one block of the kind ``dense`` adapts (:meth:`adapted_rows`)."""
        rows = self.adapted_rows(targets, linear_experts, dense)
        return [(fan_in, fan_out, copies) for fan_in, fan_out, copies, _ in rows]

    def adapted_shapes(self, targets: tuple[str, ...], linear_experts: bool) -> list[tuple[int, int]]:
        """(in, out) of every matrix any block adapts, over the kinds of :meth:`adapter_blocks` (PEFT's refusals and
        its shared projections look at every targeted module)."""
        return [
            (fan_in, fan_out)
            for _, dense in self.adapter_blocks()
            for fan_in, fan_out, _ in self.adapted_matrices(targets, linear_experts, dense)
        ]

    def target_rows(self, name: str, linear_experts: bool) -> list[tuple[float, int, int, int, bool]]:
        """(held, in, out, copies, routed) of what one target ``name`` adapts, over the kinds of :meth:`adapter_blocks`:
        ``held`` the share of the layers of the kind (a per-block figure's mean over the model). A mixture of experts
        (not a hybrid): :meth:`adapted_rows` of each kind (``all-linear``: its router rows, :meth:`all_linear_rows`);
        any other model: the target's one matrix (:meth:`linear_shapes`, unfused) in every block, as the per-block
        readers (IA3's kept tensors, ``flops.method_work``) always read it."""
        if self.num_experts > 1 and not self.recurrent_mixer:
            rows: list[tuple[float, int, int, int, bool]] = []
            for layers, dense in self.adapter_blocks():
                held = layers / self.num_layers
                kind = (
                    self.all_linear_rows(linear_experts, dense)
                    if name == ALL_LINEAR
                    else self.adapted_rows((name,), linear_experts, dense)
                )
                rows += [(held, fan_in, fan_out, copies, routed) for fan_in, fan_out, copies, routed in kind]
            return rows
        shape = self.linear_shapes().get(name)
        return [(1.0, *shape, 1, False)] if shape else []

    def dora_magnitude_params(self, targets: tuple[str, ...], linear_experts: bool) -> int:
        """DoRA's trained magnitude: one value per output row of every adapted matrix
        (PEFT ``lora_magnitude_vector``, shape [out_features]), the head's V rows when it is adapted."""
        head = self.head_adapter_shape(targets)
        blocks = self.over_blocks(
            lambda dense: sum(fan_out * c for _, fan_out, c in self.adapted_matrices(targets, linear_experts, dense))
        )
        return blocks + (head[1] if head else 0)

    def ia3_vectors(
        self, targets: tuple[str, ...], feedforward: tuple[str, ...], linear_experts: bool, dense: bool = False
    ) -> list[tuple[int, int, bool]]:
        """(elements, copies, feedforward) of each IA3 vector one block trains.

        huggingface/peft 51c2ff66 src/peft/tuners/ia3/layer.py ``IA3Layer.update_layer``: the
        vector ``ia3_l`` has shape (1, in_features) on a feedforward module (it scales the
        input) and (out_features, 1) on any other (it scales the output). Fused matrices get one
        vector over the fused width, as :meth:`adapted_matrices` gives them.
        """
        ff = set(normalise_ia3_feedforward(feedforward))
        groups: list[tuple[str, ...]] = [("q_proj", "k_proj", "v_proj")] if self.fused_qkv else []
        groups += [("gate_proj", "up_proj")] if self.fused_gate_up and self.gated_mlp else []
        out: list[tuple[int, int, bool]] = []
        done: set[str] = set()
        for name in normalise_lora_targets(targets):
            if name == ALL_LINEAR:  # the router and shared-expert gate: output-scaled (no feedforward name is theirs)
                extra = self.all_linear_rows(linear_experts, dense)
                out += [(fan_out, copies, False) for _, fan_out, copies, _ in extra]
                continue
            if name in done:
                continue
            group = next((g for g in groups if name in g), (name,))
            done.update(group)
            on_input = bool(ff & set(group))
            for fan_in, fan_out, copies in self.adapted_matrices((name,), linear_experts, dense):
                out.append((fan_in if on_input else fan_out, copies, on_input))
        return out

    def litgpt_prompt_tensors(self, prompt_length: int, start_layer: int) -> list[int]:
        """Elements of each tensor LitGPT's Adapter trains, over the whole model.

        Lightning-AI/litgpt 0f021f3 lit_gpt/adapter.py ``CausalSelfAttention.__init__``: every
        block from ``adapter_start_layer`` on has ``adapter_wte = nn.Embedding(adapter_prompt_length,
        n_embd)`` and ``gating_factor`` of shape (1, 1, n_head, 1); ``mark_only_adapter_as_trainable``
        (``adapter_filter``: "adapter_wte" or "gating_factor" in the name) freezes the rest.
        """
        adapted = max(0, self.num_layers - start_layer)
        return [prompt_length * self.hidden_size, self.num_heads] * adapted

    def litgpt_v2_block_tensors(self) -> list[tuple[int, int]]:
        """Each tensor Adapter v2 adds to one block (besides the prompts), as (elements, how many):
        an expert's tensors are one entry with the expert count, so a block of thousands of experts
        stays a handful of entries (the diagnosis estimates hundreds of plans).

        Lightning-AI/litgpt 0f021f3 lit_gpt/adapter_v2.py: every linear layer is an
        ``AdapterV2Linear`` with ``adapter_bias`` and ``adapter_scale`` of [out_features] each (the
        fused qkv ``attn``, ``proj``, the MLP's ``fc_1`` / ``fc_2`` / ``fc`` and ``proj``, a MoE's
        ``gate`` and every expert's), and ``adapter_filter`` trains "norm_1" and "norm_2" (weight, and
        bias for a LayerNorm); other norms (a post-norm's) match no name and stay frozen.
        """
        d, i = self.hidden_size, self.intermediate_size
        linears = [(self.q_width + 2 * self.kv_width, 1), (d, 1)]
        mlp = ([i, i] if self.gated_mlp else [i]) + [d]
        linears += [(n, self.num_experts) for n in mlp] + ([(self.num_experts, 1)] if self.num_experts > 1 else [])
        norm_tensors = 2 if self.norm == "layernorm" else 1
        # adapter_bias and adapter_scale of each linear: two tensors of its out_features.
        return [(n, 2 * copies) for n, copies in linears] + [(d, min(2, self.norms_per_layer) * norm_tensors)]

    def litgpt_v2_root_tensors(self) -> list[int]:
        """Adapter v2's tensors outside the blocks: ``ln_f`` (trained, ``adapter_filter``) and the
        output head's ``adapter_bias`` and ``adapter_scale`` over the (padded) vocabulary (lit_gpt/
        adapter_v2.py ``GPT.__init__``: ``lm_head = AdapterV2Linear(n_embd, padded_vocab_size)``)."""
        norm_tensors = 2 if self.norm == "layernorm" else 1
        return [self.hidden_size] * norm_tensors + [self.vocab_size] * 2

    def ia3_params(self, targets: tuple[str, ...], feedforward: tuple[str, ...], linear_experts: bool) -> int:
        """Exact IA3 size: Σ in (feedforward) or out (others) over the targets, every block."""
        return self.over_blocks(
            lambda dense: sum(n * c for n, c, _ in self.ia3_vectors(targets, feedforward, linear_experts, dense))
        )

    # ---- KV cache ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def renamed(self, name: str) -> ModelSpec:
        return replace(self, name=name)

    def edited(self, **changes: Any) -> ModelSpec:
        """This model with ``changes`` typed in (the window's dimensions): a hybrid's layer order is dropped ("",
        not known) where the edit changes how many layers there are, which says nothing of where they sit; the
        plan then reads the counts alone, as before the order was kept."""
        if self.layer_pattern and changes.get("num_layers", self.num_layers) != self.num_layers:
            changes.setdefault("layer_pattern", "")
        return replace(self, **changes)


MAX_PARAMS: Final = 10**16  # parameters a typed or imported count may claim; 10¹⁵ stays expressible
MAX_NAME_CHARS: Final = 1_000  # names, ids and families; keeps a plan file a few kB
_FLAGS: Final = (
    "gated_mlp",
    "tie_embeddings",
    "qkv_bias",
    "o_bias",
    "mlp_bias",
    "fused_qkv",
    "fused_gate_up",
    "post_norm",
    "router_bias",
    "attention_sinks",
    "alibi",
    "low_precision_layernorm",
    "parallel_residual",
    "head_bias",
    "shared_expert_gate",
    "recurrent_state_float32",
)


def is_int(value: object) -> bool:
    """An int that is not a bool (JSON true/false are ints in Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_text(path: str, value: object, *, allow_empty: bool = False) -> None:
    """A name, id or family: a string of sensible length that a UTF-8 plan file can hold."""
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise PlanError(path, value, "a string" if allow_empty else "a non-empty name")
    if len(value) > MAX_NAME_CHARS:
        raise PlanError(path, value, f"at most {MAX_NAME_CHARS:,} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PlanError(path, value, "text without lone surrogates", "cannot be saved as UTF-8") from None


# Upper bounds: generous (a 10¹⁵-parameter model stays expressible) yet they keep every
# product in the estimator finite.
LIMITS: Final[dict[str, int]] = {
    "vocab_size": 10_000_000,
    "hidden_size": 1_000_000,
    "num_layers": 10_000,
    "num_heads": 10_000,
    "num_kv_heads": 10_000,
    "head_dim": 65_536,
    "intermediate_size": 10_000_000,
    "norms_per_layer": 8,
    "num_experts": 4_096,
    "experts_per_token": 4_096,
    "max_position_embeddings": 100_000_000,
}

MODEL_FIELDS: Final = tuple(f.name for f in fields(ModelSpec))


def model_from_dict(data: Mapping[str, Any], where: str = "model") -> ModelSpec:
    """The inverse of :meth:`ModelSpec.to_dict`, with type checks that name the field."""
    if not isinstance(data, Mapping):
        raise PlanError(where, type(data).__name__, "a JSON object")
    unknown = set(data) - set(MODEL_FIELDS)
    if unknown:
        raise PlanError(f"{where}.{sorted(unknown)[0]}", data[sorted(unknown)[0]], "a known model field", "unknown key")
    kwargs: dict[str, Any] = {}
    for f in fields(ModelSpec):
        if f.name not in data:
            if f.name in _REQUIRED:
                raise PlanError(f"{where}.{f.name}", None, "a value (the key is missing)")
            continue
        value = data[f.name]
        expected = str(f.type)
        if expected == "str":
            ok = isinstance(value, str)
        elif expected == "bool":
            ok = isinstance(value, bool)
        elif expected == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif expected == "float":
            number = finite_number(value)
            ok = number is not None
            value = number if ok else value
        else:  # int | None
            ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise PlanError(f"{where}.{f.name}", value, f"a value of type {expected}")
        kwargs[f.name] = value
    return ModelSpec(**kwargs)


_REQUIRED: Final = frozenset(
    (
        "name",
        "family",
        "vocab_size",
        "hidden_size",
        "num_layers",
        "num_heads",
        "num_kv_heads",
        "head_dim",
        "intermediate_size",
    )
)


# ---- modules a bitsandbytes base keeps in 16 bits ----------------------------------------
# transformers' BitsAndBytesConfig(llm_int8_skip_modules=[...]) and a pre-quantised checkpoint's
# quantization_config.llm_int8_skip_modules. The rule is transformers' (huggingface/transformers
# 01ae98ae2414210efd0d9ac1ffe78ff21588f1f7, src/transformers/integrations/bitsandbytes.py,
# _replace_with_bnb_linear): a linear stays an nn.Linear when its own name is in the list, or when
# for some entry ``key + "." in full_name or key == full_name`` (a substring test: "0.mlp" also
# reaches layers 10, 20 ...). A list given replaces the default one (get_keys_to_not_convert: the
# output head): quantizers/quantizer_bnb_4bit.py ``_process_model_before_weight_loading`` (and
# HfQuantizer.get_modules_to_not_convert in later releases) take llm_int8_skip_modules instead of
# it, so a list that does not name the head quantises the head too.
SKIP_FIELD: Final = "bnb_skip_modules"
HEAD_NAME: Final = "lm_head"


def parse_skip_modules(text: str) -> tuple[str, ...]:
    """A comma list of module names (``model.layers.0.mlp, lm_head``); an empty entry is refused
    (transformers would match it against every name: ``"" + "."`` is in each dotted name)."""
    if not isinstance(text, str):
        raise PlanError(SKIP_FIELD, text, "a comma list of module names")
    if not text.strip():
        return ()
    names = tuple(n.strip() for n in text.split(","))
    if any(not n for n in names):
        raise PlanError(
            SKIP_FIELD, text, "a comma list of module names", "an empty name would keep every linear in 16 bits"
        )
    return names


def skip_matches(key: str, full_name: str) -> bool:
    """transformers' test of one llm_int8_skip_modules entry against a linear's dotted name."""
    return key == full_name.rpartition(".")[2] or key + "." in full_name or key == full_name


def _linear_parts(model: ModelSpec) -> tuple[list[tuple[str, int]], list[tuple[str, int]], list[tuple[str, int]]]:
    """(name, weight elements) of one block's attention linears, its MLP (or each expert's) linears,
    and its shared expert's, named as transformers' Llama / Qwen / Mistral classes name them. Fused
    projections are one linear (``qkv_proj``, ``gate_up_proj``)."""
    shapes = {name: fan_in * fan_out for name, (fan_in, fan_out) in model.linear_shapes().items()}
    names = ["gate_proj", "up_proj", "down_proj"] if model.gated_mlp else ["up_proj", "down_proj"]
    if model.kv_lora_rank:  # MLA: q_a / q_b (or q), kv_a_proj_with_mqa, kv_b, o under their own names
        attn = [(n, a * b) for n, (a, b) in model.latent_shapes().items()]
    elif model.fused_qkv:
        attn = [("qkv_proj", shapes["q_proj"] + shapes["k_proj"] + shapes["v_proj"]), ("o_proj", shapes["o_proj"])]
    else:
        attn = [(n, shapes[n]) for n in ("q_proj", "k_proj", "v_proj", "o_proj")]
    if model.gated_mlp and model.fused_gate_up:
        mlp = [("gate_up_proj", shapes["gate_proj"] + shapes["up_proj"]), ("down_proj", shapes["down_proj"])]
    else:
        mlp = [(n, shapes[n]) for n in names]
    shared = model.shared_expert_size * model.hidden_size
    shared_parts = [(n, shared) for n in ("gate_proj", "up_proj", "down_proj")] if shared else []
    return attn, mlp, shared_parts


def bnb_linear_names(model: ModelSpec) -> list[tuple[str, int]]:
    """(dotted name, weight elements) of every linear bitsandbytes would replace
    (``model.layers.{i}.self_attn.q_proj``, ``model.layers.{i}.mlp.down_proj``, each expert's
    ``mlp.experts.{e}.gate_proj``, Qwen2-MoE's ``mlp.shared_expert.*``), plus an untied ``lm_head``.
    Layers × experts names: for tests and small models; :func:`kept_linears` never lists them."""
    attn, mlp, shared = _linear_parts(model)
    out: list[tuple[str, int]] = []
    for layer in range(model.num_layers):
        block = f"model.layers.{layer}"
        out += [(f"{block}.self_attn.{n}", el) for n, el in attn]
        if model.num_experts == 1:
            out += [(f"{block}.mlp.{n}", el) for n, el in mlp]
        else:
            for e in range(model.num_experts):
                out += [(f"{block}.mlp.experts.{e}.{n}", el) for n, el in mlp]
        out += [(f"{block}.mlp.shared_expert.{n}", el) for n, el in shared]
    if model.head_params():
        out.append((HEAD_NAME, model.head_params()))
    return out


@dataclass(frozen=True)
class KeptLinears:
    """What a skip list keeps in 16 bits: the blocks' matrices (count and weight elements, as
    the architecture counts them), whether the head stays 16-bit, and the entries that matched
    no linear of the model."""

    matrices: int
    elements: int
    head_kept: bool
    unmatched: tuple[str, ...]


class _ExpertMatcher:
    """Which experts ``{prefix}{e}.{name}`` (prefix ``model.layers.{i}.mlp.experts.``) a key keeps,
    without listing layers × experts names (a custom model may have 10⁴ layers of 4,096 experts).
    ``key + "."`` occurs inside the prefix (every expert), inside ``{e}.{name}`` (the same experts in
    every layer), or across the two (``prefix`` ends with its head, ``{e}.{name}`` starts with its
    tail); the key may also be the linear's own name or its whole name (:func:`skip_matches`)."""

    def __init__(self, experts: int) -> None:
        self.experts = experts
        self._sets: dict[tuple[str, str, int], frozenset[int]] = {}

    def _experts_with(self, text: str, name: str, head: int) -> frozenset[int]:
        """Experts whose ``{e}.{name}`` contains ``text`` (head 0) or starts with ``text[head:]``."""
        cache = (text, name, head)
        if cache not in self._sets:
            if head == 0:
                found = (e for e in range(self.experts) if text in f"{e}.{name}")
            else:
                found = (e for e in range(self.experts) if f"{e}.{name}".startswith(text[head:]))
            self._sets[cache] = frozenset(found)
        return self._sets[cache]

    def matches(self, key: str, prefix: str, name: str) -> frozenset[int] | None:
        """The experts ``key`` keeps (None: all of them)."""
        s = key + "."
        if key == name or s in prefix:
            return None
        found = set(self._experts_with(s, name, 0))
        for head in range(1, len(s)):
            if prefix.endswith(s[:head]):
                found |= self._experts_with(s, name, head)
        if key.startswith(prefix):
            index, _, rest = key[len(prefix) :].partition(".")
            if rest == name and index.isdigit() and str(int(index)) == index and int(index) < self.experts:
                found.add(int(index))
        return frozenset(found)


def _expert_kept(matcher: _ExpertMatcher, keys: tuple[str, ...], prefix: str, name: str, used: set[str]) -> int:
    """How many experts' ``name`` linear under ``prefix`` the keys keep (the keys that keep one go in ``used``)."""
    kept: set[int] = set()
    every = False
    for k in keys:
        found = matcher.matches(k, prefix, name)
        if found is None or found:
            used.add(k)
        if found is None:
            every = True
        elif not every:
            kept |= found
    return matcher.experts if every else len(kept)


@lru_cache(maxsize=64)
def kept_linears(model: ModelSpec, keys: tuple[str, ...], linear_experts: bool = True) -> KeptLinears:
    """The linears ``keys`` keeps out of a bitsandbytes base (see :func:`skip_matches`), in
    O(layers × keys) whatever the experts (:class:`_ExpertMatcher`). No list: transformers' default,
    the head alone. ``linear_experts`` False: the routed experts are no linears (3-D parameters, left
    unquantised whatever the list says: Plan.bnb_16bit_experts), so no key keeps one."""
    if not keys:
        return KeptLinears(0, 0, True, ())
    attn, mlp, shared = _linear_parts(model)
    matcher = _ExpertMatcher(model.num_experts)
    matrices = elements = 0
    used: set[str] = set()
    for layer in range(model.num_layers):
        block = f"model.layers.{layer}"
        named = [(f"{block}.self_attn.{n}", el) for n, el in attn]
        named += [(f"{block}.mlp.shared_expert.{n}", el) for n, el in shared]
        if model.num_experts == 1:
            named += [(f"{block}.mlp.{n}", el) for n, el in mlp]
        for name, el in named:
            hits = [k for k in keys if skip_matches(k, name)]
            used.update(hits)
            if hits:
                matrices, elements = matrices + 1, elements + el
        if model.num_experts > 1 and linear_experts:
            for n, el in mlp:
                count = _expert_kept(matcher, keys, f"{block}.mlp.experts.", n, used)
                matrices, elements = matrices + count, elements + el * count
    head_kept = not model.head_params()
    if model.head_params():
        hits = [k for k in keys if skip_matches(k, HEAD_NAME)]
        used.update(hits)
        head_kept = bool(hits)
    return KeptLinears(matrices, elements, head_kept, tuple(k for k in keys if k not in used))
