"""Warnings about a valid plan: things it is allowed to ask that a user should still hear about.

A PlanError refuses a plan; a warning lets it through and says what is doubtful about it. The
rules live here so that the window, the command line and the tests read the same sentences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from core.catalogue import Generation, GpuGroup, amd_target, find_gpu, generation
from core.context_limit import SGLANG_LONG_ENV, VLLM_LONG_ENV, past_limit, would_not_start
from core.errors import PlanError
from core.inputs import (
    TORCH_VERSION_LABELS,
    Engine,
    Strategy,
    TorchVersion,
    deepspeed_bf16_master,
    deepspeed_bf16_states,
    torch_before,
)
from core.losses import loss_choice, loss_conflicts, loss_label
from core.mac import mac_serving_warning, mac_training_warnings
from core.model import kept_linears, parse_skip_modules
from core.plan import Attention, Method, OllamaVersion, Plan
from core.platform_rules import platform_serving_warning, platform_training_warning
from core.roles import cast_weights_label, deepspeed_cast_adapters, deepspeed_cast_weights, stored_weight_dtype
from core.verdict import Mode


@dataclass(frozen=True)
class PlanWarning:
    mode: Mode  # the view it belongs to: the training step's, or serving's
    text: str


def _context_warnings(plan: Plan) -> list[PlanWarning]:
    """A training sequence or a serving context past the model's context window."""
    warnings: list[PlanWarning] = []
    model = plan.model
    window = model.max_position_embeddings  # the model's config.json "max_position_embeddings"
    if plan.workload.seq_len > window:
        past = f"Sequence {plan.workload.seq_len:,} tokens is past {model.name}'s context window of {window:,} tokens"
        if model.learned_positions:
            # transformers models/gpt2/modeling_gpt2.py: wpe = nn.Embedding(max_position_embeddings, ...); torch's
            # embedding lookup raises IndexError past its rows (a device-side assert on CUDA)
            why = (
                f"its learned position table has {model.learned_positions:,} rows, so the first step stops "
                "('index out of range in self'); the memory is estimated as if it ran."
            )
        else:  # RoPE (or ALiBi) computes any position: it runs; quality past the window is the user's call
            why = (
                "its positions are computed (RoPE or ALiBi), not looked up: the run goes ahead, but the model was not "
                "trained on them (how well it does there is yours to judge; position scaling or a longer-context "
                "model is the usual answer)."
            )
        warnings.append(PlanWarning(Mode.TRAINING, f"{past}: {why}"))
    serving = _serving_context_warning(plan)
    if serving:
        warnings.append(PlanWarning(Mode.INFERENCE, serving))
    return warnings


def _serving_context_warning(plan: Plan) -> str:
    """A serving context past the model's window, said where the engine starts anyway (llama.cpp, transformers'
    generate, Ollama, or vLLM / SGLang with their variable set: ``inference.long_context``), with what happens there.
    Where vLLM or SGLang refuse it, the verdict ("Would not start") and the banner's sentence say so in the engine's
    words (core.context_limit); a warning beside them said it a second time (h91diag). "" otherwise."""
    if not past_limit(plan) or would_not_start(plan):
        return ""
    inf, model = plan.inference, plan.model
    window = model.max_position_embeddings
    past = f"The serving context of {inf.context:,} tokens is past {model.name}'s context window of {window:,} tokens"
    # What each engine does, from core.context_limit's sources: vllm 0.19.0 vllm/config/model.py and
    # sglang 0.5.23 srt/configs/model_config.py warn with the variable set; llama.cpp src/llama-context.cpp logs
    # "n_ctx_seq (...) > n_ctx_train (...) -- possible training context overflow" and runs; transformers' generate
    # says nothing. Ollama sizes num_ctx itself (core.serving.ollama): no engine clause.
    runs = {
        Engine.VLLM: f"vLLM starts with {VLLM_LONG_ENV}=1 and warns",
        Engine.SGLANG: f"SGLang starts with {SGLANG_LONG_ENV}=1 and warns",
        Engine.HF: "transformers' generate starts without a warning",
        Engine.LLAMACPP: "llama.cpp starts and warns n_ctx_seq > n_ctx_train",
    }.get(inf.engine, "")
    if inf.engine is Engine.LLAMACPP and inf.ollama_version is not OllamaVersion.NONE:
        runs = ""
    if model.learned_positions:
        # transformers models/gpt2/modeling_gpt2.py: wpe = nn.Embedding(max_position_embeddings, ...): no row past it
        what = (
            f"its learned position table has {model.learned_positions:,} rows, so a request stops at the first "
            "position past them (the memory is estimated as if it ran)."
        )
    else:
        what = (
            "positions past it are computed (RoPE or ALiBi), not looked up, but the model was not trained on them; "
            "how well it does there is yours to judge."
        )
    return f"{past}: {runs}; {what}" if runs else f"{past}: {what}"


