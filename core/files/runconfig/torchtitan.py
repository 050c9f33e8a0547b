"""torchtitan job configs (TOML, ``torchtitan/models/*/train_configs/*.toml``).

Read against pytorch/torchtitan commit 238fa995 (``torchtitan/config/job_config.py``, the
last release configured by TOML files): ``[training] local_batch_size`` and ``seq_len``,
``[optimizer] name`` and ``implementation`` (default ``fused``), ``[activation_checkpoint]
mode`` (``none`` | ``full`` | ``selective``, default ``selective``) with
``selective_ac_option`` (``"op"``, or an integer N: every Nth block; default ``"2"``), and
``[parallelism] data_parallel_shard_degree`` (-1 or above 1: FSDP2). The model is named by
``[model] hf_assets_path`` (its last folder, e.g. ``Llama-3.1-8B``) or ``name`` + ``flavor``.
"""

from __future__ import annotations

from typing import Any, Final

from core.files.runconfig.common import OddValues, finish, recipe_numbers
from core.files.runconfig.reading import Taker
from core.files.runconfig.result import ConfigKind, RunConfig
from core.optimizer_stacks import TORCHTITAN_NAMES, TORCHTITAN_RULE

OPTIMIZERS: Final = {name: optimizer.value for optimizer, name in TORCHTITAN_NAMES.items()}
IMPLEMENTATIONS: Final = {"fused": "fused", "foreach": "foreach", "for-loop": "forloop"}
# Defaults of torchtitan's ActivationCheckpoint dataclass at commit 238fa995.
DEFAULT_AC_MODE: Final = "selective"
DEFAULT_AC_OPTION: Final = "2"
# torchtitan's Optimizer dataclass at 238fa995 (torchtitan/config/job_config.py L148): weight_decay 0.1.
DEFAULT_WEIGHT_DECAY: Final = 0.1
ROTATE_METHODS: Final = "allgather or alltoall"
CARVED_WHY: Final = (
    "default: torchtitan (since 83e69410, July 2025) makes the embedding and [final norm, head] FSDP2 units "
    "of their own"
)


def _loss_compiled(taker: Taker) -> bool:
    """Whether torchtitan compiles its loss: ``compile.components`` names "loss" (CompileConfig's
    default is ["model", "loss"], torchtitan/config/configs.py; the loss is compiled with
    training.compile since d1f62be7, torchtitan/components/loss.py at e7c0cae)."""
    components = taker.raw("compile.components")
    if components is None:
        components = ["model", "loss"]
    elif isinstance(components, str):
        components = [components]
    if not isinstance(components, list) or not all(isinstance(c, str) for c in components):
        raise taker.fail("compile.components", components, 'a list of names such as ["model", "loss"]')
    compiled = "loss" in components
    taker.record("compiled_loss", compiled, "compile.components")
    return compiled


# torchtitan's float8 recipe names (``Float8.recipe_name`` at 6fc499f6, ``Float8Linear.recipe_name`` at
# 238fa995: "tensorwise", "rowwise", "rowwise_with_gw_hp"; unset: tensorwise) as the plan's float8.
FLOAT8_RECIPES: Final = {"tensorwise": "tensorwise", "rowwise": "rowwise", "rowwise_with_gw_hp": "rowwise-gw-hp"}
# torchtitan's MX converter ("mx" at 6fc499f6, "quantize.linear.mx" at 238fa995; ``recipe_name`` default
# "mxfp8_cublas"): the recipes that run MX linears on Blackwell's block-scaled GEMM (torchao 0.13.0
# torchao/prototype/mx_formats/config.py ``from_recipe_name``; rceil rounds the scale differently).
MX_RECIPES: Final = {"mxfp8_cublas": "mxfp8", "mxfp8_cublas_rceil": "mxfp8"}
MX_DEFAULT_RECIPE: Final = "mxfp8_cublas"  # MXLinear.recipe_name's default at 238fa995 (job_config.py)


