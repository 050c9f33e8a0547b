"""One rank of a data-parallel training step (DDP or FSDP2), measured in one process.

As torchtitan's memory estimation does (scripts/estimate/estimation.py, torchtitan commit
4a950eaa, the last one before that script was removed), the default process group is a
fake one (`torch.testing._internal.distributed.fake_pg.FakeStore` + backend "fake"): every
collective returns at once without moving data, so rank 0 runs alone with the shapes, the
buffers and the program order of a real rank. Fake-CUDA tensors + the tracker then give
the bytes that rank holds. Read against torch 2.13.0 (`torch/nn/parallel/distributed.py`,
`torch/distributed/fsdp/_fully_shard/*`, `torch/distributed/_tools/fsdp2_mem_tracker.py`).

What has to be faked for fake-CUDA (a CPU build of torch has no CUDA runtime):
  * `torch.cuda` streams/events/current device (`fake_cuda_runtime`): FSDP2 creates its
    all-gather / reduce-scatter streams and records events through `torch.cuda`; they
    become no-op objects. The caching allocator counts a block as allocated from the
    host-side malloc to the host-side free whatever the stream, so this does not change
    allocated bytes; FSDP2 keeps its all-gather / reduce-scatter buffers alive by Python
    references (AllGatherState, ReduceScatterState), which run unchanged.
  * DDP: the reducer's timer for CUDA (registered by the fake_cuda.cpp shim), the initial
    parameter broadcast (`init_sync=False`: a construction-time transient outside the
    measured steps), the allreduce result (a comm hook that divides the bucket in place
    and returns it, what the built-in hook does; the fake work returns no tensor), and the
    bucket rebuild before step 2, whose host-side index broadcast reads data
    (`_HostScratchMode` gives it real host tensors).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import time
import weakref
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker, _FSDPRefType
from torch.distributed._tools.mem_tracker import _MemRefType
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from . import runner
from . import sdpa as sdpa_mod

STRATEGIES = ("ddp", "fsdp")
WORLD_RANGE = (2, 64)
MP_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
# torch.nn.parallel.DistributedDataParallel (torch 2.13): bucket_cap_mb=None means 25 MiB
# buckets with a first (last-ready) bucket of dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB);
# an explicit bucket_cap_mb makes every bucket that size.
DDP_DEFAULT_BUCKET_MB = 25.0
GPUS_PER_NODE = 8  # plan mapping only: worlds above 8 are written as nodes of 8 GPUs


# --------------------------------------------------------------------------- case keys
def resolve_parallel(case: dict[str, Any]) -> dict[str, Any]:
    """The distributed knobs of a case, validated; what `resolved.parallel` records."""
    strategy = case.get("strategy")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy={strategy!r}: expected one of {', '.join(STRATEGIES)}")
    world = case.get("world_size")
    if not isinstance(world, int) or isinstance(world, bool) or not WORLD_RANGE[0] <= world <= WORLD_RANGE[1]:
        raise ValueError(f"world_size={world!r}: expected an integer from {WORLD_RANGE[0]} to {WORLD_RANGE[1]}")
    out: dict[str, Any] = {"strategy": strategy, "world_size": world, "rank": 0}
    if strategy == "ddp":
        cap = case.get("bucket_cap_mb")
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float)) or not 0 < cap <= 4096):
            raise ValueError(f"bucket_cap_mb={cap!r}: expected a number of MiB in (0, 4096] or null")
        gabv = case.get("gradient_as_bucket_view", False)
        if not isinstance(gabv, bool):
            raise ValueError(f"gradient_as_bucket_view={gabv!r}: expected true or false")
        out.update(
            bucket_cap_mb=cap,  # None = torch's default (25 MiB, first bucket 1 MiB)
            bucket_bytes_cap=int((DDP_DEFAULT_BUCKET_MB if cap is None else cap) * 2**20),
            first_bucket_bytes_cap=int(dist._DEFAULT_FIRST_BUCKET_BYTES if cap is None else cap * 2**20),
            gradient_as_bucket_view=gabv,
            find_unused_parameters=False,
            broadcast_buffers=True,
        )
    else:
        raf = case.get("reshard_after_forward", True)
        if not isinstance(raf, bool):
            raise ValueError(f"reshard_after_forward={raf!r}: expected true or false")
        for key in ("mp_param_dtype", "mp_reduce_dtype"):
            if case.get(key) not in (None, *MP_DTYPES):
                raise ValueError(f"{key}={case.get(key)!r}: expected null, 'bf16' or 'fp32'")
        carved = case.get("fsdp_units", "root") == "carved"
        if case.get("fsdp_units", "root") not in ("root", "carved"):
            raise ValueError(f"fsdp_units={case.get('fsdp_units')!r}: expected 'root' or 'carved'")
        out.update(
            reshard_after_forward=raf,
            root_reshard_after_forward=None,  # torch's default for the root: stays unsharded after forward
            mp_param_dtype=case.get("mp_param_dtype"),
            mp_reduce_dtype=case.get("mp_reduce_dtype"),
            units=CARVED_UNITS if carved else ROOT_UNITS,
            fsdp_units="carved" if carved else "root",
        )
    for key in case:
        if (key in _DDP_ONLY and strategy != "ddp") or (key in _FSDP_ONLY and strategy != "fsdp"):
            raise ValueError(f"{key}: only for strategy {'ddp' if key in _DDP_ONLY else 'fsdp'}, not {strategy!r}")
    return out


_DDP_ONLY = ("bucket_cap_mb", "gradient_as_bucket_view")
_FSDP_ONLY = ("reshard_after_forward", "mp_param_dtype", "mp_reduce_dtype", "fsdp_units")
ROOT_UNITS = "each module whose class is in the model's _no_split_modules (the decoder layers), then the root"
# huggingface/accelerate v1.14.0 on (PR #4015, 60b5c258; read at 16cb6eb8 src/accelerate/utils/fsdp_utils.py
# fsdp2_prepare_model): an untied input embedding its own unit, [final norm, output embedding] one unit with
# reshard_after_forward=False (tied: [final norm, embedding]), then the root. torchtitan b5bcd76c
# torchtitan/distributed/fsdp.py apply_fsdp_to_decoder carves the same (tied: embedding, norm and head one unit).
CARVED_UNITS = ROOT_UNITS.replace(", then the root", ", the embedding (untied), [final norm, head], then the root")


def plan_fields(case: dict[str, Any]) -> dict[str, Any]:
    """The case as the multi-GPU plan's `parallel` fields (core/plan.py, issue 15)."""
    par = resolve_parallel(case)
    world = par["world_size"]
    gpn = min(world, GPUS_PER_NODE)
    if world % gpn:
        raise ValueError(f"world_size={world}: not a whole number of {GPUS_PER_NODE}-GPU nodes")
    fields: dict[str, Any] = {
        "nodes": world // gpn,
        "gpus_per_node": gpn,
        "strategy": par["strategy"],
        "reshard_after_forward": par.get("reshard_after_forward", True),
        "fsdp_param_dtype": par.get("mp_param_dtype") or "stored",
        "fsdp_reduce_dtype": par.get("mp_reduce_dtype") or "stored",
        "ddp_bucket_mb": float(case.get("bucket_cap_mb") or DDP_DEFAULT_BUCKET_MB),
    }
    if par.get("fsdp_units") == "carved":  # the plan's parallel.fsdp_units; "root" is its default, left out
        fields["fsdp_units"] = "carved"
    return fields


