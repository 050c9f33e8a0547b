"""What prime-rl's chunked log-prob head holds, measured on small CPU tensors with prime-rl's own code
(docs/REAL_GPU_MEMORY.md, "prime-rl's RL rows, scored"; core.training.activations._logprob_head). Branch h82rl.

The head is ``_ChunkedLogProbEntropyFn`` of PrimeIntellect-ai/prime-rl 8718eb14
``src/prime_rl/trainer/models/layers/lm_head.py``, loaded from that file (pass its path: ``git show
8718eb14:src/prime_rl/trainer/models/layers/lm_head.py > /tmp/lm_head.py`` in a clone) and run as the RL loop runs it:
bf16 hidden states and head weight that need gradients, the log-probs times a float32 coefficient summed as the policy
loss (rl/loss.py ``-(coeff.detach() * trainer_logprobs)``), the entropy unused. Live storage bytes are counted with
live_bytes.py through the forward and through ``backward()``.

Expected from the source (the planner's rule, per N·C = tokens × the 2,048-column chunk): the forward's high point
holds a chunk's bf16 logits, their float32 copy and two float32 chunks of the online logsumexp, 14 B per N·C; the
backward's holds the new chunk's logits and float32 copy, x − log-sum-exp and its exp, the previous chunk's softmax and
logits' gradient (Python rebinds each name only once its new value exists), 22 B per N·C, beside the input's and
the weight's zero-filled gradients (N·d and V·d, bf16) and the previous chunk's weight gradient (C·d). In float32
``logits.to(torch.float32)`` returns the logits themselves: 12 and 20 B per N·C. What is left over is per-token
(the running max, sums, labels' masks: a few bytes a token), printed as bytes a token.

    .venv-measure/bin/python tools/measure/logprob_head_check.py /tmp/lm_head.py   # torch 2.13.0 CPU
"""

from __future__ import annotations

import sys
import types

import torch
from live_bytes import LiveBytes

N, D, V, C = 512, 64, 5000, 2048  # tokens, hidden size, vocabulary (chunks of 2,048, 2,048 and 904), chunk


def _load(path: str) -> types.ModuleType:
    """prime-rl's lm_head.py as a module; its one import from prime-rl (the logger) stubbed."""
    for name in ("prime_rl", "prime_rl.utils"):
        sys.modules.setdefault(name, types.ModuleType(name))
    logger = types.ModuleType("prime_rl.utils.logger")
    logger.get_logger = lambda: None  # type: ignore[attr-defined]
    sys.modules["prime_rl.utils.logger"] = logger
    module = types.ModuleType("prime_rl_lm_head")
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), module.__dict__)  # the measured source itself
    return module


def _known(mode: LiveBytes, *tensors: torch.Tensor) -> LiveBytes:
    """``mode`` told of storages made before it: a view of one (``weight[start:end]``) is not a new storage."""
    for t in tensors:
        mode.seen[t.untyped_storage().data_ptr()] = 0
    return mode


def main(path: str, dtype: torch.dtype) -> None:
    head = _load(path)
    torch.manual_seed(0)
    x = dtype.itemsize
    hidden = torch.randn(N, D, dtype=dtype, requires_grad=True)
    weight = (torch.randn(V, D) * 0.05).to(dtype).requires_grad_()
    labels = torch.randint(0, V, (N,))
    coeff = torch.randn(N)
    nc = N * C

    forward = _known(LiveBytes(), hidden, weight, labels, coeff)
    with forward:
        logprobs, entropy = head._ChunkedLogProbEntropyFn.apply(hidden, weight, labels, 1.0, C)
    outputs = 2 * N * 4  # the float32 log-probs and entropy
    per = x + 12 if x != 4 else 12  # the logits (and their float32 copy) and two float32 chunks
    rule = per * nc
    print(f"torch {torch.__version__}; {dtype}; N = {N}, d = {D}, V = {V}, C = {C}")
    print(
        f"forward high point {forward.peak:,} B at {forward.at}; rule {per} x N·C = {rule:,} B; "
        f"left over {(forward.peak - rule) / N:.1f} B a token"
    )
    print(f"    kept after it: {forward.live:,} B (log-probs, entropy, log-sum-exp: {outputs + N * 4:,} B)")

    loss = -(coeff * logprobs).sum()
    backward = _known(LiveBytes(), hidden, weight, labels, coeff, logprobs, entropy, loss)
    with backward:
        loss.backward()
    grads = (N * D + V * D + C * D) * x
    per = per + 8  # and the previous chunk's softmax and logits' gradient
    rule = per * nc + grads
    print(
        f"backward high point {backward.peak:,} B at {backward.at}; rule {per} x N·C + (N·d + V·d + C·d) x {x} = "
        f"{rule:,} B; left over {(backward.peak - rule) / N:.1f} B a token"
    )
    assert entropy.shape == (N,)


if __name__ == "__main__":
    main(sys.argv[1], torch.bfloat16)
    main(sys.argv[1], torch.float32)
