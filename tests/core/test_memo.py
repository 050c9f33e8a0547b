"""core.memo's identity caches: the same answers as uncached calls, never a stale one."""

from __future__ import annotations

import inspect
from dataclasses import FrozenInstanceError, InitVar, dataclass, field, replace

import pytest

from core.breakdown import Bucket, BucketKey, Term, make_bucket
from core.catalogue import find_model
from core.errors import PlanError
from core.evidence import confidence
from core.memo import Once, fills_fields, last_answer, replaced
from core.parallel.acts import split
from core.parallel.layout import layout
from core.params import param_counts
from core.plan import Method, Plan, Workload
from core.roles import compute_dtype, deepspeed_engine_dtype, model_dtype
from core.training.activations import layer_activations, loss_memory
from core.training.attention import sdpa_kernel
from core.training.flops import block_gemms
from core.training.optimizer import trainable_tensors
from core.training.speed import fused_attention

CACHED = (
    block_gemms,
    param_counts,
    sdpa_kernel,
    fused_attention,
    layout,
    model_dtype,
    compute_dtype,
    deepspeed_engine_dtype,
    confidence,
    trainable_tensors,
)


def plan(model: str = "llama-3.2-1b", **changes: object) -> Plan:
    return Plan(model=find_model(model).spec, workload=Workload(micro_batch=2, seq_len=1024)).with_changes(**changes)


def test_a_cached_function_answers_as_the_uncached_one() -> None:
    for one in (plan(), plan(method=Method.LORA), plan("qwen3-30b-a3b"), plan(method=Method.QLORA)):
        for fn in CACHED:
            assert fn(one) == fn.__wrapped__(one)  # type: ignore[attr-defined]
            assert fn(one) == fn.__wrapped__(one)  # the second call, served from the cache


def test_a_replaced_plan_is_not_served_the_last_answer() -> None:
    full = plan()
    lora = replace(full, method=Method.LORA)
    assert param_counts(full).trainable == param_counts(full).total
    # replace() builds a new object: the cache sees another argument and computes again.
    assert param_counts(lora).trainable < param_counts(lora).total
    assert param_counts(lora) == param_counts.__wrapped__(lora)  # type: ignore[attr-defined]
    assert block_gemms(lora) != block_gemms(full)


def test_equal_but_distinct_arguments_are_computed_again() -> None:
    calls: list[object] = []

    @last_answer
    def echo(value: object) -> object:
        calls.append(value)
        return value

    first, second = [1], [1]
    assert echo(first) is first
    assert echo(first) is first
    assert echo(second) is second  # equal, not the same object: no cached answer
    assert len(calls) == 2


def test_the_cache_keeps_its_arguments_alive() -> None:
    # Identity is only a key while the object lives: the cache holds it, so its id is not reused.
    calls = 0

    @last_answer
    def size(value: list[int]) -> int:
        nonlocal calls
        calls += 1
        return len(value)

    assert size([1, 2, 3]) == 3
    assert size([1]) == 1  # a fresh list, even if it landed at the freed address, is computed
    assert calls == 2


def test_an_exception_is_not_cached() -> None:
    calls = 0

    @last_answer
    def fails(value: int) -> int:
        nonlocal calls
        calls += 1
        raise ValueError(value)

    for _ in range(2):
        with pytest.raises(ValueError):
            fails(1)
    assert calls == 2


def test_a_cache_of_several_arguments_compares_each() -> None:
    calls = 0

    @last_answer
    def add(a: object, b: object) -> tuple[object, object]:
        nonlocal calls
        calls += 1
        return (a, b)

    x, y = object(), object()
    assert add(x, y) == (x, y)
    assert add(x, y) == (x, y)
    assert add(x, x) == (x, x)  # the second argument differs: computed again
    assert calls == 2


