"""Every input of a plan, once: the one table the Plan, the command line and the forms read.

Each :class:`Input` row names the input by its attribute path on :class:`~core.plan.Plan`
(``workload.micro_batch``, ``parallel.tensor_parallel``, ``lora.rank``, ``method``) and
gives its label, unit, kind, range, default, tooltip, command-line flags and help, and when
it matters for a plan. From it:

- :mod:`core.plan` checks every value (:func:`checks_of`): a value out of range raises a
  :class:`~core.errors.PlanError` whose field is the attribute path; its dataclasses take
  their defaults from here (:data:`DEFAULTS`);
- :mod:`core.cli.parser` builds the options of ``vramplan estimate`` (flags, types, choices,
  help);
- the forms in ``gui/forms`` build each field (range, unit, tooltip, label, steps) and
  show its row only when it matters.

Ranges: every bound is inclusive, and the smallest value is a sane one (a utilisation of
0.1 %, a card of 10 MB), never an open "above 0" that lets 1e-300 through. An input whose
``zero_means`` is set also takes 0, meaning that ("the engine's default").

The enums of the choices live here too, with their display labels; :mod:`core.plan`
re-exports them for the code that has always imported them from there. Past 400 lines
because the table is: one declarative row per input.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from core.allocator import parse_alloc_conf
from core.dtypes import (
    AUTOCAST_LABELS,
    DTYPE_LABELS,
    GGUF_LABELS,
    WEIGHT_LABELS,
    Autocast,
    CacheType,
    Dtype,
    GgufQuant,
    KvDtype,
    LlamaCppBackend,
    MpDtype,
    Quant,
    WeightFormat,
)
from core.errors import PlanError
from core.model import (
    LIMITS,
    MAX_PARAMS,
    check_text,
    normalise_ia3_feedforward,
    normalise_lora_targets,
    parse_skip_modules,
)
from core.runtime import runs_mps
from core.units import GiB, finite_number

if TYPE_CHECKING:
    from core.model import ModelSpec
    from core.plan import Inference, Plan


# ---- the choices -------------------------------------------------------------------------
class Method(StrEnum):
    FULL = "full"
    LORA = "lora"
    QLORA = "qlora"
    FROZEN = "frozen"
    DORA = "dora"  # PEFT LoraConfig(use_dora=True): LoRA plus a trained magnitude per output row
    IA3 = "ia3"  # PEFT IA3Config: one trained scaling vector per targeted projection, frozen base
    # LitGPT's own PEFT methods (branch h41adapt): LLaMA-Adapter's gated adaption prompts, and v2's
    # bias and scale on every linear layer with the norms trainable besides.
    ADAPTER = "adapter"
    ADAPTER_V2 = "adapter_v2"
    # PEFT's prompt learning (branch h41soft): trained embeddings of virtual tokens put before every
    # sequence; the frozen model runs on the sequence plus those tokens.
    PROMPT_TUNING = "prompt-tuning"  # PEFT PromptTuningConfig: the virtual tokens' embeddings train
    P_TUNING = "p-tuning"  # PEFT PromptEncoderConfig (MLP): an embedding and a 3-layer MLP make them
    # PEFT's prefix tuning and LN tuning (branch h52pfx), read at huggingface/peft 51c2ff66.
    PREFIX_TUNING = "prefix-tuning"  # PrefixTuningConfig: trained keys and values of virtual tokens in every layer
    LN_TUNING = "ln-tuning"  # LNTuningConfig: trained copies of the norms, the rest frozen
    # PEFT's LyCORIS methods (branch h53lyco), read at huggingface/peft 51c2ff66: each targeted linear's
    # whole delta weight is built from small trained factors at every forward and applied as F.linear.
    LOHA = "loha"  # LoHaConfig: Hadamard product of two rank-r products
    LOKR = "lokr"  # LoKrConfig: Kronecker product of a small matrix and a rank-r (or full) one
    # PEFT's VeRA (branch h53vera), read at huggingface/peft 51c2ff66 src/peft/tuners/vera: one frozen random
    # pair (vera_A, vera_B) shared by every target, and two trained vectors per target scaling it.
    VERA = "vera"  # VeraConfig: lambda_b * B (lambda_d * A x), lambda_d (r) and lambda_b (out) train
    # PEFT's AdaLoRA (branch h54ada), read at huggingface/peft 51c2ff66 src/peft/tuners/adalora: LoRA's shapes
    # at init_r with singular values between them, masked (not resized) down to target_r by a RankAllocator.
    ADALORA = "adalora"  # AdaLoraConfig: x (A * E)^T B^T, lora_A (r x in), lora_E (r x 1), lora_B (out x r) train
    # PEFT's OFT (branch h54oft), read at huggingface/peft 51c2ff66 src/peft/tuners/oft: each target's input is
    # rotated by a trained block-diagonal orthogonal matrix (Cayley-Neumann) before the frozen base linear.
    OFT = "oft"  # OFTConfig: r blocks of in / r (or blocks of oft_block_size), a skew-symmetric vector per block
    # PEFT's MiSS, formerly Bone (branch h58peft), read at huggingface/peft 51c2ff66 src/peft/tuners/miss: each
    # target adds (the input summed over its in / r blocks of r) @ miss_block to the frozen base linear's output.
    MISS = "miss"  # MissConfig (init_weights True): miss_block (r x out) trains per target
    # PEFT's trainable tokens on their own (branch h61mts2), read at huggingface/peft 5d602fdb
    # src/peft/tuners/trainable_tokens: k chosen rows of the embedding train as a float32 delta, no adapter;
    # k is ``lora.trainable_tokens`` (core.training.extra_trained prices the rows' buffer and the tied head).
    TRAINABLE_TOKENS = "trainable-tokens"  # TrainableTokensConfig(token_indices=[...]) on the input embedding
    # PEFT's FourierFT (branch h76peft), read at huggingface/peft 51c2ff66 src/peft/tuners/fourierft: n trained
    # spectral coefficients per target, scattered into an (out, in) grid whose inverse 2-D FFT is the whole delta
    # weight, built every forward and applied as F.linear (as LoHa / LoKr apply theirs). n is ``lora.rank``.
    FOURIERFT = "fourierft"  # FourierFTConfig: fourierft_spectrum (n_frequency) trains per target
    # PEFT's RoAd (branch h76peft), read at huggingface/peft 51c2ff66 src/peft/tuners/road: each target's output is
    # rotated pairwise (2-D rotations, scaled) by trained angles and scales, elementwise after the frozen base linear.
    ROAD = "road"  # RoadConfig: road_theta and road_alpha (out / 2, out or 2·out each, by variant) train per target
    # PEFT's VB-LoRA (branch h78peft), read at huggingface/peft 51c2ff66 src/peft/tuners/vblora: each target's rank-r
    # A and B are assembled every forward from one shared trained bank of vectors, each sub-vector a softmax mix of
    # its top-k logits' bank vectors, then applied as LoRA's two matmuls. r is ``lora.rank``.
    VBLORA = "vblora"  # VBLoRAConfig: logits (r·in/L + out·r/L, × bank size) per target and the bank (once) train
    # PEFT's RandLoRA (branch h78peft), read at huggingface/peft 51c2ff66 src/peft/tuners/randlora: full-rank updates
    # from frozen shared random bases (min(in, out) / r of them, rank r each) scaled by two trained matrices per target.
    RANDLORA = "randlora"  # RandLoraConfig: randlora_lambda (r × bases) and randlora_gamma (bases × min) per target
    # PEFT's SHiRA (branch h78peft), read at huggingface/peft 51c2ff66 src/peft/tuners/shira: r·(in + out) trained
    # entries of each target's weight (a sparse mask), added to a copy of the frozen weight every forward.
    SHIRA = "shira"  # ShiraConfig: shira_weight (r·(in + out) values) per target
    # PEFT's BOFT (branch h80boft), read at huggingface/peft 51c2ff66 src/peft/tuners/boft: each target's input is
    # multiplied by a dense in × in orthogonal matrix built every forward (Cayley of in / b trained b × b blocks,
    # block-diagonal, permuted by two bmms with boft_P), the output scaled by a trained vector. One butterfly factor.
    BOFT = "boft"  # BOFTConfig: boft_R (in / b blocks of b × b) and boft_s (out) per target


class RoadVariant(StrEnum):
    """PEFT RoadConfig.variant (huggingface/peft 51c2ff66 src/peft/tuners/road/config.py, default "road_1"): how
    many angles and scales each target trains, out / 2, out or 2·out of each (road/layer.py ``update_layer``)."""

    ROAD_1 = "road_1"
    ROAD_2 = "road_2"
    ROAD_4 = "road_4"


class ModulesToSave(StrEnum):
    """PEFT's ``modules_to_save`` (branch h60mts; huggingface/peft 51c2ff66 src/peft/utils/other.py
    ``ModulesToSaveWrapper``): whole modules trained beside the adapters, each a ``copy.deepcopy`` of the module
    beside the frozen original. The two a causal LM's configs name (a chat template's new tokens: axolotl's
    examples list ``embed_tokens`` and ``lm_head``): a choice, not free names, so that every value is one the
    catalogue's shapes price (V × d each); other names an importer lists as not understood."""

    NONE = "none"
    EMBEDDING = "embedding"  # embed_tokens (wte, ...: the input embedding)
    HEAD = "head"  # lm_head, the output head
    BOTH = "both"  # both, two copies (tied models too: peft 0.18.0 copies each, tools/measure/modules_to_save_check.py)

    @property
    def embedding(self) -> bool:
        return self in _SAVES_EMBEDDING

    @property
    def head(self) -> bool:
        return self in _SAVES_HEAD


# Read from the class once (each ``ModulesToSave.BOTH`` read on Python 3.11 goes through EnumType.__getattr__'s
# slot, ~0.15 µs; an estimate asks these ten times): core.plan's note on its own such constants.
_SAVES_EMBEDDING: Final = (ModulesToSave.EMBEDDING, ModulesToSave.BOTH)
_SAVES_HEAD: Final = (ModulesToSave.HEAD, ModulesToSave.BOTH)


class Precision(StrEnum):
    """The old one-word precision (plan files before version 3, lesson mode): derived from
    the precision roles, never an input of its own."""

    FP32 = "fp32"  # float32 weights, gradients and optimizer state
    BF16_MIXED = "bf16-mixed"  # float32 master weights, bf16 compute (autocast)
    FP16_MIXED = "fp16-mixed"
    BF16 = "bf16"  # everything in bf16, no float32 copy
    FP16 = "fp16"


class Preset(StrEnum):
    """The precision set-ups people run, each a fixed set of roles (see core.plan.PRESET_ROLES)."""

    TRAINER_BF16 = "trainer-bf16"  # model loaded in bf16, Trainer(bf16=True)
    FP32_AUTOCAST_BF16 = "fp32-autocast-bf16"  # the old "bf16-mixed"
    PURE_BF16 = "pure-bf16"  # the old "bf16"
    FP16_AMP = "fp16-amp"  # the old "fp16-mixed"
    FP32 = "fp32"
    CUSTOM = "custom"


class OptimizerImpl(StrEnum):
    """Which torch.optim code path runs the step (AdamW, Adam, SGD)."""

    FUSED = "fused"  # one CUDA kernel per group: no parameter-sized temporaries
    FOREACH = "foreach"  # torch.optim's default on CUDA: _foreach_* ops over every tensor at once
    FORLOOP = "forloop"  # one parameter at a time (foreach=False, fused=False)


class Optimizer(StrEnum):
    ADAMW = "adamw"
    ADAMW_8BIT = "adamw-8bit"
    PAGED_ADAMW = "paged-adamw"
    PAGED_ADAMW_8BIT = "paged-adamw-8bit"
    SGD_MOMENTUM = "sgd-momentum"
    SGD = "sgd"
    ADAFACTOR = "adafactor"
    ADAM = "adam"  # torch.optim.Adam: same state as AdamW, weight decay folded into the gradient
    # torchao.optim's low-bit AdamW (pytorch/ao 36027d82 torchao/optim/adam.py, subclass_8bit.py, subclass_4bit.py,
    # subclass_fp8.py): blockwise-quantised moments, one float32 scale per block (core.training.optimizer.AO_LOW_BIT).
    AO_ADAMW_8BIT = "ao-adamw-8bit"  # AdamW8bit: uint8 codes, blocks of 256 (HF adamw_torch_8bit)
    AO_ADAMW_4BIT = "ao-adamw-4bit"  # AdamW4bit: two 4-bit codes a byte, blocks of 128 (HF adamw_torch_4bit)
    AO_ADAMW_FP8 = "ao-adamw-fp8"  # AdamWFp8: float8 e4m3 codes, blocks of 256
    # AnyPrecisionAdamW as llama-recipes builds it (meta-llama/llama-cookbook 0e003351 src/llama_cookbook/
    # finetuning.py: momentum_dtype=torch.bfloat16, variance_dtype=torch.bfloat16, use_kahan_summation=False),
    # and with Kahan summation on (a bf16 compensation buffer, its compensation_buffer_dtype default).
    ANYPRECISION_ADAMW = "anyprecision-adamw"
    ANYPRECISION_ADAMW_KAHAN = "anyprecision-adamw-kahan"
    # bitsandbytes' Lion (Optimizer1State: one state, bitsandbytes 95f9af30 bitsandbytes/optim/optimizer.py
    # init_state; HF lion_32bit, lion_8bit, paged_lion_32bit, paged_lion_8bit).
    LION = "lion"
    LION_8BIT = "lion-8bit"
    PAGED_LION = "paged-lion"
    PAGED_LION_8BIT = "paged-lion-8bit"
    # torch.optim.Muon (torch 2.13.0 torch/optim/_muon.py) on the blocks' 2-D weight matrices, torch.optim.AdamW (the
    # plan's implementation) on the rest, as its docstring says to (core.params.muon_matrices).
    MUON = "muon"
    # PEFT's LoRA-FA (huggingface/peft 5d602fdb src/peft/optimizers/lorafa.py create_lorafa_optimizer, as in PEFT
    # 0.18.0): every lora_A frozen, lora_B trained by AdamW on its gradient projected through (A Aᵀ)⁻¹. LoRA only.
    LORA_FA = "lora-fa"
    # torch.optim.Adagrad (torch 2.13.0 torch/optim/adagrad.py: ``state["sum"] = torch.full_like(p, ...)``) and
    # torch.optim.RMSprop with HF's rmsprop defaults, momentum 0 and centered False (rmsprop.py: ``square_avg`` only;
    # transformers 5.25 trainer_optimizer.py _get_adagrad / _get_rmsprop pass optim_args' floats, none by default).
    ADAGRAD = "adagrad"
    RMSPROP = "rmsprop"
    # bitsandbytes' RMSprop (bitsandbytes 0.50.2 optim/rmsprop.py: Optimizer1State, one ``state1``; HF rmsprop_bnb
    # and rmsprop_bnb_32bit at optim_bits=32, rmsprop_bnb_8bit at 8, never paged: HF passes no is_paged for it).
    RMSPROP_BNB = "rmsprop-bnb"
    RMSPROP_BNB_8BIT = "rmsprop-bnb-8bit"
    # bitsandbytes' AdEMAMix (bitsandbytes 0.50.2 optim/ademamix.py AdEMAMix.init_state: ``state1`` a (2, *p.shape)
    # buffer holding m1 and m2, ``state2`` nu; HF ademamix, ademamix_8bit, paged_ademamix_32bit, paged_ademamix_8bit).
    ADEMAMIX = "ademamix"
    ADEMAMIX_8BIT = "ademamix-8bit"
    PAGED_ADEMAMIX = "paged-ademamix"
    PAGED_ADEMAMIX_8BIT = "paged-ademamix-8bit"
    # facebookresearch schedule_free (schedulefree 1.4.1 adamw_schedulefree.py / radam_schedulefree.py /
    # sgd_schedulefree.py, transformers 5.25 schedule_free_adamw / _radam / _sgd): ``z = torch.clone(p)`` and, but for
    # SGD, ``exp_avg_sq = torch.zeros_like(p)``, in the parameter's dtype; train() / eval() lerp p and z in place.
    SCHEDULE_FREE_ADAMW = "schedule-free-adamw"
    SCHEDULE_FREE_RADAM = "schedule-free-radam"
    SCHEDULE_FREE_SGD = "schedule-free-sgd"
    # GaLore's AdamW (galore-torch 1.0 galore_torch/adamw.py, galore_projector.py; transformers 5.25
    # trainer_optimizer.py _get_galore_optimizer): the blocks' Linear weights (optim_target_modules) keep Adam's moments
    # on their gradient projected to rank r, and the r × min(m, n) projector; every other parameter plain AdamW. HF's
    # galore_adamw_layerwise is this optimizer with the step in the backward (Plan.optimizer_in_backward).
    GALORE_ADAMW = "galore-adamw"


class Attention(StrEnum):
    EAGER = "eager"  # materialises batch·heads·seq² scores and probabilities
    SDPA = "sdpa"  # PyTorch scaled_dot_product_attention: flash / memory-efficient kernels
    FLASH = "flash"  # the flash-attn package (FlashAttention-2)
    # FlashAttention 1 (flash-attn < 2.0) or its Triton kernel (flash_attn_triton.py, as MPT's
    # attn_impl: triton ran it): the same memory as FlashAttention-2, about half its speed.
    FLASH1 = "flash1"
    # FlashAttention-3 (flash-attn's hopper/ package, transformers' attn_implementation="flash_attention_3"): Hopper's
    # wgmma kernels, the same memory as FlashAttention-2, about twice its speed; no other card runs it.
    FLASH3 = "flash3"


class CheckpointPolicy(StrEnum):
    """Which tensors a checkpointed run keeps (with ``checkpointing`` on).

    FULL recomputes every block (HF ``gradient_checkpointing``, torchtitan ``mode = "full"``);
    OP and LAYER are torchtitan's selective modes (``selective_ac_option = "op"`` or an
    integer N): OP keeps the outputs of a list of expensive ops in every block, LAYER
    checkpoints every Nth block and keeps the others whole.
    """

    FULL = "full"
    OP = "op"  # selective per op: matmuls (every other one) and the attention kernel saved
    LAYER = "layer"  # every Nth block fully checkpointed, the rest not at all
    # Megatron-LM --recompute-granularity selective (--recompute-modules core_attn, its
    # default): only the core attention (scores, softmax, dropout, × values) is recomputed.
    ATTENTION = "attention"
    # Unsloth's use_gradient_checkpointing="unsloth" (unslothai/unsloth-zoo ce232d6,
    # unsloth_zoo/gradient_checkpointing.py UnslothCheckpointFunction): every block is
    # recomputed as under FULL, but the block inputs go to pinned host memory; the GPU keeps
    # the last block's input and the reload buffers (core.training.detailed._unsloth_offloaded).
    UNSLOTH = "unsloth"


class Stack(StrEnum):
    """The software that runs the step: what decides how much of the card the work gets
    beyond the matmuls (elementwise kernels, fusion, launch overhead)."""

    EAGER = "eager"  # PyTorch eager (HF Trainer, PEFT, torchtune / torchtitan without compile)
    COMPILE = "compile"  # torch.compile over the model (torchtitan, torchtune, OLMo-core, fms-fsdp)
    MEGATRON = "megatron"  # Megatron-LM / NeMo: Transformer Engine and Apex fused kernels


class Float8(StrEnum):
    """Float8 training of the linear layers (attention, norms and the loss stay 16-bit)."""

    NONE = "none"
    TENSORWISE = "tensorwise"  # torchao Float8Linear, dynamic tensorwise scaling (torchtitan's float8)
    ROWWISE = "rowwise"  # torchao Float8Linear, rowwise scaling (recipe "rowwise")
    # torchao's recipe "rowwise_with_gw_hp" (Float8LinearConfig.from_recipe_name, torchao 0.13.0
    # torchao/float8/config.py): the output and input-gradient matmuls rowwise in float8, the weight
    # gradient's matmul in high precision (its input and output gradient are not cast)
    ROWWISE_GW_HP = "rowwise-gw-hp"
    # torchao's MX training (torchao 0.13.0 torchao/prototype/mx_formats, MXLinear; torchtitan's
    # --model.converters=mx, recipes "mxfp8_cublas" / "mxfp8_cublas_rceil"): E8M0 scales per 1×32 block,
    # all three matmuls in mxfp8 on cuBLAS's block-scaled GEMM (Blackwell: torchtitan asserts SM100)
    MXFP8 = "mxfp8"
    # NVIDIA Transformer Engine's per-tensor fp8 linears with delayed scaling (DelayedScaling: the cast
    # reads a scale from earlier steps' amax history): TE's own default recipe, Megatron-Core's
    # TransformerConfig.fp8_recipe default "delayed" (NVIDIA/Megatron-LM d98e8a64), NeMo 24.07's
    TE = "te"
    # Its per-tensor current scaling (Float8CurrentScaling; Megatron's --fp8-recipe tensorwise): an amax
    # pass over each tensor before its cast. Megatron-Bridge's MixedPrecisionConfig default
    # (fp8_recipe "tensorwise", NVIDIA-NeMo/Megatron-Bridge v0.1.0rc3 .. v0.5.0 mixed_precision.py)
    TE_CURRENT = "te-current"
    # Transformer Engine's MXFP8 recipe (--fp8-recipe mxfp8, MXFP8BlockScaling): E8M0 scales per 1×32
    # block, Blackwell's block-scaled fp8 GEMM; per-tensor scaling is "te" / "te-current"
    TE_MXFP8 = "te-mxfp8"


# The recipes Transformer Engine's linears run (its casts are te_cast_bytes, not torchao's).
TE_FLOAT8: Final = frozenset({Float8.TE, Float8.TE_CURRENT, Float8.TE_MXFP8})


class TransformersLoss(StrEnum):
    """The transformers release line of a training run, as far as its causal-LM loss keeps the logits
    (core.training.activations._loss_terms; each line read in the released wheels,
    ``models/llama/modeling_llama.py`` ``LlamaForCausalLM.forward`` and ``loss/loss_utils.py``
    ``ForCausalLMLoss``). Releases before 4.31 are not read."""

    # 4.31.0 - 4.45.0: ``logits = logits.float()`` in the model's forward, returned as the output's
    # logits, then ``shift_logits = logits[..., :-1, :].contiguous()``: a float32 shifted copy.
    V4_31_TO_4_45 = "4.31-4.45"
    # 4.46.0 - 4.48.0: ``self.loss_function`` (ForCausalLMLoss) upcasts a local copy and still makes the
    # shifted float32 copy; the output keeps the model's own (16-bit) logits.
    V4_46_TO_4_48 = "4.46-4.48"
    # 4.49.0 and later (read in 4.49.0, 4.50.0, 5.0.0): the labels are padded and shifted instead,
    # ``logits.float().view(-1, vocab_size)`` goes to the cross-entropy: no shifted copy. The line splits at 5.0
    # for what PEFT's target_modules reach on a mixture of experts (core.model.ModelSpec.adapted_rows): 4.x held
    # Mixtral's, Qwen2/3-MoE's, OLMoE's, DeepSeek's, GLM-4 MoE's and ERNIE 4.5's routed experts as a ModuleList of
    # nn.Linear (transformers 4.57.1), 5.x as 3-D parameters of one experts module (5.25.0), which no module name
    # reaches (tests/data/moe_lora/, tools/measure/moe_lora_targets.py).
    V4_49_TO_4_57 = "4.49-4.57"
    V5_ON = "5.0+"

    @classmethod
    def _missing_(cls, value: object) -> TransformersLoss | None:
        # "4.49+" was one value until the 5.0 split (branch h80moe): a plan file that says so reads as 4.49 - 4.57,
        # the rules it was estimated with (its routed experts counted adapted), as TorchVersion's "2.8+" does.
        return cls.V4_49_TO_4_57 if value == "4.49+" else None


class MegatronCeFusion(StrEnum):
    """Megatron-Core's cross-entropy (``cross_entropy_loss_fusion`` and ``cross_entropy_fusion_impl``,
    NVIDIA/Megatron-LM d98e8a64 megatron/core/models/common/language_module/language_module.py
    ``compute_language_model_loss``; core.training.activations reads what each keeps)."""

    OFF = "off"  # tensor_parallel.vocab_parallel_cross_entropy (eager, the default)
    NATIVE = "native"  # fusions/fused_cross_entropy.py: the same steps under jit_fuser (torch.compile)
    TE = "te"  # Transformer Engine's parallel_cross_entropy (Triton, gradient written into the logits)


class Strategy(StrEnum):
    """How the data-parallel ranks hold the model state."""

    DDP = "ddp"  # torch DistributedDataParallel: a full replica per rank + gradient buckets
    FSDP = "fsdp"  # FSDP2 fully_shard per decoder block and the root: everything sharded
    ZERO1 = "zero1"  # DeepSpeed ZeRO-1: optimizer state sharded
    ZERO2 = "zero2"  # + gradients
    ZERO3 = "zero3"  # + parameters

    @property
    def deepspeed(self) -> bool:
        """A DeepSpeed ZeRO stage (the one test the memory, the time, the inputs and the exports read)."""
        return self in _DEEPSPEED_STAGES


# Read from the class once (EnumType.__getattr__'s slot on Python 3.11, as above; read ~15 times an estimate).
_DEEPSPEED_STAGES: Final = (Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3)


class Offload(StrEnum):
    NONE = "none"
    OPTIMIZER = "optimizer"  # optimizer state (fp32 master copy, moments) and its step on the host
    PARAMS = "params"  # parameters, gradients and optimizer state on the host


class GradSync(StrEnum):
    """When a sharded (FSDP) rank reduce-scatters its gradients under gradient accumulation
    (core.parallel.state._no_sync_accumulated; docs/REAL_GPU_MEMORY.md "FSDP1's no_sync")."""

    AUTO = "auto"  # the loop's default: no_sync for FSDP1 (accelerate / HF Trainer), every micro-batch for FSDP2
    NO_SYNC = "no_sync"  # only the last micro-batch: the others keep the whole model's gradients unsharded
    EACH = "each"  # every micro-batch (accelerate sync_each_batch=True, torchtitan)


class FsdpUnits(StrEnum):
    """Which FSDP2 units hold the parts outside the decoder blocks: the embedding, the final norm and
    the output head (core.parallel.layout.carved_ends; docs/MULTI_GPU.md "FSDP2 units")."""

    # One unit per decoder block, the rest in the root unit, which stays gathered from the forward to
    # the end of the backward: huggingface/accelerate up to v1.13.0 (utils/fsdp_utils.py
    # fsdp2_prepare_model wraps the auto-wrap policy's modules, then the model) and torchtitan before
    # 83e69410 (2025-07-28, apply_fsdp: blocks, then the model).
    ROOT = "root"
    # The untied embedding its own unit (resharded after its forward like a block), [final norm, head]
    # one unit not resharded after the forward: accelerate from v1.14.0 (PR #4015; fsdp_utils.py
    # fsdp2_prepare_model "Carve embed + tail=[final_norm, lm_head] into their own units") and
    # torchtitan from 83e69410 (torchtitan/distributed/fsdp.py apply_fsdp_to_decoder at b5bcd76c).
    CARVED = "carved"