def _float8(taker: Taker) -> dict[str, Any]:
    """torchtitan's float8 converter (model.converters = ["float8"], or
    "quantize.linear.float8" in later releases): torchao's Float8Linear, tensorwise unless the
    float8 section names the rowwise recipe or rowwise_with_gw_hp, with its FSDP float8 all-gather
    (``enable_fsdp_float8_all_gather``, Float8Linear at 238fa995); or its MX converter ("mx",
    "quantize.linear.mx"): torchao's MXLinear (:data:`MX_RECIPES`)."""
    converters = taker.raw("model.converters")
    names = converters if isinstance(converters, list) else [converters] if converters else []
    short = {n.split(".")[-1] for n in names if isinstance(n, str)}
    if "mx" in short:
        return _mx(taker)
    if "float8" not in short:
        if converters is not None:
            taker.note("model.converters", "only the float8 and mx converters change the plan")
        return {}
    recipe = taker.word("float8.recipe_name") or taker.word("quantize.linear.float8.recipe_name")
    value = FLOAT8_RECIPES.get(recipe or "tensorwise", "tensorwise")
    taker.record("float8", value, "model.converters")
    found: dict[str, Any] = {"float8": value}
    for key in ("float8.enable_fsdp_float8_all_gather", "quantize.linear.float8.enable_fsdp_float8_all_gather"):
        gather = taker.flag(key, "fsdp_float8_all_gather")
        if gather is not None:
            found["fsdp_float8_all_gather"] = gather
    return found


def _mx(taker: Taker) -> dict[str, Any]:
    """torchtitan's MX converter and its recipe (default "mxfp8_cublas"); another recipe (emulated, mxfp4)
    is refused with the ones the plan has."""
    key = "quantize.linear.mx.recipe_name" if taker.has("quantize.linear.mx.recipe_name") else "mx.recipe_name"
    recipe = taker.word(key) or MX_DEFAULT_RECIPE
    if recipe not in MX_RECIPES:
        raise taker.fail(key, recipe, " or ".join(MX_RECIPES) + " (torchao's MX recipes the plan has)")
    taker.record("float8", MX_RECIPES[recipe], "model.converters")
    return {"float8": MX_RECIPES[recipe]}


def _step_keys(taker: Taker) -> dict[str, Any]:
    """What torchtitan's step does at 238fa995 (torchtitan/train.py): it clips the gradients every
    step (``dist_utils.clip_grad_norm_`` with ``training.max_norm``, default 1.0, no switch to turn
    it off), steps the optimizer in the backward with ``optimizer.early_step_in_backward``, and
    overlaps tensor-parallel communication with ``parallelism.enable_async_tensor_parallel``
    (torchtitan/distributed/tensor_parallel.py)."""
    s: dict[str, Any] = {"grad_clip": True}
    source = "training.max_norm" if taker.raw("training.max_norm") is not None else "default"
    taker.record("grad_clip", True, f"{source}: torchtitan clips the gradients every step")
    if taker.flag("optimizer.early_step_in_backward", "optimizer_in_backward"):
        s["optimizer_in_backward"] = True
    if taker.flag("parallelism.enable_async_tensor_parallel", "tp_overlap"):
        s["tp_overlap"] = True
    return s


def _rotate_method(taker: Taker) -> dict[str, Any]:
    """``parallelism.context_parallel_rotate_method`` (``Literal["allgather", "alltoall"] =
    "allgather"``, pytorch/torchtitan 000204a4 torchtitan/config/job_config.py Parallelism), which
    torchtitan hands to torch's ``set_rotate_method`` (``parallel.cp_rotate_method``). Read whether
    or not the file splits the context: the split itself is the plan's."""
    key = "parallelism.context_parallel_rotate_method"
    method = taker.word(key, ROTATE_METHODS)
    if method is None:
        return {}
    if method not in ("allgather", "alltoall"):
        raise taker.fail(key, method, ROTATE_METHODS)
    taker.record("cp_rotate_method", method, key)
    return {"cp_rotate_method": method}