def test_a_fast_built_bucket_is_frozen_equal_and_hashable() -> None:
    terms = (Term("a", "1 + 1", 2.0), Term("none", "0", 0.0), Term("b", "3", 3))
    fast = make_bucket(BucketKey.WEIGHTS, terms, note="n")
    slow = Bucket(key=BucketKey.WEIGHTS, bytes=5.0, terms=(terms[0], terms[2]), note="n")
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert type(fast.bytes) is float
    with pytest.raises(FrozenInstanceError):
        fast.bytes = 1.0  # type: ignore[misc]
    assert replace(fast, note="m").note == "m" and fast.note == "n"


def test_keyword_arguments_are_part_of_the_key() -> None:
    one = plan()
    for trainable in (True, False, True):
        got = layer_activations(one, trainable_block=trainable)
        assert got == layer_activations.__wrapped__(one, trainable_block=trainable)  # type: ignore[attr-defined]
    assert layer_activations(one, trainable_block=True) == layer_activations(one, True)
    for parallel in (False, True, False):
        assert loss_memory(one, parallel) == loss_memory.__wrapped__(one, parallel)  # type: ignore[attr-defined]


def test_a_kept_loss_answer_cannot_be_changed_by_its_reader() -> None:
    # loss_memory keeps its last answer; its terms are tuples, and split() with nothing to divide
    # hands back a new list, so a reader that appends (as the rank's phases do) leaves the answer as it was.
    one = plan()
    kept = loss_memory(one)
    assert isinstance(kept.forward, tuple) and isinstance(kept.backward, tuple)
    mine = split(kept.forward, 1, "no split")
    assert mine == list(kept.forward) and mine is not kept.forward
    mine.append(Term("mine", "0", 0.0))
    assert loss_memory(one) is kept and len(kept.forward) == len(mine) - 1


def test_the_plan_fields_of_a_context_are_kept_per_plan_never_stale() -> None:
    from core.training.activations import _context, _plan_fields

    full = plan()
    assert _plan_fields(full) is _plan_fields(full)  # the same plan: the same answer object
    longer = full.with_workload(micro_batch=8)
    assert _plan_fields(longer)["n"] == 4 * _plan_fields(full)["n"]  # a changed plan: computed again
    fp32 = plan(method=Method.LORA).with_changes(autocast="none")
    assert _plan_fields(fp32) == _plan_fields.__wrapped__(fp32)  # type: ignore[attr-defined]
    one, other = _context(full, True, ()), _context(full, False, ("q_proj",))
    assert (one.trainable, one.lora, other.trainable, other.lora) == (True, (), False, ("q_proj",))
    with pytest.raises(FrozenInstanceError):
        one.n = 1  # type: ignore[misc]


def test_fast_built_terms_and_phases_are_frozen_equal_and_hashable() -> None:
    from core.breakdown import Phase, StepPhase

    term = Term("a", "1 + 1", 2.0)
    assert term == Term(label="a", formula="1 + 1", bytes=2.0) and hash(term) == hash(Term("a", "1 + 1", 2.0))
    assert repr(term) == "Term(label='a', formula='1 + 1', bytes=2.0)"
    with pytest.raises(FrozenInstanceError):
        term.bytes = 1.0  # type: ignore[misc]
    bucket = make_bucket(BucketKey.WEIGHTS, [term])
    phase = Phase("p", (bucket,))
    assert phase.description == "" and phase.kind is StepPhase.STEP
    assert phase == Phase(name="p", buckets=(bucket,), description="", kind=StepPhase.STEP)
    assert phase.allocated_bytes == 2.0 and replace(phase, buckets=()).allocated_bytes == 0.0
    with pytest.raises(FrozenInstanceError):
        phase.name = "q"  # type: ignore[misc]


def test_value_caches_of_names_answer_as_uncached() -> None:
    from core.catalogue import Generation, generation
    from core.training.compute import _part_label

    assert generation("h100-sxm") is generation.__wrapped__("h100-sxm") is Generation.HOPPER
    assert generation("my-card") is Generation.OTHER
    assert _part_label("gemm_bytes") == _part_label.__wrapped__("gemm_bytes")
    from core.catalogue import amd_target

    # gpus.json: mi300x is an Instinct card of target gfx942 (core.catalogue._AMD_TARGET_PREFIXES); h100-sxm NVIDIA's.
    for card in ("mi300x", "h100-sxm", "my-card"):
        assert amd_target(card) == amd_target.__wrapped__(card)
    assert amd_target("mi300x") == "gfx942" and amd_target("h100-sxm") is None