class CpRotate(StrEnum):
    """How PyTorch's ring attention passes the keys and values round the context-parallel ranks
    (torch.distributed.tensor.experimental ``set_rotate_method``; torchtitan's
    ``parallelism.context_parallel_rotate_method``). What each holds and sends:
    core.parallel.acts.ring_kv_elements, core.parallel.comm._torch_ring_traffic."""

    # _AllGatherRotater, PyTorch's and torchtitan's default: every rank's K/V gathered once per
    # ring call and kept for its loop.
    ALLGATHER = "allgather"
    # _AllToAllRotater: each step sends the K/V chunk in hand to the next rank (permute_tensor).
    ALLTOALL = "alltoall"


class PipelineSchedule(StrEnum):
    GPIPE = "gpipe"  # every micro-batch's forward, then every backward
    ONE_F_ONE_B = "1f1b"  # PipeDream-flush / Megatron 1F1B
    INTERLEAVED = "interleaved"  # Megatron interleaved 1F1B over virtual stages


class PipelineSplit(StrEnum):
    """How the decoder blocks are dealt to the pipeline stages (core.parallel.layout)."""

    EVEN = "even"  # Megatron-LM / torchtitan: L ÷ (pp · v) blocks a chunk, the remainder to the first chunks
    COMPUTE = "compute"  # nanotron's build_model: blocks and the output head by compute cost (core.pipeline)


class MoeDispatcher(StrEnum):
    """Megatron-Core's MoE token dispatcher under expert parallel (``moe_token_dispatcher_type``,
    and for "flex" Megatron-Bridge's ``moe_flex_dispatcher_backend``; NVIDIA/Megatron-LM 55ac7082
    megatron/core/transformer/moe/token_dispatcher.py). What each moves beside its all-to-all:
    core.training.speed.moe_permute_bytes."""

    ALLTOALL = "alltoall"  # MoEAlltoAllTokenDispatcher: permute, all-to-all, sort by local expert
    # MoEAllGatherTokenDispatcher, Megatron-Core's own default (transformer_config.py at d98e8a64 and
    # 55ac7082: moe_token_dispatcher_type = "allgather"): all-gathers every TP × EP rank's tokens into
    # the global memory buffer, permutes those its local experts take, reduce-scatters the outputs back.
    ALLGATHER = "allgather"
    DEEPEP = "deepep"  # flex + DeepEP: fused dispatch, then a local permute of the received tokens
    HYBRIDEP = "hybridep"  # flex + HybridEP: the permutes fused into its dispatch and combine kernels


class MoeLayer(StrEnum):
    """Whose mixture-of-experts layer runs the experts (plan setting ``moe_layer``): what its forward keeps for the
    backward, core.training.activations._experts (measured: tests/data/titan_moe/, tools/measure/titan_moe_check.py)."""

    TRANSFORMERS = "transformers"  # transformers 5 grouped_mm_experts_forward (and 4.x's experts)
    # torchtitan's token-choice MoE until e1f7f318 (2025-11-21, "remove scatter_add in MoE implementation"), as
    # PrimeIntellect-ai/prime-rl 8718eb14 src/prime_rl/trainer/models/layers/moe.py copies it: the scores multiply the
    # experts' output in float32 in expert order, then a scatter-add
    TORCHTITAN_SCATTER = "torchtitan-scatter"
    # torchtitan from e1f7f318 (pytorch/torchtitan d021aa9c torchtitan/models/moe/moe.py MoE.forward): the output
    # un-sorted into an N·k × d tensor, the scores applied by torch.bmm on its float32 copy
    TORCHTITAN_BMM = "torchtitan-bmm"


class Accounting(StrEnum):
    LESSON = "lesson"  # the lesson's four buckets with a typed activation allowance
    DETAILED = "detailed"  # derived from the architecture and how the step runs


class Engine(StrEnum):
    """Which inference engine serves (its memory rules: :mod:`core.serving.engines`)."""

    HF = "hf"  # Hugging Face transformers model.generate(): one static batch
    VLLM = "vllm"  # vLLM: paged KV pool sized at start-up, continuous batching
    SGLANG = "sglang"  # SGLang: token pool of mem_fraction_static less the weights
    LLAMACPP = "llamacpp"  # llama.cpp's llama-server (and Ollama's runner): a GGUF file, layers offloaded


class OllamaVersion(StrEnum):
    """Ollama's release line in front of its llama.cpp runner (core.serving.ollama: its default
    context and parallel slots and its own choice of GPU layers); NONE: llama-server as typed."""

    NONE = "none"
    V0_5 = "0.5"  # v0.5.0 - v0.6.6
    V0_6_7 = "0.6.7"  # v0.6.7 - v0.6.8
    V0_7 = "0.7"  # v0.7.0 - v0.9.6
    V0_10 = "0.10"  # v0.10.0 - v0.11.4
    V0_12_11 = "0.12.11"  # v0.12.11 - v0.13.3: llm/server.go createLayout places every model's layers
    V0_13_4 = "0.13.4"  # v0.13.4 - v0.15.4: the llama runner's flash attention "auto"
    V0_15_5 = "0.15.5"  # v0.15.5 - v0.24.0: num_ctx by the GPUs' total memory
    V0_30 = "0.30"  # v0.30.0 - v0.32.15: llama-server without -ngl, llama.cpp's own --fit places the layers


# The Ollama lines that start llama-server without -ngl, so that llama.cpp's own fit places the layers
# when num_gpu is not given (core.serving.ollama LINES' ``llama_fit``; a test keeps the two one list).
OLLAMA_LLAMA_FIT: Final = frozenset({OllamaVersion.V0_30})


class VllmVersion(StrEnum):
    """The vLLM release line whose start-up rules apply (core.serving.vllm_versions: one era
    of rules per range of releases, each citing where it was read)."""

    V0_6 = "0.6"
    V0_7 = "0.7"
    V0_8 = "0.8"
    V0_9 = "0.9"
    V0_10 = "0.10"
    V0_11 = "0.11"
    V0_12 = "0.12"
    V0_13 = "0.13"
    V0_14 = "0.14"
    V0_15 = "0.15"
    V0_16 = "0.16"
    V0_17 = "0.17"
    V0_18 = "0.18"
    V0_19 = "0.19"
    V0_20 = "0.20"
    V0_21 = "0.21"
    V0_22 = "0.22"
    V0_23 = "0.23"
    V0_24 = "0.24"
    V0_25 = "0.25"
    V0_26 = "0.26"
    V0_27 = "0.27"
    V0_28 = "0.28"
    V0_29 = "0.29"
    V0_30 = "0.30"
    V0_31 = "0.31"
    V0_32 = "0.32"
    V0_33 = "0.33"
    V0_34 = "0.34"


# The first release line whose engine is V1 (0.8.0 made VLLM_USE_V1 the default; core.serving.vllm_versions.ERAS,
# whose V0 era is 0.6-0.7). The V0 profile samples with one float32 copy of the logits whatever the install
# (core.serving.vllm_rules.vllm_sampler_bytes), so the sampler setting changes nothing before it.
VLLM_V1_FROM: Final = VllmVersion.V0_8
# The first release line that loads Llama 4 (0.8.3's registry; core.serving.vllm_versions says where it was read).
LLAMA4_VLLM_FROM: Final = VllmVersion.V0_8
# The weight formats an engine release does not load, as the releases whose parser takes the format's
# --quantization name (the exports' core.files.launch.vllm / sglang QUANTIZATION): (first, last), None where open.
# resources/engine_flags/vllm_serve.txt and sglang_server.txt's value rows (read from each wheel by
# tools/engine_flags/choices.py) are the source; tests/core/test_engine_flag_values.py holds these to them. vLLM:
# mxfp4 from 0.10 (0.6-0.8's argparse choices=[*QUANTIZATION_METHODS, None] and 0.9's QUANTIZATION_METHODS lack it),
# bitsandbytes up to 0.27 (0.28's QuantizationMethods Literal has none, its quantization/bitsandbytes.py is gone).
# SGLang: mxfp4 from 0.5.1 (0.4.10's --quantization choices lack it): SGLANG_WEIGHT_RELEASES, below SglangVersion.
# Plan validation refuses the others (core.plan._weight_format_refusal).
VLLM_WEIGHT_LINES: Final = {
    WeightFormat.MXFP4: (VllmVersion.V0_10, None),
    WeightFormat.NF4: (None, VllmVersion.V0_27),
}

# Text-only serving of an image-text checkpoint: the release lines whose model class leaves the vision tower
# unbuilt when every modality it serves has ``--limit-mm-per-prompt`` 0, by the wrapper's model_type
# (core.vision.VISION_FAMILIES; each one's modalities: core.serving.vllm_versions.TOWER_MODALITIES). Plan
# validation reads it (core.plan.serving_refusal). Read in the released wheels' vllm/model_executor/models/<family>.py:
# * 0.10.0 (no commit id in the wheel): no model checks the limit; the tower always loads.
# * 0.10.1 (aab549870): vllm-project/vllm PR #22299 (merged 2025-08-06) — llava.py, mistral3.py (``if
#   multimodal_config.get_limit_per_prompt("image"):`` builds the tower, else ``self.vision_tower = None``) and
#   qwen2_5_vl.py (image or video); the same in 0.10.2 (26b999c71), 0.11.0 (f71952c1c) and 0.14.0 (b17039bcc).
#   mllama4.py (Llama 4) too: ``if multimodal_config.get_limit_per_prompt("image"):`` builds vision_model and
#   multi_modal_projector, else both None, in 0.10.1.1, 0.11.0 and 0.14.0 (0.10.0 builds them whatever the limit).
#   llava.py's class is LlavaForConditionalGeneration only: llava_next.py and llava_onevision.py still build
#   theirs, and gemma3_mm.py builds SigLIP whatever the limit.
# * 0.11.0 (f71952c1c): qwen3_vl.py (PR #26000) skips its tower when neither image nor video is allowed.
# * 0.15.0 (f17644344): PR #32605 (January 2026) — ``SupportsMultiModal._mark_tower_model``
#   (model_executor/models/interfaces.py) builds every marked tower as a StageMissingLayer when
#   ``all(mm_config.get_limit_per_prompt(m) == 0 for m in modalities)``; gemma3_mm.py, llava_next.py and
#   llava_onevision.py mark theirs; the same in 0.16.0 (89a77b108) and 0.19.0 (2a69949bd).
# A release line is modelled as its later patch releases, as START_CHECK_FROM does (0.10.0 itself skips
# none: the 0.10 line here means 0.10.1 and 0.10.2).
TEXT_ONLY_EVERY_MODEL_FROM: Final = VllmVersion.V0_15
TEXT_ONLY_FROM: Final = {
    "llama4": VllmVersion.V0_10,
    "llava": VllmVersion.V0_10,
    "mistral3": VllmVersion.V0_10,
    "qwen2_5_vl": VllmVersion.V0_10,
    "qwen3_vl": VllmVersion.V0_11,
}


def text_only_from(family: str) -> VllmVersion:
    """The first release line whose model class for ``family`` skips the vision tower in text-only mode."""
    return TEXT_ONLY_FROM.get(family, TEXT_ONLY_EVERY_MODEL_FROM)


def skips_tower(version: VllmVersion, family: str) -> bool:
    """Whether ``version`` leaves ``family``'s tower unbuilt when every modality's limit is 0."""
    lines = list(VllmVersion)
    return lines.index(version) >= lines.index(text_only_from(family))


def text_only_offered(plan: Plan) -> bool:
    """Whether the plan's engine and release take text-only serving (``inference.text_only``) of its image-text
    checkpoint: vLLM from the family's line (:func:`skips_tower`), nowhere else. SGLang and transformers build the
    tower whatever the requests hold, so Plan validation refuses a tick on them, or on an earlier vLLM line, with the
    engine's reason (core.plan._text_only_refusal); llama.cpp loads no tower from the GGUF, so a tick there changes
    nothing. The Serving form shows the box only where this holds; a plan file or the command line that asks it on
    a refusing engine gets that refusal."""
    model, inf = plan.model, plan.inference
    if not model.vision_params or not model.vision_family or inf.engine is not Engine.VLLM:
        return False
    return skips_tower(inf.vllm_version, model.vision_family)


def vllm_v1(plan: Plan) -> bool:
    """Whether the plan's vLLM release line runs the V1 engine."""
    lines = list(VllmVersion)
    return lines.index(plan.inference.vllm_version) >= lines.index(VLLM_V1_FROM)


class VllmSampler(StrEnum):
    """Which top-k/top-p sampler vLLM's V1 engine runs (core.serving.vllm_rules.sampler_path): what
    the install has, which no release line decides alone."""

    AUTO = "auto"  # what a plain `pip install vllm==X` runs: never FlashInfer's (vllm_rules)
    NATIVE = "native"  # no FlashInfer sampler: PyTorch's sort before 0.17, the Triton kernel from 0.17
    FLASHINFER = "flashinfer"  # FlashInfer installed and its sampler on (the Docker image, 0.9-0.11)


class PrefixCaching(StrEnum):
    """vLLM's ``--enable-prefix-caching`` / ``--no-enable-prefix-caching``: the engine's default (which differs by
    release and model kind: core.serving.vllm_hybrid.align_mode), or either switch given."""

    DEFAULT = "default"  # neither flag: the release's default for the model
    ON = "on"  # --enable-prefix-caching
    OFF = "off"  # --no-enable-prefix-caching


class CompileCache(StrEnum):
    """Whether vLLM V1 finds its torch.compile artefacts on disk at start-up (``VLLM_CACHE_ROOT``, ~/.cache/vllm by
    default): the compile of a cold start runs inside the profile that sizes the KV cache
    (core.serving.vllm_versions.compiles_in_profile), a warm one loads the AOT artefact instead."""

    WARM = "warm"  # a restart with the cache of an earlier start of the same model and settings
    COLD = "cold"  # a first start, a container that keeps no cache, or VLLM_DISABLE_COMPILE_CACHE=1


class TorchVersion(StrEnum):
    """The PyTorch releases whose memory rules differ, oldest first (:func:`torch_before` reads the order): the
    collectives' buffers (docs/REAL_GPU_MEMORY.md "The PyTorch release and TORCH_NCCL_AVOID_RECORD_STREAMS";
    core.parallel.state._release_cache), SDPA's math kernel, a Mac's autocast, and the foreach Adam / AdamW step's
    intermediates (core.training.optimizer.optimizer_step_temporary). FSDP2 first shipped in 2.4 (the PyTorch 2.4
    release post, pytorch/pytorch.github.io PR 1684: "FSDP2 is a new fully sharded data parallelism
    implementation"): before it the FSDP strategy is FSDP1, planned as FSDP2 (benchmarks/realgpu/mapping.py: both
    keep 1/N of every parameter, gradient and state), without the releases' collective-buffer terms, and a warning
    says so (core.checks). From 2.14 SDPA's memory-efficient kernel takes grouped-query heads
    (core.training.attention.sdpa_kernel), where 2.8-2.13 ran such a call on the math kernel. From 2.8 the
    bundled NCCL connects at run time, so a group carrying only scalars holds half a communicator
    (core.training.device.NCCL_RUNTIME_CONNECT_TORCH)."""

    # 2.0.0 / 2.0.1: torch/optim/adam(w).py ``_multi_tensor_adam(w)`` kept ``denom = torch._foreach_add(exp_avg_sq_sqrt,
    # eps)`` out of place beside ``exp_avg_sq_sqrt``, two parameter-sized lists (pytorch/pytorch issue 97712)
    V2_0 = "2.0"
    # 2.1.0 on: ``torch._foreach_add_(exp_avg_sq_sqrt, eps)`` in place (pytorch/pytorch PR 104898, merged to main
    # 2023-07-10; the stack ended at PR 105193 by 2023-07-31, issue 97712); release/2.1 was cut from main after it
    # (its release tracker is issue 108055, numbered after the whole stack; 2.1.0 shipped 2023-10-04); FSDP1 only
    V2_1_TO_2_3 = "2.1-2.3"
    V2_4 = "2.4"  # FSDP2 allocates the reduce-scatter input inside the reduce-scatter stream (e4ee3be)
    V2_5_TO_2_7 = "2.5-2.7"  # on the default stream; ProcessGroupNCCL records its stream on inputs
    # record_stream gone from ProcessGroupNCCL's collectives (a1cb3cc). Its value was "2.8+" until 2.14's rule
    # came: a plan file that says so reads as it (_missing_), the rules it was estimated with.
    V2_8 = "2.8-2.13"
    # 2.14.0 on: SDPA's CUDA memory-efficient kernel takes grouped-query k/v with enable_gqa (pytorch/pytorch
    # PR 191085, in the 2.14.1 wheel: mem_eff_attention/kernel_forward.h and kernel_backward.h
    # ``q_heads_per_kv``, the backward writing grad_key / grad_value at the query heads, [Mk, nHq, K], for a
    # reduction after; torch/_meta_registrations.py's efficient backward returns k / v grads at their own heads,
    # where 2.13.0's returned them at the query heads and autograd refused). Before, such a call fell to the math
    # kernel. Checked through 2.15 (docs/REAL_GPU_MEMORY.md "PyTorch 2.14 and 2.15, PEFT 0.19-0.21").
    V2_14 = "2.14+"

    @classmethod
    def _missing_(cls, value: object) -> TorchVersion | None:
        return cls.V2_8 if value == "2.8+" else None


class Platform(StrEnum):
    """The operating system the CUDA runtime runs under, where what it reports of the card differs
    (core.platform holds the rules; docs/SERVING.md "Windows' WSL2 as a platform (h92wsl)").

    Native Linux: ``cudaMemGetInfo``'s total is the card less what the driver keeps (vLLM 0.19.0's
    "total_memory=79.19GiB" on an 80 GB H100). WSL2: the total is the whole card, the driver's share
    included (vLLM 0.29.0 under WSL2: "Free memory on device (14.8/15.9 GiB)" on a 16,311 MiB RTX 5060 Ti,
    Freshair129/Private-Runtime-Platform@f52b9b9), and vLLM turns pinned host memory off
    (vllm/platforms/interface.py ``is_pin_memory_available``: "Using 'pin_memory=False' as WSL is
    detected", first in vllm-project/vllm PR 312). Native Windows (WDDM): PyTorch's total is the whole
    card too (12.00 GiB on an RTX 3060 12 GB, ToTheBeginning/PuLID issue 13)."""

    LINUX = "linux"
    WSL2 = "wsl2"
    WINDOWS = "windows"


class SglangVersion(StrEnum):
    """The SGLang release whose default mem_fraction_static applies (core.serving.sglang_versions:
    the rule of each range of releases, read in the released wheels). There was no 0.5.0 on PyPI;
    a .postN release follows its release's rules."""

    V0_4_0 = "0.4.0"
    V0_4_1 = "0.4.1"
    V0_4_2 = "0.4.2"
    V0_4_3 = "0.4.3"
    V0_4_4 = "0.4.4"
    V0_4_5 = "0.4.5"
    V0_4_6 = "0.4.6"
    V0_4_7 = "0.4.7"
    V0_4_8 = "0.4.8"
    V0_4_9 = "0.4.9"
    V0_4_10 = "0.4.10"
    V0_5_1 = "0.5.1"
    V0_5_2 = "0.5.2"
    V0_5_3 = "0.5.3"
    V0_5_4 = "0.5.4"
    V0_5_5 = "0.5.5"
    V0_5_6 = "0.5.6"
    V0_5_7 = "0.5.7"
    V0_5_8 = "0.5.8"
    V0_5_9 = "0.5.9"
    V0_5_10 = "0.5.10"
    V0_5_11 = "0.5.11"
    V0_5_12 = "0.5.12"
    V0_5_13 = "0.5.13"
    V0_5_14 = "0.5.14"
    V0_5_15 = "0.5.15"
    V0_5_16 = "0.5.16"
    V0_5_17 = "0.5.17"
    V0_5_18 = "0.5.18"
    V0_5_19 = "0.5.19"
    V0_5_20 = "0.5.20"
    V0_5_21 = "0.5.21"
    V0_5_22 = "0.5.22"
    V0_5_23 = "0.5.23"


# SGLang's --enable-multimodal (sglang/srt/server_args.py, "--enable-multimodal", action="store_true", default None;
# not in 0.4.0 - 0.4.5's, read in every wheel from 0.4.6 to 0.5.23). Its ModelConfig (configs/model_config.py) sets
# enable_multimodal False for the architectures in mm_disabled_models unless the flag is given: Gemma3 /
# Llama4ForConditionalGeneration from 0.4.6 (Step3VL from 0.5.1, Inkling from 0.5.16: families the planner does not
# read); every other model's enable_multimodal is True already, and for a text model "nothing will happen" (the
# flag's own help text). core.serving.sglang_versions.is_multimodal reads it; Plan validation refuses it on a
# release without it (core.plan._sglang_multimodal_refusal).
SGLANG_ENABLE_MULTIMODAL_FROM: Final = SglangVersion.V0_4_6
# The SGLang releases that load each weight format they do not all load (see VLLM_WEIGHT_LINES).
SGLANG_WEIGHT_RELEASES: Final = {WeightFormat.MXFP4: (SglangVersion.V0_5_1, None)}


def release_loads(fmt: WeightFormat, release: VllmVersion | SglangVersion) -> bool:
    """Whether a vLLM line or SGLang release loads weights of ``fmt`` (VLLM_WEIGHT_LINES, SGLANG_WEIGHT_RELEASES)."""
    table: dict[WeightFormat, tuple[Any, Any]] = (
        VLLM_WEIGHT_LINES if isinstance(release, VllmVersion) else SGLANG_WEIGHT_RELEASES
    )
    order: list[Any] = list(type(release))
    first, last = table.get(fmt, (None, None))
    at = order.index(release)
    return (first is None or order.index(first) <= at) and (last is None or at <= order.index(last))


# The per-token-head KV caches vLLM keeps (issue 23): its --kv-cache-dtype name for each and the first release line
# whose choices hold it, from resources/engine_flags/vllm_serve.txt's value rows (tools/engine_flags/choices.py over
# the wheels: ``--kv-cache-dtype=int8_per_token_head 0.20-0.34``, ``fp8_per_token_head 0.20-0.34``,
# ``int4_per_token_head 0.25-0.34``), read again by hand in the wheels: vllm 0.20.2 (bc150f502) vllm/config/cache.py
# CacheDType lists "int8_per_token_head" and "fp8_per_token_head" and no int4 name; 0.25.1 (752a3a504) lists all
# three; 0.19.1's has none. Every later line keeps them (0.34.0, 62d4bc3c7). fp8_per_token_head is vLLM's own
# KVQuantMode.FP8_PER_TOKEN_HEAD (vllm/v1/kv_cache_interface.py get_kv_quant_mode), not the per-tensor fp8 of
# ``fp8`` / ``fp8_e4m3`` / ``fp8_e5m2``: a float32 scale per token, KV head and side like the integer ones. Plan
# validation refuses them before those lines (core.plan._kv_format_refusal); core.serving.kv.per_token_head_scale_bytes
# has their page rule.
VLLM_KV_NAMES: Final = {
    KvDtype.INT8: "int8_per_token_head",
    KvDtype.INT4: "int4_per_token_head",
    KvDtype.FP8_PER_TOKEN_HEAD: "fp8_per_token_head",
}
VLLM_KV_FROM: Final = {
    KvDtype.INT8: VllmVersion.V0_20,
    KvDtype.INT4: VllmVersion.V0_25,
    KvDtype.FP8_PER_TOKEN_HEAD: VllmVersion.V0_20,
}
# SGLang: no release read takes a per-token-head KV cache. Its --kv-cache-dtype choices (sglang_server.txt, 0.4.0 -
# 0.5.23): auto, bf16 / bfloat16, fp8_e5m2, fp8_e4m3, fp4_e2m1, fp4_mx_block16, mxfp8 and nvfp4, floats all, scaled
# per tensor (read again by hand in the 0.5.23 wheel: sglang/srt/arg_groups/fields/model.py line 209,
# ``kv_cache_dtype``'s choices).
PER_TOKEN_HEAD_KV: Final = frozenset(VLLM_KV_NAMES)


def release_keeps_kv(kv: KvDtype, release: VllmVersion | SglangVersion) -> bool:
    """Whether a vLLM line or SGLang release keeps a KV cache of ``kv`` (16-bit and fp8 in every one; the
    per-token-head formats as :data:`VLLM_KV_FROM` says on vLLM, on no SGLang release)."""
    if kv not in PER_TOKEN_HEAD_KV:
        return True
    if isinstance(release, SglangVersion):
        return False
    order = list(VllmVersion)
    return order.index(release) >= order.index(VLLM_KV_FROM[kv])


# The wrappers' model_type (ModelSpec.vision_family) of those two architectures.
SGLANG_MM_DISABLED_FAMILIES: Final = frozenset(("gemma3", "llama4"))


def sglang_multimodal_opt_in(plan: Plan) -> bool:
    """Whether SGLang's --enable-multimodal changes this plan: an image-text checkpoint SGLang serves as a text model
    at its defaults (:data:`SGLANG_MM_DISABLED_FAMILIES`), on SGLang, at a release that has the flag
    (:data:`SGLANG_ENABLE_MULTIMODAL_FROM`; 0.4.5 serves both families with images, and argparse refuses the flag
    there, as Plan validation does: core.plan._sglang_multimodal_refusal). The Serving form shows the box only then."""
    return sglang_multimodal_decides(plan.model, plan.inference)


def sglang_multimodal_decides(model: ModelSpec, inf: Inference) -> bool:
    """:func:`sglang_multimodal_opt_in` for a model and serving settings apart from their plan (the serving rules'
    words, core.serving.text_only, read it there)."""
    lines = list(SglangVersion)
    return (
        inf.engine is Engine.SGLANG
        and model.vision_params > 0
        and model.vision_family in SGLANG_MM_DISABLED_FAMILIES
        and lines.index(inf.sglang_version) >= lines.index(SGLANG_ENABLE_MULTIMODAL_FROM)
    )


def sglang_multimodal_asked(plan: Plan) -> bool:
    """The plan passes --enable-multimodal where it changes the launch (:func:`sglang_multimodal_opt_in`): what the
    export writes and ``--json`` reports."""
    return plan.inference.sglang_enable_multimodal and sglang_multimodal_opt_in(plan)


class TransformersVersion(StrEnum):
    """The transformers release line whose Hugging Face generate rules apply
    (core.serving.transformers_versions: the MoE block's loop and the fine-grained FP8 linear's
    synchronisation, each range of releases read in the released wheels). It starts at 4.45, the
    release whose Llama and Qwen2 forwards take ``num_logits_to_keep``; a patch release follows
    its minor release's rules."""

    V4_45 = "4.45"
    V4_46 = "4.46"
    V4_47 = "4.47"
    V4_48 = "4.48"
    V4_49 = "4.49"
    V4_50 = "4.50"
    V4_51 = "4.51"
    V4_52 = "4.52"
    V4_53 = "4.53"
    V4_54 = "4.54"
    V4_55 = "4.55"
    V4_56 = "4.56"
    V4_57 = "4.57"
    V5_0 = "5.0"
    V5_1 = "5.1"
    V5_2 = "5.2"
    V5_3 = "5.3"
    V5_4 = "5.4"
    V5_5 = "5.5"
    V5_6 = "5.6"
    V5_7 = "5.7"
    V5_8 = "5.8"
    V5_9 = "5.9"
    V5_10 = "5.10"
    V5_11 = "5.11"
    V5_12 = "5.12"
    V5_13 = "5.13"
    V5_14 = "5.14"
    V5_15 = "5.15"
    V5_16 = "5.16"
    V5_17 = "5.17"
    V5_18 = "5.18"
    V5_19 = "5.19"
    V5_20 = "5.20"
    V5_21 = "5.21"
    V5_22 = "5.22"
    V5_23 = "5.23"
    V5_24 = "5.24"
    V5_25 = "5.25"


