"""Megatron-Bridge (NeMo 2 / Megatron-Core) training configs: the YAML a ``ConfigContainer`` is
written as — an override file (``--config-file``) or the ``run_config.yaml`` a run saves beside
its checkpoints.

Read against NVIDIA-NeMo/Megatron-Bridge 067f987d (``src/megatron/bridge/training/config.py``
ConfigContainer: sections ``model``, ``train``, ``optimizer``, ``ddp``, ``dist``, ``peft``,
``mixed_precision``, ``comm_overlap``, ``dataset``, ``tokenizer``, ``checkpoint``) and the
Megatron-Core fields its sections inherit, NVIDIA/Megatron-LM d98e8a64:

- ``model.recompute_granularity`` ``None`` | ``full`` | ``selective`` (TransformerConfig, default
  None: nothing recomputed); ``selective`` recomputes ``recompute_modules``, default
  ``["core_attn"]``; ``full`` with ``recompute_method`` ``uniform`` (chunks of
  ``recompute_num_layers`` blocks, each storing its input) or ``block`` (only the first
  ``recompute_num_layers`` blocks of each pipeline stage).
- ``model.fp8`` ``e4m3`` | ``hybrid``: Transformer Engine fp8 linears (or a ``mixed_precision``
  recipe such as ``bf16_with_fp8_delayed_scaling_mixed``, training/mixed_precision.py).
- ``optimizer.optimizer`` default ``adam``, built as Transformer Engine / Apex FusedAdam with
  ``adam_w_mode = decoupled_weight_decay`` (default True): fused AdamW
  (megatron/core/optimizer/__init__.py, optimizer_config.py); ``use_distributed_optimizer``
  (default False) shards the float32 main parameters and the moments over data parallel, as
  ZeRO-1 does; ``optimizer_cpu_offload`` moves them to the host; ``clip_grad`` default 1.0.
- ``peft``: ``megatron.bridge.peft.lora.LoRA`` (``dim`` 32, ``alpha`` 32, ``dropout`` 0,
  ``target_modules`` default ``linear_qkv``, ``linear_proj``, ``linear_fc1``, ``linear_fc2``) or
  ``...dora.DoRA``; an override file's ``peft`` section changes the recipe's LoRA.
- ``dist.use_megatron_fsdp`` (or ``ddp.use_megatron_fsdp``) / ``use_torch_fsdp2``: fully sharded data parallel.

An override file changes a Python recipe: what it does not say stays as the plan has it.
Parallel degrees are the launcher's GPU count's to divide, so they are noted, as torchtitan's.
"""

from __future__ import annotations

from typing import Any, Final

from core.files.runconfig.common import OddValues, finish, lora_targets, recipe_numbers
from core.files.runconfig.reading import Taker
from core.files.runconfig.result import ConfigKind, RunConfig
from core.inputs import Optimizer
from core.optimizer_stacks import STACK_RULES, OptimizerStack
from core.units import finite_number

# Megatron-Core's fused projections -> the planner's matrices (Megatron-Bridge's model bridges
# map linear_qkv to q/k/v_proj, linear_proj to o_proj, linear_fc1 to gate/up_proj (gated MLP)
# and linear_fc2 to down_proj: src/megatron/bridge/models/llama/llama_bridge.py).
MEGATRON_TARGETS: Final = {
    "linear_qkv": ("q_proj", "k_proj", "v_proj"),
    "linear_proj": ("o_proj",),
    "linear_fc1": ("gate_proj", "up_proj"),
    "linear_fc2": ("down_proj",),
}
DEFAULT_TARGETS: Final = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")  # LoRA's default
# Megatron-Core's emerging optimizers (NVIDIA/Megatron-LM d98e8a64 megatron/core/optimizer/emerging_optimizers.py
# _EMERGING_OPTIMIZERS: muon, adaptive_muon; "dist_" names are the layer-wise ones): built by Megatron, not planned.
EMERGING: Final = ("muon", "adaptive_muon")
FP8_FORMATS: Final = ("e4m3", "hybrid")
_RECOMPUTED_ATTENTION: Final = ("core_attn",)  # TransformerConfig's default recompute_modules