def test_the_phases_share_one_optimizer_bucket_equal_to_one_made_again() -> None:
    """core.training.detailed._Parts.optim_bucket / loss_held_bucket: made once per rank's parts and held by
    each phase that holds them, the same bucket make_bucket makes of the same terms."""
    from core.breakdown import StepPhase
    from core.estimate import estimate
    from core.plan import Accounting

    for one in (plan(accounting=Accounting.DETAILED), plan(accounting=Accounting.DETAILED, method=Method.LORA)):
        rank = estimate(one).ranks[0]
        assert rank.evaluation is not None
        phases = {p.kind: p for p in rank.phases}  # the forward, the backward's highest phase, the step
        optimizer = phases[StepPhase.FORWARD].bucket(BucketKey.OPTIMIZER)
        backward = next(p for p in rank.phases if p.kind.is_backward)
        assert backward.bucket(BucketKey.OPTIMIZER) is optimizer
        assert rank.evaluation.bucket(BucketKey.OPTIMIZER) is optimizer
        assert optimizer == make_bucket(BucketKey.OPTIMIZER, list(optimizer.terms))
        assert optimizer.bytes > 0  # AdamW's moments (full) or the adapters' (LoRA)
        held = phases[StepPhase.OPTIMIZER].bucket(BucketKey.ACTIVATIONS)
        assert held == make_bucket(BucketKey.ACTIVATIONS, list(held.terms))


def test_optimizer_terms_are_kept_per_plan_and_handed_out_as_new_lists() -> None:
    from core.roles import dtypes_for
    from core.training.optimizer import _optimizer_terms, optimizer_terms

    full = plan()
    counts, dt = param_counts(full), dtypes_for(full)
    assert _optimizer_terms(full, counts, dt) is _optimizer_terms(full, counts, dt)  # the same answer object
    first = optimizer_terms(full, counts, dt)
    first.append(Term("x", "1", 1.0))  # a caller's list: the kept answer does not change
    assert optimizer_terms(full, counts, dt) == list(_optimizer_terms.__wrapped__(full, counts, dt))  # type: ignore[attr-defined]
    lora = replace(full, method=Method.LORA)
    lora_counts = param_counts(lora)
    assert optimizer_terms(lora, lora_counts, dtypes_for(lora)) != first[:-1]  # a changed plan: computed again
    assert sum(t.bytes for t in optimizer_terms(lora, lora_counts, dtypes_for(lora))) < sum(t.bytes for t in first[:-1])


def test_layer_acts_bytes_are_summed_once_and_stay_equal() -> None:
    from core.breakdown import LayerActs

    acts = LayerActs((Term("a", "1", 1.0), Term("b", "2", 2)))
    assert acts.bytes == 3.0 and type(acts.bytes) is float
    assert acts == LayerActs((Term("a", "1", 1.0), Term("b", "2", 2))) and hash(acts) == hash(LayerActs(acts.items))
    assert replace(acts, items=(Term("c", "5", 5.0),)).bytes == 5.0


def test_a_fast_built_gemm_is_frozen_equal_and_hashable() -> None:
    from core.training.flops import Gemm

    gemm = Gemm("q", 4, 8, "column", True)
    assert (gemm.share, gemm.count, gemm.weight) == (1.0, 1, 32.0)
    assert gemm == Gemm(name="q", k=4, n=8, split="column", trains=True, share=1.0, count=1)
    assert hash(gemm) == hash(Gemm("q", 4, 8, "column", True)) and replace(gemm, count=2).weight == 64.0
    with pytest.raises(FrozenInstanceError):
        gemm.k = 1  # type: ignore[misc]