# Display labels, in the order the forms list them.
ENGINE_LABELS: Final = {
    Engine.HF: "Hugging Face generate",
    Engine.VLLM: "vLLM",
    Engine.SGLANG: "SGLang",
    Engine.LLAMACPP: "llama.cpp / Ollama",
}
VLLM_VERSION_LABELS: Final = {v: v.value for v in VllmVersion}
OLLAMA_VERSION_LABELS: Final = {
    OllamaVersion.NONE: "none (llama-server)",
    OllamaVersion.V0_5: "0.5.0 – 0.6.6",
    OllamaVersion.V0_6_7: "0.6.7 – 0.6.8",
    OllamaVersion.V0_7: "0.7.0 – 0.9.6",
    OllamaVersion.V0_10: "0.10.0 – 0.11.4",
    OllamaVersion.V0_12_11: "0.12.11 – 0.13.3",
    OllamaVersion.V0_13_4: "0.13.4 – 0.15.4",
    OllamaVersion.V0_15_5: "0.15.5 – 0.24.0",
    OllamaVersion.V0_30: "0.30.0 – 0.32.15",
}
PLATFORM_LABELS: Final = {
    Platform.LINUX: "Native Linux",
    Platform.WSL2: "Windows, WSL2",
    Platform.WINDOWS: "Native Windows (WDDM)",
}
TORCH_VERSION_LABELS: Final = {
    TorchVersion.V2_0: "2.0",
    TorchVersion.V2_1_TO_2_3: "2.1 – 2.3",
    TorchVersion.V2_4: "2.4",
    TorchVersion.V2_5_TO_2_7: "2.5 – 2.7",
    TorchVersion.V2_8: "2.8 – 2.13",
    TorchVersion.V2_14: "2.14 and later",
}


def torch_before(release: TorchVersion, later: TorchVersion) -> bool:
    """Whether ``release`` is older than ``later`` (TorchVersion lists its members oldest first)."""
    order = list(TorchVersion)
    return order.index(release) < order.index(later)


SGLANG_VERSION_LABELS: Final = {v: v.value for v in SglangVersion}
TRANSFORMERS_VERSION_LABELS: Final = {v: v.value for v in TransformersVersion}
CACHE_TYPE_LABELS: Final = {c: c.value for c in CacheType}
VLLM_SAMPLER_LABELS: Final = {
    VllmSampler.AUTO: "auto (pip: no FlashInfer sampler)",
    VllmSampler.NATIVE: "PyTorch sort (Triton from 0.17)",
    VllmSampler.FLASHINFER: "FlashInfer",
}
PREFIX_CACHING_LABELS: Final = {
    PrefixCaching.DEFAULT: "engine default",
    PrefixCaching.ON: "on",
    PrefixCaching.OFF: "off",
}
COMPILE_CACHE_LABELS: Final = {
    CompileCache.WARM: "warm (a restart)",
    CompileCache.COLD: "cold (first start)",
}
LLAMACPP_BACKEND_LABELS: Final = {
    LlamaCppBackend.NATIVE: "CUDA / Metal (the card's own)",
    LlamaCppBackend.VULKAN: "Vulkan",
}
METHOD_LABELS: Final = {
    Method.FULL: "Full fine-tuning",
    Method.LORA: "LoRA",
    Method.QLORA: "QLoRA (quantised base)",
    Method.FROZEN: "Frozen layers",
    Method.DORA: "DoRA (LoRA + magnitude)",
    Method.IA3: "IA3 (learned scaling vectors)",
    Method.ADAPTER: "Adapter (LitGPT LLaMA-Adapter)",
    Method.ADAPTER_V2: "Adapter v2 (LitGPT)",
    Method.PROMPT_TUNING: "Prompt tuning",
    Method.P_TUNING: "P-tuning (MLP encoder)",
    Method.PREFIX_TUNING: "Prefix tuning",
    Method.LN_TUNING: "LN tuning (norms)",
    Method.LOHA: "LoHa (Hadamard product)",
    Method.LOKR: "LoKr (Kronecker product)",
    Method.VERA: "VeRA (shared random projections)",
    Method.ADALORA: "AdaLoRA (adaptive rank)",
    Method.OFT: "OFT (orthogonal rotation)",
    Method.MISS: "MiSS (formerly Bone)",  # the 1280 × 720 plan column shows it whole (test_window_layout)
    Method.TRAINABLE_TOKENS: "Trainable tokens (rows)",
    Method.FOURIERFT: "FourierFT (sparse spectrum)",
    Method.ROAD: "RoAd (output rotation)",
    Method.VBLORA: "VB-LoRA (vector bank)",
    Method.RANDLORA: "RandLoRA (random bases)",
    Method.SHIRA: "SHiRA (sparse weights)",
    Method.BOFT: "BOFT (butterfly orthogonal)",
}
ROAD_VARIANT_LABELS: Final = {
    RoadVariant.ROAD_1: "road_1 (out/2 angles)",
    RoadVariant.ROAD_2: "road_2 (out angles)",
    RoadVariant.ROAD_4: "road_4 (2·out angles)",
}
OPTIMIZER_LABELS: Final = {
    Optimizer.ADAMW: "AdamW",
    Optimizer.ADAM: "Adam",
    Optimizer.ADAMW_8BIT: "AdamW 8-bit",
    Optimizer.PAGED_ADAMW: "Paged AdamW",
    Optimizer.PAGED_ADAMW_8BIT: "Paged AdamW 8-bit",
    Optimizer.SGD_MOMENTUM: "SGD + momentum",
    Optimizer.SGD: "SGD",
    Optimizer.ADAFACTOR: "Adafactor",
    Optimizer.AO_ADAMW_8BIT: "torchao AdamW 8-bit",
    Optimizer.AO_ADAMW_4BIT: "torchao AdamW 4-bit",
    Optimizer.AO_ADAMW_FP8: "torchao AdamW FP8",
    Optimizer.ANYPRECISION_ADAMW: "AnyPrecisionAdamW (bf16 moments)",
    Optimizer.ANYPRECISION_ADAMW_KAHAN: "AnyPrecisionAdamW + Kahan",
    Optimizer.LION: "Lion (bitsandbytes 32-bit)",
    Optimizer.LION_8BIT: "Lion 8-bit",
    Optimizer.PAGED_LION: "Paged Lion",
    Optimizer.PAGED_LION_8BIT: "Paged Lion 8-bit",
    Optimizer.MUON: "Muon (+ AdamW for the rest)",
    Optimizer.LORA_FA: "LoRA-FA (PEFT, frozen lora_A)",
    Optimizer.ADAGRAD: "Adagrad",
    Optimizer.RMSPROP: "RMSprop",
    Optimizer.RMSPROP_BNB: "RMSprop (bitsandbytes 32-bit)",
    Optimizer.RMSPROP_BNB_8BIT: "RMSprop 8-bit (bitsandbytes)",
    Optimizer.ADEMAMIX: "AdEMAMix (bitsandbytes 32-bit)",
    Optimizer.ADEMAMIX_8BIT: "AdEMAMix 8-bit",
    Optimizer.PAGED_ADEMAMIX: "Paged AdEMAMix",
    Optimizer.PAGED_ADEMAMIX_8BIT: "Paged AdEMAMix 8-bit",
    Optimizer.SCHEDULE_FREE_ADAMW: "Schedule-free AdamW",
    Optimizer.SCHEDULE_FREE_RADAM: "Schedule-free RAdam",
    Optimizer.SCHEDULE_FREE_SGD: "Schedule-free SGD",
    Optimizer.GALORE_ADAMW: "GaLore AdamW (low-rank projected)",
}
# Each optimizer's state per trainable parameter and where the rule was read (core.training.optimizer), for the
# Optimizer list's entries.
OPTIMIZER_TOOLTIPS: Final = {
    Optimizer.ADAMW: "torch.optim.AdamW: two moments in the trainable parameters' dtype (8 B at float32).",
    Optimizer.ADAM: "torch.optim.Adam: AdamW's two moments, weight decay added to the gradient.",
    Optimizer.ADAMW_8BIT: "bitsandbytes AdamW8bit: 2 B + 8 B per 256 (block absmax); tensors under 4,096 "
    "elements keep 8 B float32 moments (bitsandbytes optim/optimizer.py).",
    Optimizer.PAGED_ADAMW: "bitsandbytes PagedAdamW: 8 B float32 moments in CUDA managed memory for tensors of "
    "100,000 elements or more, outside PyTorch's allocator.",
    Optimizer.PAGED_ADAMW_8BIT: "bitsandbytes PagedAdamW8bit: AdamW 8-bit's state, paged for large tensors.",
    Optimizer.SGD_MOMENTUM: "torch.optim.SGD with momentum: one buffer in the parameters' dtype.",
    Optimizer.SGD: "torch.optim.SGD: no state.",
    Optimizer.ADAFACTOR: "Adafactor: a row and a column statistic per matrix (factored second moment).",
    Optimizer.AO_ADAMW_8BIT: "torchao AdamW8bit: uint8 codes, 2 B + 8 B per 256 (float32 block scales) and a "
    "1 KiB qmap per moment; tensors under 4,096 elements keep moments in the parameters' dtype "
    "(pytorch/ao torchao/optim/adam.py, subclass_8bit.py).",
    Optimizer.AO_ADAMW_4BIT: "torchao AdamW4bit: 4-bit codes, 1 B + 8 B per 128 (float32 block scales); small "
    "tensors as AdamW 8-bit's (pytorch/ao torchao/optim/subclass_4bit.py).",
    Optimizer.AO_ADAMW_FP8: "torchao AdamWFp8: float8 e4m3 codes, 2 B + 8 B per 256 (float32 block scales) "
    "(pytorch/ao torchao/optim/subclass_fp8.py).",
    Optimizer.ANYPRECISION_ADAMW: "AnyPrecisionAdamW as llama-recipes builds it: bf16 momentum and variance, 4 B, "
    "stepped one tensor at a time (llama-cookbook policies/anyprecision_optimizer.py).",
    Optimizer.ANYPRECISION_ADAMW_KAHAN: "AnyPrecisionAdamW with use_kahan_summation: bf16 moments and a bf16 "
    "compensation buffer, 6 B, and a clone of each parameter during its step.",
    Optimizer.LION: "bitsandbytes Lion (32-bit): one float32 momentum, 4 B whatever the parameters' dtype "
    "(bitsandbytes optim/lion.py, Optimizer1State).",
    Optimizer.LION_8BIT: "bitsandbytes Lion8bit: one uint8 momentum, 1 B + 4 B per 256 (block absmax); tensors "
    "under 4,096 elements 4 B.",
    Optimizer.PAGED_LION: "bitsandbytes PagedLion: Lion's 4 B momentum in CUDA managed memory for tensors of "
    "100,000 elements or more.",
    Optimizer.PAGED_LION_8BIT: "bitsandbytes PagedLion8bit: Lion 8-bit's 1 B codes paged for tensors of 100,000 "
    "elements or more; their block absmax (4 B per 256) stays on the GPU.",
    Optimizer.MUON: "torch.optim.Muon on the blocks' 2-D weight matrices: one momentum buffer in the gradients' "
    "dtype (4 B at float32) and bf16 Newton-Schulz products during the step; the embedding, head, norms and biases "
    "under torch.optim.AdamW (torch 2.13.0 torch/optim/_muon.py).",
    Optimizer.LORA_FA: "PEFT's LoRA-FA (create_lorafa_optimizer; LoRA only): lora_A frozen, so only lora_B trains, "
    "with AdamW's two moments in its dtype (8 B at float32), and the adapters keep no copy of their input for the "
    "backward (no gradient of A); the step projects each B's gradient through (A Aᵀ)⁻¹ one pair at a time "
    "(huggingface/peft src/peft/optimizers/lorafa.py). No config file names it (adapter_config.json and "
    "TrainingArguments have no key): it is built in code, peft.optimizers.create_lorafa_optimizer(model, r, "
    "lora_alpha, lr), and handed to the Trainer as optimizers=(optimizer, None).",
    Optimizer.ADAGRAD: "torch.optim.Adagrad: one sum of squared gradients in the parameters' dtype (4 B at "
    "float32); the foreach step keeps two parameter-sized lists, sqrt(sum) + eps and the scaled gradient "
    "(torch/optim/adagrad.py).",
    Optimizer.RMSPROP: "torch.optim.RMSprop as transformers' rmsprop builds it (momentum 0, not centered): one "
    "square_avg in the parameters' dtype (4 B at float32); no fused implementation (torch/optim/rmsprop.py).",
    Optimizer.RMSPROP_BNB: "bitsandbytes RMSprop (32-bit): one float32 square average, 4 B whatever the parameters' "
    "dtype (bitsandbytes optim/rmsprop.py, Optimizer1State).",
    Optimizer.RMSPROP_BNB_8BIT: "bitsandbytes RMSprop 8-bit: one uint8 square average, 1 B + 4 B per 256 (block "
    "absmax); tensors under 4,096 elements 4 B.",
    Optimizer.ADEMAMIX: "bitsandbytes AdEMAMix (32-bit): a fast and a slow EMA of the gradient and the second "
    "moment, three float32 buffers, 12 B (bitsandbytes optim/ademamix.py).",
    Optimizer.ADEMAMIX_8BIT: "bitsandbytes AdEMAMix 8-bit: three uint8 buffers, 3 B + 12 B per 256 (block absmax); "
    "tensors under 4,096 elements 12 B.",
    Optimizer.PAGED_ADEMAMIX: "bitsandbytes PagedAdEMAMix: AdEMAMix's 12 B in CUDA managed memory for tensors of "
    "100,000 elements or more.",
    Optimizer.PAGED_ADEMAMIX_8BIT: "bitsandbytes PagedAdEMAMix8bit: AdEMAMix 8-bit's codes paged for tensors of "
    "100,000 elements or more; their block absmax (12 B per 256) stays on the GPU.",
    Optimizer.SCHEDULE_FREE_ADAMW: "schedulefree AdamWScheduleFree: z (a copy of the parameter) and exp_avg_sq in the "
    "parameters' dtype, 8 B at float32; the foreach step keeps one denominator list; train() / eval() swap the "
    "parameters in place (facebookresearch schedule_free adamw_schedulefree.py).",
    Optimizer.SCHEDULE_FREE_RADAM: "schedulefree RAdamScheduleFree: z and exp_avg_sq, 8 B at float32; the foreach "
    "step keeps one denominator list once rectified (radam_schedulefree.py).",
    Optimizer.SCHEDULE_FREE_SGD: "schedulefree SGDScheduleFree: one z in the parameters' dtype, 4 B at float32; "
    "the step updates in place (sgd_schedulefree.py).",
    Optimizer.GALORE_ADAMW: "GaLore AdamW (galore-torch; transformers' galore_adamw, full training): each block's "
    "Linear weight keeps Adam's two moments on its gradient projected to rank r (max(m, n) × r in the gradients' "
    "dtype) and the projector (r × min(m, n)); every update_proj_gap steps a float32 SVD of the "
    "whole gradient refreshes the projector; the embedding, head and norms keep AdamW's full moments. With the "
    "step in the backward it is galore_adamw_layerwise (one optimizer per parameter in a post-accumulate-grad hook).",
}
PRESET_LABELS: Final = {
    Preset.TRAINER_BF16: "Trainer(bf16=True), bf16 model",
    Preset.FP32_AUTOCAST_BF16: "float32 weights + bf16 autocast",
    Preset.PURE_BF16: "pure bf16 (no autocast)",
    Preset.FP16_AMP: "fp16 AMP (float32, GradScaler)",
    Preset.FP32: "float32",
    Preset.CUSTOM: "custom",
}
CHECKPOINT_POLICY_LABELS: Final = {
    CheckpointPolicy.FULL: "full (every block recomputed)",
    CheckpointPolicy.OP: "selective per op (torchtitan)",
    CheckpointPolicy.LAYER: "every Nth block (torchtitan)",
    CheckpointPolicy.ATTENTION: "attention only (Megatron selective)",
    CheckpointPolicy.UNSLOTH: "offloaded to the CPU (Unsloth)",
}
STACK_LABELS: Final = {
    Stack.EAGER: "eager PyTorch",
    Stack.COMPILE: "torch.compile",
    Stack.MEGATRON: "Megatron / NeMo fused kernels",
}
FLOAT8_LABELS: Final = {
    Float8.NONE: "off (16-bit matmuls)",
    Float8.TENSORWISE: "torchao, tensorwise scaling",
    Float8.ROWWISE: "torchao, rowwise scaling",
    Float8.ROWWISE_GW_HP: "torchao, rowwise, 16-bit wgrad",
    Float8.MXFP8: "torchao, MXFP8 blocks",
    Float8.TE: "Transformer Engine, delayed scaling",
    Float8.TE_CURRENT: "Transformer Engine, current scaling",
    Float8.TE_MXFP8: "Transformer Engine, MXFP8 blocks",
}
TRANSFORMERS_LOSS_LABELS: Final = {
    TransformersLoss.V4_31_TO_4_45: "4.31 – 4.45 (float32 logits, copied)",
    TransformersLoss.V4_46_TO_4_48: "4.46 – 4.48 (shifted float32 copy)",
    TransformersLoss.V4_49_TO_4_57: "4.49 – 4.57 (experts as nn.Linear)",
    TransformersLoss.V5_ON: "5.0 and later",
}
MEGATRON_CE_FUSION_LABELS: Final = {
    MegatronCeFusion.OFF: "off (vocab-parallel cross-entropy)",
    MegatronCeFusion.NATIVE: "fused, Megatron-Core's (native)",
    MegatronCeFusion.TE: "fused, Transformer Engine's (te)",
}
OPTIMIZER_IMPL_LABELS: Final = {
    OptimizerImpl.FUSED: "HF Trainer default (fused)",
    OptimizerImpl.FOREACH: "torch.optim default (foreach)",  # on CUDA; the tooltip says so
    OptimizerImpl.FORLOOP: "for-loop",
}
ATTENTION_LABELS: Final = {
    Attention.EAGER: "eager (scores kept)",
    Attention.SDPA: "SDPA (fused)",
    Attention.FLASH: "FlashAttention-2",
    Attention.FLASH1: "FlashAttention 1 / Triton",
    Attention.FLASH3: "FlashAttention-3 (Hopper)",
}
STRATEGY_LABELS: Final = {
    Strategy.DDP: "DDP (full replica)",
    Strategy.FSDP: "FSDP2 (fully_shard)",
    Strategy.ZERO1: "ZeRO-1 (optimizer)",
    Strategy.ZERO2: "ZeRO-2 (+ gradients)",
    Strategy.ZERO3: "ZeRO-3 (+ weights)",
}
GRAD_SYNC_LABELS: Final = {
    GradSync.AUTO: "the loop's default",
    GradSync.NO_SYNC: "last micro-batch only (no_sync)",
    GradSync.EACH: "every micro-batch (sync_each_batch)",
}
FSDP_UNITS_LABELS: Final = {
    FsdpUnits.ROOT: "blocks + root (accelerate ≤ 1.13)",
    FsdpUnits.CARVED: "ends carved (accelerate ≥ 1.14)",
}
CP_ROTATE_LABELS: Final = {
    CpRotate.ALLGATHER: "allgather (every rank's K/V)",
    CpRotate.ALLTOALL: "alltoall (one chunk at a time)",
}
OFFLOAD_LABELS: Final = {
    Offload.NONE: "none",
    Offload.OPTIMIZER: "optimizer state to CPU",
    Offload.PARAMS: "parameters + optimizer to CPU",
}
SCHEDULE_LABELS: Final = {
    PipelineSchedule.GPIPE: "GPipe",
    PipelineSchedule.ONE_F_ONE_B: "1F1B",
    PipelineSchedule.INTERLEAVED: "interleaved 1F1B",
}
PIPELINE_SPLIT_LABELS: Final = {
    PipelineSplit.EVEN: "even (Megatron, torchtitan)",
    PipelineSplit.COMPUTE: "by compute (nanotron)",
}
MOE_DISPATCHER_LABELS: Final = {
    MoeDispatcher.ALLTOALL: "alltoall",
    MoeDispatcher.ALLGATHER: "allgather (Megatron-Core's default)",
    MoeDispatcher.DEEPEP: "flex, DeepEP",
    MoeDispatcher.HYBRIDEP: "flex, HybridEP",
}
MOE_LAYER_LABELS: Final = {
    MoeLayer.TRANSFORMERS: "transformers",
    MoeLayer.TORCHTITAN_SCATTER: "torchtitan, scatter-add (prime-rl)",
    MoeLayer.TORCHTITAN_BMM: "torchtitan, bmm (Nov 2025 on)",
}
MODULES_TO_SAVE_LABELS: Final = {
    ModulesToSave.NONE: "none",
    ModulesToSave.EMBEDDING: "embedding (embed_tokens)",
    ModulesToSave.HEAD: "output head (lm_head)",
    ModulesToSave.BOTH: "embedding and head",
}
QUANT_LABELS: Final = {Quant.NF4: "4-bit NF4", Quant.FP4: "4-bit FP4", Quant.INT8: "8-bit (LLM.int8)"}
ACCOUNTING_LABELS: Final = {
    # Short enough to show whole in the plan column; the tooltip says what each one counts.
    Accounting.DETAILED: "Detailed (every tensor)",
    Accounting.LESSON: "Lesson (four buckets)",
}
MP_DTYPE_LABELS: Final = {
    MpDtype.STORED: "as stored (no cast)",  # MixedPrecisionPolicy(param_dtype=None)
    MpDtype.FP32: "float32",
    MpDtype.BF16: "bf16",
    MpDtype.FP16: "fp16",
}
KV_LABELS: Final = {k: k.value for k in KvDtype}

# The optimizers torch.optim implements three ways (fused, foreach, for-loop).
# Muon's AdamW group runs in the plan's implementation too.
TORCH_OPTIMIZERS: Final = (
    Optimizer.ADAMW,
    Optimizer.ADAM,
    Optimizer.SGD,
    Optimizer.SGD_MOMENTUM,
    Optimizer.MUON,
    Optimizer.ADAGRAD,
    Optimizer.RMSPROP,
)
# AnyPrecisionAdamW's own for-loop runs its weight decay as an op of its own (core.training.speed.WEIGHT_DECAY_PASSES).
ANYPRECISION_OPTIMIZERS: Final = (Optimizer.ANYPRECISION_ADAMW, Optimizer.ANYPRECISION_ADAMW_KAHAN)

# ---- ranges and framework defaults ------------------------------------------------------
# Wide enough for any real run, narrow enough that every product stays finite.
MAX_BATCH: Final = 1_000_000
MAX_SEQ: Final = 100_000_000
MAX_TOKENS: Final = 10**16
MAX_GPUS: Final = 1_000_000
MAX_RANK: Final = 65_536
# The methods besides LoRA's and LoHa / LoKr whose ``lora.rank`` sets a trained size (VeRA's r, AdaLoRA's init_r, MiSS's
# r, FourierFT's n_frequency; VB-LoRA's, RandLoRA's and SHiRA's r, branch h78peft).
_RANKED_METHODS: Final = frozenset(
    (Method.VERA, Method.ADALORA, Method.MISS, Method.FOURIERFT, Method.VBLORA, Method.RANDLORA, Method.SHIRA)
)
# transformers 5.25 trainer_optimizer.py _get_galore_optimizer: optim_args' rank and update_proj_gap defaults.
GALORE_DEFAULT_RANK: Final = 128
GALORE_DEFAULT_GAP: Final = 200
MAX_GALORE_GAP: Final = 10_000_000  # any run's step count; bounds the amortised SVD time away from zero
MAX_DEGREE: Final = 4096
MAX_PARALLEL: Final = 1024  # a serving split's degree
# Memory other processes hold: 1 PiB bounds the number (custom_memory_gb's 1e6 GB is 0.89 PiB); the plan
# refuses more than its card has (core.plan.Plan).
HELD_BY_OTHERS_MAX_BYTES: Final = 2**50
# ggml's CUDA backend holds at most 16 devices (ggml-org/llama.cpp ggml/include/ggml-cuda.h
# GGML_CUDA_MAX_DEVICES), so llama.cpp and Ollama split layers over 16 GPUs at most.
LLAMACPP_MAX_DEVICES: Final = 16
MAX_LAYERS_FLAG: Final = 100_000  # -ngl: any count past the model's layers means "all of them"
MAX_LLAMACPP_BUILD: Final = 1_000_000  # llama.cpp's build numbers count commits on master (b7474 in Dec. 2025)
MAX_BUCKET_ELEMENTS: Final = 10**13  # DeepSpeed bucket / prefetch / live sizes, in elements
# Layer SAC's N: past the block count it checkpoints nothing, so any bound above the deepest
# model works; 1024 is far above every catalogue model's layer count.
MAX_CHECKPOINT_EVERY: Final = 1024
# DistributedDataParallel(bucket_cap_mb=None) -> 25 MiB.
DDP_BUCKET_MB: Final = 25.0
# DeepSpeed ZeRO defaults (deepspeed/runtime/zero/config.py, v0.16): reduce_bucket_size and
# allgather_bucket_size 5e8 elements, stage3_prefetch_bucket_size 5e7, stage3_max_live_parameters 1e9.
ZERO_BUCKET_ELEMENTS: Final = 500_000_000
ZERO3_PREFETCH_ELEMENTS: Final = 50_000_000
ZERO3_MAX_LIVE_ELEMENTS: Final = 1_000_000_000
# stage3_max_reuse_distance: 1e9 elements (microsoft/DeepSpeed v0.11.1 e9503fe4, zero/config.py
# max_reuse_distance; the same default at v0.14.0 and v0.19.6).
ZERO3_MAX_REUSE_ELEMENTS: Final = 1_000_000_000


class Kind(StrEnum):
    INT = "int"
    COUNT = "count"  # an integer typed as 6.7e9, 6,700,000,000, 20M or 1.5B (tokens, parameters)
    FLOAT = "float"
    BOOL = "bool"
    ENUM = "enum"  # one of ``labels``' keys
    TEXT = "text"  # an id from a catalogue (GPU, link)
    TARGETS = "targets"  # LoRA target modules: several of core.model.LORA_TARGETS
    SETTING = "setting"  # a settings string read by ``parse`` (empty: the library's defaults)


def _always(plan: Plan) -> bool:
    return True