IRRELEVANT: Final = (
    "job", "profiling", "metrics", "lr_scheduler", "checkpoint", "validation", "comm", "experimental",
    "optimizer.lr", "optimizer.eps", "optimizer.beta1", "optimizer.beta2",
    "training.steps", "training.dataset", "training.dataset_path", "training.seed",
    "training.deterministic", "model.tokenizer_path", "quantize", "fault_tolerance", "memory_estimation",
)  # fmt: skip


def _checkpointing(taker: Taker) -> dict[str, Any]:
    mode = taker.word("activation_checkpoint.mode", "none, full, selective or memory_budget")
    source = "activation_checkpoint.mode"
    if mode is None:
        mode, source = DEFAULT_AC_MODE, f"default: torchtitan's activation_checkpoint.mode is {DEFAULT_AC_MODE}"
    if mode == "none":
        taker.record("checkpointing", False, source)
        return {"checkpointing": False}
    if mode == "full":
        taker.record("checkpointing", True, source)
        taker.record("checkpoint_policy", "full", source)
        return {"checkpointing": True, "checkpoint_policy": "full"}
    if mode != "selective":
        if mode == "memory_budget":
            taker.note("activation_checkpoint.mode", "compiler memory-budget checkpointing is not modelled")
            return {}
        raise taker.fail("activation_checkpoint.mode", mode, "none, full, selective or memory_budget")
    option = taker.raw("activation_checkpoint.selective_ac_option")
    if isinstance(option, int) and not isinstance(option, bool):
        option = str(option)  # a TOML integer where torchtitan's dataclass wants the string
    opt_source = "activation_checkpoint.selective_ac_option"
    if option is None:
        option, opt_source = DEFAULT_AC_OPTION, f"default: torchtitan's selective_ac_option is {DEFAULT_AC_OPTION}"
    taker.record("checkpointing", True, source)
    if option == "op":
        taker.record("checkpoint_policy", "op", opt_source)
        return {"checkpointing": True, "checkpoint_policy": "op"}
    text = option.strip() if isinstance(option, str) else ""
    # ASCII digits only: "²".isdigit() is true and int("²") raises; four digits bound int().
    if not (text.isascii() and text.isdigit() and len(text) <= 4) or not 1 <= int(text) <= 1024:
        raise taker.fail("activation_checkpoint.selective_ac_option", option, '"op" or an integer from 1 to 1,024')
    taker.record("checkpoint_policy", "layer", opt_source)
    taker.record("checkpoint_every", int(text), opt_source)
    return {"checkpointing": True, "checkpoint_policy": "layer", "checkpoint_every": int(text)}


def _cpu_offload(taker: Taker) -> dict[str, Any]:
    """``training.enable_cpu_offload``: "CPU offloading of parameters, gradients, and optimizer states in
    FSDP" (torchtitan b5bcd76c, torchtitan/config/configs.py), the plan's parameter offload. The app's own
    torchtitan export writes the key; the reader listed it as not understood."""
    if not taker.flag("training.enable_cpu_offload"):
        return {}
    taker.record("offload", "params", "training.enable_cpu_offload")
    return {"offload": "params"}


