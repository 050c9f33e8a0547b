"""prime-rl's chunked log-prob head as a plan setting (``logprob_head``; branch h82rl).

prime-rl's RL trainer replaces the head with ``FusedOutputLinear`` (PrimeIntellect-ai/prime-rl 8718eb14
``src/prime_rl/trainer/models/layers/lm_head.py``; ``rl/config.py`` ``auto_setup_fused_lm_head_chunk_size``: 2,048
columns): ``_ChunkedLogProbEntropyFn`` computes each token's log-prob and entropy by an online logsumexp over
vocabulary chunks, saves (hidden, weight, labels, logz) and recomputes every chunk in the backward. Its high points
were measured with prime-rl's own Function (tools/measure/logprob_head_check.py, torch 2.13.0 CPU, N 512, d 64,
V 5,000): bf16 forward 14,702,680 B = 14 × N·C + 44 B a token; backward 24,044,636 B = 22 × N·C + (N·d + V·d + C·d)
× 2 + 16 B a token, at ``aten.exp``; float32 12 × N·C and 20 × N·C + (N·d + V·d + C·d) × 4, the same leftovers.
"""

from __future__ import annotations

from core.estimate import estimate
from core.losses import LossChoice, loss_choice, loss_options
from core.plan import Plan, Preset
from core.presets import plan_for_model
from core.training.activations import PRIME_RL_LOGPROB_CHUNK, PRIME_RL_PER_TOKEN_BYTES, loss_memory

C = 2_048  # rl/config.py auto_setup_fused_lm_head_chunk_size at 8718eb14


def _qwen(**changes: object) -> Plan:
    # Qwen3 0.6B (Qwen/Qwen3-0.6B config.json: hidden 1,024, vocabulary 151,936, tied embeddings), pure bf16.
    return plan_for_model("qwen3-0.6b").with_changes(**{"preset": Preset.PURE_BF16, "logprob_head": True, **changes})


def _nc_bytes(terms: tuple[object, ...], n: int) -> float:
    """The terms that scale with N·C (their formula says so)."""
    return sum(t.bytes for t in terms if "N·C" in t.formula)  # type: ignore[attr-defined]


def test_the_chunk_is_prime_rls_default() -> None:
    assert PRIME_RL_LOGPROB_CHUNK == C


def test_the_head_holds_what_its_function_holds() -> None:
    plan = _qwen()
    n = plan.workload.micro_batch * plan.workload.seq_len
    d, v = plan.model.hidden_size, plan.model.vocab_size
    head = loss_memory(plan)
    # Forward (bf16 logits): 14 B per N·C, measured above, and the per-token tensors.
    assert _nc_bytes(head.forward, n) == 14 * n * C
    assert sum(t.bytes for t in head.forward) == 14 * n * C + n * PRIME_RL_PER_TOKEN_BYTES
    # Backward: 22 B per N·C beside the input's, the weight's and the previous chunk's weight gradients (bf16).
    assert _nc_bytes(head.backward, n) == 22 * n * C
    grads = (n * d + v * d + C * d) * 2
    assert sum(t.bytes for t in head.backward) == 22 * n * C + grads + n * PRIME_RL_PER_TOKEN_BYTES
    # No N·V tensor: 22 B per N·C against transformers' three float32 N·V (12 B per N·V) at the backward's start,
    # 12 V / 22 C = 40 times less on Qwen3's vocabulary.
    eager = loss_memory(plan.with_changes(logprob_head=False))
    assert _nc_bytes(head.backward, n) * 40 < sum(t.bytes for t in eager.backward)


def test_float32_logits_need_no_copy() -> None:
    plan = _qwen(preset=Preset.FP32)
    n = plan.workload.micro_batch * plan.workload.seq_len
    head = loss_memory(plan)
    # logits.to(torch.float32) returns the float32 logits themselves: 12 and 20 B per N·C (measured in float32).
    assert _nc_bytes(head.forward, n) == 12 * n * C
    assert _nc_bytes(head.backward, n) == 20 * n * C


def test_it_is_one_entry_of_the_loss_list_and_the_others_come_first() -> None:
    plan = _qwen()
    assert loss_choice(plan) is LossChoice.LOGPROB_HEAD
    assert LossChoice.LOGPROB_HEAD in [o.choice for o in loss_options(plan)]
    # Liger's fused loss comes first (core.inputs.LOSS_KERNELS order): the head then counts nothing of its own.
    fused = plan.with_changes(fused_loss=True)
    assert loss_memory(fused) == loss_memory(fused.with_changes(logprob_head=False))
    # The loop's kept output is the eager loss's: moot under the head (its log-probs are per token).
    kept = plan.with_changes(loop_keeps_output=True)
    assert estimate(kept).peak_bytes == estimate(plan).peak_bytes