@dataclass(frozen=True)
class Input:
    """One input of a plan. ``label`` is the text beside the field (a check box's own text)
    and names an edit ("Change micro-batch"); ``name`` is the field's full name (what a screen
    reader says). ``scale`` shows the value multiplied (a fraction as a percentage), with
    ``decimals`` and ``step`` as the field types and steps it. ``matters(plan)``: whether
    the input changes this plan's estimate and is not fixed by another input (a named
    precision preset fixes the roles); the forms show the field only then, and those marked
    ``advanced`` only when asked. ``flags`` and ``help`` are its command-line options;
    ``flag_of`` the path of the input whose flag sets this one under ``--mode inference``
    (the serving split)."""

    path: str
    kind: Kind
    label: str
    name: str
    default: Any
    tooltip: str
    flags: tuple[str, ...] = ()
    help: str = ""
    unit: str = ""
    low: float = 0
    high: float = 0
    zero_means: str = ""
    # What the least value means where it is below 0 and stands for a word (GPU layers' -1: "auto"):
    # the window's field shows the word there.
    low_means: str = ""
    # What 0 means to the serving figures when that differs (the window's Inference mode says it).
    zero_means_serving: str = ""
    labels: Mapping[Any, str] | None = None
    expected: str = ""  # TEXT: what an acceptable value is
    matters: Callable[[Plan], bool] = _always
    advanced: bool = False
    # Changes only the training estimate (its time or memory), never serving's: the window's
    # Inference mode hides its field.
    training_only: bool = False
    scale: float = 1.0
    decimals: int = 2
    step: float = 1.0
    metavar: str | None = None
    cli_choices: tuple[str, ...] | None = None  # fewer than ``labels`` (no "custom" preset)
    cli_switch: bool = False  # an ENUM the command line sets as --flag / --no-flag
    # The command line's unit in the plan's: the value typed is multiplied by it (GiB typed, bytes held).
    cli_factor: float = 1.0
    flag_of: str = ""
    parse: Callable[[str], object] | None = None  # SETTING: reads the text, or raises PlanError
    # The label where a method gives the input another meaning (OFT's r counts blocks); None: ``label``.
    label_for: Callable[[Plan], str] | None = None

    def label_in(self, plan: Plan) -> str:
        """The text beside the field for this plan."""
        return self.label if self.label_for is None else self.label_for(plan)

    @property
    def enum(self) -> type[StrEnum]:
        assert self.labels is not None, self.path
        return type(next(iter(self.labels)))

    @property
    def group(self) -> str:
        """The part of the Plan that holds it ("workload"; "" for the Plan's own fields)."""
        return self.path.rpartition(".")[0]

    @property
    def attribute(self) -> str:
        return self.path.rpartition(".")[2]

    @property
    def allowed(self) -> str:
        """What a value must be, as an error message says it."""
        if self.kind in (Kind.INT, Kind.COUNT):
            return f"an integer from {self.low:,} to {self.high:,}"
        if self.kind is Kind.FLOAT and self.expected:
            return self.expected
        if self.kind is Kind.FLOAT:
            span = f"a number from {self.low:g} to {self.high:g}"
            return f"0 ({self.zero_means}) or {span}" if self.zero_means and self.low > 0 else span
        if self.kind is Kind.BOOL:
            return "true or false"
        if self.kind is Kind.ENUM:
            return "one of " + ", ".join(e.value for e in self.enum)
        if self.kind is Kind.SETTING:
            return self.expected or "a setting the library accepts"
        return self.expected or "a list of module names"


def megatron_grad_buffer(plan: Plan) -> bool:
    """Whether the plan's gradients live in Megatron-Core's gradient buffer: the Megatron stack
    under its DDP or its distributed optimizer (ZeRO-1)."""
    return plan.stack is Stack.MEGATRON and plan.parallel.strategy in (Strategy.DDP, Strategy.ZERO1)


def zero_overlap_comm(plan: Plan) -> bool:
    """Whether the plan's ZeRO-1 / ZeRO-2 run is DeepSpeed's with ``zero_optimization.overlap_comm``
    on (``parallel.zero_overlap_comm``): the gradients reduced bucket by bucket on DeepSpeed's
    ``reduction_stream`` during the backward, into a second ipg bucket (deepspeedai/DeepSpeed
    edaa7221, deepspeed/runtime/zero/stage_1_and_2.py ``setup_buckets``, ``average_tensor``). Not
    under the Megatron stack: there ZeRO-1 is Megatron's distributed optimizer, its overlap its own
    (--overlap-grad-reduce). ZeRO-3 has its own setting, :func:`zero3_overlap_comm`."""
    par = plan.parallel
    return par.zero_overlap_comm and _zero_overlap_matters(plan)


def zero3_overlap_comm(plan: Plan) -> bool:
    """Whether the plan's ZeRO-3 gathers and reduce-scatters run beside the compute: DeepSpeed's
    ``overlap_comm`` at stage 3 (``parallel.zero3_overlap_comm``, on by default as DeepSpeed's is
    there). deepspeedai/DeepSpeed edaa7221: stage3.py ``__init__`` makes ``reduce_and_partition_stream``
    a stream of its own only with overlap_comm (else the default stream, where
    ``__reduce_and_partition_ipg_grads`` then runs), and parameter_offload.py ``__allgather_stream``
    likewise (partitioned_param_coordinator.py ``fetch_sub_module`` gathers on it). Off: both run in
    line with the compute. The ipg bucket and the prefetch are the same either way. True for FSDP
    and every plan that is not DeepSpeed's ZeRO-3."""
    par = plan.parallel
    return par.zero3_overlap_comm or not _zero3_overlap_matters(plan)


def deepspeed_bf16_master(plan: Plan) -> bool:
    """Whether DeepSpeed keeps the plan's master weights and master gradients in bf16
    (``parallel.bf16_master_weights``, DeepSpeed's ``bf16.bf16_master_weights_and_grads``): under a DeepSpeed
    ZeRO stage with its bf16 engine (the plan's bf16 autocast there, core.roles.deepspeed_engine_dtype), off
    the Megatron stack. deepspeedai/DeepSpeed edaa7221, runtime/base_optimizer.py
    ``_configure_master_weights`` returns torch.bfloat16 as ``master_weights_and_grads_dtype``, which
    stage_1_and_2.py and stage3.py give the flat master partition and the gradient the optimizer steps on
    (PR #7700, 39a682d7, first in v0.18.3)."""
    return plan.parallel.bf16_master_weights and _bf16_master_matters(plan)


def deepspeed_bf16_states(plan: Plan) -> bool:
    """Whether DeepSpeed's optimizer keeps its states (Adam's moments) in bf16 (``parallel.bf16_optimizer_states``,
    ``bf16.bf16_optimizer_states``): the optimizer is built over the bf16 master partition, so torch's and
    FusedAdam's ``zeros_like`` states are bf16; offloaded, the engine builds DeepSpeedCPUAdam with
    ``fp32_optimizer_states=False`` (deepspeedai/DeepSpeed edaa7221, runtime/engine.py
    ``_configure_basic_optimizer``)."""
    return plan.parallel.bf16_optimizer_states and deepspeed_bf16_master(plan)


def _bf16_master_matters(plan: Plan) -> bool:
    return plan.parallel.strategy.deepspeed and plan.stack is not Stack.MEGATRON and plan.autocast is Autocast.BF16


def _zero_overlap_matters(plan: Plan) -> bool:
    return plan.parallel.strategy in (Strategy.ZERO1, Strategy.ZERO2) and plan.stack is not Stack.MEGATRON


def _zero3_overlap_matters(plan: Plan) -> bool:
    return plan.parallel.strategy is Strategy.ZERO3


def megatron_dispatcher(plan: Plan) -> MoeDispatcher | None:
    """The MoE token dispatcher the plan runs (``parallel.moe_dispatcher``) where Megatron-Core
    dispatches tokens at all — the Megatron stack, a mixture of experts, TP × EP > 1 — else None.
    The one rule the memory (the global buffer), the time (the permutes), the traffic and the
    export read, and the window's row shows by."""
    par = plan.parallel
    split = par.expert_parallel * par.tensor_parallel > 1
    return par.moe_dispatcher if plan.stack is Stack.MEGATRON and plan.model.num_experts > 1 and split else None


# The loss kernels of the window's Loss list (core.losses.LOSS_INPUTS, the rest of which describe
# the eager loss), in the order core.training.activations.loss_memory takes them (Liger's first,
# then the compiled loss, prime-rl's RL log-prob head last). The one list of them: core.losses derives
# its own from this one.
LOSS_KERNELS: Final = ("fused_loss", "chunked_loss", "flash_loss", "compiled_loss", "logprob_head")

# The loss settings that replace the eager cross-entropy with code of their own: the kernels and
# the training loops that bring their own loss (Unsloth, LitGPT: switches of their own, outside the
# Loss list). A setting that describes the eager loss (Megatron's fusion, the kept output, the
# 16-bit loss) matters only when none of them is on: own_loss_code.
LOSS_CODE: Final = (*LOSS_KERNELS, "unsloth", "litgpt")


# The loss kernels the estimate takes only on a head without tanh soft-capping (Gemma 2's
# ``final_logit_softcapping``): on a soft-capped head core.training.activations._loss_terms counts
# the eager cross-entropy, with the capped logits kept, in their place.
SOFTCAP_EAGER_LOSS: Final = ("flash_loss", "compiled_loss")


def loss_code_runs(plan: Plan, name: str) -> bool:
    """Whether the loss setting ``name`` (one of :data:`LOSS_CODE`) is on and its code is what the
    estimate counts: a kernel of :data:`SOFTCAP_EAGER_LOSS` on a soft-capped head is not."""
    return bool(getattr(plan, name)) and not (plan.model.final_softcap and name in SOFTCAP_EAGER_LOSS)


def own_loss_code(plan: Plan) -> bool:
    """Whether one of :data:`LOSS_CODE` computes the plan's loss (no eager cross-entropy): the one
    rule the memory, the 16-bit loss switch and the window's rows read."""
    return any(loss_code_runs(plan, name) for name in LOSS_CODE)


def needs_mask(plan: Plan) -> bool:
    """transformers builds an explicit mask once the sequence reaches a sliding window."""
    model = plan.model
    return model.sliding_window is not None and plan.workload.seq_len >= model.sliding_window


def explicit_mask(plan: Plan) -> bool:
    """Whether SDPA is handed a mask: a sliding window (needs_mask), or prefix tuning's keys before the
    sequence's own (huggingface/peft 51c2ff66 src/peft/peft_model.py ``PeftModelForCausalLM.forward`` passes
    a prefix cache and a mask with the prefix's ones; with more keys than queries a causal mask cannot be
    SDPA's ``is_causal``, so transformers builds it; with it, no ``enable_gqa``: k and v are repeated)."""
    return needs_mask(plan) or plan.prefix_tokens > 0


def sixteen_bit_inputs(plan: Plan) -> bool:
    """Attention sees 16-bit q, k, v under autocast or when the model is stored in 16 bits."""
    # PEFT's LoHa, LoKr, VeRA, OFT, AdaLoRA, MiSS, FourierFT, RoAd on a frozen base (branches h53lyco, h53vera,
    # h54oft, h54ada, h58peft, h76peft)
    frozen_base = plan.method in _SDPA_FROZEN_BASE or plan.litgpt_adapter or plan.peft_wrapped
    stored = plan.base_dtype if frozen_base else plan.weight_dtype
    return plan.autocast is not Autocast.NONE or stored is not Dtype.FP32


_SDPA_FROZEN_BASE: Final = frozenset((Method.LORA, Method.QLORA, Method.DORA))


def flash_misses_gqa(plan: Plan) -> bool:
    """Whether SDPA gets grouped-query heads with ``enable_gqa`` (no mask: transformers' use_gqa_in_sdpa) that the
    flash kernel cannot take (float32 inputs, or heads wider than 256): the call PyTorch 2.14 moved from the math
    kernel to the memory-efficient one (core.training.attention.efficient_takes_gqa), where the release matters."""
    model = plan.model
    return (
        plan.attention is Attention.SDPA
        and model.num_kv_heads != model.num_heads
        and not explicit_mask(plan)
        and not (sixteen_bit_inputs(plan) and model.head_dim <= 256)
    )


def loss_16bit_matters(plan: Plan) -> bool:
    """Whether a loop's own F.cross_entropy would see 16-bit logits: no autocast (autocast runs the op
    in float32), a 16-bit model (the head's output dtype; not QLoRA after prepare_model_for_kbit_training,
    which runs it in float32: core.roles.kbit_float32), and no other loss code chosen (a fused, chunked,
    compiled, flash-attn, LitGPT, Unsloth or Megatron loss is its own kernel)."""
    model = plan.base_dtype if plan.adapter_based else plan.weight_dtype
    upcast = plan.quantised_base and plan.kbit_upcast
    return (
        plan.autocast is Autocast.NONE
        and model in (Dtype.BF16, Dtype.FP16)
        and not upcast
        and not own_loss_code(plan)
        and plan.stack is not Stack.MEGATRON
    )


def transformers_loss_matters(plan: Plan) -> bool:
    """Whether the transformers release changes the plan's loss: the eager cross-entropy of transformers'
    causal-LM models, not a loss of other code (:data:`LOSS_CODE`, Megatron's) nor a loop's own 16-bit
    cross-entropy (``loss_16bit``)."""
    own_16bit = plan.loss_16bit and loss_16bit_matters(plan)
    return not own_loss_code(plan) and plan.stack is not Stack.MEGATRON and not own_16bit


def training_transformers_matters(plan: Plan) -> bool:
    """Whether the training run's transformers release changes the plan: its loss (:func:`transformers_loss_matters`)
    or what an adapter's MLP targets reach on a mixture of experts (``Plan.linear_experts`` differs by release), or
    whether a bitsandbytes base quantises the routed experts (``Plan.release_moves_bnb_experts``)."""
    return transformers_loss_matters(plan) or plan.release_moves_adapters or plan.release_moves_bnb_experts


def torch_ring_rotate(plan: Plan) -> CpRotate | None:
    """The rotate method of the plan's ring attention (``parallel.cp_rotate_method``) where
    PyTorch's ring attention runs at all — context parallel > 1 outside Megatron-LM, whose context
    parallelism is Transformer Engine's attention — else None. The one rule the memory, the time,
    the traffic, the export and the window's row read."""
    if plan.parallel.context_parallel <= 1 or plan.stack is Stack.MEGATRON:
        return None
    return plan.parallel.cp_rotate_method


def _node_split(plan: Plan) -> bool:
    return plan.parallel.world_size > 1


# The table. A declarative table: one row per input, longer than a function may be.
# fmt: off
# Host memory the CPU reads llama.cpp's host-kept weights from, by default: dual-channel DDR4-3200,
# 2 x 8 bytes x 3.2 GT/s = 51.2 GB/s (JEDEC JESD79-4), the common desktop and workstation case.
HOST_BANDWIDTH_GB_S: Final = 51.2


