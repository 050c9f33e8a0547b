"""``estimate(plan)``: the pure function every view, the command line and the tests use.

Same plan, same answer; no I/O (the GPU catalogue is passed in, or read once and cached);
fast enough to run on every keystroke.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from typing import TYPE_CHECKING, Final

from core.breakdown import Bucket, BucketKey, Phase
from core.catalogue import GpuSpec, custom_gpu, find_gpu
from core.checks import PlanWarning, plan_warnings
from core.dtypes import Autocast, Dtype
from core.errors import PlanError
from core.evidence import Confidence, confidence
from core.format import amount, memory
from core.memo import fills_fields
from core.params import ParamCounts, param_counts
from core.plan import Accounting, Engine, Offload, Plan
from core.runtime import card_left_bytes, mps_high_watermark_bytes, pytorch_limit_bytes, runs_mps, runtime_names
from core.training.compute import MFU_CONVENTION, Compute, UtilisationSource, compute_estimate
from core.training.host import HostMemory, host_memory
from core.training.ranks import RankMemory, rank_memories
from core.units import GiB
from core.verdict import VERDICT_LABELS, Judgement, Mode, Verdict, judge

# Enum members this module's hot paths compare with, read from their classes once: on Python 3.11 each
# ``Class.MEMBER`` read goes through EnumType.__getattr__'s slot, ~0.15 µs (core.plan's note; h74speed).
_ACCOUNTING_DETAILED: Final = Accounting.DETAILED
_ENGINE_LLAMACPP: Final = Engine.LLAMACPP
_MODE_TRAINING: Final = Mode.TRAINING
_OFFLOAD_NONE: Final = Offload.NONE

if TYPE_CHECKING:
    from core.serving.inference import InferenceEstimate

# Which figure the verdict reads, and why: every view that shows it says so in these words.
JUDGED_FIGURE: Final = "nvidia-smi"
JUDGED_SHORT: Final = "what the card must give the process"
JUDGED_WHY: Final = (
    "the card runs out of memory when the process can get no more from it; nvidia-smi counts all it "
    "holds: the caching allocator's segments (max_memory_reserved), the CUDA context and NCCL's buffers"
)
# Lesson accounting (seed/LM8-T3-memory-and-compute.txt) sums its four buckets, the activations a typed
# allowance: no allocator, CUDA context or library is in it, so it is no card's figure (h55ux).
LESSON_JUDGED_FIGURE: Final = "lesson sum"
LESSON_JUDGED_WHY: Final = (
    "lesson accounting judges the sum of its four buckets (weights, gradients, optimizer state and the typed "
    "activation allowance); no allocator reserve, CUDA context or library buffer is counted"
)
# On an Apple GPU PyTorch runs its MPS backend (core.runtime.runs_mps): no nvidia-smi, and the figure its
# allocator checks is the Metal driver's, torch.mps.driver_allocated_memory() (pytorch/pytorch
# aten/src/ATen/mps/MPSAllocator.h at 01f98b3e: the heaps it holds), against its high watermark.
MPS_JUDGED_FIGURE: Final = "MPS driver"
MPS_JUDGED_WHY: Final = (
    "PyTorch's MPS allocator refuses a buffer once the Metal driver would hold more than its high watermark "
    "(1.7 × Metal's recommended working set, judged here against the lower of that and the Mac's RAM); "
    "torch.mps.driver_allocated_memory() counts all it holds: the allocator's heaps, their unused room and its "
    "cached buffers"
)


# On an AMD card the same figure is amd-smi's (core.runtime.runtime_names): ROCm's PyTorch runs the same
# caching allocator, its context is the HIP runtime's and its collectives RCCL's.
AMD_JUDGED_FIGURE: Final = "amd-smi"
AMD_JUDGED_WHY: Final = (
    "the card runs out of memory when the process can get no more from it; amd-smi counts all it holds: the "
    "caching allocator's segments (max_memory_reserved; ROCm's PyTorch runs the same allocator), the HIP "
    "context and RCCL's buffers"
)


def judged_figure(gpu_id: str) -> str:
    """The name of the figure the verdict reads on the card ``gpu_id``: nvidia-smi's, amd-smi's on an AMD
    card, or on an Apple GPU the MPS driver's."""
    if runs_mps(gpu_id):
        return MPS_JUDGED_FIGURE
    return AMD_JUDGED_FIGURE if runtime_names(gpu_id).smi == AMD_JUDGED_FIGURE else JUDGED_FIGURE