# Where the model's name may be, in the order tried: the Hub id a provider built from a Hugging
# Face model keeps (GPTModelProvider.hf_model_id), the tokenizer's Hub id, the provider class.
_MODEL_KEYS: Final = ("model.hf_model_id", "tokenizer.tokenizer_model")
_PARALLEL_KEYS: Final = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "virtual_pipeline_model_parallel_size",
    "context_parallel_size",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
)
IRRELEVANT: Final = (
    "logger", "rng", "scheduler", "checkpoint", "profiling", "validation", "ft", "straggler", "nvrx_straggler",
    "inprocess_restart", "rerun_state_machine", "tensor_inspect", "mlflow", "wandb",
    "train.train_iters", "train.eval_iters", "train.eval_interval", "train.exit_interval",
    "train.exit_duration_in_mins", "train.skip_train", "train.manual_gc", "train.manual_gc_interval",
    "optimizer.lr", "optimizer.min_lr", "optimizer.adam_beta1", "optimizer.adam_beta2",
    "optimizer.adam_eps", "optimizer.finetune_lr", "optimizer.loss_scale",
    "optimizer.initial_loss_scale", "optimizer.min_loss_scale", "optimizer.loss_scale_window", "optimizer.hysteresis",
    "dataset", "tokenizer", "dist.distributed_backend", "dist.distributed_timeout_minutes",
    "dist.use_gloo_process_groups",
    "model._target_", "model.seq_length", "model.hidden_dropout", "model.attention_dropout",
    "model.init_method_std", "model.freeze_language_model", "model.freeze_vision_model",
    "model.freeze_vision_projection", "model.use_hf_vision_model", "model.calculate_per_token_loss",
    "model.cp_comm_type", "ddp.average_in_collective",
    "ddp.check_for_nan_in_grad", "ddp.overlap_grad_reduce", "ddp.overlap_param_gather",
    "peft._target_", "model.hf_model_id",
    "comm_overlap._target_",  # CommOverlapConfig, as the launch export writes it (core/files/launch/megatron.py)
)  # fmt: skip


def _model_ref(taker: Taker) -> str | None:
    for key in _MODEL_KEYS:
        value = taker.raw(key)
        if isinstance(value, str) and "/" in value.strip() and len(value) <= 1000:
            taker.record("model", value.strip(), key)
            return value.strip()
    target = taker.raw("model._target_")
    if isinstance(target, str) and len(target) <= 1000:
        # megatron.bridge.models.llama.llama_provider.Llama32ModelProvider1B -> Llama32-1B
        family, found, size = target.rsplit(".", 1)[-1].partition("ModelProvider")
        family = family.replace("MoE", "").replace("Moe", "")
        if found and family and size:
            ref = f"{family}-{size}"
            taker.record("model", ref, "model._target_")
            return ref
    folder = taker.raw("checkpoint.pretrained_checkpoint")
    if isinstance(folder, str) and folder.strip().strip("/") and len(folder) <= 1000:
        ref = folder.strip().rstrip("/").rsplit("/", 1)[-1]
        taker.record("model", ref, "checkpoint.pretrained_checkpoint (its folder name)")
        return ref
    return None


