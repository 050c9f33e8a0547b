"""Run the training steps of one accuracy case and record its memory peak.

Backends:
  cuda       real GPU; torch.cuda.max_memory_allocated / max_memory_reserved, with a
             MemTracker alongside for the breakdown at the tracker's peak.
  fake-cuda  CPU-only torch: FakeTensorMode on device "cuda" (fake_cuda.cpp shim must be
             preloaded), MemTracker models the caching allocator's 512-byte rounding.
  cpu        real CPU tensors, MemTracker accounting (used by selfcheck).
  fake-cpu   FakeTensorMode on device "cpu", MemTracker accounting (used by selfcheck).
Import this module only after the backend's preconditions are set (see __main__.py).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import platform
import time
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType
from torch.distributed._tools.mod_tracker import ModTracker

from . import sdpa as sdpa_mod

REPO = Path(__file__).resolve().parents[2]
MODELS_JSON = REPO / "resources" / "models.json"
FALLBACK_JSON = Path(__file__).with_name("_fallback_configs.json")

PHASES = ("forward", "backward", "optimizer")
_CAT = {
    _MemRefType.PARAM: "parameters",
    _MemRefType.BUFFER: "buffers",
    _MemRefType.GRAD: "gradients",
    _MemRefType.OPT: "optimizer_state",
    _MemRefType.ACT: "activations",
    _MemRefType.TEMP: "temporary",
    _MemRefType.OTH: "other",
}
BREAKDOWN_KEYS = ("parameters", "buffers", "gradients", "optimizer_state", "activations", "temporary", "other")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
OPTIMIZER_IMPLS = ("foreach", "fused", "forloop")


def resolve_knobs(case: dict[str, Any]) -> dict[str, Any]:
    """The precision roles and optimizer implementation a case runs with.

    Keys absent from a case keep what the old `precision` field meant, so every case
    measured before these keys existed runs exactly as it did:
      precision "fp32"        -> fp32 weights, no autocast
      precision "bf16"        -> weights converted to bf16 after an fp32 build, no autocast
      precision "bf16-mixed"  -> fp32 weights, bf16 autocast
      precision "fp16-mixed"  -> fp32 weights, fp16 autocast + GradScaler
    `weight_dtype` (when present) is the dtype the model is built in (from_pretrained's
    dtype), `adapter_dtype` "fp32" is PEFT's autocast_adapter_dtype=True (its default),
    `optimizer_impl` absent = "foreach" (what torch.optim picks on CUDA, and what every old
    case measured).
    """
    precision = str(case.get("precision", "fp32"))
    legacy_weight = {"bf16": "bf16", "fp16": "fp16"}.get(precision, "fp32")
    weight = case.get("weight_dtype") or legacy_weight
    if "autocast" in case:
        autocast = case["autocast"]
    else:
        autocast = {"bf16-mixed": "bf16", "fp16-mixed": "fp16"}.get(precision)
    knobs = {
        "weight_dtype": weight,
        "built_in_weight_dtype": "weight_dtype" in case,
        "adapter_dtype": case.get("adapter_dtype") or "fp32",
        "autocast": autocast,
        "grad_scaler": bool(case.get("grad_scaler", autocast == "fp16")),
        "optimizer_impl": case.get("optimizer_impl") or "foreach",
    }
    for key in ("weight_dtype", "adapter_dtype"):
        if knobs[key] not in DTYPES:
            raise ValueError(f"{key}={knobs[key]!r}: expected one of {', '.join(DTYPES)}")
    if knobs["autocast"] not in (None, "bf16", "fp16"):
        raise ValueError(f"autocast={knobs['autocast']!r}: expected null, 'bf16' or 'fp16'")
    if knobs["optimizer_impl"] not in OPTIMIZER_IMPLS:
        raise ValueError(f"optimizer_impl={knobs['optimizer_impl']!r}: expected one of {', '.join(OPTIMIZER_IMPLS)}")
    return knobs


# --------------------------------------------------------------------------- configs
def load_model_configs() -> dict[str, dict[str, Any]]:
    path = MODELS_JSON if MODELS_JSON.exists() else FALLBACK_JSON
    data = json.loads(path.read_text())
    models = data["models"] if isinstance(data, dict) else data
    return {m["id"]: m["config"] for m in models}


# --------------------------------------------------------------------------- tracker
class _PhaseStats:
    """Per (step, phase) device peaks and the breakdown at the overall peak, for a
    MemTracker subclass. `_cat` maps the tracker's reference types to breakdown keys.

    Allocations made inside optimizer.step() are labelled with the tracker's OPT type;
    at a peak we split that label into real optimizer state (tensors held in
    optimizer.state) and temporaries (e.g. the extra param-sized buffer of foreach AdamW).
    With `record_phase_breakdowns`, the breakdown at each (step, phase) peak is kept too.
    """

    _cat: dict[Any, str] = _CAT
    _breakdown_keys: tuple[str, ...] = BREAKDOWN_KEYS
    _opt_ref: Any = _MemRefType.OPT
    _curr_mem_snap: dict
    _WINFO: Any

    def _init_phase_stats(self, device: torch.device) -> None:
        self.device_type = device.type
        self.step = 0
        self.phase = "setup"
        self.phase_peaks: dict[str, dict[str, int]] = {}
        self.peak_bytes = 0
        self.peak_at: tuple[int, str] = (0, "setup")
        self.peak_breakdown: dict[str, int] = dict.fromkeys(self._breakdown_keys, 0)
        self.optimizer: torch.optim.Optimizer | None = None
        self.record_phase_breakdowns = False
        self.phase_breakdowns: dict[str, dict[str, dict[str, int]]] = {}

    def _dev_snap(self) -> dict | None:
        for dev, snap in self._curr_mem_snap.items():
            if dev.type == self.device_type:
                return snap
        return None

    def current_bytes(self) -> int:
        snap = self._dev_snap()
        return int(snap["Total"]) if snap else 0

    def set_phase(self, step: int, phase: str) -> None:
        self.step, self.phase = step, phase
        self.phase_peaks.setdefault(f"step{step}", {})[phase] = self.current_bytes()
        if self.record_phase_breakdowns:
            self.phase_breakdowns.setdefault(f"step{step}", {})[phase] = self._breakdown(self._dev_snap())
        self._update_peak_stats(None)

    def _opt_state_bytes(self) -> int:
        if self.optimizer is None:
            return 0
        total = 0
        seen = set()
        for st in self.optimizer.state.values():
            for v in st.values():
                if isinstance(v, torch.Tensor):
                    v = getattr(v, "_local_tensor", v)  # DTensor state (FSDP2): its local shard
                if isinstance(v, torch.Tensor) and v.device.type == self.device_type:
                    s = v.untyped_storage()
                    if id(s) in seen:
                        continue
                    seen.add(id(s))
                    winfo, _ = self._WINFO.get(s, (None, None))
                    if winfo is not None and winfo.reftype == self._opt_ref:
                        total += winfo.mem_consumed
        return total

    def _breakdown(self, snap: dict | None) -> dict[str, int]:
        bd = dict.fromkeys(self._breakdown_keys, 0)
        if snap:
            for ref, key in self._cat.items():
                bd[key] += int(snap.get(ref, 0))
        if self.phase == "optimizer" and bd["optimizer_state"]:
            state = min(self._opt_state_bytes(), bd["optimizer_state"])
            bd["temporary"] += bd["optimizer_state"] - state
            bd["optimizer_state"] = state
        return bd

    def _update_peak_stats(self, peak_state) -> None:
        snap = self._dev_snap()
        total = int(snap["Total"]) if snap else 0
        if self.step:
            pp = self.phase_peaks.setdefault(f"step{self.step}", {})
            if total > pp.get(self.phase, -1):
                pp[self.phase] = total
                if self.record_phase_breakdowns:
                    self.phase_breakdowns.setdefault(f"step{self.step}", {})[self.phase] = self._breakdown(snap)
        if total > self.peak_bytes:
            self.peak_bytes = total
            self.peak_at = (self.step, self.phase)
            self.peak_breakdown = self._breakdown(snap)


class StepModTracker(ModTracker):
    """torch 2.13's ModTracker without the hooks it puts on each module's inputs for the module's post-backward.

    ModTracker's forward pre-hook calls ``register_multi_grad_hook(inputs, pop, mode="all")``
    (torch/distributed/_tools/mod_tracker.py, ``_fw_pre_hook``). That hook's closure holds the inputs' grad_fn
    nodes (``grad_fns`` in torch/autograd/graph.py) and is itself held by those nodes (a tensor hook lives on its
    grad_fn): a cycle through C++ that Python's collector does not break while the node has another owner
    (torch only traverses a C++ node's hooks when the Python wrapper is its sole owner). Under
    non-reentrant checkpointing the nodes it keeps reach each checkpointed block's frame and, through it, the
    block's saved input, so a tracked step kept B·S·d tensors an untracked run frees: past its end into the next
    step (a checkpointed hybrid's step 2 then held 3 × B·S·d more than step 1 and the optimizer's moments), and,
    in its backward, gradients the hook buffers until every input's gradient has arrived.

    Here the post-backward pop of every module is queued to run when its backward ends (the path torch already
    takes for a module none of whose inputs needs a gradient), so no hook holds a node or a gradient. Nothing
    this package reads changes: ``PhaseMemTracker`` keeps no per-module statistics, ``is_bw`` reads the graph
    task, activation-checkpoint recomputation is still seen by the pre- and post-forward hooks, and the
    parameters' gradient hooks are installed as before (``tools.measure.selfcheck`` checks a tracked run against
    an untracked one to the byte).
    """

    def _fw_pre_hook(self, mod: torch.nn.Module, input: Any) -> None:
        if torch._dynamo.eval_frame._is_in_optimized_module():
            return
        name = self._get_mod_name(mod)
        w_mod = weakref.ref(mod)
        self._get_append_fn(w_mod, name, False)()
        if self._user_pre_fw_hook is not None:
            self._user_pre_fw_hook(mod, input)
        if not self.is_bw:
            self._post_bw_callbacks_to_enqueue.append(self._get_pop_fn(w_mod, name, True))


def use_step_mod_tracker(tracker: MemTracker) -> None:
    """Give a MemTracker (or torch's FSDPMemTracker) the StepModTracker, before it is entered."""
    tracker._mod_tracker = StepModTracker()


class PhaseMemTracker(_PhaseStats, MemTracker):
    """MemTracker that keeps only the device totals we need, per (step, phase).

    The stock module-level bookkeeping is skipped (it costs O(modules) per op), and its module tracker registers
    no post-backward hooks on module inputs (StepModTracker: they kept tensors alive that a run without the
    tracker frees).
    """

    def __init__(self, device: torch.device) -> None:
        MemTracker.__init__(self)
        use_step_mod_tracker(self)
        self._init_phase_stats(device)

    def _track_module_params_and_buffers(
        self, module: torch.nn.Module, install_grad_hooks: bool = True
    ) -> tuple[int, int]:
        # Stock MemTracker registers grad hooks on every parameter, which raises for frozen
        # ones (requires_grad=False): hook only the trainable parameters.
        def _grad_hook(grad: torch.Tensor) -> None:
            self._update_and_maybe_create_winfos(grad, _MemRefType.GRAD)

        param_memory = 0
        for param in module.parameters():
            winfos = self._update_and_maybe_create_winfos(param, _MemRefType.PARAM)
            param_memory += sum(w.mem_consumed for w in winfos)
            if param.grad is not None:
                self._update_and_maybe_create_winfos(param.grad, _MemRefType.GRAD)
            if install_grad_hooks and param.requires_grad and self._param_to_grad_hook_handles.get(param) is None:
                self._param_to_grad_hook_handles[param] = (
                    param.register_hook(_grad_hook),
                    param.register_post_accumulate_grad_hook(lambda p: _grad_hook(p.grad)),
                )
        buffer_memory = 0
        for buffer in module.buffers():
            winfos = self._update_and_maybe_create_winfos(buffer, _MemRefType.BUFFER)
            buffer_memory += sum(w.mem_consumed for w in winfos)
        return param_memory, buffer_memory


# --------------------------------------------------------------------------- helpers
@contextlib.contextmanager
def _patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@contextlib.contextmanager
def fake_tensor_environment() -> Iterator[None]:
    """Make library code treat fake tensors as the real data they stand for.

    * transformers' masking code counts FakeTensors as "tracing" and then materialises a
      4-D mask instead of using SDPA's is_causal; a real GPU run would skip the mask.
    * Module._apply (used by .to() in PEFT) must not swap fake parameters (see below)."""
    import transformers.masking_utils as mu
    from transformers.utils import import_utils as iu

    def is_tracing(tensor=None) -> bool:  # transformers' is_tracing minus the FakeTensor test
        return bool(
            iu.is_torchdynamo_compiling()
            or iu.is_jit_tracing()
            or (tensor is not None and iu.is_torch_fx_proxy(tensor))
        )

    def find_packed_sequence_indices(position_ids: torch.Tensor) -> None:
        # Same tensor ops as transformers', but the data-dependent ".all()" cannot run on
        # fake tensors: the models build position_ids = arange (one sequence per row), so
        # the real answer is always None (no packing -> no materialised mask).
        first = position_ids[:, :1] - 1
        packed = (torch.diff(position_ids, prepend=first, dim=-1) != 1).cumsum(-1)
        (packed[:, -1] == 0).all()
        return None

    with contextlib.ExitStack() as st:
        st.enter_context(_patched(mu, "is_tracing", is_tracing))
        st.enter_context(_patched(mu, "find_packed_sequence_indices", find_packed_sequence_indices))
        st.enter_context(_patched(torch.utils, "swap_tensors", _swap_tensors_fake_ok))
        yield


_META_LIB: Any = None


def _register_missing_meta_kernels() -> None:
    """aten::_fused_sgd_ has no Meta kernel in torch 2.13 (its AdamW/Adam siblings do).
    It only writes into tensors it is given (params, grads, momentum buffers, all
    allocated in Python beforehand), and the CUDA kernel allocates nothing, so a Meta
    kernel that does nothing has the same memory effect."""
    global _META_LIB
    if _META_LIB is not None or torch._C._dispatch_has_kernel_for_dispatch_key("aten::_fused_sgd_", "Meta"):
        return
    _META_LIB = torch.library.Library("aten", "IMPL")
    for overload in ("_fused_sgd_", "_fused_sgd_.tensor_lr"):
        _META_LIB.impl(overload, lambda *args, **kwargs: None, "Meta")


_CUDA_LIB: Any = None
# Ops whose native_functions.yaml entry has CPU and CUDA kernels beside a CompositeImplicitAutograd one
# (math_silu_backward, math_mish_backward in aten/src/ATen/native/Activation.cpp): a CPU-only build registers no
# CUDA kernel, so the dispatcher runs the composite for CUDA tensors above every TorchDispatchMode.
_CUDA_KERNELS_ON_A_GPU = ("silu_backward", "mish_backward")


def _register_missing_cuda_kernels() -> None:
    """Fake CUDA on a CPU-only torch 2.13 ran SiLU's backward as its composite (sigmoid, 1 - s, x·(1 - s) + 1,
    two products: five tensors the size of the input, where a GPU's silu_backward makes one), because a CPU-only
    build has no CUDA kernel for it and the dispatcher then takes the CompositeImplicitAutograd kernel before any
    mode sees the op. Registering a CUDA kernel restores the one op; FakeTensorMode answers it (its meta kernel)
    before the kernel is reached, so the kernel is never run (it refuses, should a real tensor ever get there).
    Only these two ops of the build have a CPU kernel and a composite without a CUDA one and a CUDA kernel on a
    GPU build (native_channel_shuffle, the third, has none on a GPU either: left alone)."""
    global _CUDA_LIB
    if _CUDA_LIB is not None:
        return
    _CUDA_LIB = torch.library.Library("aten", "IMPL")

    def _not_on_a_cpu_build(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tools.measure fake CUDA: this CUDA kernel stands in for the GPU's, it does not run")

    for name in _CUDA_KERNELS_ON_A_GPU:
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "CUDA"):
            _CUDA_LIB.impl(name, _not_on_a_cpu_build, "CUDA")


@contextlib.contextmanager
def fake_cuda_environment() -> Iterator[None]:
    """Python-level pieces of the fake GPU: autocast("cuda") allowed (it switches itself
    off when CUDA looks unavailable), SDPA routed like sm80/sm90, SiLU's backward one op."""
    _register_missing_meta_kernels()
    _register_missing_cuda_kernels()
    with contextlib.ExitStack() as st:
        st.enter_context(_patched(torch.cuda.amp.common, "amp_definitely_not_available", lambda: False))
        st.enter_context(_patched(torch.cuda, "is_bf16_supported", lambda *a, **k: True))
        # transformers' MoE experts pick torch's grouped_mm on sm80+ (H100 = sm90); the CPU
        # build cannot answer the capability question itself.
        st.enter_context(_patched(torch.cuda, "get_device_capability", lambda *a, **k: (9, 0)))
        st.enter_context(sdpa_mod.patched_sdpa())
        yield


def _swap_tensors_fake_ok(t1: torch.Tensor, t2: torch.Tensor) -> None:
    """torch.utils.swap_tensors, falling back to `.data =` for fake tensors.

    Module._apply always swaps FakeTensor parameters, and swapping refuses tensors with
    weakrefs (FakeTensorMode keeps some), so PEFT's adapter .to() calls would fail."""
    try:
        _ORIG_SWAP(t1, t2)
    except RuntimeError as e:
        if "weakref" not in str(e):
            raise
        t1.data = t2.detach()


_ORIG_SWAP = torch.utils.swap_tensors


def _to_device_inplace(
    model: torch.nn.Module, device: torch.device | None = None, dtype: torch.dtype | None = None
) -> None:
    """Move parameters/buffers to `device` by replacing them (keeps ties and requires_grad).

    Module.to() cannot be used on fake tensors on a CPU build (swap_tensors refuses the
    fake tensors' weakrefs), so each Parameter is rebuilt with empty_like on the device.
    """
    memo: dict[int, torch.Tensor] = {}
    for mod in model.modules():
        for name, p in list(mod._parameters.items()):
            if p is None:
                continue
            if id(p) not in memo:
                dt = dtype if dtype is not None and p.is_floating_point() else p.dtype
                memo[id(p)] = torch.nn.Parameter(
                    torch.empty_strided(p.shape, p.stride(), device=device or p.device, dtype=dt),
                    requires_grad=p.requires_grad,
                )
            mod._parameters[name] = memo[id(p)]
        for name, b in list(mod._buffers.items()):
            if b is None:
                continue
            if id(b) not in memo:
                dt = dtype if dtype is not None and b.is_floating_point() else b.dtype
                # empty_strided (a factory), not empty_like: some buffers are real constant tensors
                memo[id(b)] = torch.empty_strided(b.shape, b.stride(), device=device or b.device, dtype=dt)
            mod._buffers[name] = memo[id(b)]


def _param_stats(model: torch.nn.Module) -> dict[str, Any]:
    total = trainable = nbytes = tbytes = 0
    dtypes: dict[str, int] = {}
    seen: set[int] = set()
    for p in model.parameters():  # parameters() de-duplicates tied weights
        if id(p) in seen:
            continue
        seen.add(id(p))
        n = p.numel()
        b = n * p.element_size()
        total += n
        nbytes += b
        dtypes[str(p.dtype)] = dtypes.get(str(p.dtype), 0) + n
        if p.requires_grad:
            trainable += n
            tbytes += b
    return {"total": total, "trainable": trainable, "bytes": nbytes, "trainable_bytes": tbytes, "dtypes": dtypes}


def _freeze_first_layers(model: torch.nn.Module, n: int) -> None:
    """requires_grad=False on token/position embeddings and the first n transformer blocks."""
    base = model.get_decoder() if hasattr(model, "get_decoder") else model
    for attr in ("embed_tokens", "wte", "wpe", "embed_positions"):
        emb = getattr(base, attr, None)
        if isinstance(emb, torch.nn.Module):
            for p in emb.parameters():
                p.requires_grad_(False)
    layers = getattr(base, "layers", None) or getattr(base, "h", None)
    if layers is None:
        raise ValueError(f"cannot find transformer blocks in {type(base).__name__}")
    if n > len(layers):
        raise ValueError(f"frozen_layers={n} > {len(layers)} blocks")
    for blk in list(layers)[:n]:
        for p in blk.parameters():
            p.requires_grad_(False)


def _apply_lora(
    model: torch.nn.Module, lcfg: dict[str, Any], dora: bool = False, adapter_dtype: str = "fp32"
) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(
        r=int(lcfg.get("rank", 8)),
        lora_alpha=int(lcfg.get("alpha", 16)),
        target_modules=list(lcfg.get("targets", ["q_proj", "v_proj"])),
        lora_dropout=float(lcfg.get("dropout", 0.0)),
        bias="none",
        task_type="CAUSAL_LM",
        use_dora=dora,
    )
    # autocast_adapter_dtype=True (PEFT's default) stores adapters in fp32 on a bf16/fp16
    # base; False leaves them in the base's dtype (litgpt's bf16-true keeps them so).
    if adapter_dtype not in ("fp32", "bf16", "fp16"):
        raise ValueError(f"adapter_dtype={adapter_dtype!r}")
    return get_peft_model(model, cfg, autocast_adapter_dtype=adapter_dtype == "fp32")


def _build(case: dict[str, Any], config: dict[str, Any], fake: bool) -> torch.nn.Module:
    from transformers import AutoConfig, AutoModelForCausalLM

    knobs = resolve_knobs(case)
    cfg = AutoConfig.for_model(**config)
    # New cases (weight_dtype given) are built in that dtype, as from_pretrained(dtype=...)
    # loads them; old ones keep their fp32 build + conversion, byte for byte.
    build_dtype = DTYPES[knobs["weight_dtype"]] if knobs["built_in_weight_dtype"] else torch.float32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_config(
            cfg, attn_implementation=case.get("attention", "sdpa"), dtype=build_dtype
        )
    if not knobs["built_in_weight_dtype"] and knobs["weight_dtype"] != "fp32":
        target = DTYPES[knobs["weight_dtype"]]
        if fake:  # Module.to() cannot swap fake tensors; same effect as model.to(torch.bfloat16)
            _to_device_inplace(model, dtype=target)
        else:
            model.to(target)
    method = case["method"]
    if method in ("lora", "dora"):
        model = _apply_lora(model, case.get("lora") or {}, dora=method == "dora", adapter_dtype=knobs["adapter_dtype"])
    elif method == "frozen":
        _freeze_first_layers(model, int(case.get("frozen_layers", 0)))
    elif method != "full":
        raise ValueError(f"unknown method {method!r}")
    return model


def _make_optimizer(
    case: dict[str, Any], params: list[torch.nn.Parameter], device: torch.device
) -> torch.optim.Optimizer:
    # PyTorch's default on CUDA is the foreach implementation (fused=False). Fake tensors are
    # not of the types _default_to_fused_or_foreach accepts, so the default would silently be
    # the for-loop: pass foreach explicitly = what a real CUDA run picks. CPU default: for-loop.
    # optimizer_impl chooses explicitly: foreach (absent = foreach), fused, or forloop.
    impl = resolve_knobs(case)["optimizer_impl"]
    if device.type != "cuda":
        kw: dict[str, Any] = {"foreach": False}
    elif impl == "foreach":
        kw = {"foreach": True}
    elif impl == "fused":
        kw = {"fused": True}
    else:
        kw = {"foreach": False, "fused": False}
    name = case["optimizer"]
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, **kw)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-4, **kw)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-4, momentum=0.9, **kw)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-4, **kw)
    raise ValueError(f"unknown optimizer {name!r}")