INPUTS: Final[tuple[Input, ...]] = (
    # ---- method -----------------------------------------------------------------------
    Input("method", Kind.ENUM, "Method", "Method", Method.FULL,
          "Full: every weight trains. LoRA: small adapters train, the base is frozen. "
          "QLoRA: LoRA on a 4- or 8-bit base. Frozen layers: the bottom blocks get no gradients. "
          "IA3 (PEFT): one trained vector per targeted projection scales its output (or, on a feedforward "
          "module, its input); the base is frozen. "
          "Adapter (LitGPT): learned prompts, gated, in the attention of the top blocks. Adapter v2: those, plus a "
          "trained bias and scale on every linear layer and trainable norms. Prompt tuning / P-tuning (PEFT): "
          "trained embeddings of virtual tokens go before every sequence (P-tuning makes them with an MLP); the "
          "frozen model runs on the sequence plus those tokens. Prefix tuning (PEFT): trained keys and values of "
          "virtual tokens in every layer's attention. LN tuning (PEFT): trained copies of the norms. LoHa / LoKr "
          "(PEFT): each target's whole weight update is built every step from rank-r factors (a Hadamard or a "
          "Kronecker product) and kept for the backward. VeRA (PEFT): one frozen random rank-r pair shared by all "
          "targets, scaled by two trained vectors per target (r and out). OFT (PEFT): each target's input is "
          "rotated by a trained block-diagonal orthogonal matrix, built every step from skew-symmetric blocks. "
          "AdaLoRA (PEFT): LoRA at the initial rank with trained singular values between A and B, masked down to "
          "the target rank (nothing shrinks); its rank allocator keeps three float32 copies of every trained "
          "element. MiSS (PEFT, formerly Bone): each target adds its input, summed over blocks of r features, "
          "times a trained r × out matrix. FourierFT (PEFT): n trained spectral coefficients per target; the "
          "inverse FFT of them is the target's whole weight update, built every step and kept for the backward. "
          "RoAd (PEFT): each target's output is rotated in pairs by trained angles and scales; the float32 output "
          "and its rotated copy are kept for the backward. VB-LoRA (PEFT): LoRA's A and B at rank r, assembled every "
          "step from one shared trained bank of vectors (256 of 256, each slot a mix of its top 2). RandLoRA (PEFT): "
          "frozen shared random rank-r bases, min(in, out) / r of them, scaled by two trained matrices per target; a "
          "full-rank float32 update. SHiRA (PEFT): r × (in + out) trained entries of each target's weight, added to "
          "a copy of the frozen weight every step, the copy kept for the backward. BOFT (PEFT, one butterfly "
          "factor): each target's input multiplied by a dense in × in orthogonal matrix built every step from trained "
          "b × b blocks (three in × in matrices kept per target), its output scaled by a trained vector.",
          ("--method",), "full, lora, qlora, frozen (layers), dora, ia3, adapter, adapter_v2, prompt-tuning, "
          "p-tuning, prefix-tuning, ln-tuning, loha, lokr, vera, oft, adalora, miss, trainable-tokens, fourierft, "
          "road, vblora, randlora, shira or boft", labels=METHOD_LABELS),
    Input("lora.rank", Kind.INT, "Rank r", "LoRA rank", 8,
          "Rank r of each adapter: r × (in + out) parameters per matrix (LoHa: twice that; LoKr: the same on "
          "each weight's large Kronecker factor, or that factor whole where r is at least half its larger side; "
          "VeRA: r trained per target, the shared frozen projections r × (largest in + largest out); OFT with "
          "block size 0: r blocks per target, each in/r wide; AdaLoRA: init_r, r × (in + out + 1); MiSS: "
          "r × out per target, 64 by default; FourierFT: n_frequency, the coefficients trained per target, 1000 by "
          "default; VB-LoRA: 4 by default; RandLoRA: the bases' rank, 32 by default, min(in, out) / r bases; SHiRA: "
          "r × (in + out) trained entries per target, 32 by default; BOFT with block size 0: boft_block_num, r blocks "
          "per target).",
          ("--lora-rank",), "LoRA/DoRA/LoHa/LoKr/VeRA/MiSS/VB-LoRA/RandLoRA/SHiRA adapter rank r (OFT, BOFT: blocks "
          "per target; AdaLoRA: init_r; FourierFT: n_frequency)",
          low=1, high=MAX_RANK,
          matters=lambda p: p.lora_adapters or p.lycoris or p.method in _RANKED_METHODS
          or ((p.oft or p.boft) and p.lora.oft_block_size == 0),
          # huggingface/peft 51c2ff66 src/peft/tuners/oft/config.py OFTConfig.r: the number of OFT blocks;
          # src/peft/tuners/fourierft/config.py FourierFTConfig.n_frequency: the coefficients per target.
          label_for=lambda p: "Blocks r" if p.oft or p.boft else "Frequencies n" if p.method is Method.FOURIERFT
          else "Rank r"),
    Input("lora.alpha", Kind.FLOAT, "Alpha α", "LoRA alpha", 16.0,
          "Adapter scaling α (the update is scaled by α / r); no effect on memory.",
          ("--lora-alpha",), "LoRA/DoRA/LoHa/LoKr/AdaLoRA scaling α (no effect on memory)", low=0.01, high=1e6,
          matters=lambda p: p.lora_adapters or p.lycoris or p.method is Method.ADALORA),
    Input("lora.dropout", Kind.FLOAT, "Dropout", "LoRA dropout", 0.0,
          "Dropout on the adapters' input (PEFT lora_dropout; 0 by default): each adapter then keeps its own "
          "dropped copy of its input and a one-byte mask per element for the backward.",
          ("--lora-dropout",), "LoRA/DoRA/AdaLoRA dropout (PEFT lora_dropout, default 0)", low=0.0, high=0.99,
          step=0.05, matters=lambda p: p.lora_adapters or p.method is Method.ADALORA),
    Input("lora.targets", Kind.TARGETS, "Targets", "LoRA target modules", ("q_proj", "v_proj"),
          "The modules that get an adapter (LoRA, DoRA) or a scaling vector (IA3); lm_head, the output head, "
          "takes a LoRA or DoRA adapter (all-linear leaves it out, as PEFT does). all-linear is PEFT's every linear "
          "layer: the seven names and, on a mixture of experts, the router where the release builds it as one.",
          ("--lora-targets",), "comma list: q_proj,v_proj, all-linear, lm_head (the output head; LoRA, DoRA)",
          matters=lambda p: p.adapter_based and not p.litgpt_adapter and not p.prompt_learning
          and p.method is not Method.LN_TUNING),
    Input("lora.ia3_feedforward", Kind.TARGETS, "Feedforward", "IA3 feedforward modules", ("down_proj",),
          "IA3's feedforward_modules: of the targets, those whose input is scaled (PEFT's default for Llama-style "
          "models: down_proj); the others scale their output.",
          ("--ia3-feedforward",), "IA3: comma list of targets whose input is scaled (PEFT default down_proj)",
          matters=lambda p: p.method is Method.IA3),
    # LitGPT's adapters (branch h41adapt): lit_gpt/adapter.py Config defaults at Lightning-AI/litgpt 0f021f3.
    Input("lora.adapter_prompt_length", Kind.INT, "Prompt length", "Adapter prompt length", 10,
          "LitGPT adapter_prompt_length: the learned prompt tokens each adapted block's attention also attends to.",
          ("--adapter-prompt-length",), "LitGPT adapter / adapter_v2: adaption prompt tokens (default 10)",
          unit="tokens", low=1, high=65_536, matters=lambda p: p.litgpt_adapter),
    Input("lora.adapter_start_layer", Kind.INT, "Start layer", "Adapter start layer", 2,
          "LitGPT adapter_start_layer: the first block with an adaption prompt (the blocks below get none; "
          "under Adapter v1 they get no gradients at all).",
          ("--adapter-start-layer",), "LitGPT adapter / adapter_v2: first block with a prompt (default 2)",
          unit="blocks", low=0, high=LIMITS["num_layers"], matters=lambda p: p.litgpt_adapter),
    Input("lora.adapter_quantised", Kind.BOOL, "Quantised base", "Adapter on a quantised base", False,
          "LitGPT --quantize bnb.nf4 / bnb.nf4-dq / bnb.int8-training: the frozen base stored by bitsandbytes "
          "as QLoRA stores it (the base storage and double quantisation below).",
          ("--adapter-quantised",), "LitGPT adapter / adapter_v2 on a bitsandbytes base (--quantize bnb.*)",
          matters=lambda p: p.litgpt_adapter),
    Input("lora.virtual_tokens", Kind.INT, "Virtual tokens", "Virtual tokens", 20,
          "Prompt tuning / P-tuning: PEFT's num_virtual_tokens, trained embeddings put before every sequence; "
          "the model runs on the sequence plus these tokens. Prefix tuning: the keys and values every layer's "
          "attention sees before the sequence's own.",
          ("--virtual-tokens",), "prompt-tuning / p-tuning / prefix-tuning: PEFT num_virtual_tokens (default 20)",
          low=1, high=100_000, matters=lambda p: p.prompt_learning),
    # huggingface/peft 51c2ff66 src/peft/tuners/lokr/config.py LoKrConfig.decompose_factor (default -1).
    Input("lora.lokr_factor", Kind.INT, "LoKr factor", "LoKr decompose factor", -1,
          "LoKr's decompose_factor: each side of a weight splits into factor × (side ÷ factor) when the factor "
          "divides it (PEFT's factorization); -1 splits near the square root. The small Kronecker factor trains "
          "whole, the large one as a rank-r product unless r is at least half its larger side.",
          ("--lokr-factor",), "lokr: PEFT decompose_factor (-1: near the square root, the default)",
          low=-1, high=1_000_000, matters=lambda p: p.method is Method.LOKR),
    # huggingface/peft 51c2ff66 src/peft/tuners/oft/config.py OFTConfig.oft_block_size (default 32, r 0).
    Input("lora.oft_block_size", Kind.INT, "OFT block size", "OFT block size", 32,
          "OFT's oft_block_size: each target's input splits into blocks this wide (PEFT moves it to the nearest "
          "divisor of the input width), each rotated by a trained b × b orthogonal matrix of b·(b−1)/2 "
          "parameters. 0: the rank r gives the number of blocks instead (OFTConfig r). BOFT: boft_block_size "
          "(4 by default), which must divide the input width; b × b trained per block.",
          ("--oft-block-size",), "oft, boft: PEFT oft_block_size / boft_block_size (defaults 32 / 4; 0: --lora-rank "
          "blocks per target)",
          # huggingface/peft 51c2ff66 src/peft/tuners/boft/config.py BOFTConfig.boft_block_size (default 4, num 0).
          low=0, high=65_536, matters=lambda p: p.oft or p.boft, label_for=lambda p: "BOFT block size" if p.boft
          else "OFT block size"),
    # huggingface/peft 51c2ff66 src/peft/tuners/road/config.py RoadConfig.variant (default "road_1").
    Input("lora.road_variant", Kind.ENUM, "RoAd variant", "RoAd variant", RoadVariant.ROAD_1,
          "RoAd's variant: how many rotation angles and scales each target trains (out/2, out or 2·out of each). "
          "What the forward keeps does not change with it.",
          ("--road-variant",), "road: PEFT variant road_1, road_2 or road_4 (default road_1)",
          labels=ROAD_VARIANT_LABELS, matters=lambda p: p.method is Method.ROAD),
    # PEFT's modules_to_save and trainable_token_indices (branch h60mts; huggingface/peft 51c2ff66
    # src/peft/utils/other.py ModulesToSaveWrapper, src/peft/tuners/trainable_tokens/layer.py).
    Input("lora.modules_to_save", Kind.ENUM, "Trained in full", "Modules to save", ModulesToSave.NONE,
          "PEFT's modules_to_save (axolotl lora_modules_to_save, LLaMA-Factory additional_target): modules "
          "trained whole beside the adapters, usually when a chat template adds tokens. PEFT keeps the frozen "
          "original and trains a copy in the base's dtype: the copy, its gradient and its optimizer state, "
          "V × d each; a trained head also keeps its input for the weight gradient.",
          ("--modules-to-save",), "PEFT modules_to_save: none, embedding, head or both (V × d copies that train)",
          labels=MODULES_TO_SAVE_LABELS, matters=lambda p: p.peft_config),
    Input("lora.trainable_tokens", Kind.INT, "Trained token rows", "Trainable tokens", 0,
          "PEFT's trainable_token_indices: how many rows of the embedding train (a float32 delta and a copy "
          "of the original rows, k × d each). On a tied head the head's forward also builds and keeps a "
          "merged V × d copy of the matrix. 0: none.",
          ("--trainable-tokens",), "PEFT trainable_token_indices: the number of embedding rows that train (0: none)",
          unit="rows", low=0, high=LIMITS["vocab_size"],
          matters=lambda p: p.peft_config and (p.lora_adapters or p.method is Method.TRAINABLE_TOKENS)),
    Input("quant", Kind.ENUM, "Base storage", "Base quantisation", Quant.NF4,
          "How QLoRA stores the frozen base weights (bitsandbytes): 4-bit NF4/FP4 in blocks of 64, or 8-bit.",
          ("--quant",), "QLoRA base storage", labels=QUANT_LABELS, matters=lambda p: p.quantised_base),
    Input("double_quant", Kind.BOOL, "Double quantisation", "Double quantisation", True,
          "Store the 4-bit block scales in 8 bits (QLoRA paper §3): ≈ 0.37 bits per weight less.",
          ("--double-quant",), "QLoRA: 4-bit block scales stored in 8 bits (default on)",
          matters=lambda p: p.four_bit_base),
    Input("bnb_skip_modules", Kind.SETTING, "Kept in 16 bits", "Modules kept in 16 bits", "",
          "transformers' llm_int8_skip_modules: linears the bitsandbytes base keeps in 16 bits, as a comma "
          "list matched as transformers matches it (a module's own name, or a dotted prefix such as "
          "model.layers.0.mlp). Empty: the output head alone. A list that does not name lm_head quantises "
          "the head too, as transformers does.",
          ("--bnb-skip-modules",), "QLoRA: comma list of modules kept in 16 bits (llm_int8_skip_modules), "
          "e.g. model.layers.0.mlp,lm_head", expected="a comma list of module names", metavar="NAMES",
          parse=parse_skip_modules, training_only=True, matters=lambda p: p.method is Method.QLORA),
    Input("frozen_layers", Kind.INT, "Frozen layers", "Frozen layers", 0,
          "Bottom transformer blocks (and the embeddings) that get no gradients.",
          ("--frozen-layers",), "frozen layers method: bottom blocks without gradients", unit="blocks",
          low=0, high=LIMITS["num_layers"], matters=lambda p: p.method is Method.FROZEN),
    Input("preset", Kind.ENUM, "Precision", "Precision", Preset.FP32_AUTOCAST_BF16,
          "How the run stores and computes: Trainer(bf16=True) on a model loaded in bf16 keeps bf16 weights, "
          "float32 adapters and bf16 autocast; float32 weights + autocast is the classic mixed precision; "
          "custom sets each role.",
          ("--preset",), "trainer-bf16: model loaded in bf16 + Trainer(bf16=True); fp32-autocast-bf16; pure-bf16; "
          "fp16-amp; fp32", labels=PRESET_LABELS,
          cli_choices=tuple(p.value for p in Preset if p is not Preset.CUSTOM)),
    Input("weight_dtype", Kind.ENUM, "Trained weights", "Trained weights", Dtype.FP32,
          "Storage of the weights that train (and of their gradients and optimizer state).",
          ("--weight-dtype",), "storage of trained weights (full FT) and the dtype the model is loaded in",
          labels=DTYPE_LABELS,
          matters=lambda p: p.preset is Preset.CUSTOM and p.method in (Method.FULL, Method.FROZEN)),
    Input("base_dtype", Kind.ENUM, "Frozen base", "Frozen base", Dtype.FP32,
          "Storage of the frozen base of LoRA, DoRA, LoHa, LoKr, VeRA, OFT, AdaLoRA, MiSS, FourierFT, RoAd, VB-LoRA, "
          "RandLoRA, SHiRA or frozen layers, and of an image-text model's frozen vision tower (full fine-tuning too).",
          ("--base-dtype",), "the frozen base of LoRA/DoRA/LoHa/LoKr/VeRA/OFT/AdaLoRA/MiSS/FourierFT/RoAd/VB-LoRA/"
          "RandLoRA/SHiRA/frozen layers, and an image-text model's frozen vision tower",
          labels=DTYPE_LABELS,
          matters=lambda p: p.preset is Preset.CUSTOM
          and (p.method in (Method.LORA, Method.DORA, Method.FROZEN)
               or p.peft_wrapped
               or (p.litgpt_adapter and not p.quantised_base)
               or (p.method is Method.FULL and p.model.vision_params > 0))),
    Input("adapter_dtype", Kind.ENUM, "Adapters", "Adapters", Dtype.FP32,
          "LoRA / DoRA adapter storage: PEFT casts adapters to float32 by default.",
          ("--adapter-dtype",), "LoRA/DoRA adapters (PEFT: fp32)", labels=DTYPE_LABELS,
          matters=lambda p: p.preset is Preset.CUSTOM and p.adapter_based and p.method is not Method.LN_TUNING),
    # On the command line a switch: on means autocast to the weights' 16-bit dtype.
    Input("autocast", Kind.ENUM, "Autocast", "Autocast", Autocast.BF16,
          "torch.autocast around the forward pass and the loss; fp16 adds a GradScaler.",
          ("--autocast",), "torch.autocast around forward and loss, in the weights' 16-bit dtype (bf16 over float32)",
          labels=AUTOCAST_LABELS, matters=lambda p: p.preset is Preset.CUSTOM, cli_switch=True),
    Input("optimizer", Kind.ENUM, "Optimizer", "Optimizer", Optimizer.ADAMW,
          "AdamW keeps two float32 moments per trainable parameter (8 bytes); 8-bit AdamW (bitsandbytes) two "
          "bytes + 8 B per 256 (blocks' absmax); torchao AdamW 8-bit the same, 4-bit 1 byte + 8 B per 128, FP8 "
          "2 bytes + 8 B per 256 (pytorch/ao torchao/optim); AnyPrecisionAdamW as llama-recipes runs it two bf16 "
          "moments (4 bytes), 6 with its bf16 Kahan buffer; Lion one momentum (4 bytes, 8-bit 1 byte + 4 B per "
          "256: bitsandbytes); SGD with momentum one buffer; Adafactor factored moments; Adagrad and RMSprop "
          "(torch) one buffer; bitsandbytes' RMSprop one float32 buffer (8-bit 1 byte + 4 B per 256); AdEMAMix "
          "three (12 bytes, 8-bit 3 bytes + 12 B per 256); schedule-free AdamW / RAdam z and exp_avg_sq, SGD z.",
          ("--optimizer",), "the optimizer (its state per trainable parameter)", labels=OPTIMIZER_LABELS),
    Input("optimizer_impl", Kind.ENUM, "Implementation", "Optimizer implementation", OptimizerImpl.FUSED,
          "fused (HF Trainer's adamw_torch_fused) updates in place; foreach (torch.optim's default on CUDA) "
          "makes one more copy of the Adam second moment during the step (two under PyTorch 2.0); for-loop works "
          "one tensor at a time.",
          ("--optimizer-impl",), "fused (HF Trainer default), foreach (torch.optim default on CUDA) or forloop",
          labels=OPTIMIZER_IMPL_LABELS, matters=lambda p: p.optimizer in TORCH_OPTIMIZERS),
    # HF Trainer's TrainingArguments.weight_decay defaults to 0.0 (what a plan without it meant); torch.optim.AdamW's
    # own default 0.01 applies only to a hand-written loop. torch's foreach and for-loop steps add a pass over the
    # parameters for it (core.training.speed.WEIGHT_DECAY_PASSES), and Adam's / SGD's L2 form a new gradient
    # (core.training.optimizer.L2_DECAY); fused kernels fold it in.
    Input("weight_decay", Kind.FLOAT, "Weight decay", "Weight decay", 0.0,
          "The optimizer's weight decay (HF Trainer: 0 unless set; torch.optim.AdamW alone: 0.01). Not zero, "
          "torch's foreach and for-loop steps read and write every parameter once more (AdamW's "
          "mul_ by 1 − lr·wd; Adam's and SGD's add to the gradient); the fused kernels fold it in. Adam's (L2) "
          "for-loop and SGD's foreach and for-loop steps also keep that new gradient: one more gradient-sized list "
          "(SGD foreach) or copy of the largest tensor (core.training.optimizer.L2_DECAY).",
          ("--weight-decay",), "the optimizer's weight decay (HF Trainer default 0; foreach / for-loop: time, and "
          "Adam's and SGD's L2 gradient copy)",
          low=0.0, high=10.0, decimals=3, step=0.01, training_only=True,
          matters=lambda p: p.optimizer in ANYPRECISION_OPTIMIZERS
          or (p.optimizer in TORCH_OPTIMIZERS and p.optimizer_impl is not OptimizerImpl.FUSED)),
    # GaLore's optim_args (transformers 5.25 trainer_optimizer.py _get_galore_optimizer: rank 128, update_proj_gap
    # 200 unless optim_args sets them; scale and proj_type change neither memory nor time under "std").
    Input("galore_rank", Kind.INT, "GaLore rank", "GaLore rank", GALORE_DEFAULT_RANK,
          "optim_args rank: each targeted matrix's gradient is projected to rank r, and Adam's moments are kept "
          "on the max(m, n) × r projection (transformers' default 128).",
          ("--galore-rank",), "GaLore's projection rank (optim_args rank; transformers default 128)",
          low=1, high=MAX_RANK, training_only=True, matters=lambda p: p.optimizer is Optimizer.GALORE_ADAMW),
    Input("galore_update_proj_gap", Kind.INT, "GaLore update gap", "GaLore projector update gap",
          GALORE_DEFAULT_GAP,
          "optim_args update_proj_gap: every this many steps each targeted gradient's float32 SVD refreshes the "
          "projector; its time is spread over the gap (transformers' default 200).",
          ("--galore-update-proj-gap",), "steps between GaLore's SVD refreshes (transformers default 200)",
          unit="steps", low=1, high=MAX_GALORE_GAP, training_only=True,
          matters=lambda p: p.optimizer is Optimizer.GALORE_ADAMW),
    Input("attention", Kind.ENUM, "Attention", "Attention kernel", Attention.SDPA,
          "Eager attention keeps the batch × heads × seq² score matrix for the backward pass; fused kernels "
          "(SDPA, FlashAttention-2) do not. FlashAttention 1 and its Triton kernel (before July 2023) keep the same "
          "memory but run about half as fast as FlashAttention-2; FlashAttention-3 (Hopper only) the same memory, "
          "about twice as fast.",
          ("--attention",), "eager keeps the score matrix; sdpa, flash, flash1 (FlashAttention 1 / Triton, "
          "slower) and flash3 (FlashAttention-3, Hopper only) do not", labels=ATTENTION_LABELS),
    Input("checkpointing", Kind.BOOL, "Gradient checkpointing", "Gradient checkpointing", False,
          "Keep only each block's input and recompute the block in the backward pass: far fewer activations, "
          "about a third more compute.",
          ("--checkpointing",), "gradient checkpointing (activation recomputation)"),
    Input("checkpoint_policy", Kind.ENUM, "Policy", "Checkpointing policy", CheckpointPolicy.FULL,
          "Full: every block keeps only its input (Hugging Face gradient_checkpointing, torchtitan mode full). "
          "Selective per op: each block also keeps every other matmul output and the attention output "
          "(torchtitan selective_ac_option op). Every Nth block: those blocks are checkpointed, the rest keep "
          "everything (selective_ac_option N). Attention only: every block keeps everything but the core "
          "attention's scores, which its backward recomputes (Megatron-LM --recompute-granularity selective). "
          "Offloaded (Unsloth's use_gradient_checkpointing=\"unsloth\"): every block recomputed, the block inputs "
          "kept in pinned host memory; the GPU keeps the last block's input and one or two reload buffers "
          "(below 512 tokens Unsloth checkpoints plainly).",
          ("--checkpoint-policy",), "full (every block recomputed), op (torchtitan selective per op), layer "
          "(every Nth block), attention (Megatron selective: core attention only) or unsloth (block inputs "
          "offloaded to the CPU); turns checkpointing on",
          labels=CHECKPOINT_POLICY_LABELS,
          matters=lambda p: p.checkpointing),
    Input("checkpoint_every", Kind.INT, "Checkpoint every", "Checkpoint every", 1,
          "N: the blocks whose number N divides are checkpointed, the others keep their activations.",
          ("--checkpoint-every",), "layer policy: checkpoint every Nth block (implies layer)", unit="blocks",
          low=1, high=MAX_CHECKPOINT_EVERY,
          matters=lambda p: p.checkpointing and p.checkpoint_policy is CheckpointPolicy.LAYER),
    # The software stack and float8 decide how fast the step runs (core.training.speed);
    # float8 also what the linears hold (core.training.detailed, torchao Float8Linear), and
    # torch.compile what a block saves (core.training.activations, COMPILE_NOTE).
    Input("stack", Kind.ENUM, "Software", "Software stack", Stack.EAGER,
          "What runs the step. Eager PyTorch (Hugging Face Trainer, PEFT, torchtune) launches every "
          "elementwise op as its own kernel; torch.compile fuses them; Megatron-LM / NeMo use Transformer "
          "Engine's fused kernels. The matmuls are the same: the stack decides the time spent around them. "
          "torch.compile also saves less for the backward: it recomputes the norms' float32 copies and the "
          "MLP's activation.",
          ("--stack",), "eager (PyTorch), compile (torch.compile) or megatron (Megatron-LM / NeMo fused kernels)",
          labels=STACK_LABELS),
    Input("float8", Kind.ENUM, "Float8", "Float8 training", Float8.NONE,
          "Run the linear layers' matmuls in float8 (torchao Float8Linear as torchtitan uses it, or "
          "Transformer Engine in Megatron / NeMo) at the card's fp8 rate; attention, norms and the loss stay "
          "16-bit. Needs FP8 tensor cores (Ada, Hopper, Blackwell).",
          ("--float8",), "float8 linears: none, tensorwise, rowwise, rowwise-gw-hp (rowwise with the weight "
          "gradient's matmul in 16-bit) or mxfp8 (MX blocks, Blackwell) (torchao), te (Transformer Engine, "
          "per-tensor delayed scaling), te-current (its per-tensor current scaling, Megatron's tensorwise) "
          "or te-mxfp8 (its MXFP8 blocks, Blackwell)",
          labels=FLOAT8_LABELS),
    Input("chunked_loss", Kind.BOOL, "Chunked cross-entropy loss", "Chunked cross-entropy loss", False,
          "Compute the loss in chunks so the full float32 logits never exist at once.",
          ("--chunked-loss",), "cross-entropy in chunks: no full float32 logits",
          # A fused linear cross-entropy or LitGPT's own loss replaces it (core.training.activations.loss_memory).
          matters=lambda p: not p.unsloth and not p.fused_loss and not p.litgpt),
    # ---- recipes (issue 22): each read from the library's source, see core/training ------
    Input("fused_loss", Kind.BOOL, "Fused linear cross-entropy", "Fused linear cross-entropy", False,
          "Liger's fused linear cross-entropy (use_liger_kernel) or Cut Cross-Entropy: the output head and the "
          "loss run chunk by chunk, so the logits never exist whole; the input's gradient is formed in the "
          "forward and kept.",
          ("--fused-loss",), "Liger / Cut Cross-Entropy fused linear cross-entropy: no logits tensor"),
    # Megatron-Core's cross-entropy fusion (cross_entropy_loss_fusion / cross_entropy_fusion_impl): what
    # its loss keeps, read from source (core.training.activations._megatron_loss). A plan file without
    # it reads as off, the unfused loss every earlier release of this program priced.
    Input("megatron_ce_fusion", Kind.ENUM, "Megatron CE fusion", "Megatron cross-entropy fusion",
          MegatronCeFusion.OFF,
          "Megatron-Core's --cross-entropy-loss-fusion (Megatron-Bridge: model.cross_entropy_loss_fusion, on by "
          "default there) and its implementation. Off: the vocabulary-parallel cross-entropy keeps one float32 "
          "copy of the logits shard, turned into the softmax in place. Native: the same steps compiled with "
          "torch.compile, which writes each in-place step's result beside its input before copying it back: "
          "one float32 logits shard more while they run. Transformer Engine's (te, what NVIDIA's performance "
          "scripts set): a Triton kernel writes the gradient into the 16-bit logits in the forward: no float32 "
          "copy at all.",
          ("--megatron-ce-fusion",), "Megatron cross-entropy fusion: off, native or te (Megatron stack only)",
          labels=MEGATRON_CE_FUSION_LABELS,
          matters=lambda p: p.stack is Stack.MEGATRON and not own_loss_code(p)),
    # Megatron-LM's --moe-grouped-gemm (Megatron-Bridge: model.moe_grouped_gemm): the experts run as
    # Transformer Engine's GroupedLinear (NVIDIA/Megatron-LM d98e8a64, megatron/core/extensions/
    # transformer_engine_spec_provider.py grouped_mlp_modules: TEGroupedMLP), whose grouped GEMM keeps
    # one cuBLAS workspace per compute stream for the process (core.training.device.allocator_workspaces).
    Input("moe_grouped_gemm", Kind.BOOL, "MoE grouped GEMM", "Megatron MoE grouped GEMM", False,
          "Megatron-Core's --moe-grouped-gemm: each MoE layer's local experts run as Transformer Engine's "
          "grouped linear layers, whose grouped GEMM keeps one cuBLAS workspace per compute stream (4 × 32 MiB "
          "on Hopper and Blackwell) from its first call to the end of the process. Off: one linear layer per "
          "expert (SequentialMLP), on TE's one workspace.",
          ("--moe-grouped-gemm",), "Megatron MoE experts as TE grouped GEMMs (four more TE workspaces)",
          matters=lambda p: p.stack is Stack.MEGATRON and p.model.num_experts > 1, training_only=True),
    Input("grad_clip", Kind.BOOL, "Gradient clipping", "Gradient clipping", False,
          "clip_grad_norm_ before the step (max_grad_norm): a norm per gradient tensor and an in-place "
          "multiply, no gradient-sized temporary.",
          ("--grad-clip",), "gradient clipping (max_grad_norm)"),
    Input("optimizer_in_backward", Kind.BOOL, "Optimizer step in the backward", "Optimizer step in the backward",
          False,
          "torchtune's optimizer_in_bwd: each parameter is updated by a hook as soon as its gradient is formed, "
          "and the gradient is freed: the gradients of the whole model never exist at once. Needs no "
          "gradient accumulation.",
          ("--optimizer-in-backward",), "torchtune optimizer_in_bwd: each weight updated as its gradient forms"),
    Input("activation_offload", Kind.BOOL, "Activation offloading", "Activation offloading to the CPU", False,
          "torchtune / torchao OffloadActivations: the tensors saved for the backward go to pinned host memory "
          "in the forward and come back in the backward; the GPU keeps the last few in flight.",
          ("--activation-offload",), "saved activations offloaded to host memory (torchtune/torchao)"),
    Input("bnb_legacy", Kind.BOOL, "bitsandbytes before 0.43.2", "bitsandbytes before 0.43.2", False,
          "bitsandbytes 0.43.1 and older: the 4-bit matmul kept its input for the backward (ctx.tensors), so "
          "every 4-bit layer's input stays until the backward, checkpointing or not (reentrant checkpointing "
          "keeps only the recomputed block's).",
          ("--bnb-legacy",), "QLoRA on bitsandbytes < 0.43.2 (4-bit matmul keeps its input)",
          matters=lambda p: p.four_bit_base),
    Input("litgpt", Kind.BOOL, "LitGPT fine-tuning script", "LitGPT fine-tuning script", False,
          "litgpt finetune/lora.py and full.py (Lightning-AI/litgpt 00af8b0): the head runs on 128-token "
          "chunks and the loss in the compute dtype, every chunk's logits and log-probabilities alive until "
          "the backward; the loop's logits keep the previous micro-batch's graph until the next forward "
          "returns; under QLoRA Lightning's bitsandbytes precision quantises the head too. LitGPT's "
          "fine-tuning never ties the head to the embedding: choose a model with its own head.",
          ("--litgpt",), "litgpt's fine-tuning loop (chunked 16-bit loss, previous logits kept, 4-bit head)",
          matters=lambda p: not p.unsloth and not p.fused_loss),
    # Unsloth (unslothai/unsloth 015bdef, unslothai/unsloth-zoo ce232d6; docs/UNSLOTH.md): its
    # FastLanguageModel's fused cross-entropy, fast LoRA kernels and 4-bit dequantisation buffer
    # (core.training.activations, core.training.storage). Its checkpointing is the policy above.
    Input("unsloth", Kind.BOOL, "Unsloth FastLanguageModel", "Unsloth FastLanguageModel", False,
          "Unsloth's FastLanguageModel (unsloth 2026.8): the loss is its fused cross-entropy, chunked over "
          "tokens so a chunk's float32 logits stay under 4 GiB, with the input's gradient formed in the "
          "forward; with LoRA dropout 0 its LoRA kernels keep only each projection group's input and the "
          "MLP's gate and up outputs; under QLoRA one dequantised weight buffer stays on the card. "
          "Unsloth's own checkpointing is the policy \"offloaded to the CPU (Unsloth)\"; Unsloth before "
          "2025.8 called Cut Cross-Entropy: turn on the fused linear cross-entropy for it.",
          ("--unsloth",), "Unsloth FastLanguageModel: fused chunked loss, fast LoRA kernels, dequant buffer"),
    # A loop that binds the model's output and drops it only after backward() (Answer.AI
    # fsdp_qlora e877dda train.py: ``output = model(..., labels=...)``, ``loss.backward()``, then
    # ``output = None``) keeps the output's logits through the backward (core.training.activations
    # loss_memory). The HF Trainer, torchtune and torchtitan free them first (the default).
    Input("loop_keeps_output", Kind.BOOL, "Output kept in backward", "Model output kept through the backward",
          False,
          "The training loop keeps the model's output (its float32 logits, as transformers 4.37 returns them "
          "with labels) until after loss.backward(): Answer.AI's fsdp_qlora train.py, and any loop of the form "
          "output = model(...); output.loss.backward(). The HF Trainer, torchtune and torchtitan drop the "
          "logits before the backward.",
          ("--loop-keeps-output",), "the loop holds the model output (float32 logits) through the backward",
          matters=lambda p: not own_loss_code(p)),
    # The transformers release of a training run, for what its causal-LM loss keeps of the logits: read in the
    # released wheels (TransformersLoss; core.training.activations._loss_terms). 4.31 - 4.45 rebind the logits
    # to float32 and copy them shifted; 4.46 - 4.48 copy them shifted; from 4.49 the labels are shifted instead.
    # From 5.0 a mixture of experts' routed experts are 3-D parameters PEFT's target_modules cannot name
    # (TransformersLoss.V5_ON; core.model.ModelSpec.adapted_rows).
    Input("training_transformers", Kind.ENUM, "transformers", "transformers release of the training run",
          TransformersLoss.V5_ON,
          "The transformers release the training run used, for what its model's loss keeps of the logits "
          "(micro-batch x sequence x vocabulary values). 4.31 - 4.45: the forward turns the logits into float32 "
          "(the output keeps those) and copies them shifted by one token before the cross-entropy: one float32 "
          "copy more and no 16-bit logits while the loss runs. 4.46 - 4.48: the loss function still makes the "
          "shifted float32 copy beside the 16-bit logits. 4.49 and later shift the labels instead: no copy. "
          "On a mixture of experts it also decides what LoRA's MLP targets reach: up to 4.57 every routed expert "
          "is an nn.Linear and gets an adapter; from 5.0 the experts are 3-D parameters no target reaches, and "
          "only a shared expert (and dense layers) are adapted.",
          ("--training-transformers",),
          "transformers release line of the training run: 4.31-4.45, 4.46-4.48, 4.49-4.57 or 5.0+ "
          "(default: the newest)",
          labels=TRANSFORMERS_LOSS_LABELS, training_only=True, matters=training_transformers_matters),
    # transformers' decoders return every layer's key and value states when use_cache is on, as it is by
    # default (LlamaConfig use_cache=True), in training too: huggingface/transformers v4.31.0
    # models/llama/modeling_llama.py, LlamaAttention.forward ``past_key_value = (key_states, value_states)
    # if use_cache else None`` (after RoPE, before repeat_kv), LlamaModel.forward collects them in
    # ``next_decoder_cache`` and returns them as ``past_key_values``; it turns use_cache off only ``if
    # self.gradient_checkpointing and self.training`` (HF's own checkpointing), not under PyTorch's
    # checkpoint_wrapper (FSDP activation checkpointing: llama-recipes before its PR #165, 2023-09).
    # What it keeps: core.training.activations.kv_cache_terms.
    Input("training_kv_cache", Kind.BOOL, "K/V cache kept in training", "Key/value cache returned by the "
          "training forward", False,
          "The model returns its key/value cache (past_key_values) from the training forward: transformers' "
          "use_cache=True, its default, with checkpointing other than its own gradient_checkpointing (FSDP's "
          "checkpoint_wrapper) or none. Every layer's K and V (batch x tokens x kv heads x head dim, 16 bits) "
          "live until the loop drops the output; with checkpointing they are all extra, without it only where "
          "the attention keeps other tensors (grouped-query heads repeated, outside flash-attn). Pass "
          "use_cache=False when loading the model to be rid of them.",
          ("--training-kv-cache",), "the training forward returns past_key_values (transformers use_cache=True)",
          matters=lambda p: p.stack is not Stack.MEGATRON, training_only=True),
    # transformers 4.55's GptOssExperts in training mode loops over the experts and indexes each one's
    # weights out of the stacked [E, ...] parameters (huggingface/transformers v4.55.0,
    # models/gpt_oss/modeling_gpt_oss.py ``GptOssExperts.forward``, ``if self.training``); the hub's
    # MegaBlocks kernel replaces it only when kernels' kernelize ran on a CUDA model (kernels 0.9.0
    # layer.py ``kernelize``: no mapping for the device type, the original forward). What it keeps:
    # core.training.activations._experts; its backward's gradient: core.training.detailed.
    Input("experts_loop", Kind.BOOL, "Experts looped (stacked weights)", "Experts run one at a time from stacked "
          "weights", False,
          "The mixture of experts runs one expert at a time, indexing its weights out of the stacked "
          "[experts, ...] parameters: transformers 4.55's gpt-oss in training (GptOssExperts), unless the hub's "
          "MegaBlocks kernel replaced it (use_kernels on a model loaded on the GPU; a model loaded on the CPU "
          "for FSDP keeps the loop). Each indexed weight is a copy the matmuls keep for the backward, and each "
          "expert's weight gradient is scattered into a zero tensor of the whole stacked weight. Off: the "
          "experts run as grouped matmuls (transformers 5, MegaBlocks, Megatron-Core).",
          ("--experts-loop",), "MoE experts looped over stacked weights (transformers 4.55 gpt-oss training)",
          matters=lambda p: p.model.num_experts > 1 and p.stack is not Stack.MEGATRON, training_only=True),
    # transformers 5.25.0's Mamba-2 mixers (Granite 4.0-H, Bamba, Nemotron-H) call mamba_ssm's
    # mamba_split_conv1d_scan_combined in training when the package imports (integrations/hub_kernels.py
    # use_kernel_func_from_hub_with_fallback; it needs causal-conv1d too), else their torch path. What each keeps:
    # core.training.mamba.
    # Gated DeltaNet layers (Qwen3-Next, Qwen3.5 / 3.6) call flash-linear-attention's chunk_gated_delta_rule and
    # causal-conv1d the same way when those import (modeling_qwen3_next.py, modeling_qwen3_5.py), else their own
    # torch fallbacks: core.training.gdn. The field keeps its name (plan files) for both.
    Input("mamba_kernels", Kind.BOOL, "Hybrid kernels (mamba_ssm or fla, causal-conv1d)", "A hybrid's recurrent "
          "layers run their fused kernels", True,
          "The environment has the recurrent layers' kernels installed, so transformers runs them in training: "
          "a Mamba-2 layer through mamba_ssm's fused function (with causal-conv1d), which keeps the in_proj output, "
          "the scan's output and the norm's 1/rms and recomputes the rest in the backward; a Gated DeltaNet layer "
          "through flash-linear-attention's chunk_gated_delta_rule (with causal-conv1d), which keeps q, k, v, the "
          "gate's cumsum, beta and the solved chunk blocks (both read from their source, not measured). "
          "Off: transformers' torch path, a chunked scan in plain torch ops whose chunk-by-chunk float32 "
          "tensors are kept for the backward (measured on fake tensors): several times the memory.",
          ("--mamba-kernels",), "a hybrid's recurrent layers run their fused kernels: mamba_ssm for Mamba-2, "
          "flash-linear-attention for Gated DeltaNet, with causal-conv1d (transformers picks them when installed)",
          matters=lambda p: bool(p.model.recurrent_mixer), training_only=True),
    # torchtitan's MoE layer (and prime-rl's copy of it) keeps other tensors than transformers' (MoeLayer above;
    # core.training.activations._experts_torchtitan, measured with the layers' own source on the CPU).
    Input("moe_layer", Kind.ENUM, "MoE layer", "Whose mixture-of-experts layer runs", MoeLayer.TRANSFORMERS,
          "Whose MoE layer the model runs. transformers: its grouped-matmul experts. torchtitan (and prime-rl's "
          "copy of its layer): the routed rows permuted and padded per expert, the routing scores applied to "
          "a float32 copy of the experts' output (kept for the scores' gradient in eager; under torch.compile "
          "the scatter-add form keeps the 16-bit output instead, the bmm form still the float32 copy), no gate "
          "on the shared expert. Full fine-tuning (torchtitan trains the whole model).",
          ("--moe-layer",), "whose MoE layer runs: transformers, torchtitan-scatter (torchtitan before Nov 2025, "
          "prime-rl), torchtitan-bmm (torchtitan from Nov 2025)", labels=MOE_LAYER_LABELS,
          matters=lambda p: (p.model.num_experts > 1 and p.stack is not Stack.MEGATRON and not p.experts_loop
                             and p.method is Method.FULL), training_only=True),
    Input("compiled_loss", Kind.BOOL, "Loss under torch.compile", "Cross-entropy under torch.compile", False,
          "The cross-entropy runs compiled (torchtitan since Feb 2025 compiles its loss with --training.compile; "
          "a model whose forward computes the loss compiles it with the model): Inductor keeps the 16-bit "
          "logits and two numbers per row instead of the float32 log-softmax, and the backward forms the "
          "logits' gradient in one fused kernel, in the logits' dtype.",
          ("--compiled-loss",), "cross-entropy under torch.compile (no float32 N·V tensors)",
          matters=lambda p: (
              not p.unsloth and not p.fused_loss and not p.litgpt and not p.chunked_loss and not p.flash_loss
          )),
    # flash-attn's fused cross-entropy (flash_attn.losses.cross_entropy.CrossEntropyLoss), llm-foundry's MPT
    # default (loss_fn: fused_crossentropy): what it keeps, read from source (core.training.activations
    # _flash_loss). It replaces the loss function, so under torch.compile it is still this kernel.
    Input("flash_loss", Kind.BOOL, "flash-attn cross-entropy", "flash-attn fused cross-entropy", False,
          "flash-attn's fused cross-entropy (flash_attn.losses.cross_entropy, llm-foundry's MPT default "
          "loss_fn: fused_crossentropy): one kernel reads the 16-bit logits for each row's log-sum-exp and keeps "
          "them for the backward, which writes the logits' gradient in their dtype: no float32 copy, "
          "log-softmax or float32 gradient.",
          ("--flash-loss",), "flash-attn's fused cross-entropy (llm-foundry MPT's loss_fn: fused_crossentropy)",
          matters=lambda p: not p.unsloth and not p.fused_loss and not p.litgpt and not p.chunked_loss),
    # prime-rl's RL head (PrimeIntellect-ai/prime-rl 8718eb14 src/prime_rl/trainer/models/layers/lm_head.py
    # FusedOutputLinear, _ChunkedLogProbEntropyFn; rl/config.py auto_setup_fused_lm_head_chunk_size: 2,048
    # columns unless impl is liger_kernel): per-token log-probs and entropy by an online logsumexp over
    # vocabulary chunks, recomputed chunk by chunk in the backward (core.training.activations._logprob_head).
    Input("logprob_head", Kind.BOOL, "Chunked log-prob head (RL)", "prime-rl's chunked log-prob head", False,
          "prime-rl's RL trainer head (FusedOutputLinear): the logits are computed 2,048 vocabulary columns at a "
          "time, only each token's log-probability and entropy are kept (float32), and the backward recomputes "
          "each chunk's logits: no whole logits tensor, a few float32 chunks at once, the head's input gradient "
          "and the head's weight gradient formed chunk by chunk.",
          ("--logprob-head",), "prime-rl's chunked log-prob / entropy head for RL (2,048-column vocabulary chunks)",
          # Last of LOSS_CODE's order: any other loss code switched on replaces it.
          matters=lambda p: not any(getattr(p, name) for name in LOSS_CODE if name != "logprob_head")),
    # A loop that calls F.cross_entropy on the 16-bit logits of a pure 16-bit model (no autocast, no
    # ``.float()``): rasbt/LLMs-from-scratch 908dd2f ch05/10_llm-training-speed ``calc_loss_batch``,
    # nanoGPT-style loops, llm-foundry's torch_crossentropy under PURE precision. aten's log_softmax and
    # nll_loss then run in the logits' dtype (core.training.activations._loss_16bit). Under autocast the
    # op is on autocast's float32 list, so it upcasts as transformers' loss does and the setting is moot.
    Input("loss_16bit", Kind.BOOL, "Cross-entropy in 16 bits", "Cross-entropy on 16-bit logits", False,
          "The training loop calls F.cross_entropy on the model's 16-bit logits itself, with no float32 "
          "upcast (a hand-written loop over a model cast to bf16 / fp16, as LLMs-from-scratch and nanoGPT-style "
          "scripts do): the log-probabilities and their gradients are 16-bit. Off: the loss upcasts the "
          "logits to float32 first, as transformers' models, torchtitan and torchtune do. Under autocast "
          "F.cross_entropy runs in float32 either way, so the setting only matters without it.",
          ("--loss-16bit",), "the loop's F.cross_entropy on 16-bit logits (no float32 upcast, no autocast)",
          matters=loss_16bit_matters),
    Input("kbit_upcast", Kind.BOOL, "prepare_model_for_kbit_training", "prepare_model_for_kbit_training", False,
          "PEFT's prepare_model_for_kbit_training casts every 16-bit parameter that is not quantised (embedding, "
          "head, norms) to float32; the float32 norms turn the hidden states float32, and bitsandbytes casts "
          "each 4-bit layer's output back to its input's dtype.",
          ("--kbit-upcast",), "QLoRA after peft's prepare_model_for_kbit_training (float32 embedding, head, norms)",
          matters=lambda p: p.method is Method.QLORA),
    # ---- accounting ---------------------------------------------------------------------
    Input("accounting", Kind.ENUM, "Accounting", "Accounting", Accounting.DETAILED,
          "Lesson: weights, gradients, optimizer state and a typed activation allowance, exactly as the lesson "
          "adds them.\nDetailed: every tensor of a real training step, phase by phase, plus framework overhead.",
          ("--accounting",), "detailed (every tensor) or lesson (the lesson's four buckets; also --lesson)",
          labels=ACCOUNTING_LABELS),
    Input("lesson.activations_gb", Kind.FLOAT, "Activations", "Activation allowance", 1.5,
          "The lesson's activation term: memory for the activations, typed rather than derived "
          "(the lesson uses 1.5 GB).",
          ("--activations-gb",), "lesson mode: activation allowance (default 1.5)", unit="GB", low=0.0, high=1e6,
          step=0.5, matters=lambda p: p.accounting is Accounting.LESSON),
    Input("lesson.trainable_override", Kind.COUNT, "Trainable T", "Trainable parameters T", 0,
          "T as the lesson gives it (e.g. 4,194,304 for LoRA r = 8 on q, k, v, o). "
          "Leave empty to derive T from the method and the architecture.",
          ("--trainable",), "lesson mode: trainable parameters as given", unit="parameters", low=0, high=MAX_PARAMS,
          zero_means="derived", metavar="T", matters=lambda p: p.accounting is Accounting.LESSON),
    Input("model.params_override", Kind.COUNT, "Parameters P", "Parameter count P", 0,
          "P as typed (the lesson's 7B model has P = 6.7e9), used instead of the count derived from the "
          "architecture in both accountings. Leave empty to derive it.",
          ("--params",), "parameter count as the lesson gives it (6.7e9)", unit="parameters", low=0, high=MAX_PARAMS,
          zero_means="derived from the architecture", metavar="N"),
    # ---- workload -----------------------------------------------------------------------
    Input("workload.micro_batch", Kind.INT, "Micro-batch", "Micro-batch", 1,
          "Sequences in one forward/backward pass on one GPU.",
          ("--micro-batch", "-b"), "sequences per forward/backward pass on one GPU", unit="sequences",
          low=1, high=MAX_BATCH),
    Input("workload.seq_len", Kind.INT, "Sequence", "Sequence length", 1024,
          "Tokens per sequence; activations grow with it (eager attention: with its square).",
          ("--seq", "-s"), "tokens per sequence", unit="tokens", low=1, high=MAX_SEQ, step=256),
    Input("workload.grad_accum", Kind.INT, "Accumulation", "Gradient accumulation", 1,
          "Micro-batches summed before each optimizer step: a larger effective batch for no extra activation "
          "memory.",
          ("--accum",), "gradient accumulation steps", unit="steps", low=1, high=MAX_BATCH),
    Input("workload.tokens", Kind.COUNT, "Token budget", "Token budget", 20_000_000,
          "Tokens the whole run trains on (D in FLOPs ≈ 6·P·D): sets time and cost.",
          ("--tokens",), "token budget D for time and cost (default 20M)", unit="tokens", low=0, high=MAX_TOKENS),
    Input("workload.eval_batch", Kind.INT, "Eval batch", "Evaluation batch", 0,
          "Batch used for evaluation passes; 0 uses the training micro-batch.",
          ("--eval-batch",), "batch of evaluation passes (0: the training micro-batch)", unit="sequences",
          low=0, high=MAX_BATCH, zero_means="same as training"),
    # ---- hardware -----------------------------------------------------------------------
    Input("hardware.gpu", Kind.TEXT, "GPU", "GPU", "a100-80gb-sxm",
          "The card, with the memory its driver reports (not the marketing figure).\n"
          "Search by name, memory (“24 GB”), vendor (“amd”) or kind (“laptop”, “apple”).",
          ("--gpu",), "GPU id (see `vramplan gpus`), or custom", expected="a GPU id from the catalogue or 'custom'"),
    Input("hardware.custom_memory_gb", Kind.FLOAT, "Memory", "Custom GPU memory", 80.0,
          "Memory of the custom card in decimal GB, as its driver reports it.",
          ("--custom-memory-gb",), "--gpu custom: its memory in GB", unit="GB", low=0.01, high=1e6,
          matters=lambda p: p.hardware.gpu == "custom"),
    Input("hardware.custom_tflops", Kind.FLOAT, "Peak speed", "Custom GPU speed", 100.0,
          "Dense 16-bit peak of the custom card (no sparsity).",
          ("--custom-tflops",), "--gpu custom: its dense 16-bit TFLOP/s", unit="TFLOP/s", low=0.01, high=1e7,
          matters=lambda p: p.hardware.gpu == "custom"),
    # Default: the default card's, A100 80GB SXM, 2,039 GB/s (NVIDIA A100 datasheet; resources/gpus.json).
    # Without it a custom card had no bandwidth and decoded 0 tokens/s (issue 28 item 20).
    Input("hardware.custom_bandwidth_gb_s", Kind.FLOAT, "Bandwidth", "Custom GPU bandwidth", 2039.0,
          "Memory bandwidth of the custom card in decimal GB/s (its datasheet's figure): decoding reads\n"
          "the weights and the cache once per token, so serving speed follows it.",
          ("--custom-bandwidth",), "--gpu custom: its memory bandwidth in GB/s", unit="GB/s", low=1.0, high=1e6,
          matters=lambda p: p.hardware.gpu == "custom"),
    # 0: modelled from the card, the matmul sizes and the stack (core.training.speed); a typed
    # value replaces the modelled compute efficiency (the lesson: 30-50 % for well-tuned code).
    Input("hardware.utilisation", Kind.FLOAT, "Utilisation", "Utilisation", 0.0,
          "The share of the card's peak the step's compute reaches. 0 models it from the card, the matmul "
          "sizes and the software stack; a typed value replaces the model (the lesson: 30-50 % for "
          "well-tuned code). Exposed communication and the pipeline bubble come on top.",
          ("--utilisation",), "compute utilisation, 0.4 = 40 % (default: modelled)", unit="%", low=0.001,
          high=1.0, scale=100, decimals=1, step=5, zero_means="modelled",
          # core.serving.speed.SERVING_UTILISATION and APPLE_MATMUL_UTILISATION: serving's prefill and
          # decode compute when none is typed; the window names the chosen card's figure
          # (core.estimate.serving_utilisation_text): "78 % on Apple GPUs" on an L4 misled.
          zero_means_serving="serving's fixed share"),
    # Calibrate from a short real run: the speed it showed, per GPU as torchtitan, Megatron and
    # llm-foundry log it, or its time per optimizer step; the estimate solves the utilisation.
    # Short form labels ("Run speed", "Run step"): a label longer than "Peak override" widens the
    # Plan column, and at 1024 × 700 the chart is what gives the room.
    Input("hardware.measured_tokens_per_s", Kind.FLOAT, "Run speed", "Measured tokens per second per GPU",
          0.0,
          "Tokens per second per GPU a short run of this plan showed (torchtitan's tps, Megatron's "
          "throughput ÷ GPUs). The time is then solved to match it; change the plan afterwards and the "
          "measurement becomes a calibration factor for it. 0: not measured.",
          ("--measured-tokens-per-s",), "calibrate: tokens/s per GPU your run of this plan showed",
          unit="tokens/s/GPU", low=0.001, high=1e9, step=100, zero_means="not measured",
          matters=lambda p: p.accounting is Accounting.DETAILED, training_only=True),
    Input("hardware.measured_step_s", Kind.FLOAT, "Run step", "Measured seconds per optimizer step", 0.0,
          "Seconds per optimizer step a short run of this plan showed (used when no speed is given). "
          "0: not measured.",
          ("--measured-step-s",), "calibrate: seconds per optimizer step your run of this plan showed",
          unit="s", low=1e-6, high=1e7, step=0.1, decimals=3, zero_means="not measured",
          matters=lambda p: p.accounting is Accounting.DETAILED and not p.hardware.measured_tokens_per_s,
          training_only=True),
    Input("hardware.calibration", Kind.FLOAT, "Calibration", "Calibration factor", 0.0,
          "Your runs' compute speed ÷ the modelled one on this card and stack (1.1: 10 % faster), from a "
          "measured run; every plan on the same card and stack can use it. 0: none.",
          ("--calibration",), "calibration factor from a measured run (speed ÷ modelled speed)", unit="×",
          low=0.01, high=100.0, step=0.05, decimals=3, zero_means="none",
          matters=lambda p: p.accounting is Accounting.DETAILED, training_only=True),
    # The lesson advises keeping 10-20 % of the card free.
    Input("hardware.headroom", Kind.FLOAT, "Headroom", "Headroom", 0.10,
          "Share of the card kept free for fragmentation and spikes; the lesson advises 10-20 %.",
          ("--headroom",), "fraction kept free, 0.1 = 10 %", unit="%", low=0.0, high=0.9,
          scale=100, decimals=1, step=5),
    # Memory other processes hold on each GPU before the run starts (a desktop's compositor and
    # browser, WSL2's share, another engine): in bytes in the plan, typed in GiB (cli_factor), as
    # nvidia-smi's "Memory-Usage" or vLLM's "Free memory on device (free/total GiB)" show it. Each engine
    # applies it as its own source does (docs/SERVING.md, "Memory other processes hold"). Its upper
    # end here only bounds a number; core.plan.Plan refuses one the card does not have.
    Input("hardware.held_by_others", Kind.FLOAT, "Held by others", "Memory other processes hold", 0.0,
          "Memory other processes already hold on each GPU when the run starts: a desktop, a browser, "
          "WSL2, another model (nvidia-smi's Memory-Usage before you start, less nothing of yours).\n"
          "Training and Hugging Face generate: the card's usable memory loses it. vLLM (V1, from 0.9.1) "
          "refuses to start when the free memory is below gpu_memory_utilization × the card; vLLM 0.8 - 0.9 "
          "count it in the KV pool's non-torch memory. SGLang's token pool shrinks by mem_fraction_static × it. "
          "Ollama places fewer layers on the GPU; llama.cpp's own fit (-ngl auto) too.",
          ("--held-by-others",), "GiB other processes hold on each GPU before the run (default 0)",
          unit="GiB", low=0.0, high=float(HELD_BY_OTHERS_MAX_BYTES), scale=1 / GiB, decimals=2, step=0.25,
          metavar="GIB", cli_factor=GiB, zero_means="none",
          expected="bytes from 0 up to the card's memory (the command line and the window take GiB)"),
    # The operating system CUDA runs under (core.platform): under WSL2 and native Windows the driver reports
    # the whole card as its total, which vLLM's and SGLang's shares are taken of; under WSL2 vLLM pins no
    # host memory. Native Linux by default (a plan file written before the setting reads so).
    Input("hardware.platform", Kind.ENUM, "Platform", "Operating system CUDA runs under", Platform.LINUX,
          "Where the run's CUDA programs run. Native Linux: the driver reports the card less what it "
          "keeps. Windows, WSL2 (and native Windows, WDDM): the driver reports the whole card as total, "
          "so vLLM's gpu_memory_utilization and SGLang's mem_fraction_static take a share of more memory "
          "than there is to give, and Windows' desktop holds some of it (Held by others). Under WSL2 vLLM "
          "turns pinned host memory off and NVIDIA limits pinned memory: CPU offloads copy slower.",
          ("--platform",), "operating system CUDA runs under: linux, wsl2, windows (default linux)",
          labels=PLATFORM_LABELS),
    # 0: the catalogue's typical cloud price for the card, else unknown (never a made-up price).
    Input("hardware.price_per_gpu_hour", Kind.FLOAT, "Price", "Price per GPU-hour", 0.0,
          "What one GPU costs per hour, in your currency; 0 takes the catalogue's typical cloud price "
          "for the card, and the cost reads 'unknown' for a card without one.",
          ("--price",), "price per GPU-hour (default: the card's catalogue price, else unknown)",
          unit="per GPU·h", low=0.0001, high=1e6, step=0.5, zero_means="the card's catalogue price"),
    # PyTorch's caching allocator settings; empty: its defaults (core.allocator).
    Input("hardware.alloc_conf", Kind.SETTING, "Allocator", "PYTORCH_CUDA_ALLOC_CONF", "",
          "PyTorch's caching-allocator settings, as the environment variable gives them, e.g. "
          "expandable_segments:True (one growing segment per stream: far less fragmentation) or "
          "max_split_size_mb:512. Empty: PyTorch's defaults. A setting PyTorch would refuse is refused here.",
          ("--alloc-conf",), "PYTORCH_CUDA_ALLOC_CONF, e.g. expandable_segments:True (default: PyTorch's)",
          expected="a PYTORCH_CUDA_ALLOC_CONF value PyTorch accepts", metavar="CONF",
          parse=parse_alloc_conf, training_only=True, matters=lambda p: not runs_mps(p.hardware.gpu)),
    # The PyTorch release whose FSDP2 and ProcessGroupNCCL rules apply; the default is the newest
    # rules (a plan file written before the setting reads as it): core.parallel.state._release_cache.
    # 2.14+ is the default: both current releases (2.14.1, 2.15.0, what `pip install torch` brings) are in it,
    # and it differs from 2.8-2.13 only where SDPA gets grouped-query heads the flash kernel cannot take.
    Input("hardware.torch_version", Kind.ENUM, "PyTorch", "PyTorch release", TorchVersion.V2_14,
          "The PyTorch release the run uses, where its memory rules differ: 2.4's FSDP2 allocates each "
          "reduce-scatter input on its reduce-scatter stream, which keeps it cached; from 2.5 it is a "
          "default-stream tensor; before 2.8 ProcessGroupNCCL holds a collective's input block until the "
          "collective ends unless TORCH_NCCL_AVOID_RECORD_STREAMS=1. From 2.5 SDPA's math kernel (an Apple GPU's, "
          "or CUDA's fallback) works in float32 on 16-bit inputs; a Mac's autocast needs 2.5 (bfloat16: 2.6). "
          "Under 2.0 the foreach Adam / AdamW step keeps two parameter-sized intermediates, from 2.1 one. "
          "Before 2.4 FSDP is FSDP1 (FSDP2 came with 2.4): planned with the same shards, without these buffers. "
          "From 2.14 SDPA's memory-efficient kernel takes grouped-query heads (float32 inputs, or heads wider than "
          "256) where earlier releases fell back to the math kernel and its B·H·S² probabilities. "
          "From 2.8 the bundled NCCL (2.27) connects an algorithm at the first collective that picks it: on one "
          "node a group that carries only scalars (a barrier, the loss) holds its rings' buffers alone, half a "
          "communicator. Checked through PyTorch 2.15.",
          ("--torch-version",),
          "PyTorch release whose rules apply: 2.0, 2.1-2.3, 2.4, 2.5-2.7, 2.8-2.13, 2.14+ (default 2.14+)",
          labels=TORCH_VERSION_LABELS, training_only=True,
          matters=lambda p: (p.parallel.strategy is Strategy.FSDP and not p.parallel.fsdp1_wrap)
          or runs_mps(p.hardware.gpu)
          or (p.optimizer in (Optimizer.ADAMW, Optimizer.ADAM) and p.optimizer_impl is OptimizerImpl.FOREACH)
          or flash_misses_gqa(p)),
    Input("hardware.nccl_avoid_record_streams", Kind.BOOL, "Avoid record streams",
          "TORCH_NCCL_AVOID_RECORD_STREAMS=1", False,
          "The environment variable TORCH_NCCL_AVOID_RECORD_STREAMS=1 (torchtitan set it until PyTorch "
          "2.8 made it the default): ProcessGroupNCCL keeps a reference to a collective's input instead "
          "of recording its stream on it, so the freed block is reused at once.",
          ("--nccl-avoid-record-streams",), "TORCH_NCCL_AVOID_RECORD_STREAMS=1 is set (PyTorch before 2.8)",
          training_only=True,
          matters=lambda p: p.parallel.strategy is Strategy.FSDP
          and not p.parallel.fsdp1_wrap
          and torch_before(p.hardware.torch_version, TorchVersion.V2_8)
          and not torch_before(p.hardware.torch_version, TorchVersion.V2_4)),
    Input("hardware.peak_tflops_override", Kind.FLOAT, "Peak override", "Peak TFLOP/s override", 0.0,
          "Dense peak to use instead of the card's datasheet figure for the plan's precision; 0 uses the card's.",
          ("--peak-tflops",), "override the card's dense peak TFLOP/s", unit="TFLOP/s", low=0.01, high=1e7,
          zero_means="card's datasheet", step=10),
    # ---- parallelism --------------------------------------------------------------------
    Input("parallel.nodes", Kind.INT, "Nodes", "Nodes", 1,
          "Machines in the run, each with the same GPUs.",
          ("--nodes",), "nodes (default 1)", unit="nodes", low=1, high=MAX_GPUS),
    Input("parallel.gpus_per_node", Kind.INT, "GPUs per node", "GPUs per node", 1,
          "GPUs in each node; memory is shown per GPU.",
          ("--gpus-per-node",), "GPUs in each node", unit="GPUs", low=1, high=MAX_DEGREE),
    Input("parallel.strategy", Kind.ENUM, "Strategy", "Strategy", Strategy.DDP,
          "How the data-parallel GPUs hold the model: DDP keeps a full copy on each; DeepSpeed ZeRO stages "
          "split the optimizer state, then gradients, then the weights; FSDP2 splits all three.",
          ("--strategy",), "data-parallel engine (default ddp)", labels=STRATEGY_LABELS),
    Input("parallel.tensor_parallel", Kind.INT, "Tensor parallel", "Tensor parallel", 1,
          "GPUs each layer's matrices are split across; within a node.",
          ("--tensor-parallel", "--tp"), "tensor-parallel degree", low=1, high=MAX_DEGREE, metavar="N",
          matters=_node_split),
    Input("parallel.pipeline_parallel", Kind.INT, "Pipeline parallel", "Pipeline parallel", 1,
          "Stages the layers are split into, each on its own GPUs.",
          ("--pipeline-parallel", "--pp"), "pipeline-parallel stages", low=1, high=MAX_DEGREE, metavar="N",
          matters=_node_split),
    Input("parallel.context_parallel", Kind.INT, "Context parallel", "Context parallel", 1,
          "GPUs each sequence is split across (ring attention), in 2 × CP chunks.",
          ("--context-parallel", "--cp"), "context-parallel degree", low=1, high=MAX_DEGREE, metavar="N",
          matters=_node_split),
    # Megatron-Core's expert_model_parallel_size (default 1): the experts of each MoE layer split
    # across EP ranks of the data × context parallel ones (NVIDIA/Megatron-LM d98e8a64,
    # megatron/core/parallel_state.py initialize_model_parallel: expert TP defaults to TP).
    Input("parallel.expert_parallel", Kind.INT, "Expert parallel", "Expert parallel", 1,
          "GPUs each MoE layer's experts are split across (E ÷ EP experts per GPU), taken from the data × "
          "context parallel GPUs; tokens reach their experts by an all-to-all.",
          ("--expert-parallel", "--ep"), "expert-parallel degree (MoE models)", low=1, high=MAX_DEGREE, metavar="N",
          matters=lambda p: p.parallel.world_size > 1 and p.model.num_experts > 1),
    # Expert load imbalance (issue 24 item 4): the busiest expert-parallel rank's routed token copies ÷ the mean
    # (1.0: balanced, what Megatron-Core's moe_router_force_load_balancing and torchtitan's
    # --debug.moe_force_load_balance force, the plan's default). The step waits for that rank: its experts'
    # matmuls, its all-to-all receive and its routed activations scale by it (core.parallel.layout.expert_load).
    Input("parallel.expert_imbalance", Kind.FLOAT, "Expert load", "Expert load imbalance", 1.0,
          "The busiest expert-parallel GPU's routed tokens ÷ the mean over the EP GPUs: 1.0 is balanced routing "
          "(the default); 1.3 means one GPU's experts receive 30 % more tokens than average. The step waits for "
          "that GPU; at most EP (one GPU receiving every token). A max/mean tokens-per-EP-rank metric reads it.",
          ("--expert-imbalance",), "busiest EP rank's routed tokens ÷ the mean (1.0 = balanced)", unit="×",
          low=1.0, high=float(MAX_DEGREE), step=0.05, decimals=2, training_only=True,
          matters=lambda p: p.model.num_experts > 1 and p.parallel.expert_parallel > 1),
    # Megatron-Core's moe_expert_capacity_factor (NVIDIA/Megatron-LM d98e8a64 transformer_config.py: Optional[float],
    # None "means no token will be dropped", a negative value set to None) and moe_pad_expert_input_to_capacity
    # (default False; refused without a capacity factor). Each expert takes at most ceil(N·k ÷ E × factor) of a
    # rank's N·k routed copies (moe_utils.py get_capacity); DeepSpeed-MoE's capacity_factor is the same formula
    # (deepspeedai/DeepSpeed edaa7221 deepspeed/moe/sharded_moe.py _capacity) and always pads.
    Input("parallel.capacity_factor", Kind.FLOAT, "Capacity factor", "MoE expert capacity factor", 0.0,
          "Megatron's --moe-expert-capacity-factor (DeepSpeed-MoE's capacity_factor): each expert takes at most "
          "factor × its even share of the routed tokens and drops the rest, so the busiest GPU holds at most "
          "factor × the mean. 0: no dropping (Megatron's default, dropless).",
          ("--capacity-factor",), "Megatron MoE expert capacity factor (0 = dropless)", unit="×",
          low=0.1, high=float(MAX_DEGREE), step=0.05, decimals=2, zero_means="no dropping", training_only=True,
          matters=lambda p: p.model.num_experts > 1 and p.stack is Stack.MEGATRON),
    Input("parallel.pad_to_capacity", Kind.BOOL, "Pad experts to capacity", "Pad expert input to capacity", False,
          "Megatron's --moe-pad-expert-input-to-capacity: every expert's input is padded to its capacity, so "
          "every GPU holds and computes factor × the mean tokens whatever the routing (DeepSpeed-MoE always pads).",
          ("--pad-to-capacity",), "pad each expert's input to its capacity (needs --capacity-factor)",
          training_only=True,
          matters=lambda p: p.model.num_experts > 1 and p.stack is Stack.MEGATRON and p.parallel.capacity_factor > 0),
    # PyTorch's ring attention's rotater (pytorch/pytorch f2127dbdb01fc9319ce42b92d60344d19cbd0137,
    # torch/distributed/tensor/experimental/_attention.py: _ContextParallelOptions.rotate_method =
    # ALL_GATHER, set_rotate_method accepts "allgather" and "alltoall"); torchtitan's
    # parallelism.context_parallel_rotate_method, Literal["allgather", "alltoall"] = "allgather"
    # (pytorch/torchtitan 000204a4 torchtitan/config/job_config.py Parallelism). A plan file without
    # it reads allgather.
    Input("parallel.cp_rotate_method", Kind.ENUM, "CP K/V rotation", "Context-parallel rotate method",
          CpRotate.ALLGATHER,
          "How PyTorch's ring attention (torchtitan's context parallel) passes keys and values round the "
          "context-parallel ranks: allgather (the default) gathers every rank's K/V once and keeps them through "
          "the attention's forward and backward; alltoall sends one chunk to the next rank at each step, "
          "holding only the chunk in use, the one sent and the one arriving.",
          ("--cp-rotate-method",), "PyTorch ring attention K/V rotation: allgather or alltoall (default allgather)",
          labels=CP_ROTATE_LABELS, advanced=True, training_only=True,
          matters=lambda p: torch_ring_rotate(p) is not None),
    # Megatron-Core's token dispatcher: "alltoall" is what Megatron-Bridge's MoE providers set (Qwen3's:
    # NVIDIA-NeMo/Megatron-Bridge v0.2.0 src/megatron/bridge/models/qwen/qwen_provider.py:
    # moe_token_dispatcher_type "alltoall"), the plan's default; "allgather" is Megatron-Core's own
    # default (a Megatron-LM run that does not pass --moe-token-dispatcher-type); "flex" with DeepEP or
    # HybridEP is what NVIDIA's later performance recipes set (apply_flex_dispatcher_backend). A plan
    # file without it reads alltoall.
    Input("parallel.moe_dispatcher", Kind.ENUM, "MoE dispatcher", "MoE token dispatcher", MoeDispatcher.ALLTOALL,
          "Megatron-Core's token dispatcher under expert parallel: alltoall permutes the routed token copies, "
          "all-to-alls them and sorts them by local expert (and back); allgather (Megatron-Core's own default) "
          "gathers every rank's tokens into a buffer kept for the run and permutes those its experts take; "
          "flex with DeepEP permutes only the tokens it received; flex with HybridEP permutes inside its "
          "dispatch and combine kernels.",
          ("--moe-dispatcher",),
          "Megatron MoE token dispatcher: alltoall, allgather, deepep or hybridep (expert parallel)",
          labels=MOE_DISPATCHER_LABELS, advanced=True,
          matters=lambda p: megatron_dispatcher(p) is not None),
    # HSDP: torchtitan's data_parallel_replicate_degree (default 1; pytorch/torchtitan b5bcd76
    # torchtitan/config/configs.py), FSDP2 fully_shard on a 2-D (replicate, shard) DeviceMesh, FSDP1
    # ShardingStrategy.HYBRID_SHARD (whose default shard group is one node).
    Input("parallel.dp_replicate", Kind.INT, "HSDP replicas", "HSDP replicas", 1,
          "Hybrid sharding (FSDP only): the data-parallel GPUs form this many replicas, each sharding the "
          "state over DP ÷ R GPUs; gradient shards are all-reduced across the replicas. 1: plain FSDP.",
          ("--dp-replicate", "--hsdp"), "HSDP replica groups (FSDP; 1 = shard over all DP)", low=1,
          high=MAX_DEGREE, metavar="R",
          matters=lambda p: _node_split(p) and p.parallel.strategy is Strategy.FSDP),
    # Megatron sequence parallelism alongside tensor parallel.
    Input("parallel.sequence_parallel", Kind.BOOL, "Sequence parallel", "Sequence parallel", True,
          "Megatron sequence parallelism with tensor parallel: norms and dropout on 1/TP of the tokens each.",
          ("--sequence-parallel",), "Megatron sequence parallelism with tensor parallel (default on)",
          matters=lambda p: p.parallel.tensor_parallel > 1),
    # Off: Megatron-LM's default (--tp-comm-overlap is opt-in) and torchtitan's (async TP is opt-in).
    Input("parallel.tp_overlap", Kind.BOOL, "Overlap TP communication", "Tensor-parallel communication overlap",
          False,
          "Hide the tensor-parallel all-gathers and reduce-scatters behind the matmuls that use them "
          "(torchtitan async TP, Megatron --tp-comm-overlap / NeMo's default performance recipes).",
          ("--tp-overlap",), "overlap tensor-parallel communication with the matmuls (async TP)",
          matters=lambda p: p.parallel.tensor_parallel > 1),
    Input("parallel.schedule", Kind.ENUM, "Schedule", "Pipeline schedule", PipelineSchedule.ONE_F_ONE_B,
          "GPipe runs every forward, then every backward; 1F1B alternates them and keeps at most one "
          "micro-batch per stage in flight; interleaved 1F1B splits each stage into virtual chunks.",
          ("--schedule",), "pipeline schedule (1f1b)", labels=SCHEDULE_LABELS,
          matters=lambda p: p.parallel.pipeline_parallel > 1),
    Input("parallel.virtual_stages", Kind.INT, "Virtual stages", "Virtual stages", 1,
          "Model chunks per pipeline rank (interleaved 1F1B).",
          ("--virtual-stages",), "interleaved pipeline: model chunks per stage", unit="chunks", low=1, high=MAX_DEGREE,
          matters=lambda p: p.parallel.schedule is PipelineSchedule.INTERLEAVED),
    # nanotron's build_model balances the stages by its blocks' compute costs (huggingface/nanotron@c2528430
    # src/nanotron/models/base.py L190-237; core.pipeline); Megatron-LM and torchtitan split the blocks evenly.
    Input("parallel.stage_split", Kind.ENUM, "Stage split", "Pipeline stage split", PipelineSplit.EVEN,
          "Even: each stage holds L ÷ PP blocks (Megatron-LM, torchtitan), the last one the output head too. "
          "By compute: nanotron's split, blocks and the output head dealt so that each stage holds about the "
          "same matmul cost (4·h·heads·head_dim + 3·h·ffn a block, vocab·h the head), so the last stage "
          "holds fewer blocks.",
          ("--stage-split",), "pipeline stages: even or compute (nanotron's)", labels=PIPELINE_SPLIT_LABELS,
          matters=lambda p: p.parallel.pipeline_parallel > 1),
    Input("parallel.offload", Kind.ENUM, "Offload", "CPU offload", Offload.NONE,
          "What lives in host memory: the optimizer state and its step (DeepSpeed ZeRO-Offload), or the "
          "parameters and gradients too (FSDP2 CPUOffloadPolicy, ZeRO-3 offload_param).",
          ("--offload",), "what moves to host memory", labels=OFFLOAD_LABELS),
    # 0: not given; what each node needs is shown but not judged (a desktop has 32-128 GB, a
    # DGX H100 2 TB: no one default fits every machine).
    Input("parallel.host_ram_gb", Kind.FLOAT, "Host RAM", "Host RAM per node", 0.0,
          "Memory of each node's CPUs (a DGX H100 has 2 TB); 0: not given, so what a node needs "
          "is shown but not judged.",
          ("--host-ram-gb",), "RAM per node in GB (default: not given, not judged)", unit="GB", low=0.01,
          high=1e9, step=64, zero_means="not given",
          matters=lambda p: p.parallel.offload is not Offload.NONE or _node_split(p)
          or p.inference.engine is Engine.LLAMACPP),
    # The node's peak DRAM bandwidth, what a CPU optimizer step streams its state through
    # (core.training.host.host_step). Default: a DGX A100's two AMD EPYC 7742 sockets, each 8 channels
    # of DDR4-3200 (NVIDIA DGX A100 datasheet: "Dual AMD Rome 7742"; AMD EPYC 7742 product page:
    # 8 channels DDR4-3200, 204.8 GB/s per socket).
    Input("parallel.host_memory_gbs", Kind.FLOAT, "Host memory bandwidth", "Host memory bandwidth per node", 409.6,
          "Peak DRAM bandwidth of each node's CPUs (channels × transfer rate × 8 bytes, all sockets): "
          "the CPU optimizer step of an offloaded plan streams its state through it. Default 409.6: "
          "a DGX A100's two EPYC 7742 (8 × DDR4-3200 each); a DGX H100's two Xeon 8480C: 614.4.",
          ("--host-memory-gbs",), "host DRAM bandwidth per node in GB/s (default 409.6)", unit="GB/s", low=1.0,
          high=1e5, step=50, advanced=True,
          matters=lambda p: p.parallel.offload is not Offload.NONE),
    # The CPU threads each rank's optimizer step runs on (core.training.host.host_step): torchrun sets
    # OMP_NUM_THREADS=1 for each process when it starts more than one on a node and the user has not
    # set it (pytorch/pytorch torch/distributed/run.py, config_from_args: "Setting OMP_NUM_THREADS
    # environment variable for each process to be 1 in default"; `tune run` and `accelerate launch`
    # start their ranks through it); one process alone keeps OpenMP's default, every core. torch's CPU
    # AdamW runs at::parallel_for on those threads. 0: that launcher default.
    Input("parallel.host_threads_per_rank", Kind.INT, "Host threads per rank", "CPU threads per rank", 0,
          "CPU threads each rank's offloaded optimizer step runs on (OMP_NUM_THREADS). 0: the launcher's "
          "default — torchrun (and tune run, accelerate launch) gives each of several ranks on a node one "
          "thread, which streams far less than the node's DRAM allows; one process a node uses every core. "
          "DeepSpeed's own launcher leaves it to OpenMP (every core): type the cores per rank then.",
          ("--host-threads-per-rank",), "CPU threads per rank for an offloaded optimizer step "
          "(default 0: torchrun's 1 with several ranks a node, else every core)",
          unit="threads", low=0, high=1024, step=1, zero_means="launcher default", advanced=True,
          training_only=True, matters=lambda p: p.parallel.offload is not Offload.NONE),
    Input("parallel.intra_link", Kind.TEXT, "In a node", "Link within a node", "auto",
          "How the GPUs of one node talk to each other (per GPU and direction, the catalogue's peak); "
          "auto: the card's own (NVLink on SXM parts, else its PCIe generation).",
          ("--intra-link",), "link within a node (default auto: the card's own)",
          expected="auto or a link id from the catalogue",
          metavar="LINK", matters=lambda p: p.parallel.gpus_per_node > 1),
    Input("parallel.inter_link", Kind.TEXT, "Between", "Link between nodes", "ib-ndr400",
          "The network between nodes, per GPU and direction.",
          ("--interconnect",), "link between nodes (see `vramplan links`)", expected="a link id from the catalogue",
          metavar="LINK", matters=lambda p: p.parallel.nodes > 1),
    # FSDP2 fully_shard(reshard_after_forward=True) is its default.
    Input("parallel.reshard_after_forward", Kind.BOOL, "Reshard after forward", "FSDP reshard after forward", True,
          "FSDP2 fully_shard(reshard_after_forward=True), its default: each block's gathered weights are "
          "freed after its forward and gathered again for the backward. Off keeps them (ZeRO-2-like).",
          ("--reshard-after-forward",), "FSDP2",
          matters=lambda p: _node_split(p) and p.parallel.strategy is Strategy.FSDP),
    Input("parallel.fsdp_param_dtype", Kind.ENUM, "FSDP params", "FSDP parameter dtype", MpDtype.STORED,
          "MixedPrecisionPolicy.param_dtype: the dtype of the gathered weights.",
          ("--fsdp-param-dtype",), "FSDP2 MixedPrecisionPolicy", labels=MP_DTYPE_LABELS,
          matters=lambda p: p.parallel.strategy is Strategy.FSDP),
    # torchao Float8LinearConfig(enable_fsdp_float8_all_gather=True) (pytorch/ao 36027d8,
    # torchao/float8/config.py; fsdp_utils.py fsdp_pre_all_gather sends the float8 data).
    Input("parallel.fsdp_float8_all_gather", Kind.BOOL, "Float8 all-gather", "FSDP float8 all-gather", False,
          "torchao's enable_fsdp_float8_all_gather (torchtitan --float8.enable_fsdp_float8_all_gather): "
          "FSDP2 gathers the float8 linears' weights as float8, one byte per element instead of two.",
          ("--fsdp-float8-all-gather",), "FSDP2 + float8 tensorwise: gather the linears' weights in float8",
          advanced=True,
          matters=lambda p: p.parallel.strategy is Strategy.FSDP and p.float8 is Float8.TENSORWISE),
    # FSDP1 FullyShardedDataParallel(device_id=..., sync_module_states=True) over a model held on
    # the CPU or the meta device (Answer.AI fsdp_qlora's low_memory loading; accelerate's
    # fsdp_cpu_ram_efficient_loading): each unit is moved to the GPU, broadcast and flattened
    # there, and the freed originals and flat parameters stay cached
    # (core.parallel.state._fsdp1_wrap_cache).
    Input("parallel.fsdp1_wrap", Kind.BOOL, "FSDP1 wrap on GPU", "FSDP1 wrap from CPU/meta", False,
          "FSDP1 (FullyShardedDataParallel) wrapping a model held on the CPU or the meta device, with "
          "device_id and sync_module_states (Answer.AI fsdp_qlora low_memory, accelerate "
          "fsdp_cpu_ram_efficient_loading): the largest units' original tensors and flat parameters "
          "stay cached by the allocator after the wrap.",
          ("--fsdp1-wrap",), "FSDP1 wrap of a model on the CPU/meta device (sync_module_states)",
          advanced=True,
          matters=lambda p: p.parallel.strategy is Strategy.FSDP),
    # accelerate's Accelerator.accumulate enters the model's no_sync() for every micro-batch but the
    # last unless GradientAccumulationPlugin(sync_each_batch=True) (huggingface/accelerate v0.28.0
    # 60bfdaa9 onwards; FSDP2 through set_requires_gradient_sync(False) from v1.11.0, ec92b1af);
    # under it FSDP1's _post_backward_hook keeps flat_param.grad unsharded
    # (core.parallel.state._no_sync_accumulated).
    Input("parallel.grad_sync", Kind.ENUM, "Accumulation sync", "FSDP gradient sync under accumulation",
          GradSync.AUTO,
          "When an FSDP rank reduce-scatters its gradients under gradient accumulation. No_sync (accelerate "
          "and HF Trainer with FSDP1, their default; FSDP2 from accelerate 1.11; Lightning Fabric's "
          "no_backward_sync) reduces only on the last micro-batch: until then every rank holds the whole "
          "model's trainable gradients unsharded. Every micro-batch (accelerate's sync_each_batch=True, "
          "torchtitan) keeps them sharded at the cost of a reduce-scatter per micro-batch. The loop's "
          "default: no_sync for FSDP1, every micro-batch for FSDP2.",
          ("--grad-sync",), "FSDP under accumulation: auto, no_sync, each (default auto: no_sync for FSDP1)",
          labels=GRAD_SYNC_LABELS, advanced=True, training_only=True,
          matters=lambda p: p.parallel.strategy is Strategy.FSDP
          and p.workload.grad_accum > 1
          and p.parallel.pipeline_parallel == 1),
    # "root": what accelerate up to v1.13.0 wraps (and torchtitan before 83e69410), the safe side: it
    # holds more than "carved" (core.inputs.FsdpUnits). Plan files without the field read "root".
    Input("parallel.fsdp_units", Kind.ENUM, "FSDP2 units", "FSDP2 unit layout", FsdpUnits.ROOT,
          "Which FSDP2 units hold the embedding, final norm and output head. Blocks + root (accelerate "
          "≤ 1.13, torchtitan before July 2025): they stay in the root unit, gathered from the forward to "
          "the end of the backward. Carved (accelerate ≥ 1.14, torchtitan since July 2025): an untied "
          "embedding is its own unit, resharded after its forward; [final norm, head] one unit kept "
          "gathered only from its forward to its backward. A tied embedding is the same either way.",
          ("--fsdp-units",), "FSDP2 units of the embedding and head: root (accelerate <= 1.13) or carved "
          "(accelerate >= 1.14, torchtitan)", labels=FSDP_UNITS_LABELS, training_only=True,
          matters=lambda p: _node_split(p) and p.parallel.strategy is Strategy.FSDP and not p.parallel.fsdp1_wrap),
    Input("parallel.fsdp_reduce_dtype", Kind.ENUM, "FSDP reduce", "FSDP reduce dtype", MpDtype.STORED,
          "MixedPrecisionPolicy.reduce_dtype: the dtype gradients are reduced in.",
          ("--fsdp-reduce-dtype",), "FSDP2 MixedPrecisionPolicy", labels=MP_DTYPE_LABELS,
          matters=lambda p: p.parallel.strategy is Strategy.FSDP),
    # Megatron-Core's DistributedDataParallelConfig.grad_reduce_in_fp32: the dtype of the gradient
    # buffer (main_grad) and of its reduce-scatter / all-reduce, torch.float when on, else the
    # parameters' own 16-bit dtype (NVIDIA/Megatron-LM d98e8a64, megatron/core/distributed/
    # param_and_grad_buffer.py: "grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype").
    # On: Megatron-LM's --bf16 (arguments.py turns accumulate_allreduce_grads_in_fp32 on unless
    # --grad-reduce-in-bf16) and Megatron-Bridge's bf16_mixed recipe; off: the performance recipes
    # (Megatron-Bridge scripts/performance/configs: cfg.ddp.grad_reduce_in_fp32 = False).
    Input("parallel.grad_reduce_in_fp32", Kind.BOOL, "Reduce gradients in fp32", "Megatron gradient reduce in fp32",
          True,
          "Megatron-Core grad_reduce_in_fp32: its gradient buffer and the gradient reduce-scatter / "
          "all-reduce in float32 (on: Megatron-LM --bf16, Megatron-Bridge bf16_mixed) or, off, in the "
          "model's 16-bit dtype (--grad-reduce-in-bf16, NVIDIA's performance recipes).",
          ("--grad-reduce-in-fp32",), "Megatron: gradient buffer and reduction in float32 (default on)",
          advanced=True, matters=megatron_grad_buffer),
    # Megatron-LM's gradient accumulation fusion: the weight-gradient GEMM adds into the gradient
    # buffer (main_grad) itself, on unless --no-gradient-accumulation-fusion (NVIDIA/Megatron-LM
    # d98e8a64 megatron/training/arguments.py). Off, each micro-batch after the first adds its
    # gradients into the buffer in a pass of its own (core.training.speed.grad_accum_bytes):
    # Megatron-DeepSpeed of 2022 (bigscience-workshop/Megatron-DeepSpeed@541b967) has no fusion.
    Input("parallel.grad_accum_fusion", Kind.BOOL, "Fused gradient accumulation",
          "Megatron gradient accumulation fusion", True,
          "Megatron --gradient-accumulation-fusion: the weight-gradient matmul adds into the gradient "
          "buffer (on by default in Megatron-LM); off, every micro-batch after the first adds its "
          "gradients into the buffer in a pass of its own (Megatron-DeepSpeed of 2022).",
          ("--grad-accum-fusion",), "Megatron: weight-gradient matmuls add into the gradient buffer (default on)",
          advanced=True, matters=lambda p: megatron_grad_buffer(p) and p.workload.grad_accum > 1),
    Input("parallel.ddp_bucket_mb", Kind.FLOAT, "DDP bucket", "DDP bucket size", DDP_BUCKET_MB,
          "DistributedDataParallel(bucket_cap_mb=...): 25 MiB by default.",
          ("--ddp-bucket-mb",), "DDP bucket_cap_mb (25)", unit="MiB", low=0.01, high=1e6, advanced=True,
          matters=lambda p: _node_split(p) and p.parallel.strategy is Strategy.DDP),
    # False (torch's default) keeps param.grad apart from the buckets, a second copy of the
    # gradients; True makes the gradients views into them.
    Input("parallel.ddp_bucket_view", Kind.BOOL, "Gradients as bucket views", "DDP gradient as bucket view", False,
          "DistributedDataParallel(gradient_as_bucket_view=True): the gradients are views into the "
          "communication buckets instead of a second copy beside them.",
          ("--ddp-bucket-view",), "DDP gradient_as_bucket_view", advanced=True,
          matters=lambda p: _node_split(p) and p.parallel.strategy is Strategy.DDP),
    Input("parallel.zero_bucket_elements", Kind.COUNT, "ZeRO bucket", "ZeRO bucket", ZERO_BUCKET_ELEMENTS,
          "DeepSpeed reduce_bucket_size / allgather_bucket_size (5e8 by default).",
          ("--zero-bucket",), "DeepSpeed reduce/allgather bucket size in elements (5e8)", unit="elements",
          low=1, high=MAX_BUCKET_ELEMENTS, advanced=True, metavar="N",
          matters=lambda p: p.parallel.strategy.deepspeed),
    # DeepSpeed zero_optimization.overlap_comm: None means True for stage 3 only (deepspeedai/DeepSpeed
    # edaa7221, deepspeed/runtime/zero/config.py overlap_comm_valid), so off here and on in the ZeRO-3
    # row below: one setting per stage, each with DeepSpeed's default for it.
    Input("parallel.zero_overlap_comm", Kind.BOOL, "Overlap gradient reduction", "ZeRO overlap_comm", False,
          "DeepSpeed zero_optimization.overlap_comm for ZeRO-1/2 (off by default below stage 3): the "
          "gradients are reduced bucket by bucket on a side stream during the backward (ZeRO-2 every "
          "micro-batch, ZeRO-1 in the last one), hidden but the last bucket, at the cost of a second "
          "reduce bucket of reduce_bucket_size elements.",
          ("--zero-overlap-comm",), "DeepSpeed ZeRO-1/2 overlap_comm: reduce gradients during the backward",
          advanced=True, matters=_zero_overlap_matters),
    Input("parallel.zero3_overlap_comm", Kind.BOOL, "Overlap communication", "ZeRO-3 overlap_comm", True,
          "DeepSpeed zero_optimization.overlap_comm for ZeRO-3 (on by default at stage 3): the parameter "
          "all-gathers and the gradient reduce-scatters run on side streams beside the compute; off, they "
          "run in line with it and the step waits for each. Memory is the same either way.",
          ("--zero3-overlap-comm",), "DeepSpeed ZeRO-3 overlap_comm: gather and reduce beside the compute (on)",
          advanced=True, matters=_zero3_overlap_matters),
    # DeepSpeed bf16.bf16_master_weights_and_grads and bf16.bf16_optimizer_states, both False by default
    # (deepspeedai/DeepSpeed edaa7221, runtime/precision_config.py DeepSpeedBF16Config; PR #7700, v0.18.3).
    Input("parallel.bf16_master_weights", Kind.BOOL, "bf16 master weights", "DeepSpeed bf16 master weights", False,
          "DeepSpeed bf16.bf16_master_weights_and_grads (v0.18.3+): the ZeRO optimizer keeps its master "
          "partition and the gradients it steps on in bf16 instead of float32. Without bf16 optimizer "
          "states DeepSpeed accepts it only with optimizer offload (DeepSpeedCPUAdam).",
          ("--bf16-master-weights",), "DeepSpeed bf16_master_weights_and_grads: bf16 master weights and gradients",
          advanced=True, matters=_bf16_master_matters),
    Input("parallel.bf16_optimizer_states", Kind.BOOL, "bf16 optimizer states", "DeepSpeed bf16 optimizer states",
          False,
          "DeepSpeed bf16.bf16_optimizer_states (v0.18.3+): Adam's moments in bf16 too; needs bf16 master "
          "weights.",
          ("--bf16-optimizer-states",), "DeepSpeed bf16_optimizer_states: Adam moments in bf16 (needs bf16 master)",
          advanced=True, matters=_bf16_master_matters),
    Input("parallel.zero3_prefetch_elements", Kind.COUNT, "ZeRO-3 prefetch", "ZeRO-3 prefetch",
          ZERO3_PREFETCH_ELEMENTS,
          "DeepSpeed stage3_prefetch_bucket_size (5e7 by default).",
          ("--zero3-prefetch",), "DeepSpeed stage3_prefetch_bucket_size in elements (5e7)", unit="elements",
          low=1, high=MAX_BUCKET_ELEMENTS, advanced=True, metavar="N",
          matters=lambda p: p.parallel.strategy is Strategy.ZERO3),
    Input("parallel.zero3_max_live_elements", Kind.COUNT, "ZeRO-3 live", "ZeRO-3 live parameters",
          ZERO3_MAX_LIVE_ELEMENTS,
          "DeepSpeed stage3_max_live_parameters (1e9 by default).",
          ("--zero3-max-live",), "DeepSpeed stage3_max_live_parameters (1e9)", unit="elements",
          low=1, high=MAX_BUCKET_ELEMENTS, advanced=True, metavar="N",
          matters=lambda p: p.parallel.strategy is Strategy.ZERO3),
    Input("parallel.zero3_max_reuse_elements", Kind.COUNT, "ZeRO-3 reuse", "ZeRO-3 reuse distance",
          ZERO3_MAX_REUSE_ELEMENTS,
          "DeepSpeed stage3_max_reuse_distance (1e9 by default): a module used again within this many "
          "elements of the step's trace stays gathered (the forward's last modules into the backward; a "
          "checkpointed block from its recompute to its backward).",
          ("--zero3-max-reuse",), "DeepSpeed stage3_max_reuse_distance in elements (1e9)", unit="elements",
          low=1, high=MAX_BUCKET_ELEMENTS, advanced=True, metavar="N",
          matters=lambda p: p.parallel.strategy is Strategy.ZERO3),
    # ---- serving ------------------------------------------------------------------------
    Input("inference.engine", Kind.ENUM, "Engine", "Engine", Engine.HF,
          "Hugging Face generate runs one static batch; vLLM and SGLang size a paged KV pool at start-up; "
          "llama.cpp (and Ollama's runner) loads a GGUF file and offloads its layers to the GPU.",
          ("--engine",), "hf: transformers generate; vllm: vLLM; sglang: SGLang; llamacpp: llama.cpp / Ollama",
          labels=ENGINE_LABELS),
    Input("inference.vllm_version", Kind.ENUM, "vLLM version", "vLLM version", VllmVersion.V0_19,
          "The vLLM release whose start-up rules apply: how it profiles, what it counts outside PyTorch, "
          "whether it sets CUDA-graph memory aside before the KV cache (0.20 on), its default memory share, "
          "and 0.34's KV cache sized from the memory measured after warm-up.",
          ("--vllm-version",), "vLLM release line (default 0.19, the newest checked against start-up logs)",
          labels=VLLM_VERSION_LABELS, matters=lambda p: p.inference.engine is Engine.VLLM),
    Input("inference.vllm_sampler", Kind.ENUM, "vLLM sampler", "vLLM top-k/top-p sampler", VllmSampler.AUTO,
          "The sampler of vLLM's profiling run, which sets part of the memory taken before the KV cache. "
          "Without FlashInfer's sampler, releases before 0.17 sort the float32 logits of every sequence "
          "(about 38 bytes a logit with PyTorch's scratch, against 14); 0.17 on run a Triton kernel. "
          "FlashInfer's runs when it is installed (0.9-0.11: the Docker image, not pip) or, from 0.12, "
          "when VLLM_USE_FLASHINFER_SAMPLER=1. Auto: what pip install vllm gives, never FlashInfer's. "
          "The start-up log says which: 'Using FlashInfer for top-p & top-k sampling'.",
          ("--vllm-sampler",), "vLLM: top-k/top-p sampler (auto: a pip install's; native; flashinfer)",
          labels=VLLM_SAMPLER_LABELS, matters=lambda p: p.inference.engine is Engine.VLLM and vllm_v1(p)),
    Input("inference.cuda_graphs", Kind.BOOL, "CUDA graphs", "CUDA graphs (decode replayed)", True,
          "Off: vLLM's --enforce-eager (no CUDA graphs and, on V1, no torch.compile: no graph memory set aside "
          "before the KV cache from 0.20 or captured after it) or SGLang's --disable-cuda-graph (from 0.5.20 its "
          "default memory share no longer reserves for graphs). Each decode kernel is then launched on its own.",
          ("--cuda-graphs",), "vLLM / SGLang: capture CUDA graphs (default on; --no-cuda-graphs: vLLM "
          "--enforce-eager, SGLang --disable-cuda-graph)",
          matters=lambda p: p.inference.engine in (Engine.VLLM, Engine.SGLANG)),
    Input("inference.compile_cache", Kind.ENUM, "Compile cache", "vLLM compile cache", CompileCache.WARM,
          "Whether vLLM finds its torch.compile cache (~/.cache/vllm, or VLLM_CACHE_ROOT) from an earlier start of "
          "the same model and settings. Cold: the first start, a container that does not keep that folder, or "
          "VLLM_DISABLE_COMPILE_CACHE=1. A cold start compiles inside the profiling run that sizes the KV cache, "
          "and Inductor's autotuning there raises the profiled peak, so the KV cache gets that much less; a warm "
          "start loads the compiled model instead. V1 releases with CUDA graphs on only (--enforce-eager compiles "
          "nothing).",
          ("--compile-cache",), "vLLM V1: torch.compile cache at start-up (warm: a restart; cold: a first start, "
          "or a container without ~/.cache/vllm)",
          labels=COMPILE_CACHE_LABELS,
          matters=lambda p: p.inference.engine is Engine.VLLM and vllm_v1(p) and p.inference.cuda_graphs),
    Input("inference.prefix_caching", Kind.ENUM, "Prefix caching", "vLLM prefix caching", PrefixCaching.DEFAULT,
          "vLLM's --[no-]enable-prefix-caching. It changes the pool of a hybrid model (Mamba-2 or Gated DeltaNet "
          "beside attention): with it a request keeps two or three recurrent-state blocks (mamba_cache_mode "
          "align, the default from 0.28; opt-in from 0.26), without it one. Engine default: the release's own.",
          ("--prefix-caching",), "vLLM: prefix caching (default: the release's own; on; off)",
          labels=PREFIX_CACHING_LABELS,
          matters=lambda p: p.inference.engine is Engine.VLLM and p.model.hybrid is not None),
    Input("inference.text_only", Kind.BOOL, "Text only", "Text-only serving (no vision tower)", False,
          "Serve an image-text checkpoint for text alone: vLLM leaves the vision tower unbuilt and profiles no "
          "images when every modality's --limit-mm-per-prompt is 0 (LLaVA 1.5, Mistral 3 and Qwen2.5-VL from "
          "0.10.1, Qwen3-VL from 0.11, every model from 0.15). Offered on those releases only: SGLang and "
          "transformers build the tower whatever the requests hold, so a plan that asks it there is refused.",
          ("--text-only",), "image-text models on vLLM: serve text only (--limit-mm-per-prompt 0 for every modality)",
          matters=text_only_offered),
    Input("inference.long_context", Kind.BOOL, "Past the model's limit", "Context past the model's limit allowed",
          False,
          "A serving context longer than the model's max_position_embeddings: vLLM refuses to start unless "
          "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, SGLang unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (both then "
          "warn: positions past the limit may give wrong outputs or NaN). On: that variable is set. llama.cpp "
          "warns and runs either way (core.context_limit).",
          ("--long-context",), "vLLM / SGLang: a context past the model's limit allowed (the engine's variable set)",
          matters=lambda p: p.inference.engine in (Engine.VLLM, Engine.SGLANG)
          and p.inference.context > p.model.max_position_embeddings),
    Input("inference.sglang_enable_multimodal", Kind.BOOL, "Multimodal", "SGLang --enable-multimodal", False,
          "SGLang's --enable-multimodal (0.4.6 on). At its defaults SGLang serves Gemma 3 as a text model: it takes "
          "no images, yet still builds the vision tower, whose weights are counted. With the flag it takes images, "
          "and SGLang lowers its default memory share for the vision encoder (from 0.4.9), captures no prefill CUDA "
          "graphs (0.5.10 on) and keeps 100 MiB of the token pool for the image-embedding cache (0.5.18 on). "
          "(SGLang treats Llama 4 alike; the planner serves Llama 4 on vLLM only.)",
          ("--enable-multimodal",), "SGLang 0.4.6 on: serve Gemma 3 with images (--enable-multimodal)",
          matters=sglang_multimodal_opt_in),
    Input("inference.sglang_version", Kind.ENUM, "SGLang version", "SGLang version", SglangVersion.V0_5_23,
          "The SGLang release whose default mem_fraction_static applies: a table by tensor-parallel size "
          "up to 0.4.5, by card size from 0.4.6, and from 0.5.3 the card less a reserve for the prefill "
          "chunk's activations and the CUDA graphs (at least 10 GiB on cards above 60 GiB).",
          ("--sglang-version",), "SGLang release (default 0.5.23, the newest the rules were read from)",
          labels=SGLANG_VERSION_LABELS, matters=lambda p: p.inference.engine is Engine.SGLANG),
    Input("inference.transformers_version", Kind.ENUM, "transformers version", "transformers version",
          TransformersVersion.V5_25,
          "The transformers release Hugging Face generate runs: how a mixture-of-experts block runs its experts "
          "(a Python loop over every expert up to 4.51, and 4.52's Qwen3-MoE; over the experts a token routes "
          "to from 4.53; one grouped product from 5.0) and whether the fine-grained FP8 linear synchronises "
          "the device after each product (up to 5.3; FP8 weights load from 4.49).",
          ("--transformers-version",),
          "transformers release line for --engine hf (default 5.25, the newest the rules were read from)",
          labels=TRANSFORMERS_VERSION_LABELS, matters=lambda p: p.inference.engine is Engine.HF),
    Input("inference.weight_dtype", Kind.ENUM, "Weights", "Weight storage", WeightFormat.BF16,
          "How the served weights are stored; quantised formats keep embeddings, head and norms in 16 bits.",
          ("--weights",), "weight storage", labels=WEIGHT_LABELS,
          matters=lambda p: p.inference.engine is not Engine.LLAMACPP),
    Input("inference.gguf_quant", Kind.ENUM, "GGUF type", "GGUF quantisation", GgufQuant.Q4_K_M,
          "The GGUF file's type as llama-quantize names it: a default storage type and, for the K-quant "
          "mixes, more bits for some tensors (the output matrix, half the attention V and FFN down matrices).",
          ("--gguf",), "llama.cpp: the GGUF file type (Q4_K_M, Q8_0, IQ4_XS, F16, ...)", labels=GGUF_LABELS,
          matters=lambda p: p.inference.engine is Engine.LLAMACPP),
    Input("inference.gpu_layers", Kind.INT, "GPU layers", "GPU layers (n_gpu_layers)", 999,
          "llama.cpp's -ngl: the last N repeating layers run on the GPU; one more puts the output layer "
          "there too. The rest (and the token embeddings, always) stay in host RAM. 999: everything. "
          "-1: auto, llama.cpp's own fit (-ngl unset, --fit on: as many layers as leave 1 GiB free on each GPU).",
          ("--gpu-layers", "--ngl"), "llama.cpp: layers on the GPU (-ngl; 999: all, -1: auto)", unit="layers", low=-1,
          low_means="auto (llama.cpp's fit)",
          high=MAX_LAYERS_FLAG, matters=lambda p: p.inference.engine is Engine.LLAMACPP),
    Input("inference.cpu_moe_layers", Kind.INT, "Experts in RAM", "MoE layers whose experts stay in RAM (--n-cpu-moe)",
          0,
          "llama.cpp's --n-cpu-moe N: the routed experts (ffn_up / gate / down _exps) of the first N layers stay "
          "in host RAM, the rest of each layer on the GPU; the CPU reads them each token, and a prompt's "
          "micro-batch copies them to the GPU. At the layer count or above: --cpu-moe, every layer's. "
          "Mixture-of-experts models only; Ollama has no such option.",
          ("--n-cpu-moe",), "llama.cpp: keep the experts of the first N layers in host RAM (--cpu-moe: all)",
          unit="layers", low=0, high=MAX_LAYERS_FLAG, zero_means="none",
          # shown for a dense model too while it holds a count, which the estimate refuses: the field to clear
          matters=lambda p: p.inference.engine is Engine.LLAMACPP and p.inference.ollama_version is OllamaVersion.NONE
          and (p.model.num_experts > 1 or p.inference.cpu_moe_layers > 0)),
    # Default HOST_BANDWIDTH_GB_S (dual-channel DDR4-3200), the figure host reads were planned at before it
    # was an input.
    Input("inference.host_bandwidth_gb_s", Kind.FLOAT, "Host RAM speed", "Host memory bandwidth",
          HOST_BANDWIDTH_GB_S,
          "The bandwidth the CPU reads llama.cpp's host-kept weights at (the layers -ngl leaves on the CPU, the "
          "experts --n-cpu-moe keeps in RAM), in decimal GB/s: channels x 8 bytes x transfer rate. Dual-channel "
          "DDR4-3200 51.2, dual-channel DDR5-5600 89.6, eight-channel DDR5-4800 307.2. Decoding reads those "
          "weights once per token, so it sets the speed of every token that touches them.",
          ("--host-bandwidth",), "llama.cpp: host memory bandwidth in GB/s for CPU-kept weights (default 51.2)",
          unit="GB/s", low=1.0, high=10_000.0, decimals=1, step=10,
          matters=lambda p: p.inference.engine is Engine.LLAMACPP
          and (p.inference.gpu_layers < p.model.num_layers or p.inference.cpu_moe_layers > 0)),
    Input("inference.ollama_version", Kind.ENUM, "Ollama", "Ollama release", OllamaVersion.NONE,
          "Run through Ollama: it picks the GPU layers itself from its own memory estimate of the card's "
          "free memory (its log's 'offload' line, ollama ps' SIZE and PROCESSOR), passes num_ctx × "
          "parallel as the context and turns flash attention on only with OLLAMA_FLASH_ATTENTION=1 (from "
          "0.12.11 also for the models it lists, from 0.13.4 llama.cpp's own 'auto'). "
          "GPU layers below 999 are its num_gpu; it has no --n-cpu-moe (Experts in RAM is hidden). "
          "The CLI takes the release's default num_ctx (2048 up "
          "to 0.6.6, then 4096; from 0.15.5 4k / 32k / 256k by the GPUs' total memory) and "
          "OLLAMA_NUM_PARALLEL (tries 4, later 2, then 1; 1 from 0.10). From 0.12.11 the layers are "
          "packed onto as few GPUs as hold them, the split shown per GPU. From 0.30 Ollama starts "
          "llama-server without -ngl and llama.cpp's own fit picks the layers (1 GiB left free per GPU).",
          ("--ollama",), "llama.cpp: run through this Ollama release line (none: llama-server)",
          labels=OLLAMA_VERSION_LABELS, matters=lambda p: p.inference.engine is Engine.LLAMACPP),
    Input("inference.cache_type", Kind.ENUM, "KV cache type", "llama.cpp KV cache type", CacheType.F16,
          "llama.cpp's -ctk / -ctv: f16, or q8_0 / q4_0 blocks of 32 values with one fp16 scale "
          "(34 and 18 bytes per 32). A quantised V cache needs flash attention.",
          ("--cache-type",), "llama.cpp: KV cache type for K and V (f16, q8_0, q4_0, ...)", labels=CACHE_TYPE_LABELS,
          matters=lambda p: p.inference.engine is Engine.LLAMACPP),
    Input("inference.flash_attention", Kind.BOOL, "Flash attention", "llama.cpp flash attention", True,
          "llama.cpp's -fa: without it each layer's attention scores (context × batch × heads, float32) "
          "sit in the compute buffer. Current builds turn it on where the GPU supports it.",
          ("--flash-attention",), "llama.cpp: flash attention (default on; --no-flash-attention: off)",
          matters=lambda p: p.inference.engine is Engine.LLAMACPP),
    Input("inference.ubatch", Kind.INT, "Micro-batch", "llama.cpp micro-batch (n_ubatch)", 512,
          "llama.cpp's -ub: tokens one forward takes at most (512 by default); the compute buffer is sized for it.",
          ("--ubatch",), "llama.cpp: physical batch in tokens (512)", unit="tokens", low=1, high=MAX_SEQ,
          matters=lambda p: p.inference.engine is Engine.LLAMACPP),
    Input("inference.llamacpp_build", Kind.INT, "llama.cpp build", "llama.cpp build number", 0,
          "The llama.cpp build (the N of bN) whose prompt kernels apply: CUDA builds before b3216 "
          "(June 2024) turn a quantised weight into F16 before cuBLAS for every prompt micro-batch "
          "above 32 tokens, a read and a write of the weights each time; later builds multiply the "
          "quantised weights directly. CUDA builds before b3916 (October 2024) read a lone token's F16 weights "
          "with scalar loads: 1.33 × the time on HBM cards. 0: a current build.",
          ("--llamacpp-build",), "llama.cpp: build number bN the speed follows (0: a current build)",
          low=0, high=MAX_LLAMACPP_BUILD, zero_means="a current build", metavar="N",
          matters=lambda p: p.inference.engine is Engine.LLAMACPP),
    Input("inference.llamacpp_backend", Kind.ENUM, "llama.cpp backend", "llama.cpp GPU backend",
          LlamaCppBackend.NATIVE,
          "The ggml backend that runs the GPU layers: the card's own (CUDA on NVIDIA, Metal on Apple) or "
          "Vulkan. Vulkan records a token's kernels into command buffers (no launch each), fuses some of "
          "them and multiplies float activations where CUDA first quantises them: fewer kernels a layer.",
          ("--llamacpp-backend",), "llama.cpp: GPU backend (native: CUDA / Metal; vulkan)",
          labels=LLAMACPP_BACKEND_LABELS, matters=lambda p: p.inference.engine is Engine.LLAMACPP),
    Input("inference.kv_dtype", Kind.ENUM, "KV cache", "KV cache storage", KvDtype.BF16,
          "Element type of the cached keys and values. int8 / int4 / fp8_per_token_head on vLLM: its per-token-head "
          "caches (from 0.20 / 0.25 / 0.20), a float32 scale per token and head beside them; SGLang keeps none.",
          ("--kv-dtype",), "element type of the KV cache", labels=KV_LABELS,
          matters=lambda p: p.inference.engine is not Engine.LLAMACPP),
    Input("inference.concurrent", Kind.INT, "Concurrent", "Concurrent requests", 1,
          "Requests served at once, each with its own KV cache.",
          ("--concurrent",), "requests served at once", unit="requests", low=1, high=MAX_BATCH),
    Input("inference.context", Kind.INT, "Context", "Context per request", 4096,
          "Prompt plus generated tokens of one request (vLLM: max_model_len).",
          ("--context",), "tokens per request, prompt + generated (vLLM: max_model_len)", unit="tokens",
          low=1, high=MAX_SEQ, step=1024),
    Input("inference.new_tokens", Kind.INT, "Generated", "Generated tokens", 256,
          "Tokens each request generates; the rest is prompt.",
          ("--new-tokens",), "generated tokens per request (default 256)", unit="tokens", low=0, high=MAX_SEQ),
    Input("inference.tensor_parallel", Kind.INT, "Tensor parallel", "Tensor parallel", 1,
          "GPUs each layer is split across (weights and KV heads).",
          unit="GPUs", low=1, high=MAX_PARALLEL, flag_of="parallel.tensor_parallel"),
    Input("inference.pipeline_parallel", Kind.INT, "Pipeline parallel", "Pipeline parallel", 1,
          "Stages the layers are split into, one GPU group each.",
          unit="stages", low=1, high=MAX_PARALLEL, flag_of="parallel.pipeline_parallel"),
    Input("inference.replicas", Kind.INT, "Replicas", "Replicas", 1,
          "Independent copies of the served model.",
          ("--replicas",), "independent copies of the served model", low=1, high=MAX_GPUS),
    Input("inference.link", Kind.TEXT, "GPU link", "Link between the serving GPUs", "auto",
          "What carries the tensor-parallel all-reduce: auto is the card's own (NVLink on SXM parts, else "
          "its PCIe); a network link (ib-ndr400, roce-100) for ranks on different nodes.",
          ("--serving-link",), "link of the tensor-parallel GPUs (default auto: the card's own)",
          expected="auto or a link id from the catalogue", metavar="LINK",
          matters=lambda p: p.inference.tensor_parallel > 1 and p.inference.engine is not Engine.LLAMACPP),
    # 0: the version's default (0.9; 0.92 from 0.20; 1.0 in 0.34: core.serving.vllm_versions).
    Input("inference.gpu_memory_utilization", Kind.FLOAT, "GPU memory use", "GPU memory utilisation", 0.0,
          "vLLM's gpu_memory_utilization: the share of each GPU it may use "
          "(its default: 90 %, 92 % from 0.20, all of it in 0.34).",
          ("--gpu-memory-utilization",), "vLLM: fraction of each GPU it may use (0: the version's default)",
          unit="%", low=0.01, high=1.0, zero_means="default", scale=100, decimals=0,
          matters=lambda p: p.inference.engine is Engine.VLLM),
    Input("inference.max_num_seqs", Kind.INT, "Sequences per step", "max_num_seqs", 0,
          "Most requests vLLM schedules at once (its max_num_seqs); 0: its default for the card.",
          ("--max-num-seqs",), "vLLM: most requests scheduled at once (0: its default)", low=0, high=MAX_BATCH,
          zero_means="default", matters=lambda p: p.inference.engine is Engine.VLLM),
    Input("inference.max_num_batched_tokens", Kind.INT, "Batched tokens", "max_num_batched_tokens", 0,
          "Tokens vLLM runs per step (chunked prefill); its profiling forward uses this many. 0: its default.",
          ("--max-num-batched-tokens",), "vLLM: tokens per step (0: its default)", low=0, high=MAX_SEQ,
          zero_means="default", matters=lambda p: p.inference.engine is Engine.VLLM),
    Input("inference.mem_fraction_static", Kind.FLOAT, "Static fraction", "mem_fraction_static", 0.0,
          "SGLang's share of the GPU for weights and the token pool; 0: its release's default for the card and layout.",
          ("--mem-fraction-static",), "SGLang: weights + KV pool share (0: its default)", unit="%",
          low=0.01, high=1.0, zero_means="default", scale=100, decimals=0,
          matters=lambda p: p.inference.engine is Engine.SGLANG),
)
# fmt: on