def judged_why(gpu_id: str) -> str:
    """Why that figure decides an out-of-memory error on ``gpu_id``."""
    if runs_mps(gpu_id):
        return MPS_JUDGED_WHY
    return AMD_JUDGED_WHY if runtime_names(gpu_id).smi == AMD_JUDGED_FIGURE else JUDGED_WHY


__all__ = [
    "AMD_JUDGED_FIGURE",
    "JUDGED_FIGURE",
    "JUDGED_WHY",
    "MFU_CONVENTION",
    "MPS_JUDGED_FIGURE",
    "VERDICT_LABELS",
    "Bucket",
    "BucketKey",
    "Estimate",
    "HostMemory",
    "Judgement",
    "Mode",
    "Phase",
    "RankMemory",
    "UtilisationSource",
    "Verdict",
    "estimate",
    "gpu_for",
    "judged_figure",
    "judged_why",
    "keep_calibration",
]


@fills_fields
@dataclass(frozen=True)
class Estimate:
    plan: Plan
    gpu: GpuSpec
    params: ParamCounts
    buckets: tuple[Bucket, ...]  # the composition at the peak, in chart order
    phases: tuple[Phase, ...]
    peak_phase: str
    peak_bytes: float  # allocator-level peak (what max_memory_allocated reports)
    total_bytes: float  # peak + overhead: what nvidia-smi shows, the figure judged (core.training.device)
    # What a PyTorch process may hold on the card: its memory, or on an Apple GPU the lower of the MPS
    # allocator's limit and the RAM (core.runtime.pytorch_limit_bytes); an engine with a runtime of its
    # own reads serving_capacity_bytes.
    capacity_bytes: float
    summary_formula: str
    compute: Compute
    notes: tuple[str, ...]
    warnings: tuple[PlanWarning, ...] = ()  # core.checks.plan_warnings: valid, but doubtful
    # Every kind of rank (one on a single GPU); the fields above are ranks[worst_rank]'s.
    ranks: tuple[RankMemory, ...] = ()
    worst_rank: int = 0
    host: HostMemory | None = None  # one node's host memory
    reserved_bytes: float = 0.0  # peak + the caching allocator's reserve (what max_memory_reserved reports)
    # How sure total_bytes is: the published real-GPU figures of plans of this kind (None in
    # lesson accounting, which is the lesson's arithmetic, not a prediction of a card).
    confidence: Confidence | None = None
    # The serving estimate, worked out when first read (:attr:`inference`): a training plan's
    # views seldom read it. A partial of _serving, so an estimate still pickles.
    _inference_of: Callable[[], InferenceEstimate] | None = field(default=None, compare=False, repr=False)
    # The rank whose figures the single-rank fields carry when seen from one (:meth:`for_rank`); None: the worst.
    seen_rank: int | None = None

    @cached_property
    def inference(self) -> InferenceEstimate:
        """The plan served by its engine on this card (:mod:`core.serving`)."""
        if self._inference_of is None:
            raise ValueError("this estimate was built without its serving estimate")
        return self._inference_of()

    def summary_in(self, unit: str = "GB") -> str:
        """The sum at the peak in ``unit`` (GB or GiB): :attr:`summary_formula` in GB, and in lesson
        accounting (the lesson's own digits); in GiB the peak phase's buckets and the workspaces again,
        as the detailed sum writes them (core.training.detailed)."""
        phase = next((p for p in self.phases if p.name == self.peak_phase), None)
        if unit != "GiB" or phase is None or self.plan.accounting is Accounting.LESSON:
            return self.summary_formula
        workspaces = self.peak_bytes - self.tensor_peak_bytes
        text = " + ".join(amount(b.bytes, unit) for b in phase.buckets)
        text += f" + {amount(workspaces, unit)} (workspaces)" if workspaces else ""
        return f"{text} = {amount(self.peak_bytes, unit)} GiB at the {phase.name}"

    @property
    def worst(self) -> RankMemory:
        return self.ranks[self.worst_rank]

    def warnings_for(self, mode: Mode) -> tuple[str, ...]:
        """What is doubtful about the plan in ``mode`` (the training step, or serving). Serving's
        sentences that need the serving estimate are worked out here, when first asked for."""
        texts = tuple(w.text for w in self.warnings if w.mode is mode)
        if mode is Mode.INFERENCE and self._inference_of is not None:
            texts += _vllm_warnings(self.plan, self.inference)
        return texts

    @property
    def tensor_peak_bytes(self) -> float:
        """The allocated peak less the libraries' workspaces (core.training.device.allocator_workspaces):
        the peak phase's tensors, what a fake-tensor measurement (tools/measure), which runs no cuBLAS,
        records as its peak."""
        return max((p.allocated_bytes for p in self.phases), default=self.peak_bytes)

    @property
    def evaluation_bytes(self) -> float:
        """An evaluation forward with the eval batch, between steps, on the rank where it is
        largest: its allocated bytes plus overhead (judged against the same usable memory)."""
        return max((r.evaluation_bytes for r in self.ranks), default=0.0)

    @property
    def host_holds(self) -> bool:
        """Each node's RAM holds what the run keeps there (offloaded state, checkpoint load)."""
        return self.host is None or self.host.verdict in (None, Verdict.FITS)

    def for_rank(self, index: int | None) -> Estimate:
        """This estimate seen from rank ``index``: its phases, buckets, peak and verdict in the
        single-rank fields, for a view that shows one rank; the worst (or None) is itself."""
        if index is None or index == self.worst_rank or not 0 <= index < len(self.ranks):
            return self
        rank = self.ranks[index]
        return replace(
            self,
            buckets=rank.buckets,
            phases=rank.phases,
            peak_phase=rank.peak_phase,
            peak_bytes=rank.peak_bytes,
            total_bytes=rank.total_bytes,
            reserved_bytes=rank.reserved_bytes,
            summary_formula=rank.summary_formula,
            notes=rank.notes,
            seen_rank=index,
        )

    def bucket(self, key: BucketKey) -> Bucket:
        for bucket in self.buckets:
            if bucket.key is key:
                return bucket
        raise KeyError(key)

    def judgement(self, mode: Mode = Mode.TRAINING) -> Judgement:
        """The plan's verdict with its figures — the one place it is decided. Training: the
        worst rank's peak + overhead against the card, and each node's RAM against what the run
        keeps there. Serving: the engine's total at once (a pooled engine that holds not one
        request is out of memory, :func:`core.serving.engines.pooled_verdict`)."""
        headroom = self.plan.hardware.headroom
        if mode is Mode.INFERENCE:
            inf = self.inference
            capacity = self.serving_capacity_bytes
            usable = capacity * (1.0 - headroom)
            # llama.cpp's host part judged against the host RAM given: the verdict says which decides.
            host = (Verdict.OOM if inf.host_ram_short else Verdict.FITS) if inf.host_ram_bytes else None
            if inf.engine is Engine.LLAMACPP and host is not None:
                return judge(inf.total_bytes, capacity, headroom, host)
            return Judgement(inf.verdict, inf.total_bytes, capacity, usable)
        host = self.host.verdict if self.host is not None else None  # None: RAM not given
        # The range of the rank whose total is judged: the worst's, or the one this estimate is seen from.
        rank = self.worst if self.seen_rank is None else self.ranks[self.seen_rank]
        return judge(self.total_bytes, self.capacity_bytes, headroom, host, rank.low_bytes, rank.high_bytes)

    @property
    def serving_capacity_bytes(self) -> float:
        """The card as the plan's serving engine meets it: PyTorch's limit for transformers' generate, the
        card's memory (on an Apple GPU Metal's working set) for an engine with its own runtime."""
        if self.plan.inference.engine is Engine.HF:
            return self.capacity_bytes
        # less what other processes hold on it
        return card_left_bytes(self.gpu.memory_bytes, self.plan.hardware.held_by_others)

    @property
    def judged_figure(self) -> str:
        """The name of the figure the verdict reads: "nvidia-smi", "amd-smi" on an AMD card or "MPS driver"
        on an Apple GPU; in lesson accounting the lesson's sum."""
        if self.plan.accounting is Accounting.LESSON:
            return LESSON_JUDGED_FIGURE
        return judged_figure(self.gpu.id)

    @property
    def judged_why(self) -> str:
        if self.plan.accounting is Accounting.LESSON:
            return LESSON_JUDGED_WHY
        return judged_why(self.gpu.id)

    @property
    def range_bytes(self) -> tuple[float, float]:
        """The range of the judged figure (the worst rank's nvidia-smi): low, high."""
        return self.judgement().range_bytes

    @property
    def verdict(self) -> Verdict:
        """The training verdict (GPU and host): :meth:`judgement`'s."""
        return self.judgement().verdict

    @property
    def fits(self) -> bool:
        """The training run starts and fits: every rank on its GPU, each node's share in its RAM."""
        return self.verdict is Verdict.FITS

    @property
    def usable_bytes(self) -> float:
        """The card's capacity less the headroom kept free."""
        return self.capacity_bytes * (1.0 - self.plan.hardware.headroom)

    @property
    def margin_bytes(self) -> float:
        """Usable memory less the worst rank's total; negative when it does not fit the GPU."""
        return self.usable_bytes - self.total_bytes