class _FakeSafeGradScaler(torch.amp.GradScaler):
    """GradScaler whose step does not read found_inf back (.item() has no value on a fake
    tensor). The kernels (scale, unscale + inf check, update) still run; a finite step, what
    a healthy run does, then always steps."""

    def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):  # type: ignore[no-untyped-def]
        return optimizer.step(*args, **kwargs)


def versions() -> dict[str, str]:
    import peft
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _enter_backend(stack: contextlib.ExitStack, backend: str) -> tuple[bool, torch.device]:
    """Enter the backend's contexts (fake tensors, fake CUDA); return (fake, device)."""
    fake = backend in ("fake-cuda", "fake-cpu")
    device = torch.device("cuda" if backend in ("cuda", "fake-cuda") else "cpu")
    sdpa_mod.CHOICES.clear()
    sdpa_mod.MASKED_CALLS.clear()
    torch.manual_seed(0)
    if fake:
        stack.enter_context(FakeTensorMode(allow_non_fake_inputs=False))
        stack.enter_context(fake_tensor_environment())
    if backend == "fake-cuda":
        stack.enter_context(fake_cuda_environment())
    return fake, device


def _place(model: torch.nn.Module, device: torch.device, fake: bool) -> None:
    if fake and device.type == "cuda":
        _to_device_inplace(model, device)
    elif device.type == "cuda":
        model.to(device)


