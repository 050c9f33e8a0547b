"""PEFT's ``modules_to_save`` and ``trainable_token_indices``: what trains beside the adapters (branch h60mts).

Read at huggingface/peft 51c2ff66 and measured with peft 0.18.0, torch 2.13.0 (tools/measure/
modules_to_save_check.py):

- ``ModulesToSaveWrapper`` (src/peft/utils/other.py) keeps the original module, frozen, where it was and trains
  ``copy.deepcopy(original_module)``: a V × d copy in the dtype the module is stored in (the base's; bitsandbytes
  never quantises the embedding or the head, so under QLoRA the 16-bit or, after prepare_model_for_kbit_training,
  float32 dtype). PEFT's ``autocast_adapter_dtype`` casts adapter layers only: the copy stays 16-bit on a 16-bit
  base (measured). Its gradient and optimizer state follow the copy's dtype (``torch.zeros_like(param)``). On a
  tied model each listed module is copied on its own (two copies for both; peft 0.18.0 does so even with
  ``ensure_weight_tying`` when both are listed, measured), and the frozen original stays once.
- A trained head keeps its input for the weight gradient (a frozen one does not: autograd saves what the
  gradients it computes read, measured); its backward runs the weight-gradient matmul, 2·N·d·V FLOPs.
- A trained embedding's gradient is dense, V × d (``F.embedding`` with ``sparse=False``), in the gradients above.
- ``TrainableTokensLayer`` (src/peft/tuners/trainable_tokens/layer.py): ``trainable_tokens_delta`` (k × d, trained)
  and ``trainable_tokens_original`` (k × d buffer), both cast to float32 by ``autocast_adapter_dtype`` (measured);
  the forward builds ``W.index_copy(0, index, delta)``, a merged V × d copy in the base's dtype. The embedding's
  ``F.embedding`` keeps only the indices, so the copy is freed at once; on a tied model the head is wrapped too
  (``tied_adapter``) and its ``F.linear(x, W)`` keeps the merged copy and its input until the backward (measured:
  +128,000 B on the tiny model, the V × d bf16 matrix, and its N × d input).

Not modelled: the first block's norm input, which the frozen embedding's output needs no gradient for (measured
+N·d × 4 B once the embedding trains; this planner already counts every block's norm input), the embedding's
saved indices (N × 8 B), and a copy's step temporaries beyond the state.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from core.breakdown import Term
from core.format import sci
from core.inputs import Method, ModulesToSave
from core.params import modules_to_save_elements
from core.plan import Plan
from core.roles import Dtypes, saved_copy_bytes
from core.training.optimizer import tensor_state_bytes

# Enum members this module's hot paths compare with, read from their classes once: on Python 3.11 each
# ``Class.MEMBER`` read goes through EnumType.__getattr__'s slot, ~0.15 µs (core.plan's note; h74speed).
_MODULES_TO_SAVE_NONE: Final = ModulesToSave.NONE

__all__ = [
    "Trained",
    "extra_elements",
    "extra_grad_terms",
    "extra_state_terms",
    "extra_trained_note",
    "extra_weight_terms",
    "formed_gradients",
    "head_copy_trains",
    "merged_head_copy",
    "trained_tensors",
]


class Trained(NamedTuple):
    """One tensor trained beside the adapters: what it is, its shape, and its bytes per element."""

    label: str
    rows: int
    cols: int
    bytes: float

    @property
    def elements(self) -> int:
        return self.rows * self.cols


def copy_bytes(plan: Plan, dt: Dtypes) -> float:
    """Bytes per element of a modules_to_save copy: the module's stored dtype (module docstring)."""
    return saved_copy_bytes(plan, dt.base)


def trained_tensors(plan: Plan, dt: Dtypes) -> list[Trained]:
    """The copies modules_to_save trains and the trainable tokens' delta, in the order PEFT makes them."""
    lora, model = plan.lora, plan.model
    v, d = model.vocab_size, model.hidden_size
    out: list[Trained] = []
    if lora.modules_to_save.embedding:
        out.append(Trained("modules_to_save: embed_tokens copy", v, d, copy_bytes(plan, dt)))
    if lora.modules_to_save.head:
        out.append(Trained("modules_to_save: lm_head copy", v, d, copy_bytes(plan, dt)))
    if lora.trainable_tokens and plan.method is not Method.TRAINABLE_TOKENS:  # else the method's own parameter
        out.append(Trained("trainable tokens: delta rows", lora.trainable_tokens, d, dt.adapter))
    return out


def extra_elements(plan: Plan) -> int:
    """Parameters trained beside the adapters (what PEFT's print_trainable_parameters adds); the trainable-tokens
    method's rows are its own (core.params.flat_trained_sizes)."""
    rows = 0 if plan.method is Method.TRAINABLE_TOKENS else plan.lora.trainable_tokens
    return modules_to_save_elements(plan) + rows * plan.model.hidden_size