def _layout_warnings(plan: Plan) -> list[PlanWarning]:
    """Layouts that run but not as planned or not as people run them: FSDP2 before PyTorch 2.4, tensor parallel
    across nodes or over a bitsandbytes base."""
    warnings: list[PlanWarning] = []
    par = plan.parallel
    release = plan.hardware.torch_version
    if par.strategy is Strategy.FSDP and not par.fsdp1_wrap and torch_before(release, TorchVersion.V2_4):
        # FSDP2 (fully_shard) first shipped in 2.4 (the PyTorch 2.4 release post, pytorch/pytorch.github.io PR 1684)
        warnings.append(
            PlanWarning(
                Mode.TRAINING,
                f"PyTorch {TORCH_VERSION_LABELS[release]} has no FSDP2 (fully_shard came with 2.4): the run is FSDP1, "
                "planned here with FSDP2's shards (1/N of every parameter, gradient and state) but without either "
                "one's release-specific collective buffers.",
            )
        )
    if par.tensor_parallel > par.gpus_per_node:
        # Megatron-LM and torchtitan keep tensor parallel inside a node's NVLink domain: its
        # all-reduces run twice per layer and micro-batch (four with recomputation).
        warnings.append(
            PlanWarning(
                Mode.TRAINING,
                f"Tensor parallel {par.tensor_parallel} spans nodes of {par.gpus_per_node} GPUs: its all-reduces, "
                "several per layer, then cross the slower link between nodes; frameworks keep it within a node.",
            )
        )
    if plan.quantised_base and par.tensor_parallel > 1:
        # No trainer people run shards a bitsandbytes base by tensor parallel: transformers' tp_plan fails on
        # bitsandbytes weights (huggingface/transformers#38122), torchtitan and Megatron have no bitsandbytes path;
        # vLLM's TP over bitsandbytes (vllm-project/vllm#8434) serves, it does not train.
        warnings.append(
            PlanWarning(
                Mode.TRAINING,
                f"Tensor parallel {par.tensor_parallel} over a bitsandbytes {plan.quant.value} base: the estimate "
                "shards it, but no common trainer runs this (Hugging Face's tp_plan fails on bitsandbytes weights, "
                "transformers#38122); FSDP or DeepSpeed ZeRO-3 over more GPUs, or a bigger card, is what QLoRA "
                "recipes use.",
            )
        )
    return warnings


def _flash3_warning(plan: Plan) -> str | None:
    """FlashAttention-3 on a card other than Hopper: flash-attn's hopper/ package needs an H100 / H800 (its README,
    Dao-AILab/flash-attention 0251105a: "Requirements: H100 / H800 GPU"); transformers' _flash_attn_3_can_dispatch
    raises "Flash Attention 3 requires compute capability >= 9.0" below, and its sm_90a kernels do not load on
    Blackwell's sm_100 / sm_120 (arch-specific code runs on that architecture only)."""
    if plan.attention is not Attention.FLASH3 or generation(plan.hardware.gpu) is Generation.HOPPER:
        return None
    name = find_gpu(plan.hardware.gpu).name if plan.hardware.gpu != "custom" else "custom card"
    return (
        f"FlashAttention-3 runs on Hopper only (flash-attn's hopper/ build; transformers refuses compute capability "
        f"below 9.0): the {name} cannot run it, so its attention is timed as FlashAttention-2 (flash), the same memory."
    )


