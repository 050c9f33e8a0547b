"""SGLang's weights as free device memory sees them: each parameter through PyTorch's caching allocator.

SGLang sizes its token pool from ``torch.cuda.mem_get_info`` after ``empty_cache``
(``get_available_gpu_memory`` in ``sglang/srt/utils.py``, 0.4.2 and 0.4.3.post4 wheels), so the
weights it subtracts are the allocator's segments, not the tensors. The rule lives in
:mod:`core.serving.sglang_weights` (the rank's tensors in SGLang's construction order) and
:func:`core.allocator.resident_segment_bytes` (PyTorch's rules); this prints it beside the held-out
SGLang logs' ``Load weight end … mem usage`` (docs/SERVING.md, "SGLang's weights are allocator
segments").

    python benchmarks/realgpu/sglang_segments.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.catalogue import find_model  # noqa: E402
from core.dtypes import WeightFormat  # noqa: E402
from core.model import ModelSpec  # noqa: E402
from core.serving.sglang_weights import sglang_weights  # noqa: E402
from core.units import GiB  # noqa: E402


def load_usage(model: ModelSpec, tp: int) -> tuple[float, float]:
    """(segments, tensors) in GiB that loading bf16 weights takes on one rank, the rotary table included."""
    replay = sglang_weights(model, WeightFormat.BF16, tp, 1)
    assert replay is not None
    return replay.segments / GiB, (replay.tensors + replay.rope) / GiB


# The held-out SGLang logs' "Load weight end … mem usage" (GiB): QwQ-32B at TP 4 on L4s
# (Qwen2.5-32B's tensors; didier-durand/llms-in-clouds@b001c869 docs/sglang.md, "mem usage=15.54
# GB") and R1-Distill-Qwen-7B on an RTX 3090 (jerryzsj/my-deepseek-r1@bd9f5c77 README.md: 22.76
# GB free before the weights, 8.37 after).
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