def gpu_for(plan: Plan) -> GpuSpec:
    if plan.hardware.gpu == "custom":
        return custom_gpu(
            plan.hardware.custom_memory_gb,
            plan.hardware.custom_tflops,
            bandwidth_gb_s=plan.hardware.custom_bandwidth_gb_s,
        )
    return find_gpu(plan.hardware.gpu)


def serving_utilisation_text(plan: Plan) -> str:
    """What a utilisation of 0 (none typed) means to the plan's serving figures, on its card:
    core.serving.speed's SERVING_UTILISATION, or APPLE_MATMUL_UTILISATION on an Apple GPU. The
    chosen card's figure only: "40 % (serving; 78 % on Apple GPUs)" was shown on an L4."""
    from core.serving.speed import serving_utilisation  # the serving rules load with the first serving figure

    gpu = gpu_for(plan)
    share = serving_utilisation(plan.with_hardware(utilisation=0.0), gpu)
    on = " on an Apple GPU" if gpu.vendor == "apple" else ""
    return f"{share * 100:.0f} % (serving{on})"


def estimate(plan: Plan, gpu: GpuSpec | None = None) -> Estimate:
    """Estimate memory, time and serving needs for ``plan`` on ``gpu`` (or the plan's card)."""
    card = gpu if gpu is not None else gpu_for(plan)
    counts = param_counts(plan)
    # PyTorch's limit on the card, less what other processes hold on it
    capacity = card_left_bytes(pytorch_limit_bytes(card), plan.hardware.held_by_others)
    ranks, worst_index = rank_memories(plan, counts, capacity)
    worst = ranks[worst_index]
    host = host_memory(plan, counts)
    serving = partial(_serving, plan, counts, card)
    warnings = plan_warnings(plan) + _host_warnings(plan, host) + _mps_warnings(plan, card, capacity, worst.total_bytes)
    warnings += _unified_offload_warnings(plan, card, host, worst.total_bytes)
    served = serving() if plan.inference.engine is _ENGINE_LLAMACPP else None
    if served is not None:  # llama.cpp's host part is judged against the host RAM given
        warnings += _llamacpp_host_warnings(served)
    result = Estimate(
        plan=plan,
        gpu=card,
        params=counts,
        buckets=worst.buckets,
        phases=worst.phases,
        peak_phase=worst.peak_phase,
        peak_bytes=worst.peak_bytes,
        total_bytes=worst.total_bytes,
        capacity_bytes=capacity,
        summary_formula=worst.summary_formula,
        compute=compute_estimate(plan, counts, card),
        notes=worst.notes,
        warnings=warnings,
        ranks=ranks,
        worst_rank=worst_index,
        host=host,
        reserved_bytes=worst.reserved_bytes,
        confidence=confidence(plan) if plan.accounting is _ACCOUNTING_DETAILED else None,
        _inference_of=serving,
    )
    if served is not None:
        result.__dict__["inference"] = served  # worked out already: the cached_property's slot
    return result