def test_a_head_context_is_the_block_context_with_the_head_trainable() -> None:
    from core.training.activations import _context

    # outside_blocks builds the head's context as _context does, not by replace(): the same record.
    for one in (plan(), plan(method=Method.LORA), plan(method=Method.FROZEN, frozen_layers=2)):
        for lora in ((), ("lm_head",)):
            assert _context(one, False, lora) == replace(_context(one, True, lora), trainable=False)
            assert _context(one, True, lora) == replace(_context(one, False, lora), trainable=True)


@dataclass(frozen=True)
class _Plain:
    a: int
    b: str = "b"
    c: list[int] = field(default_factory=list)


@fills_fields
@dataclass(frozen=True)
class _Filled:
    a: int
    b: str = "b"
    c: list[int] = field(default_factory=list)


def test_a_filled_record_is_the_one_the_dataclass_builds() -> None:
    # The values are arbitrary: what is compared is the two classes' instances, field by field.
    for args, named in (((1,), {}), ((1, "x", [2]), {}), ((), {"a": 3, "c": [4]}), ((5,), {"b": "y"})):
        filled, plain = _Filled(*args, **named), _Plain(*args, **named)  # type: ignore[arg-type]
        assert vars(filled) == vars(plain) and list(vars(filled)) == list(vars(plain))  # same fields, same order
        assert repr(filled) == repr(plain).replace("_Plain", "_Filled")
        assert filled == _Filled(*args, **named) and hash(replace(filled, c=None)) == hash(replace(filled, c=None))  # type: ignore[arg-type]
    assert _Filled(1).c == [] and _Filled(1).c is not _Filled(1).c  # the factory called per instance
    with pytest.raises(FrozenInstanceError):
        _Filled(1).a = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        _Filled()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _Filled(1, d=2)  # type: ignore[call-arg]
    names = [(p.name, p.default) for p in inspect.signature(_Filled).parameters.values()]
    assert names[:2] == [("a", inspect.Parameter.empty), ("b", "b")] and names[2][0] == "c"


def test_fills_fields_refuses_what_it_does_not_build() -> None:
    @dataclass(frozen=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True)
    class Derived:
        a: int
        b: int = field(init=False, default=0)

    @dataclass(frozen=True)
    class WithInitVar:
        a: int
        scale: InitVar[int]

    @dataclass(frozen=True, kw_only=True)
    class KeywordsOnly:
        a: int

    @dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    for cls in (Checked, Derived, WithInitVar, KeywordsOnly, Slotted):
        with pytest.raises(TypeError, match="not a plain dataclass"):
            fills_fields(cls)
    with pytest.raises(TypeError):
        fills_fields(int)


def test_the_run_plan_is_one_object_per_plan_and_follows_its_virtual_tokens() -> None:
    from core.estimate import estimate
    from core.plan import as_run

    prompt = plan(method=Method.PROMPT_TUNING).with_input("lora.virtual_tokens", 20)
    run = as_run(prompt)
    # The ranks' memory and the step's time read the one run plan (their identity caches meet on it).
    assert as_run(prompt) is run
    assert run.workload.seq_len == 1024 + 20  # plan(): seq 1024; PEFT puts the 20 virtual tokens before it
    # The same plan but its virtual tokens: a new run plan and new figures, never the last answer.
    more = prompt.with_input("lora.virtual_tokens", 200)
    assert as_run(more).workload.seq_len == 1024 + 200
    first, second = estimate(prompt), estimate(more)
    assert second.compute.flops_per_token > first.compute.flops_per_token
    assert second.total_bytes > first.total_bytes
    as_run.cache_clear()  # type: ignore[attr-defined]
    assert estimate(more).compute == second.compute
    assert estimate(more).total_bytes == second.total_bytes


def test_an_input_is_read_from_the_plan_it_is_asked_of_never_a_kept_one() -> None:
    from functools import reduce

    from core.inputs import INPUTS

    lora = plan(method=Method.LORA)
    for one in (plan(), lora):
        for spec in INPUTS:  # each input as its dotted path names it
            value = reduce(getattr, spec.path.split("."), one)
            assert one.input_value(spec.path) == (0 if value is None else value)
    # The path's reader is kept, never a plan's value: the next plan's own rank is read.
    assert lora.with_input("lora.rank", 64).input_value("lora.rank") == 64  # (typed here)
    assert lora.input_value("lora.rank") != 64
    with pytest.raises(AttributeError):
        lora.input_value("lora.no_such_input")