def head_copy_trains(plan: Plan) -> bool:
    """The output head's forward reads a trained weight: a modules_to_save copy of it, or the merged matrix of
    trainable tokens on a tied head (its input is then kept for the weight's gradient)."""
    lora = plan.lora
    return lora.modules_to_save.head or bool(lora.trainable_tokens and plan.model.tie_embeddings)


def merged_head_copy(plan: Plan, dt: Dtypes) -> list[Term]:
    """Trainable tokens on a tied head: the merged V × d matrix the head's F.linear keeps for the backward."""
    model = plan.model
    if not (plan.lora.trainable_tokens and model.tie_embeddings):
        return []
    b = copy_bytes(plan, dt)
    vd = model.vocab_size * model.hidden_size
    return [Term("trainable tokens: merged head matrix kept by the tied head", f"V·d × {b:g} B", vd * b)]


def extra_weight_terms(plan: Plan, dt: Dtypes) -> list[Term]:
    """The trained copies and the tokens' delta, plus the tokens' buffer of the original rows (same shape)."""
    terms = [Term(t.label, f"{t.rows:,} × {t.cols:,} × {t.bytes:g} B", t.elements * t.bytes) for t in _of(plan, dt)]
    k, d = plan.lora.trainable_tokens, plan.model.hidden_size
    if k:
        a = dt.adapter
        terms.append(Term("trainable tokens: original rows (buffer)", f"{k:,} × {d:,} × {a:g} B", k * d * a))
    return terms


def extra_grad_terms(plan: Plan, dt: Dtypes) -> list[Term]:
    """Each trained tensor's gradient, in its dtype (dense for the embedding copy)."""
    return [
        Term(f"gradient of the {t.label}", f"{t.rows:,} × {t.cols:,} × {t.bytes:g} B", t.elements * t.bytes)
        for t in _of(plan, dt)
    ]


def formed_gradients(plan: Plan, dt: Dtypes, *, head: bool) -> list[Term]:
    """A copy's gradient as the backward forms it, beside the one accumulated over earlier micro-batches: with
    gradient accumulation AccumulateGrad adds the new V × d tensor into ``.grad`` in place and frees it after
    (torch 2.13.0 torch/csrc/autograd/functions/accumulate_grad.h, "Case 2.3: In-place addition": ``variable_grad
    += new_grad``); the first micro-batch's is kept as ``.grad`` itself. The head's forms at the start of the
    backward, the embedding's at its end. None without accumulation, or with the step in the backward."""
    if plan.workload.grad_accum <= 1 or plan.optimizer_in_backward:
        return []
    setting = plan.lora.modules_to_save
    if not (setting.head if head else setting.embedding):
        return []
    name = "lm_head" if head else "embed_tokens"
    b = copy_bytes(plan, dt)
    vd = plan.model.vocab_size * plan.model.hidden_size
    label = f"modules_to_save: the {name} copy's new gradient before AccumulateGrad adds it in place"
    return [Term(label, f"V·d × {b:g} B", vd * b)]


def extra_state_terms(plan: Plan, dt: Dtypes, at: float | None = None) -> list[Term]:
    """The optimizer's state of each trained tensor, by the rules core.training.optimizer applies to a tensor of
    that size and dtype (8-bit optimizers keep a large tensor 8-bit; paged ones page it). ``at``: the bytes per
    element the optimizer steps the tensors in instead of their own (DeepSpeed ZeRO steps a float32 master
    partition of every trainable parameter, core.parallel.state._zero_optimizer_partition)."""
    terms = []
    for t in _of(plan, dt):
        t = t if at is None else t._replace(bytes=at)
        state, why = tensor_state_bytes(plan.optimizer, t.rows, t.cols, t.bytes)
        if state:
            terms.append(Term(f"optimizer state of the {t.label} ({why})", f"{sci(t.elements)} elements", state))
    return terms


def extra_trained_note(plan: Plan, dt: Dtypes) -> str:
    """One line for the breakdown's notes (and so the Diagnosis): the trained copies, and their weights,
    gradients and optimizer state in GB; empty without any."""
    tensors = _of(plan, dt)
    if not tensors:
        return ""
    parts = extra_weight_terms(plan, dt) + extra_grad_terms(plan, dt) + extra_state_terms(plan, dt)
    names = ", ".join(f"{t.label.split(': ', 1)[1]} ({t.rows:,} × {t.cols:,})" for t in tensors)
    total = sum(t.bytes for t in parts)
    return (
        f"Trained beside the adapters (PEFT modules_to_save / trainable tokens): {names}; with their gradients "
        f"and optimizer state {total / 1e9:.2f} GB. PEFT keeps each original, frozen, beside its copy."
    )


def _of(plan: Plan, dt: Dtypes) -> list[Trained]:
    if plan.lora.modules_to_save is _MODULES_TO_SAVE_NONE and not plan.lora.trainable_tokens:
        return []
    return trained_tensors(plan, dt)