def _host_warnings(plan: Plan, host: HostMemory) -> tuple[PlanWarning, ...]:
    """Offloaded state with no host RAM given: what a node needs is known, whether it has it is not."""
    if host.verdict is not None or plan.parallel.offload is _OFFLOAD_NONE:
        return ()
    return (
        PlanWarning(
            _MODE_TRAINING,
            f"Host RAM is not given: each node needs {memory(host.bytes)} for the offloaded state and its "
            "processes; give the RAM (Host RAM per node, --host-ram-gb) to have it judged.",
        ),
    )


def keep_calibration(before: Estimate, after: Plan, estimator: Callable[[Plan], Estimate] | None = None) -> Plan:
    """A measured speed describes the plan it was measured on. When an edit changes anything
    else, the measurement becomes the calibration factor it gave, so the edited plan is
    modelled and scaled by it, not pinned to the old speed; on another card or software stack
    the factor does not hold and is dropped. An edit of the measurement itself is kept.

    The calibrated plan is estimated to check that the factor holds, by ``estimator`` when
    given: a caller that keeps its estimates (gui.controller) reuses that one for the plan
    it then makes current, rather than estimating it twice."""
    old, new = before.plan.hardware, after.hardware
    if not (old.measured_tokens_per_s or old.measured_step_s) or after == before.plan:
        return after
    if (new.measured_tokens_per_s, new.measured_step_s) != (old.measured_tokens_per_s, old.measured_step_s):
        return after
    same = new.gpu == old.gpu and after.stack is before.plan.stack and after.float8 is before.plan.float8
    modelled = after.with_hardware(measured_tokens_per_s=0.0, measured_step_s=0.0, calibration=0.0)
    if not same:
        return modelled
    # A factor no calibration can hold (outside its range), or one the edited plan cannot run
    # at (past the card's peak), is dropped rather than refusing the edit: the plan is modelled.
    try:
        calibrated = modelled.with_hardware(calibration=before.compute.calibration_factor)
        (estimator or estimate)(calibrated)
    except PlanError:
        return modelled
    return calibrated