def test_trainable_tensors_are_kept_per_plan_never_for_another() -> None:
    # Two LoRA plans that differ only deep inside the plan (lora.targets; the model's depth): each is counted
    # for itself, the kept answer of the other never read.
    lora = plan(method=Method.LORA)
    more = lora.with_changes(lora=replace(lora.lora, targets=("q_proj", "k_proj", "v_proj", "o_proj")))
    deeper = replace(lora, model=replace(lora.model, num_layers=lora.model.num_layers + 4))
    uncached = trainable_tensors.__wrapped__  # type: ignore[attr-defined]
    counted = [trainable_tensors(one) for one in (lora, more, lora, deeper)]
    assert counted == [uncached(one) for one in (lora, more, lora, deeper)]
    assert counted[0] < counted[1] and counted[0] < counted[3]


def test_a_replaced_record_is_the_one_dataclasses_replace_makes() -> None:
    prompt = plan(method=Method.PROMPT_TUNING)
    for one, changes in (
        (prompt, {"workload": replaced(prompt.workload, seq_len=2048)}),
        (prompt.workload, {"seq_len": 4096, "micro_batch": 8}),
        (plan(), {"method": Method.LORA}),
    ):
        ours, theirs = replaced(one, **changes), replace(one, **changes)
        assert ours == theirs and hash(ours) == hash(theirs) and repr(ours) == repr(theirs)
        assert list(vars(ours)) == list(vars(theirs))  # the same fields, in the same order (the derived one last)
        assert ours is not one and one != ours
    # The checks of __post_init__ run as they do under replace(): a refused value is refused.
    with pytest.raises(PlanError):
        replaced(prompt.workload, seq_len=0)
    with pytest.raises(PlanError):
        replaced(plan(), frozen_layers=10_000)  # more frozen blocks than Llama-3.2-1B's 16
    with pytest.raises(TypeError, match="no field"):
        replaced(prompt, no_such_field=1)


def test_replaced_refuses_what_it_cannot_make_as_replace_does() -> None:
    @dataclass(frozen=True)
    class WithDefaultDerived:
        a: int
        b: int = field(init=False, default=0)

    @dataclass(frozen=True)
    class WithInitVar:
        a: int
        b: InitVar[int] = 0

    @dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    @dataclass(frozen=True, init=False)
    class NoInit:
        a: int

        def __init__(self, a: int) -> None:
            object.__setattr__(self, "a", a)

    @dataclass(frozen=True)
    class OwnInit:  # dataclass() keeps an __init__ of the class's own, which may do more than store
        a: int

        def __init__(self, a: int) -> None:
            object.__setattr__(self, "a", abs(a))

    for cls in (WithDefaultDerived, WithInitVar, Slotted, NoInit, OwnInit):
        with pytest.raises(TypeError, match="not a plain dataclass"):
            replaced(cls(1), a=2)
    assert replaced(Bucket(BucketKey.WEIGHTS, 1.0), bytes=2.0) == Bucket(BucketKey.WEIGHTS, 2.0)  # fills_fields
    with pytest.raises(TypeError, match="not a plain dataclass"):
        replaced(3, real=1)


def test_a_once_value_is_worked_out_at_its_first_reading_only() -> None:
    calls: list[int] = []

    @dataclass(frozen=True)
    class Record:
        a: int

        @Once
        def double(self) -> int:
            calls.append(self.a)
            return 2 * self.a

    one, other = Record(3), Record(5)
    assert (one.double, one.double, other.double) == (6, 6, 10)
    assert calls == [3, 5]  # once per instance, never another instance's
    assert one == Record(3) and hash(one) == hash(Record(3))  # not a field: equality and hashing ignore it
    assert isinstance(Record.__dict__["double"], Once)