def _peft(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """The method: ``peft: null`` trains every weight; a ``peft`` section is LoRA (the recipe's
    default scheme) unless its ``_target_`` names DoRA; no ``peft`` key says nothing."""
    if "peft" not in taker.document:
        return {}
    section = taker.raw("peft")
    if section is None:
        taker.record("method", "full", "peft: null")
        return {"method": "full"}
    if not isinstance(section, dict):
        raise taker.fail("peft", section, "a LoRA or DoRA section, or null")
    target = taker.word("peft._target_", "a class path") or ""
    name = target.rsplit(".", 1)[-1]
    if name not in ("", "LoRA", "DoRA", "CanonicalLoRA"):
        odd.add("peft._target_", target, "a PEFT scheme the planner does not model (LoRA and DoRA are)")
        return {}
    method = "dora" if name == "DoRA" else "lora"
    taker.record("method", method, "peft._target_" if target else "peft (the recipe's LoRA)")
    s: dict[str, Any] = {"method": method}
    s["lora_rank"] = taker.integer("peft.dim", "lora_rank", 1, 65_536)
    alpha = taker.raw("peft.alpha")
    if alpha is not None:
        s["lora_alpha"] = taker.number("peft.alpha", "lora_alpha", 0, 1e6)
    names = taker.names("peft.target_modules")
    source = "peft.target_modules"
    if names is None:
        names, source = DEFAULT_TARGETS, "default: Megatron-Bridge's LoRA targets every linear layer"
    ours: list[str] = []
    for name_ in names:
        if name_ in MEGATRON_TARGETS:
            ours.extend(MEGATRON_TARGETS[name_])
        else:
            odd.add("peft.target_modules", name_, "not one of linear_qkv, linear_proj, linear_fc1, linear_fc2")
    if ours:
        picked = lora_targets(taker, source, tuple(ours), odd)
        if picked:
            s["lora_targets"] = picked
    taker.irrelevant("peft.dropout_position", "peft.lora_A_init_method", "peft.lora_B_init_method")
    return s


def _recompute(taker: Taker, odd: OddValues) -> dict[str, Any]:
    model = taker.document.get("model")
    if not isinstance(model, dict) or "recompute_granularity" not in model:
        return {}
    granularity = taker.word("model.recompute_granularity", "full, selective or null")
    method = taker.word("model.recompute_method", "uniform, block or null")
    layers = taker.integer("model.recompute_num_layers", None, 1, 100_000)
    modules = taker.names("model.recompute_modules")
    source = "model.recompute_granularity"
    if granularity is None:
        taker.record("checkpointing", False, f"{source}: null (Megatron-Core recomputes nothing)")
        return {"checkpointing": False}
    if granularity == "selective":
        chosen = modules or _RECOMPUTED_ATTENTION
        for module in (m for m in chosen if m not in _RECOMPUTED_ATTENTION):
            odd.add("model.recompute_modules", module, "only core_attn's selective recompute is modelled")
        if not set(_RECOMPUTED_ATTENTION) & set(chosen):
            return {}  # no policy of the plan recomputes those modules alone
        taker.record("checkpointing", True, source)
        taker.record("checkpoint_policy", "attention", f"{source}: selective (core_attn)")
        return {"checkpointing": True, "checkpoint_policy": "attention"}
    if granularity != "full":
        raise taker.fail(source, granularity, "full, selective or null")
    if method not in (None, "uniform", "block"):
        raise taker.fail("model.recompute_method", method, "uniform, block or null")
    if method == "block" and layers is not None:
        odd.add(
            "model.recompute_num_layers",
            layers,
            "block recompute of the first N blocks per stage: taken as every block",
        )
    elif method == "uniform" and layers is not None and layers > 1:
        odd.add("model.recompute_num_layers", layers, f"uniform chunks of {layers} blocks: taken as one block each")
    taker.record("checkpointing", True, source)
    taker.record("checkpoint_policy", "full", f"{source}: full" + (f", {method}" if method else ""))
    return {"checkpointing": True, "checkpoint_policy": "full"}


def _precision(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """bf16 / fp16 model (Megatron keeps 16-bit parameters and float32 main copies in its
    optimizer) and fp8 linears, from ``model`` or the ``mixed_precision`` recipe."""
    s: dict[str, Any] = {}
    recipe = taker.raw("mixed_precision")
    fp8 = taker.word("model.fp8", "e4m3, hybrid or null")
    if isinstance(recipe, str):
        name = recipe.strip().lower().replace("-", "_")
        for dtype in ("bf16", "fp16"):
            if name.startswith(dtype):
                s["model_dtype"] = dtype
                taker.record("model_dtype", dtype, "mixed_precision")
        if "fp8" in name:
            fp8 = fp8 or "hybrid"
        if not s:
            odd.add("mixed_precision", recipe, "a precision recipe the planner does not know")
    elif isinstance(recipe, dict):
        fp8 = fp8 or taker.word("mixed_precision.fp8", "e4m3, hybrid or null")
        for dtype in ("bf16", "fp16"):
            if taker.flag(f"mixed_precision.{dtype}"):
                s["model_dtype"] = dtype
                taker.record("model_dtype", dtype, f"mixed_precision.{dtype}")
    for dtype in ("bf16", "fp16"):
        if "model_dtype" not in s and taker.flag(f"model.{dtype}"):
            s["model_dtype"] = dtype
            taker.record("model_dtype", dtype, f"model.{dtype}")
    if "model_dtype" in s:  # Megatron-Core casts the model itself (Float16Module): no torch autocast
        s["autocast"] = "none"
        taker.record("autocast", "none", "Megatron-Core runs the 16-bit model without torch autocast")
    # Megatron-Core's fp8_recipe (TransformerConfig: "delayed", "tensorwise", "mxfp8", "blockwise"):
    # each per-tensor recipe's casts and MXFP8's block-scaled casts and GEMMs are timed apart
    # (core.training.speed). Which one runs when none is named: a named recipe says it
    # (Megatron-Bridge training/mixed_precision.py: bf16_with_fp8_delayed_scaling_mixed "delayed",
    # bf16_with_fp8_current_scaling_mixed "tensorwise", bf16_with_mxfp8_mixed "mxfp8"); a
    # mixed_precision section without one takes MixedPrecisionConfig's default "tensorwise"
    # (NVIDIA-NeMo/Megatron-Bridge v0.1.0rc3 .. v0.5.0, copied over the model's by its setup); a
    # model section alone, Megatron-Core's TransformerConfig default "delayed" (NVIDIA/Megatron-LM d98e8a64).
    words = "delayed, tensorwise, mxfp8, blockwise or null"
    fp8_recipe = taker.word("model.fp8_recipe", words)
    if isinstance(recipe, dict):
        fp8_recipe = taker.word("mixed_precision.fp8_recipe", words) or fp8_recipe or "tensorwise"
    elif isinstance(recipe, str):
        name = recipe.lower().replace("-", "_")
        named = {"mxfp8": "mxfp8", "current_scaling": "tensorwise", "delayed_scaling": "delayed"}
        fp8_recipe = next((v for k, v in named.items() if k in name), fp8_recipe)
    if fp8 is not None:
        if fp8 not in FP8_FORMATS:
            raise taker.fail("model.fp8", fp8, "e4m3, hybrid or null")
        kind = {"mxfp8": "te-mxfp8", "tensorwise": "te-current"}.get(fp8_recipe or "delayed", "te")
        s["float8"] = kind
        taker.record("float8", kind, f"fp8: Transformer Engine fp8 linears, {fp8_recipe or 'delayed'} recipe")
    taker.irrelevant("mixed_precision", "model.params_dtype", "model.autocast_dtype")
    return s


def _optimizer_choice(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """``optimizer.optimizer`` as Megatron-Core builds it (core.optimizer_stacks, its one table): 'adam' AdamW, or
    Adam's L2 with ``decoupled_weight_decay`` false; 'sgd' with momentum (``sgd_momentum`` 0.9) or without (0);
    'lion'. Its Muon is listed as not planned; a name it does not build is refused with its rule."""
    s: dict[str, Any] = {}
    name = taker.word("optimizer.optimizer", "adam, sgd or lion")
    decoupled = taker.flag("optimizer.decoupled_weight_decay")
    momentum = finite_number(taker.raw("optimizer.sgd_momentum"))
    if name is None:
        return s
    if name.removeprefix("dist_") in EMERGING:
        odd.add("optimizer.optimizer", name, "Megatron-Core's emerging optimizer: not planned")
        return s
    chosen = {
        "adam": Optimizer.ADAM if decoupled is False else Optimizer.ADAMW,
        "sgd": Optimizer.SGD if momentum == 0 else Optimizer.SGD_MOMENTUM,
        "lion": Optimizer.LION,
    }.get(name)
    if chosen is None:
        rule = STACK_RULES[OptimizerStack.MEGATRON]
        raise taker.fail("optimizer.optimizer", name, f"adam, sgd or lion ({rule})")
    s["optimizer"] = chosen.value
    why = {Optimizer.ADAM: ", decoupled_weight_decay false", Optimizer.SGD: ", sgd_momentum 0"}.get(chosen, "")
    taker.record("optimizer", chosen.value, f"optimizer.optimizer {name}{why}")
    if name == "adam":
        s["optimizer_impl"] = "fused"
        taker.record("optimizer_impl", "fused", "optimizer.optimizer: Transformer Engine / Apex FusedAdam")
    return s


def _optimizer(taker: Taker, odd: OddValues) -> dict[str, Any]:
    s = _optimizer_choice(taker, odd)
    distributed = None
    for key in ("ddp.use_distributed_optimizer", "optimizer.use_distributed_optimizer"):
        found = taker.flag(key)
        if found is not None:
            distributed = distributed or found
            if found:
                s["sharding"] = "zero1"
                taker.record("sharding", "zero1", f"{key}: float32 main parameters and moments sharded")
    # Megatron-Bridge turns Megatron-FSDP on from either section (ConfigContainer.validate:
    # ``if self.dist.use_megatron_fsdp or self.ddp.use_megatron_fsdp``, 067f987d training/config.py);
    # NVIDIA's performance recipes set the ddp one.
    for key in ("dist.use_megatron_fsdp", "ddp.use_megatron_fsdp", "dist.use_torch_fsdp2"):
        if taker.flag(key):
            s["sharding"] = "fsdp"
            taker.record("sharding", "fsdp", key)
    if distributed is False and "sharding" not in s:
        s["sharding"] = "ddp"
        taker.record("sharding", "ddp", "use_distributed_optimizer: false")
    if taker.flag("optimizer.optimizer_cpu_offload"):
        s["offload"] = "optimizer"
        taker.record("offload", "optimizer", "optimizer.optimizer_cpu_offload")
    s.update(recipe_numbers(taker, "optimizer.clip_grad", "peft.dropout", "optimizer.weight_decay"))
    return s


def _grad_reduce(taker: Taker) -> dict[str, Any]:
    """Megatron-Core's gradient buffer dtype (``grad_reduce_in_fp32``). The precision recipe's
    value is copied over ``ddp``'s when the run starts (067f987d training/config.py runtime setup:
    ``cfg.mixed_precision.setup(cfg.model, cfg.optimizer, cfg.ddp)`` →
    ``update_config_with_precision_overrides``), so it wins: a ``mixed_precision`` section's own
    key, else a named recipe's (training/mixed_precision.py: ``bf16_mixed`` and the bf16 fp8 / fp4
    recipes built on it True, ``fp16_mixed`` and its fp8 recipes False), else ``ddp``'s."""
    recipe = taker.raw("mixed_precision")
    ddp = taker.flag("ddp.grad_reduce_in_fp32")
    if isinstance(recipe, dict) and taker.raw("mixed_precision.grad_reduce_in_fp32") is not None:
        return {"grad_reduce_in_fp32": taker.flag("mixed_precision.grad_reduce_in_fp32", "grad_reduce_in_fp32")}
    if isinstance(recipe, str):
        name = recipe.strip().lower()
        for prefix, value in (("bf16", True), ("fp16", False)):
            if name.startswith(prefix):
                why = f"mixed_precision: {recipe.strip()} sets grad_reduce_in_fp32 = {value} over ddp's"
                taker.record("grad_reduce_in_fp32", value, why)
                return {"grad_reduce_in_fp32": value}
    if ddp is None:
        return {}
    taker.record("grad_reduce_in_fp32", ddp, "ddp.grad_reduce_in_fp32")
    return {"grad_reduce_in_fp32": ddp}


def _grad_accum_fusion(taker: Taker) -> dict[str, Any]:
    """Megatron's gradient accumulation fusion (``model.gradient_accumulation_fusion``,
    ModelParallelConfig, NVIDIA/Megatron-LM d98e8a64 megatron/core/model_parallel_config.py): the
    weight-gradient GEMM adds into ``main_grad`` itself; off, each later micro-batch adds its
    gradients in a pass of its own (core.training.speed.grad_accum_bytes). A file that does not
    say keeps the plan's: the provider decides (NVIDIA-NeMo/Megatron-Bridge 067f987d
    src/megatron/bridge/models/gpt_provider.py: ``fusions.can_enable_gradient_accumulation_fusion``,
    on where the fused kernel is installed; some performance recipes set it off)."""
    value = taker.flag("model.gradient_accumulation_fusion")
    if value is None:
        return {}
    taker.record("grad_accum_fusion", value, "model.gradient_accumulation_fusion")
    return {"grad_accum_fusion": value}


# Megatron-Core's cross-entropy implementations (ModelParallelConfig.cross_entropy_fusion_impl, NVIDIA/Megatron-LM
# d98e8a64 megatron/core/model_parallel_config.py: Literal['native', 'te'], default 'native').
CE_FUSION_IMPLS: Final = ("native", "te")


def _ce_fusion(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """Megatron-Core's cross-entropy (``model.cross_entropy_loss_fusion``, ``model.cross_entropy_fusion_impl``;
    language_module.py ``compute_language_model_loss`` at d98e8a64): off, or the fused loss of the named
    implementation, ``native`` when the file names none (Megatron-Core's default). A file that does not say
    keeps the plan's: the recipe decides (Megatron-Bridge's GPTModelProvider turns the fusion on, 4ab94dfa
    src/megatron/bridge/models/gpt_provider.py; NVIDIA's performance scripts set ``te``,
    scripts/performance/utils/overrides.py ``_set_common_perf_overrides``)."""
    fused = taker.flag("model.cross_entropy_loss_fusion")
    impl = taker.word("model.cross_entropy_fusion_impl", "native or te")
    if impl is not None and impl.lower() not in CE_FUSION_IMPLS:
        odd.add("model.cross_entropy_fusion_impl", impl, "Megatron-Core's implementations are native and te")
        impl = None
    if fused is None:
        taker.missing(
            "megatron_ce_fusion",
            "model.cross_entropy_loss_fusion not given: the recipe's (GPTModelProvider turns it on; NVIDIA's "
            "performance scripts pick te); the plan keeps its own",
        )
        return {}
    value = ("native" if impl is None else impl.lower()) if fused else "off"
    taker.record("megatron_ce_fusion", value, "model.cross_entropy_loss_fusion, model.cross_entropy_fusion_impl")
    return {"megatron_ce_fusion": value}


def _capacity(taker: Taker) -> dict[str, Any]:
    """Megatron-Core's token dropping (NVIDIA/Megatron-LM d98e8a64 transformer_config.py):
    ``model.moe_expert_capacity_factor`` (None, the default, drops nothing; ``__post_init__`` sets a negative
    one to None) and ``model.moe_pad_expert_input_to_capacity`` (default False), the plan's
    ``parallel.capacity_factor`` (0: dropless) and ``parallel.pad_to_capacity``. A file that names neither keeps
    the plan's."""
    s: dict[str, Any] = {}
    key, model = "model.moe_expert_capacity_factor", taker.document.get("model")
    if isinstance(model, dict) and "moe_expert_capacity_factor" in model:  # null says dropless too
        value = taker.raw(key)
        factor = finite_number(value) if value is not None else -1.0
        if factor is None or factor == 0:
            raise taker.fail(key, value, "a positive number, or null / a negative number for no dropping")
        s["capacity_factor"] = max(0.0, factor)
        taker.record("capacity_factor", s["capacity_factor"], key + (" (no dropping)" if factor < 0 else ""))
    pad = taker.flag("model.moe_pad_expert_input_to_capacity", "pad_to_capacity")
    if pad is not None:
        s["pad_to_capacity"] = pad
    return s


def read_megatron_bridge(document: dict[str, Any], where: str) -> RunConfig:
    taker = Taker(document, where)
    odd = OddValues()
    s: dict[str, Any] = {"stack": "megatron"}
    taker.record("stack", "megatron", "default: Megatron-Core with Transformer Engine's fused kernels")
    model_ref = _model_ref(taker)
    s["micro_batch"] = taker.integer("train.micro_batch_size", "micro_batch")
    for key in ("model.seq_length", "dataset.seq_length"):
        seq = taker.integer(key, None)
        if seq is not None:
            s["seq_len"] = seq
            taker.record("seq_len", seq, key)
            break
    s.update(_peft(taker, odd))
    s.update(_recompute(taker, odd))
    s.update(_precision(taker, odd))
    s.update(_optimizer(taker, odd))
    if s.get("method") in ("lora", "dora") and "model_dtype" in s:
        # LoRA(lora_dtype=None): the adapters take the base linear's dtype (peft/lora_layers.py)
        s["adapter_dtype"] = s["model_dtype"]
        taker.record("adapter_dtype", s["model_dtype"], "peft: adapters in the model's dtype (lora_dtype unset)")
    if taker.flag("comm_overlap.tp_comm_overlap", "tp_overlap"):
        s["tp_overlap"] = True
    for key in _PARALLEL_KEYS:
        if taker.raw(f"model.{key}") not in (None, 1):  # 1: no split, nothing to say
            taker.note(f"model.{key}", "set the split in the plan's Parallelism section")
    taker.note("model.sequence_parallel", "set it in the plan's Parallelism section")
    taker.note("train.global_batch_size", "gradient accumulation follows from it and the data-parallel degree")
    s.update(_grad_reduce(taker))
    s.update(_grad_accum_fusion(taker))
    s.update(_ce_fusion(taker, odd))
    # TransformerConfig.moe_grouped_gemm (NVIDIA/Megatron-LM d98e8a64 transformer_config.py, default False):
    # the experts as Transformer Engine's grouped linear layers (core.training.device.allocator_workspaces).
    s["moe_grouped_gemm"] = taker.flag("model.moe_grouped_gemm", "moe_grouped_gemm")
    s.update(_capacity(taker))
    taker.irrelevant(*IRRELEVANT)
    settings = {k: v for k, v in s.items() if v is not None}
    return finish(ConfigKind.MEGATRON_BRIDGE, taker, odd, model_ref, settings)