def _serving(plan: Plan, counts: ParamCounts, card: GpuSpec) -> InferenceEstimate:
    """The plan served (:mod:`core.serving`): its engines' rules are loaded when a serving
    figure is first read, not at start-up (a training window reads none)."""
    from core.serving.inference import inference_estimate

    return inference_estimate(plan, counts, card)


# PyTorch's MPS backend refuses a bfloat16 tensor before macOS 14 (pytorch/pytorch 026a4bff,
# aten/src/ATen/mps/EmptyTensor.cpp, empty_mps: "MPS BFloat16 is only supported on MacOS 14 or newer").
MPS_BF16_WARNING: Final = (
    "bfloat16 on an Apple GPU needs macOS 14 or newer (PyTorch's MPS backend refuses it before); on macOS 13 "
    "pick fp16 or fp32."
)


def _mps_warnings(plan: Plan, card: GpuSpec, capacity: float, total: float) -> tuple[PlanWarning, ...]:
    """On an Apple GPU (PyTorch's MPS backend): a bfloat16 role, which needs macOS 14, and a step past
    Metal's recommended working set (the card's memory) but within what the verdict reads
    (core.runtime.pytorch_limit_bytes): PyTorch allocates it, Metal pages it."""
    working_set = float(card.memory_bytes)
    if capacity <= working_set:  # not an Apple GPU
        return ()
    bf16 = Dtype.BF16 in (plan.weight_dtype, plan.base_dtype, plan.adapter_dtype) or plan.autocast is Autocast.BF16
    warnings = (PlanWarning(Mode.TRAINING, MPS_BF16_WARNING),) if bf16 else ()
    if not working_set < total <= capacity:
        return warnings
    limit = mps_high_watermark_bytes(working_set)
    paged = (
        PlanWarning(
            Mode.TRAINING,
            f"The step needs {memory(total)}, past Metal's recommended working set of {memory(working_set)} on "
            f"{card.name}: it runs, but macOS pages the GPU's memory and steps slow down. PyTorch stops at 1.7 × "
            f"the working set ({memory(limit)}); the verdict reads the lower of that and the "
            f"{card.unified_memory_gb:g} GB of RAM, which macOS shares.",
        ),
    )
    return (*warnings, *paged)