BY_PATH: Final[dict[str, Input]] = {i.path: i for i in INPUTS}


def input_at(path: str) -> Input:
    """The row of the input at ``path`` (KeyError for a path the table lacks)."""
    return BY_PATH[path]


# The inputs' defaults: the Plan's dataclasses take their field defaults from here.
DEFAULTS: Final[dict[str, Any]] = {i.path: i.default for i in INPUTS}
# PEFT's own IA3 targets when a config names none: TRANSFORMERS_MODELS_TO_IA3_TARGET_MODULES_MAPPING["llama"]
# (and "mistral", "qwen2", ...: the same three) in huggingface/peft 5d602fdb src/peft/utils/constants.py; its
# feedforward module, down_proj, is lora.ia3_feedforward's default. A plan that switches to IA3 with LoRA's
# default targets untouched takes these (Plan.with_method), as IA3Config() would.
IA3_DEFAULT_TARGETS: Final = ("k_proj", "v_proj", "down_proj")


# ---- checks, built once per input: the Plan runs them on every construction ---------------
Check = Callable[[object], object]  # the value, converted (an enum from its text), or PlanError


def _int_check(spec: Input) -> Check:
    path, low, high, allowed = spec.path, spec.low, spec.high, spec.allowed

    def check(value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise PlanError(path, value, allowed)
        return value

    return check


def _float_check(spec: Input) -> Check:
    path, low, high, allowed, zero = spec.path, spec.low, spec.high, spec.allowed, bool(spec.zero_means)

    typed = spec.cli_factor != 1.0  # held in the plan's unit, typed in another (GiB): say what was typed

    def check(value: object) -> object:
        number = finite_number(value)
        if number is None or not (low <= number <= high or (zero and number == 0)):
            reason = f"{number / spec.cli_factor:,.2f} {spec.unit}" if typed and number is not None else ""
            raise PlanError(path, value, allowed, reason)
        return value

    return check


def _bool_check(spec: Input) -> Check:
    path = spec.path

    def check(value: object) -> object:
        if not isinstance(value, bool):
            raise PlanError(path, value, "true or false")
        return value

    return check


def _enum_check(spec: Input) -> Check:
    path, enum, allowed = spec.path, spec.enum, spec.allowed

    def check(value: object) -> object:
        if isinstance(value, enum):
            return value
        if isinstance(value, str):  # the value's text ("lora") is taken as the enum
            with contextlib.suppress(ValueError):
                return enum(value)
        raise PlanError(path, value, allowed)

    return check


def _text_check(spec: Input) -> Check:
    path, expected = spec.path, spec.expected

    def check(value: object) -> object:
        if not isinstance(value, str) or not value.strip():
            raise PlanError(path, value, expected)
        check_text(path, value)
        return value

    return check


def _targets_check(spec: Input) -> Check:
    def check(value: object) -> object:
        if not isinstance(value, tuple):
            raise PlanError(spec.path, value, "a list of module names")
        normal = (
            normalise_ia3_feedforward(value) if spec.path == "lora.ia3_feedforward" else normalise_lora_targets(value)
        )
        return value if normal == value else normal

    return check


def _setting_check(spec: Input) -> Check:
    path, parse = spec.path, spec.parse

    def check(value: object) -> object:
        if not isinstance(value, str):
            raise PlanError(path, value, spec.allowed)
        check_text(path, value, allow_empty=True)
        if value.strip() and parse is not None:
            parse(value)  # raises PlanError with the library's own reason
        return value

    return check


_CHECKS: Final[dict[Kind, Callable[[Input], Check]]] = {
    Kind.INT: _int_check,
    Kind.COUNT: _int_check,
    Kind.FLOAT: _float_check,
    Kind.BOOL: _bool_check,
    Kind.ENUM: _enum_check,
    Kind.TEXT: _text_check,
    Kind.TARGETS: _targets_check,
    Kind.SETTING: _setting_check,
}
# Checked by the model description itself (core.model.ModelSpec), which Plan holds whole.
_CHECKED_ELSEWHERE: Final = frozenset({"model.params_override"})
_GROUP_CHECKS: Final[dict[str, tuple[tuple[str, Check], ...]]] = {
    group: tuple(
        (i.attribute, _CHECKS[i.kind](i)) for i in INPUTS if i.group == group and i.path not in _CHECKED_ELSEWHERE
    )
    for group in dict.fromkeys(i.group for i in INPUTS)
}


def checks_of(group: str) -> tuple[tuple[str, Check], ...]:
    """(attribute, check) for every input ``group`` holds ("" for the Plan's own fields)."""
    return _GROUP_CHECKS[group]


def run_checks(value: object, checks: tuple[tuple[str, Check], ...]) -> None:
    """Check each attribute of ``value`` (a frozen dataclass); store converted values back."""
    for name, check in checks:
        given = getattr(value, name)
        kept = check(given)
        if kept is not given:
            object.__setattr__(value, name, kept)