def plan_warnings(plan: Plan) -> tuple[PlanWarning, ...]:
    """One sentence per doubtful setting of ``plan``, with the mode it concerns."""
    warnings = [*_context_warnings(plan), *_layout_warnings(plan)]
    flash3 = _flash3_warning(plan)
    if flash3:
        warnings.append(PlanWarning(Mode.TRAINING, flash3))
    cast = deepspeed_cast_adapters(plan)
    if cast is not None:
        # deepspeedai/DeepSpeed edaa7221, deepspeed/runtime/engine.py _configure_distributed_model.
        warnings.append(
            PlanWarning(
                Mode.TRAINING,
                f"DeepSpeed with {cast.value} enabled casts the whole model to {cast.value}, the "
                f"{plan.adapter_dtype.value} adapters too: the estimate counts {cast.value} adapters, gradients "
                "and reduce bucket (float32 master copies in the optimizer). Choose "
                f"{cast.value} adapters to match, or ZeRO-3, whose zero.Init model keeps them.",
            )
        )
    weights = _engine_weights_warning(plan)
    if weights:
        warnings.append(PlanWarning(Mode.TRAINING, weights))
    warnings += _latent_attention_warnings(plan)
    loss = _loss_warning(plan)
    if loss:
        warnings.append(PlanWarning(Mode.TRAINING, loss))
    skip = _skip_warning(plan)
    if skip:
        warnings.append(PlanWarning(Mode.TRAINING, skip))
    # On an Apple GPU: what runs only under conditions the plan cannot name (core.mac; the Plan refuses
    # what cannot run at all).
    warnings += [PlanWarning(Mode.TRAINING, text) for text in mac_training_warnings(plan)]
    serving = mac_serving_warning(plan)
    if serving:
        warnings.append(PlanWarning(Mode.INFERENCE, serving))
    warnings += [PlanWarning(Mode.INFERENCE, text) for text in card_serving_warnings(plan)]
    # The operating system CUDA runs under (core.platform_rules): pinned host memory under WSL2, vLLM and
    # SGLang on native Windows.
    on_platform = ((Mode.TRAINING, platform_training_warning(plan)), (Mode.INFERENCE, platform_serving_warning(plan)))
    warnings += [PlanWarning(mode, text) for mode, text in on_platform if text]
    return tuple(warnings)


# The AMD targets vLLM's ROCm build lists (vllm-project/vllm docs/getting_started/installation/gpu.rocm.inc.md,
# "Requirements": MI210/MI250 gfx90a, MI300/MI325 gfx942, MI350/MI355 gfx950, Radeon RX 7900 series gfx1100/1101,
# Radeon RX 9000 series gfx1200/1201). Strix Halo's gfx1151 is not among them.
VLLM_ROCM_TARGETS: Final = frozenset({"gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1200", "gfx1201"})
# The catalogue's Radeon and Ryzen AI targets (core.catalogue.amd_target): SGLang's own AMD page
# (docs.sglang.io platforms/amd_gpu) and kernel build target Instinct cards (gfx942 / gfx950); the PyPI package
# sglang-radeon-rdna3 says the build rejects RDNA 3, and AMD's ROCm documentation gives Radeon images only for
# SGLang 0.5.13 on, with AITER turned off.
RADEON_TARGETS: Final = frozenset({"gfx1100", "gfx1101", "gfx1151", "gfx1200", "gfx1201"})


def card_serving_warnings(plan: Plan) -> tuple[str, ...]:
    """What the plan's card does not promise its serving engine (an AMD target an engine does not list, a GPU
    that shares the machine's RAM): the plan is still estimated as on a card the engine runs on, and says so."""
    try:
        card = find_gpu(plan.hardware.gpu)
    except PlanError:  # a custom or saved card: nothing is known of its engines
        return ()
    engine = plan.inference.engine
    target = amd_target(card.id)
    out: list[str] = []
    if target is not None and engine is Engine.VLLM and target not in VLLM_ROCM_TARGETS:
        out.append(
            f"vLLM's ROCm build does not list {card.name}'s {target} (its requirements name gfx90a, gfx942, gfx950, "
            "gfx1100/1101 and gfx1200/1201): these figures are vLLM's pool as on a listed card, if a build of yours "
            "starts. llama.cpp / Ollama (Vulkan or ROCm) run on it."
        )
    if target in RADEON_TARGETS and engine is Engine.SGLANG:
        out.append(
            f"SGLang's AMD build targets Instinct cards (gfx942 / gfx950); on {card.name} ({target}) it needs AMD's "
            "Radeon images (SGLang 0.5.13 on, AITER off) or a community build: these figures are SGLang's token "
            "pool as on an Instinct card."
        )
    if card.group is GpuGroup.UNIFIED and engine in (Engine.VLLM, Engine.SGLANG):
        out.append(
            f"{card.name} shares its {card.unified_memory_gb:g} GB of RAM with the OS: the engine's memory fraction "
            "is taken of the GPU's part, which the OS, the page cache and host processes also use, and its start-up "
            "check fails when less is free (drop the page cache; leave several GiB)."
        )
    return tuple(out)