def _unified_offload_warnings(plan: Plan, card: GpuSpec, host: HostMemory, total: float) -> tuple[PlanWarning, ...]:
    """A unified-memory machine's offloaded state and its GPU's step come out of one RAM (a Mac, DGX Spark, a Ryzen
    AI Max): the host check reads the host RAM given, this says when the two together pass the machine's RAM (macOS
    swaps; Linux swaps or its OOM killer ends the run)."""
    if plan.parallel.offload is _OFFLOAD_NONE or not card.unified_memory_gb:
        return ()
    ram = card.unified_memory_gb * GiB  # RAM sizes are binary (core.runtime.pytorch_limit_bytes)
    if host.bytes + total <= ram:
        return ()
    mac = runs_mps(plan.hardware.gpu)
    happens = "macOS swaps and the step slows" if mac else "Linux swaps or its OOM killer ends the run"
    frees = "Metal's working set" if mac else "the GPU's share"
    return (
        PlanWarning(
            _MODE_TRAINING,
            f"On {card.name} the CPU and the GPU share {card.unified_memory_gb:g} GB of RAM: the host part "
            f"(offloaded state and the process, {memory(host.bytes)}) and the GPU's step ({memory(total)}) need "
            f"{memory(host.bytes + total)} together, so {happens}; offloading frees {frees}, not the machine's "
            "memory.",
        ),
    )


def _vllm_warnings(plan: Plan, served: InferenceEstimate) -> tuple[str, ...]:
    """vLLM's cold torch.compile inside its memory profile, where it would cost the plan requests
    (core.serving.engines.cold_compile_warning); the serving rules are loaded only for a vLLM plan."""
    if plan.inference.engine is not Engine.VLLM:
        return ()
    from core.serving.engines import cold_compile_warning

    text = cold_compile_warning(plan, served)
    return (text,) if text else ()


def _llamacpp_host_warnings(serving: InferenceEstimate) -> tuple[PlanWarning, ...]:
    """llama.cpp's host part (token embeddings, the layers not offloaded and their KV) judged
    against the host RAM the plan gives."""
    if not serving.host_ram_short:
        return ()
    return (
        PlanWarning(
            Mode.INFERENCE,
            f"llama.cpp keeps {memory(serving.host_bytes)} in host memory (token embeddings, the layers not "
            f"offloaded and their KV cache), more than the {memory(serving.host_ram_bytes)} of host RAM given: "
            "offload more layers (--gpu-layers) or pick a smaller GGUF type.",
        ),
    )