def read_torchtitan(document: dict[str, Any], where: str) -> RunConfig:
    taker = Taker(document, where)
    odd = OddValues()
    s: dict[str, Any] = {"method": "full"}
    assets = taker.text("model.hf_assets_path")
    name, flavor = taker.text("model.name"), taker.text("model.flavor")
    model_ref = None
    if assets:
        model_ref = assets.rstrip("/").rsplit("/", 1)[-1]
        taker.record("model", model_ref, "model.hf_assets_path")
    elif name and flavor:
        model_ref = f"{name}-{flavor}"
        taker.record("model", model_ref, "model.name + model.flavor")
    taker.record("method", "full", "default: torchtitan trains every weight")
    s["micro_batch"] = taker.integer("training.local_batch_size", "micro_batch")
    s["seq_len"] = taker.integer("training.seq_len", "seq_len")
    optimizer = taker.word("optimizer.name", "an optimizer name such as AdamW")
    if optimizer is not None:
        if optimizer == "DistMuon":
            odd.add("optimizer.name", optimizer, "torchtitan's distributed Muon: not planned")
        elif optimizer not in OPTIMIZERS:
            raise taker.fail("optimizer.name", optimizer, f"Adam or AdamW ({TORCHTITAN_RULE})")
        else:
            s["optimizer"] = OPTIMIZERS[optimizer]
            taker.record("optimizer", s["optimizer"], "optimizer.name")
    impl = taker.word("optimizer.implementation", "fused, foreach or for-loop")
    if impl is not None and impl not in IMPLEMENTATIONS:
        raise taker.fail("optimizer.implementation", impl, "fused, foreach or for-loop")
    s["optimizer_impl"] = IMPLEMENTATIONS[impl or "fused"]
    source = "optimizer.implementation" if impl else "default: torchtitan's optimizer.implementation is fused"
    taker.record("optimizer_impl", s["optimizer_impl"], source)
    s.update(recipe_numbers(taker, None, None, "optimizer.weight_decay"))
    if "weight_decay" not in s:
        s["weight_decay"] = DEFAULT_WEIGHT_DECAY
        taker.record("weight_decay", DEFAULT_WEIGHT_DECAY, "default: torchtitan's optimizer.weight_decay is 0.1")
    s.update(_checkpointing(taker))
    shard = taker.integer("parallelism.data_parallel_shard_degree", None, -1, 1_000_000)
    if shard is not None and shard != 1:
        s["sharding"] = "fsdp"
        taker.record("sharding", "fsdp", "parallelism.data_parallel_shard_degree")
    # torchtitan's FSDP2 wrap has carved the ends since 83e69410 (2025-07-28, "Improve reshard_after_forward
    # logic"; torchtitan/distributed/fsdp.py apply_fsdp_to_decoder at b5bcd76c): the keys this reader takes
    # are that era's, and no key chooses the wrap.
    s["fsdp_units"] = "carved"
    taker.record("fsdp_units", "carved", CARVED_WHY)
    for key in (
        "tensor_parallel_degree",
        "pipeline_parallel_degree",
        "context_parallel_degree",
        "expert_parallel_degree",
    ):
        if taker.raw(f"parallelism.{key}") not in (None, 1):  # 1: no split, nothing to say
            taker.note(f"parallelism.{key}", "set the split in the plan's Parallelism section")
    if taker.raw("parallelism.data_parallel_replicate_degree") not in (None, 1):
        hsdp = shard is not None and shard != 1  # replicas of FSDP2's shards (torchtitan b5bcd76 fsdp.py)
        why = "HSDP: set the GPU count, then HSDP replicas in the Parallelism section" if hsdp else ""
        taker.note("parallelism.data_parallel_replicate_degree", why or "set the GPU count in the Parallelism section")
    s.update(_cpu_offload(taker))
    taker.note("training.mixed_precision_param", "FSDP2's parameter dtype: set it in the Parallelism section")
    taker.note("training.mixed_precision_reduce", "FSDP2's reduce dtype: set it in the Parallelism section")
    taker.note("training.dtype", "bfloat16 keeps parameters, gradients and optimizer states in bf16 with no "
               "float32 copy: set the precision (pure bf16) in the Method section")  # fmt: skip
    taker.note("training.global_batch_size", "gradient accumulation follows from it and the data-parallel degree")
    if taker.flag("compile.enable"):  # torch.compile: the blocks save less (core.training.activations)
        s["stack"] = "compile"
        taker.record("stack", "compile", "compile.enable")
        s["compiled_loss"] = _loss_compiled(taker)
    s.update(_float8(taker))
    s.update(_step_keys(taker))
    s.update(_rotate_method(taker))
    taker.irrelevant(*IRRELEVANT, "compile.components", "activation_checkpoint.preserve_rng_state", "model.name")
    taker.irrelevant("model.flavor", "model.hf_assets_path", "parallelism")
    return finish(ConfigKind.TORCHTITAN, taker, odd, model_ref, s)