def _skip_warning(plan: Plan) -> str:
    """Names in ``bnb_skip_modules`` that keep no linear of the model (core.model.kept_linears:
    transformers' llm_int8_skip_modules rule), or a skip list on a plan without a bitsandbytes base."""
    keys = parse_skip_modules(plan.bnb_skip_modules)
    if not keys:
        return ""
    if plan.method is not Method.QLORA:
        return "Modules kept in 16 bits apply to a QLoRA (bitsandbytes) base only: this plan ignores them."
    unmatched = kept_linears(plan.model, keys).unmatched
    if not unmatched:
        return ""
    names = ", ".join(unmatched)
    return (
        f"Modules kept in 16 bits: {names} matches no linear layer of {plan.model.name} (named as transformers "
        "names Llama / Qwen layers, e.g. model.layers.0.mlp or down_proj), so it keeps nothing in 16 bits."
    )


def _engine_weights_warning(plan: Plan) -> str:
    """DeepSpeed's bf16 / fp16 engine overrides the plan's float32 weights at every ZeRO stage
    (core.roles.deepspeed_cast_weights: microsoft/DeepSpeed v0.14.0 ce78a632 and deepspeedai/DeepSpeed
    edaa7221, deepspeed/runtime/engine.py _configure_distributed_model; zero/partition_parameters.py
    Init._set_dtype under ZeRO-3)."""
    cast = deepspeed_cast_weights(plan)
    if cast is None:
        return ""
    stored = stored_weight_dtype(plan).value
    what = cast_weights_label(plan)
    return (
        f"DeepSpeed with {cast.value} enabled keeps the model's {what} in {cast.value}, not {stored} (the engine "
        f"casts the module; ZeRO-3's zero.Init creates it in {cast.value}): the estimate counts {cast.value} "
        f"weights and gradients, no autocast copies, and {_master_words(plan)}. "
        f"Choose {cast.value} weights to match (a float32 model under DeepSpeed means no 16-bit autocast)."
    )


def _master_words(plan: Plan) -> str:
    """Where float32 remains under DeepSpeed's 16-bit engine: the optimizer's master partition and state, unless
    ``bf16_master_weights_and_grads`` (and ``bf16_optimizer_states``) keep them in bf16 too."""
    if not deepspeed_bf16_master(plan):
        return "float32 only in the optimizer's master partition"
    if deepspeed_bf16_states(plan):
        return "the optimizer's master partition and Adam state in bf16 too (bf16_master_weights_and_grads)"
    return "a bf16 master partition beside float32 optimizer state on the host (bf16_master_weights_and_grads)"


def _loss_warning(plan: Plan) -> str:
    """A plan file or a command line can turn on two losses; one computes the step's loss."""
    others = loss_conflicts(plan)
    if not others:
        return ""
    chosen = loss_label(plan, loss_choice(plan))
    ignored = " and ".join(f"“{loss_label(plan, other)}”" for other in others)
    return (
        f"The plan turns on more than one loss: the estimate counts “{chosen}” and ignores {ignored}, "
        "which it replaces. Choose one: the Method form's Loss, or one loss flag on the command line."
    )


def _latent_attention_warnings(plan: Plan) -> list[PlanWarning]:
    """A multi-head latent attention model (DeepSeek-V2 / V3, Kimi K2): its parameters, weights and
    serving cache are exact, and its attention keeps what transformers' DeepseekV3Attention keeps
    (core.training.activations._latent_attention); its dense first layers are read as expert layers
    (one block's activations times the layers). Measured on fake tensors, a tiny DeepSeek-V3
    (benchmarks/accuracy/cases_mla.json): -0.2 % with every layer routed, +1.0 % to +2.0 % with one
    dense layer of four, +2.2 % to +4.1 % under LoRA. Said in the training view."""
    model = plan.model
    if not model.latent_attention:
        return []
    dense = model.first_k_dense_replace
    text = (
        f"{model.name} uses multi-head latent attention: the training activations follow transformers' "
        "DeepseekV3Attention"
    )
    if dense:
        counted = "layers are counted as expert layers" if dense > 1 else "layer is counted as an expert layer"
        text += f", but its {dense} dense first {counted}"
    text += ". Checked on a tiny DeepSeek-V3 with fake tensors: from 0.2 % under to 4 % over the measured peak."
    return [PlanWarning(Mode.TRAINING, text)]