def _token_ids(b: int, s: int, vocab: int, device: torch.device, fake: bool) -> torch.Tensor:
    """Zeros on fake backends (values do not exist there), random tokens on real ones."""
    if fake:
        return torch.zeros((b, s), dtype=torch.long, device=device)
    return torch.randint(0, vocab, (b, s), device=device)


# --------------------------------------------------------------------------- main entry
def _enable_checkpointing(model: torch.nn.Module, fake: bool) -> None:
    # preserve_rng_state would call torch.cuda.get_rng_state (absent on a CPU build);
    # the RNG state is a few bytes of host memory, so the peak is unaffected.
    kw = {"use_reentrant": False}
    if fake:
        kw["preserve_rng_state"] = False
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
    model.config.use_cache = False


def _enable_selective(model: torch.nn.Module, fake: bool, policy: str, every: int) -> None:
    """torchtitan's selective activation checkpointing on a HF model (pytorch/torchtitan
    commit 1f029641, torchtitan/distributed/activation_checkpoint.py ``_apply_op_sac`` /
    ``_apply_layer_sac``, with llama3/parallelize.py's ``_op_sac_save_list``).

    ``op``: every block checkpointed with ``context_fn`` = selective contexts whose policy
    saves the outputs of the listed ops except every second mm (counted per block, per
    forward / recompute), and recomputes the rest. ``layer``: the blocks whose 1-based
    index is a multiple of ``every`` are fully checkpointed, the others not at all.
    """
    from collections import defaultdict
    from functools import partial

    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    kw: dict[str, Any] = {"use_reentrant": False}
    if fake:
        kw["preserve_rng_state"] = False
    if policy == "op":
        aten = torch.ops.aten
        save = {
            aten.mm.default,
            aten.linear.default,
            aten._scaled_dot_product_efficient_attention.default,
            aten._scaled_dot_product_flash_attention.default,
            aten._scaled_dot_product_cudnn_attention.default,
            aten._scaled_dot_product_attention_math.default,
            aten._scaled_dot_product_fused_attention_overrideable.default,
            torch.ops._c10d_functional.reduce_scatter_tensor.default,
            aten.max.default,
        }
        mm_ops = (aten.mm.default, aten.linear.default)

        def _policy(meta: dict[str, int], ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            key = "recompute_mm_count" if ctx.is_recompute else "forward_mm_count"
            if func in mm_ops:
                meta[key] += 1
            to_save = func in save and not (func in mm_ops and meta[key] % 2 == 0)
            return CheckpointPolicy.MUST_SAVE if to_save else CheckpointPolicy.PREFER_RECOMPUTE

        def _context_fn() -> Any:
            return create_selective_checkpoint_contexts(partial(_policy, defaultdict(int)))

        kw["context_fn"] = _context_fn
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
    model.config.use_cache = False
    if policy == "layer":
        blocks = [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]
        for i, block in enumerate(blocks, start=1):
            block.gradient_checkpointing = i % every == 0


class _CudaMarks:
    """Per-phase torch.cuda.max_memory_allocated on a real GPU (no-op elsewhere)."""

    def __init__(self, backend: str) -> None:
        self.on = backend == "cuda"
        self.phase: dict[str, dict[str, int]] = {}
        self.peak_step: tuple[int, str] | None = None
        self.running_max = 0

    def start(self) -> None:
        if self.on:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()

    def __call__(self, step: int, phase: str) -> None:
        if not self.on:
            return
        torch.cuda.synchronize()
        m = torch.cuda.max_memory_allocated()
        self.phase.setdefault(f"step{step}", {})[phase] = m
        if m > self.running_max:
            self.running_max, self.peak_step = m, (step, phase)
        torch.cuda.reset_peak_memory_stats()


def _train_steps(
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    ids: torch.Tensor,
    tracker: Any,
    knobs: dict[str, Any],
    device: torch.device,
    fake: bool,
    backend: str,
    marks: _CudaMarks,
    before_forward: Any = None,
) -> None:
    """The two measured training steps (forward, backward, optimizer) under `tracker`."""
    autocast = (
        torch.autocast(device.type, dtype=DTYPES[knobs["autocast"]]) if knobs["autocast"] else contextlib.nullcontext()
    )
    scaler = None
    if knobs["grad_scaler"]:
        scaler = (_FakeSafeGradScaler if fake else torch.amp.GradScaler)(device.type)
    ws_ctx = sdpa_mod.KernelWorkspaceMode() if backend == "fake-cuda" else contextlib.nullcontext()
    # Python's cyclic collector is off during the steps (and run at each step's end): a
    # reference cycle that holds tensors then lives until the step ends, whenever the
    # collector would have run. Without this the peak depended on how many Python objects
    # earlier code had allocated (fake and real runs differed). The cycles seen were torch's
    # ModTracker hooks' (around PEFT's DoRA forward too); StepModTracker makes none (NOTES.md).
    with tracker, ws_ctx, _cyclic_gc_paused():
        for step in (1, 2):
            if step == 2:
                tracker.reset_mod_stats()
            tracker.set_phase(step, "forward")
            if before_forward is not None:
                before_forward(step)
            with autocast:
                out = model(input_ids=ids, labels=ids)
                loss = out.loss
            del out  # like HF Trainer: only the loss outlives the forward
            marks(step, "forward")
            tracker.set_phase(step, "backward")
            if scaler is not None:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            del loss
            marks(step, "backward")
            tracker.set_phase(step, "optimizer")
            if scaler is not None:  # fp16 AMP as HF Trainer runs it: unscale (for clipping), step, update
                scaler.unscale_(opt)
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            opt.zero_grad(set_to_none=True)
            marks(step, "optimizer")
            gc.collect()


def _peak_fields(tracker: Any, backend: str, marks: _CudaMarks) -> dict[str, Any]:
    if backend == "cuda":
        peak_step, peak_phase = marks.peak_step or (1, "forward")
        return {
            "peak_allocated_bytes": int(marks.running_max),
            "peak_reserved_bytes": int(torch.cuda.max_memory_reserved()),
            "peak_step": peak_step,
            "peak_phase": peak_phase,
            "breakdown_at_peak": tracker.peak_breakdown,
            "phase_peaks": marks.phase,
        }
    return {
        "peak_allocated_bytes": int(tracker.peak_bytes),
        "peak_reserved_bytes": None,
        "peak_step": int(tracker.peak_at[0]),
        "peak_phase": tracker.peak_at[1],
        "breakdown_at_peak": tracker.peak_breakdown,
        "phase_peaks": {k: {p: int(v.get(p, 0)) for p in PHASES} for k, v in tracker.phase_peaks.items()},
    }


def prepared_model(case: dict[str, Any], config: dict[str, Any], fake: bool, device: torch.device) -> torch.nn.Module:
    """The case's model built, placed on the device, checkpointed as the case says and in training mode (inside
    the backend's contexts): what measure_case runs (tools/measure/hybrid_live.py traces the same model)."""
    model = _build(case, config, fake)
    _place(model, device, fake)
    if case.get("checkpointing") and case.get("checkpoint_policy", "full") != "full":
        _enable_selective(model, fake, str(case["checkpoint_policy"]), int(case.get("checkpoint_every", 1)))
    elif case.get("checkpointing"):
        _enable_checkpointing(model, fake)
    model.train()
    return model


def measure_case(case: dict[str, Any], config: dict[str, Any], backend: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run two training steps; return (measurement JSON dict, diagnostics)."""
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        fake, device = _enter_backend(stack, backend)
        model = prepared_model(case, config, fake, device)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = _make_optimizer(case, params, device)

        # An image-text wrapper (Qwen3.5's qwen3_5) keeps the vocabulary in text_config; AutoModelForCausalLM builds
        # its text decoder alone (Qwen3_5ForCausalLM).
        vocab = int(config.get("vocab_size") or config.get("text_config", {})["vocab_size"])
        ids = _token_ids(int(case["micro_batch"]), int(case["seq_len"]), vocab, device, fake)

        marks = _CudaMarks(backend)
        marks.start()
        tracker = PhaseMemTracker(device)
        tracker.optimizer = opt
        tracker.track_external(model, opt, ids)
        knobs = resolve_knobs(case)
        _train_steps(model, opt, ids, tracker, knobs, device, fake, backend, marks)

        result: dict[str, Any] = {
            "format": "vramplan-measurement",
            "version": 1,
            "case": case,
            "resolved": {k: v for k, v in resolve_knobs(case).items() if k != "built_in_weight_dtype"},
            "model_config": config,
            "backend": backend,
            "versions": versions(),
            "device_name": _device_name(backend),
            "parameters": _param_stats(model),
        }
        result.update(_peak_fields(tracker, backend, marks))
        result["wall_seconds"] = round(time.perf_counter() - t0, 2)
        diag = {"sdpa_kernels": dict(sdpa_mod.CHOICES), "sdpa_masked_calls": dict(sdpa_mod.MASKED_CALLS)}
        del model, opt, ids, tracker
    gc.collect()
    return result, diag


def _device_name(backend: str) -> str:
    if backend == "cuda":
        return torch.cuda.get_device_name()
    if backend == "fake-cuda":
        return f"fake CUDA (FakeTensorMode + MemTracker on {platform.machine()} CPU)"
    return f"CPU ({platform.processor() or platform.machine()})"


def write_atomic(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- serving (HF generate)
class ServingMemTracker(PhaseMemTracker):
    """PhaseMemTracker that, at each new peak, also counts the bytes held by the KV cache."""

    def __init__(self, device: torch.device) -> None:
        super().__init__(device)
        self.cache: Any = None
        self.peak_kv_bytes = 0
        self.peak_kv_tokens = 0

    def kv_bytes(self) -> tuple[int, int]:
        """(bytes of the distinct storages the cache's keys/values live in, longest cached length)."""
        if self.cache is None:
            return 0, 0
        total, longest, seen = 0, 0, set()
        for layer in getattr(self.cache, "layers", []):
            for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
                if not isinstance(t, torch.Tensor) or t.numel() == 0:
                    continue
                longest = max(longest, int(t.shape[-2]))
                st = t.untyped_storage()
                if id(st) in seen:
                    continue
                seen.add(id(st))
                winfo, _ = self._WINFO.get(st, (None, None))
                total += winfo.mem_consumed if winfo is not None else -(-st.nbytes() // 512) * 512
        return total, longest

    def _update_peak_stats(self, peak_state) -> None:  # type: ignore[no-untyped-def]
        before = self.peak_bytes
        super()._update_peak_stats(peak_state)
        if self.peak_bytes > before:
            self.peak_kv_bytes, self.peak_kv_tokens = self.kv_bytes()


def measure_serving_case(
    case: dict[str, Any], config: dict[str, Any], backend: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """HF generate's memory as it runs a static batch: prefill of batch x prompt_len tokens
    with a DynamicCache and logits_to_keep=1, then new_tokens - 1 decode steps. No grad,
    model built in `weight_dtype` (default bf16), eval mode."""
    from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache

    t0 = time.perf_counter()
    weight_dtype = case.get("weight_dtype", "bf16")
    if weight_dtype not in DTYPES:
        raise ValueError(f"weight_dtype={weight_dtype!r}: expected one of {', '.join(DTYPES)}")
    b, s = int(case["batch"]), int(case["prompt_len"])
    new_tokens = int(case.get("new_tokens", 2))
    if b < 1 or s < 1 or new_tokens < 1:
        raise ValueError("batch, prompt_len and new_tokens must be >= 1")

    with contextlib.ExitStack() as stack:
        fake, device = _enter_backend(stack, backend)
        cfg = AutoConfig.for_model(**config)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = AutoModelForCausalLM.from_config(
                cfg, attn_implementation=case.get("attention", "sdpa"), dtype=DTYPES[weight_dtype]
            )
        _place(model, device, fake)
        model.eval()
        ids = _token_ids(b, s, int(cfg.get_text_config().vocab_size), device, fake)

        if backend == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        tracker = ServingMemTracker(device)
        tracker.track_external(model, ids)
        cuda_phase: dict[str, int] = {}

        def cuda_mark(phase: str) -> None:
            if backend == "cuda":
                torch.cuda.synchronize()
                cuda_phase[phase] = max(cuda_phase.get(phase, 0), torch.cuda.max_memory_allocated())
                torch.cuda.reset_peak_memory_stats()

        kv_after: dict[str, dict[str, int]] = {}
        with tracker, torch.no_grad():
            # generate() builds the cache before the first forward (DynamicCache from the config:
            # sliding-window layers get DynamicSlidingWindowLayer).
            cache = DynamicCache(config=model.config)
            tracker.cache = cache

            def forward(phase: str, step_ids: torch.Tensor) -> torch.Tensor:
                nonlocal ids
                out = model(input_ids=step_ids, cache=cache, use_cache=True, logits_to_keep=1)
                # as GenerationMixin._sample: copy the last position's logits to fp32, drop the outputs
                next_logits = out.logits[:, -1].to(copy=True, dtype=torch.float32)
                del out
                next_tokens = torch.argmax(next_logits, dim=-1)
                del next_logits
                ids = torch.cat([ids, next_tokens[:, None]], dim=-1)
                cuda_mark(phase)
                kv_bytes, kv_tokens = tracker.kv_bytes()
                kv_after[phase] = {"bytes": kv_bytes, "tokens": kv_tokens}
                return next_tokens

            tracker.set_phase(1, "prefill")
            next_tokens = forward("prefill", ids)
            for _ in range(new_tokens - 1):
                tracker.reset_mod_stats()  # MemTracker refuses a second forward otherwise
                tracker.set_phase(1, "decode")
                next_tokens = forward("decode", next_tokens[:, None])
            tracker.cache = None

        stats = _param_stats(model)
        bd = tracker.peak_breakdown
        weights = int(bd["parameters"] + bd["buffers"])
        if backend == "cuda":
            peak = max(cuda_phase.values())
            peak_phase = max(cuda_phase, key=lambda k: cuda_phase[k])
            phase_peaks = cuda_phase
        else:
            peak = int(tracker.peak_bytes)
            peak_phase = tracker.peak_at[1]
            phase_peaks = {p: int(v) for p, v in tracker.phase_peaks.get("step1", {}).items()}
        kv_at_peak = int(tracker.peak_kv_bytes)
        result: dict[str, Any] = {
            "format": "vramplan-serving-measurement",
            "version": 1,
            "case": case,
            "model_config": config,
            "backend": backend,
            "versions": versions(),
            "device_name": _device_name(backend),
            "parameters": stats,
            "peak_bytes": peak,
            "peak_phase": peak_phase,
            "breakdown": {
                "weights": weights,
                "kv_cache": kv_at_peak,
                "working": int(tracker.peak_bytes) - weights - kv_at_peak,
            },
            "kv_cache_tokens_at_peak": int(tracker.peak_kv_tokens),
            "kv_cache_after": kv_after,
            "phase_peaks": phase_peaks,
            "peak_reserved_bytes": int(torch.cuda.max_memory_reserved()) if backend == "cuda" else None,
        }
        result["wall_seconds"] = round(time.perf_counter() - t0, 2)
        diag = {"sdpa_kernels": dict(sdpa_mod.CHOICES), "sdpa_masked_calls": dict(sdpa_mod.MASKED_CALLS)}
    gc.collect()
    return result, diag
