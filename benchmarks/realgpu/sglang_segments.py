"""SGLang's weights as free device memory sees them: each parameter through PyTorch's caching allocator.

SGLang sizes its token pool from ``torch.cuda.mem_get_info`` after ``empty_cache``
(``get_available_gpu_memory`` in ``sglang/srt/utils.py``, 0.4.2 and 0.4.3.post4 wheels), so the
weights it subtracts are the allocator's segments, not the tensors: every parameter is its own
request, rounded and placed by the rules of :mod:`core.allocator` (read from PyTorch's source).
This replays a dense Qwen2-style model's parameters in the order SGLang builds them (embedding;
per layer: input norm, fused qkv and its bias, o, post-attention norm, fused gate_up, down; final
norm; head) for one tensor-parallel rank, to check the held-out SGLang logs' ``Load weight end …
mem usage`` (docs/SERVING.md, "Held-out start-up logs, second round"). A check, not a rule of the
estimator: the plan's layout holds bytes per rank, not SGLang's tensors.

    python benchmarks/realgpu/sglang_segments.py
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.allocator import (  # noqa: E402
    SMALL_SEGMENT_BYTES,
    AllocatorConfig,
    fits_free_block,
    is_small,
    round_size,
    segment_size,
    splits,
)
from core.catalogue import find_model  # noqa: E402
from core.model import ModelSpec  # noqa: E402
from core.units import GiB  # noqa: E402

BF16 = 2


@dataclass
class Replay:
    """The device's segments after a run of allocations that are never freed."""

    config: AllocatorConfig = field(default_factory=AllocatorConfig)
    segments: int = 0  # bytes cudaMalloc'd
    requested: int = 0  # bytes the tensors hold
    small_free: list[int] = field(default_factory=list)
    large_free: list[int] = field(default_factory=list)

    def allocate(self, nbytes: int) -> None:
        size = round_size(nbytes)
        self.requested += nbytes
        small = is_small(size)
        pool = self.small_free if small else self.large_free
        fitting = [b for b in pool if fits_free_block(b, size, self.config)]
        if fitting:
            block = min(fitting)  # best fit
            pool.remove(block)
        else:
            block = SMALL_SEGMENT_BYTES if small else segment_size(size)
            self.segments += block
        if splits(block, size, small, self.config):
            pool.append(block - size)


def qwen2_rank_tensors(model: ModelSpec, tp: int) -> list[int]:
    """Bytes of each bf16 parameter on one rank of ``tp``, in SGLang's construction order."""
    h, head = model.hidden_size, model.head_dim
    qkv = (model.num_heads + 2 * model.num_kv_heads) * head // tp
    inter = model.intermediate_size // tp
    layer = [h * BF16, qkv * h * BF16]
    layer += [qkv * BF16] if model.qkv_bias else []
    layer += [h * model.num_heads * head // tp * BF16, h * BF16, 2 * inter * h * BF16, inter * h * BF16]
    embedding = model.vocab_size // tp * h * BF16
    head_bytes = [] if model.tie_embeddings else [embedding]
    return [embedding, *layer * model.num_layers, h * BF16, *head_bytes]


def rope_table_bytes(model: ModelSpec) -> int:
    """The float32 cos/sin table SGLang builds while loading (core.serving.engines)."""
    return model.max_position_embeddings * model.head_dim * 4


def load_usage(model: ModelSpec, tp: int) -> tuple[float, float]:
    """(segments, tensors) in GiB that loading takes on one rank, the rotary table included."""
    replay = Replay()
    for nbytes in qwen2_rank_tensors(model, tp):
        replay.allocate(nbytes)
    replay.allocate(rope_table_bytes(model))
    return replay.segments / GiB, replay.requested / GiB


# The held-out SGLang logs' "Load weight end … mem usage" (GiB): QwQ-32B at TP 4 on L4s
# (Qwen2.5-32B's tensors) and R1-Distill-Qwen-7B on an RTX 3090 (22.76 − 8.37 free).
LOGGED: dict[str, tuple[str, int, float]] = {
    "durand-sglang0434-qwq32b-4xl4-tp4": ("qwen2.5-32b", 4, 15.54),
    "jerryzsj-sglang042-r1-distill-qwen7b-3090": ("deepseek-r1-distill-qwen-7b", 1, 22.76 - 8.37),
}


def main() -> None:
    for log_id, (model_id, tp, logged) in LOGGED.items():
        segments, tensors = load_usage(find_model(model_id).spec, tp)
        print(f"{log_id}: logged {logged:.3f} GiB, segments {segments:.3f}, tensors {tensors:.3f}")


if __name__ == "__main__":
    main()