# --------------------------------------------------------------------------- fake runtime
class _FakeEvent:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record(self, stream: Any = None) -> None:
        return None

    def wait(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


class _FakeStream:
    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.priority = priority

    def wait_stream(self, stream: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> Any:
        return event if event is not None else _FakeEvent()

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


_DEFAULT_STREAM = _FakeStream()


@contextlib.contextmanager
def fake_cuda_runtime() -> Iterator[None]:
    """torch.cuda's device / stream / event API as no-ops, for FSDP2 and DeviceMesh on the
    fake-CUDA device. `is_available` is left alone: FakeTensorMode reads it to decide how
    to build tensors, and the shim already reports CUDA to C++."""
    tc = torch.cuda
    reps = {
        "current_device": lambda: 0,
        "set_device": lambda device: None,
        "is_initialized": lambda: True,
        "device_count": lambda: 1,
        "Stream": _FakeStream,
        "Event": _FakeEvent,
        "current_stream": lambda device=None: _DEFAULT_STREAM,
        "default_stream": lambda device=None: _DEFAULT_STREAM,
        "stream": lambda stream: contextlib.nullcontext(),
        "synchronize": lambda device=None: None,
    }
    with contextlib.ExitStack() as st:
        for name, value in reps.items():
            st.enter_context(runner._patched(tc, name, value))
        yield


class _HostScratchMode(TorchDispatchMode):
    """For DDP's bucket rebuild: the reducer broadcasts the new bucket layout through int32
    tensors it fills and reads element by element on the host (`sync_bucket_indices`).
    Host int32 `empty` becomes a real tensor, ops on real tensors only run for real (with
    the fake PG the broadcast moves nothing), and a copy between a real and a fake tensor
    moves nothing (rank 0 is the broadcast's source: its host copy is already the answer).
    Everything else, the new float buckets included, goes on to the tracker and the fake
    mode below."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if func is torch.ops.aten.empty.memory_format and kwargs.get("dtype") == torch.int32:
            device = kwargs.get("device")
            if device is None or torch.device(device).type == "cpu":
                with _disable_current_modes():
                    return func(*args, **kwargs)
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        for a in args:
            if isinstance(a, (list, tuple)):
                tensors += [t for t in a if isinstance(t, torch.Tensor)]
        if tensors and not any(_is_fake(t) for t in tensors):
            with _disable_current_modes():
                return func(*args, **kwargs)
        if func is torch.ops.aten.copy_.default and _is_fake(args[0]) != _is_fake(args[1]):
            return args[0]
        return func(*args, **kwargs)


def _is_fake(t: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


class _CreationRecorder(TorchDispatchMode):
    """Remembers (weakly) the device tensors created while it is active: DDP allocates its
    gradient buckets in the Reducer's constructor, before the tracker exists."""

    def __init__(self, device_type: str) -> None:
        super().__init__()
        self.device_type = device_type
        self.refs: list[weakref.ref] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.device.type == self.device_type:
                self.refs.append(weakref.ref(t))
        return out

    def alive(self) -> list[torch.Tensor]:
        return [t for t in (r() for r in self.refs) if t is not None]


# --------------------------------------------------------------------------- trackers
class DDPPhaseMemTracker(runner.PhaseMemTracker):
    """PhaseMemTracker that reports DDP's gradient buckets on their own.

    Bucket storages are tracked as `Other` (the reducer allocates them in C++, outside
    any parameter or gradient hook) and remembered; at a peak, `Other` is split into
    `ddp_buckets` (those storages) and `other` (the input ids). With
    gradient_as_bucket_view the gradients are views of the buckets, so they show here.
    """

    _breakdown_keys = (*runner.BREAKDOWN_KEYS, "ddp_buckets")

    def __init__(self, device: torch.device) -> None:
        super().__init__(device)
        self.bucket_storages: weakref.WeakSet = weakref.WeakSet()
        self.label_buckets = False

    def add_buckets(self, tensors: list[torch.Tensor]) -> None:
        for t in tensors:
            st = t.untyped_storage()
            if self._WINFO.get(st, (None, None))[0] is None:
                self._update_and_maybe_create_winfos(t, _MemRefType.OTH)
                self.bucket_storages.add(st)

    def _track(self, reftype, t: torch.Tensor) -> None:  # type: ignore[no-untyped-def]
        if self.label_buckets and t.device.type == self.device_type:
            st = t.untyped_storage()
            if self._WINFO.get(st, (None, None))[0] is None:
                self.bucket_storages.add(st)
            reftype = _MemRefType.OTH
        super()._track(reftype, t)

    def _breakdown(self, snap: dict | None) -> dict[str, int]:
        bd = super()._breakdown(snap)
        buckets = 0
        for st in list(self.bucket_storages):
            winfo = self._WINFO.get(st, (None, None))[0]
            if winfo is not None and winfo.reftype == _MemRefType.OTH:
                buckets += winfo.mem_consumed
        buckets = min(buckets, bd["other"])
        bd["ddp_buckets"] = buckets
        bd["other"] -= buckets
        return bd


_FSDP_CAT = {
    _FSDPRefType.SHARDED_PARAM: "sharded_parameters",
    _FSDPRefType.UNSHARDED_PARAM: "unsharded_parameters",
    _FSDPRefType.BUFFER: "buffers",
    _FSDPRefType.SHARDED_GRAD: "sharded_gradients",
    _FSDPRefType.UNSHARDED_GRAD: "unsharded_gradients",
    _FSDPRefType.ACT: "activations",
    _FSDPRefType.TEMP: "temporary",
    _FSDPRefType.ALL_GATHER: "all_gather_buffers",
    _FSDPRefType.REDUCE_SCATTER: "reduce_scatter_buffers",
    _FSDPRefType.OPT: "optimizer_state",
    _FSDPRefType.INP: "inputs",
}


class FSDPPhaseMemTracker(runner._PhaseStats, FSDPMemTracker):
    """torch's FSDPMemTracker (what torchtitan's estimation uses: it labels sharded and
    unsharded parameters and gradients, all-gather outputs and reduce-scatter inputs)
    with the per (step, phase) peaks of PhaseMemTracker instead of per-module stats."""

    _cat = _FSDP_CAT
    _breakdown_keys = tuple(dict.fromkeys(_FSDP_CAT.values()))
    _opt_ref = _FSDPRefType.OPT

    def __init__(self, model: torch.nn.Module, opt: torch.optim.Optimizer, device: torch.device) -> None:
        FSDPMemTracker.__init__(self, model, opt)
        runner.use_step_mod_tracker(self)  # no post-backward hooks on module inputs (runner.StepModTracker)
        self._init_phase_stats(device)

    def _track(self, reftype, t: torch.Tensor) -> None:  # type: ignore[no-untyped-def]
        if _PROPAGATING:
            return  # DTensor's metadata propagation, not the rank's memory (see below)
        super()._track(reftype, t)


_PROPAGATING: list[bool] = []


@contextlib.contextmanager
def dtensor_propagation_untracked() -> Iterator[None]:
    """DTensor computes each new op's output shape by running it on global-shape fake
    tensors, inside `detect_fake_mode() or FakeTensorMode()` (torch 2.13
    _sharding_prop.py). Under our FakeTensorMode that is our mode, so the tracker saw
    those global-shape tensors as allocations (the first AdamW step of FSDP2 looked like
    it held several unsharded copies of the model). Nothing is allocated on a GPU for it;
    the tracker ignores what runs inside."""
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    orig = ShardingPropagator._propagate_tensor_meta_non_cached

    def wrapped(self, op_schema):  # type: ignore[no-untyped-def]
        _PROPAGATING.append(True)
        try:
            return orig(self, op_schema)
        finally:
            _PROPAGATING.pop()

    with runner._patched(ShardingPropagator, "_propagate_tensor_meta_non_cached", wrapped):
        yield


# --------------------------------------------------------------------------- wrapping
def _decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """Modules whose class is named in the (base) model's _no_split_modules: what HF
    accelerate's FSDP2 transformer auto-wrap policy shards one by one (the decoder layers)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        raise ValueError(f"no decoder layers found ({type(base).__name__}._no_split_modules={sorted(names)})")
    return layers


def _wrap_fsdp(model: torch.nn.Module, par: dict[str, Any], mesh: Any) -> dict[str, Any]:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(
        param_dtype=MP_DTYPES.get(par["mp_param_dtype"] or ""),
        reduce_dtype=MP_DTYPES.get(par["mp_reduce_dtype"] or ""),
    )
    layers = _decoder_layers(model)
    for layer in layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=par["reshard_after_forward"], mp_policy=mp)
    if par.get("fsdp_units") == "carved":
        _carve_ends(model, dict(mesh=mesh, mp_policy=mp, reshard_after_forward=par["reshard_after_forward"]))
    fully_shard(model, mesh=mesh, mp_policy=mp)
    return {"fsdp_units": _fsdp_units(model)}


def _carve_ends(model: torch.nn.Module, kwargs: dict[str, Any]) -> None:
    """accelerate ≥ 1.14's units for the ends (CARVED_UNITS): the untied embedding with the layers' resharding,
    [final norm, head] (tied: [final norm, embedding]) kept gathered after forward."""
    from torch.distributed.fsdp import fully_shard

    embed, head = model.get_input_embeddings(), model.get_output_embeddings()
    tied = head is not None and getattr(embed, "weight", None) is getattr(head, "weight", None)
    if not tied:
        fully_shard(embed, **kwargs)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    norm = getattr(getattr(base, "model", base), "norm", None)  # LlamaModel.norm, Qwen2Model.norm
    tail = [m for m in (norm, embed if tied else head) if m is not None]
    fully_shard(tail, **{**kwargs, "reshard_after_forward": False})


def _fsdp_units(model: torch.nn.Module) -> list[dict[str, Any]]:
    """Per FSDP parameter group: its parameters' global numel and this rank's padded shard."""
    from torch.distributed.fsdp import FSDPModule

    units = []
    for name, mod in model.named_modules():
        if not isinstance(mod, FSDPModule):
            continue
        group = mod._get_fsdp_state()._fsdp_param_group
        if group is None:
            continue
        numel = sum(fp.sharded_param.numel() for fp in group.fsdp_params)  # DTensor: global numel
        local = sum(fp.sharded_param._local_tensor.numel() for fp in group.fsdp_params)
        n_params = len(group.fsdp_params)
        units.append({"module": name or "<root>", "params": n_params, "numel": int(numel), "local_numel": int(local)})
    return units


def _wrap_ddp(
    model: torch.nn.Module, par: dict[str, Any], device: torch.device, world: int
) -> tuple[Any, dict[str, Any]]:
    from torch.nn.parallel import DistributedDataParallel

    kwargs: dict[str, Any] = {"gradient_as_bucket_view": par["gradient_as_bucket_view"], "init_sync": False}
    if par["bucket_cap_mb"] is not None:
        kwargs["bucket_cap_mb"] = par["bucket_cap_mb"]
    recorder = _CreationRecorder(device.type)
    with recorder:
        ddp = DistributedDataParallel(model, device_ids=[0] if device.type == "cuda" else None, **kwargs)
    info: dict[str, Any] = {"bucket_sizes": {}}

    def allreduce_hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP rejects non-GradBucket annotations
        # What the reducer's built-in hook does (default_comm_hooks.cpp: divide in place by
        # the world size, allreduce the flat bucket); the fake work has no result tensor.
        buf = bucket.buffer()
        buf.div_(world)
        dist.all_reduce(buf, async_op=True)
        info["bucket_sizes"].setdefault(info.get("step", 0), {})[bucket.index()] = [int(buf.numel()), str(buf.dtype)]
        fut = torch.futures.Future()
        fut.set_result(buf)
        return fut

    ddp.register_comm_hook(None, allreduce_hook)
    return ddp, {"info": info, "initial_buckets": recorder.alive()}


# --------------------------------------------------------------------------- main entry
@contextlib.contextmanager
def fake_process_group(world: int) -> Iterator[None]:
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        yield
    finally:
        dist.destroy_process_group()


def measure_parallel_case(
    case: dict[str, Any], config: dict[str, Any], backend: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Rank 0 of a `world_size`-rank DDP / FSDP2 run: two training steps, as measure_case."""
    import torch.distributed._tools.fake_collectives  # noqa: F401 - FakeTensor kernels for c10d ops
    from torch.distributed.device_mesh import init_device_mesh

    par = resolve_parallel(case)
    if "parallel" in case and case["parallel"] != plan_fields(case):
        raise ValueError(f"parallel={case['parallel']!r} disagrees with the case's keys (expected {plan_fields(case)})")
    if backend not in ("fake-cuda", "cuda", "cpu", "fake-cpu"):
        raise ValueError(f"backend {backend!r}")
    world = par["world_size"]
    t0 = time.perf_counter()
    dev_type = "cuda" if backend in ("cuda", "fake-cuda") else "cpu"
    with contextlib.ExitStack() as outer:
        if backend == "fake-cuda":
            outer.enter_context(fake_cuda_runtime())
        outer.enter_context(dtensor_propagation_untracked())
        outer.enter_context(fake_process_group(world))
        # DeviceMesh reads its rank list back from a tensor: build it before FakeTensorMode.
        mesh = init_device_mesh(dev_type, (world,)) if par["strategy"] == "fsdp" else None
        with contextlib.ExitStack() as stack:
            fake, device = runner._enter_backend(stack, backend)
            model = runner._build(case, config, fake)
            runner._place(model, device, fake)
            if case.get("checkpointing"):
                runner._enable_checkpointing(model, fake)
            model.train()
            stats = runner._param_stats(model)
            wrap: dict[str, Any] = {}
            if par["strategy"] == "fsdp":
                static = _wrap_fsdp(model, par, mesh)
            else:
                model, wrap = _wrap_ddp(model, par, device, world)
                static = {}
            params = [p for p in model.parameters() if p.requires_grad]
            opt = runner._make_optimizer(case, params, device)
            b, s = int(case["micro_batch"]), int(case["seq_len"])
            # An image-text wrapper (Qwen3.5's qwen3_5) keeps the vocabulary in text_config (runner.measure_case).
            vocab = int(config.get("vocab_size") or config.get("text_config", {})["vocab_size"])
            ids = runner._token_ids(b, s, vocab, device, fake)

            marks = runner._CudaMarks(backend)
            marks.start()
            before_forward = None
            if par["strategy"] == "fsdp":
                tracker: Any = FSDPPhaseMemTracker(model, opt, device)
                tracker.optimizer = opt
                tracker.track_inputs((ids,))
            else:
                tracker = DDPPhaseMemTracker(device)
                tracker.optimizer = opt
                tracker.track_external(model, opt, ids)
                tracker.add_buckets(wrap.pop("initial_buckets"))
                info = wrap["info"]
                before_forward = functools.partial(_ddp_before_forward, model, tracker, info, fake)

            tracker.record_phase_breakdowns = True
            knobs = runner.resolve_knobs(case)
            runner._train_steps(model, opt, ids, tracker, knobs, device, fake, backend, marks, before_forward)

            local = _local_param_stats(model)
            result: dict[str, Any] = {
                "format": "vramplan-parallel-measurement",
                "version": 1,
                "case": case,
                "resolved": {
                    **{k: v for k, v in knobs.items() if k != "built_in_weight_dtype"},
                    "parallel": par,
                    "process_group": "fake (torch.testing._internal.distributed.fake_pg), rank 0 measured",
                },
                "model_config": config,
                "backend": backend,
                "versions": runner.versions(),
                "device_name": runner._device_name(backend),
                "parameters": stats,
                "rank_parameters": local,
            }
            result.update(runner._peak_fields(tracker, backend, marks))
            result["phase_breakdowns"] = tracker.phase_breakdowns
            if par["strategy"] == "ddp":
                sizes = info["bucket_sizes"]
                result["ddp_buckets"] = {f"step{s}": [sizes[s][i] for i in sorted(sizes[s])] for s in sorted(sizes)}
            result.update(static)
            result["wall_seconds"] = round(time.perf_counter() - t0, 2)
            diag = {"sdpa_kernels": dict(sdpa_mod.CHOICES), "sdpa_masked_calls": dict(sdpa_mod.MASKED_CALLS)}
            del model, opt, ids, tracker, wrap
        del mesh
    gc.collect()
    return result, diag


def _ddp_before_forward(ddp: Any, tracker: DDPPhaseMemTracker, info: dict[str, Any], fake: bool, step: int) -> None:
    info["step"] = step
    if step != 2:
        return
    # DDP's _pre_forward rebuilds the buckets itself at the start of step 2's forward (the
    # call then returns False); it is called here first so the new buckets get their label.
    tracker.label_buckets = True
    try:
        with _HostScratchMode() if fake else contextlib.nullcontext():
            rebuilt = ddp.reducer._rebuild_buckets()
    finally:
        tracker.label_buckets = False
    ddp._has_rebuilt_buckets = bool(rebuilt)
    info["rebuilt_before_step2"] = bool(rebuilt)


def _local_param_stats(model: torch.nn.Module) -> dict[str, Any]:
    """This rank's parameter bytes (FSDP2: the padded local shards of the DTensors)."""
    nbytes = tbytes = 0
    seen: set[int] = set()
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        local = getattr(p, "_local_tensor", p)
        b = local.numel() * local.element_size()
        nbytes += b
        if p.requires_grad:
            tbytes += b
    return {"bytes": nbytes, "trainable_bytes": tbytes}
