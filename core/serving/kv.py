"""The KV cache: the one home of its formula.

Per token and layer a decoder caches one key and one value vector for each KV head:
2 · KV heads · head width · bytes. Tensor parallelism splits the KV heads across ranks,
each rank keeping at least one (vLLM replicates KV heads when the tensor-parallel size
exceeds their number: ``ModelConfig.get_num_kv_heads`` returns max(1, heads // tp)).
Layers that attend within a sliding window keep at most ``window`` positions.
"""

from __future__ import annotations

from core.model import ModelSpec


def kv_heads_per_rank(model: ModelSpec, tensor_parallel: int = 1) -> int:
    return max(1, model.num_kv_heads // tensor_parallel)


def kv_bytes_per_token_layer(model: ModelSpec, bytes_per_element: float, tensor_parallel: int = 1) -> float:
    """One token in one layer on one rank: 2 (K and V) · KV heads per rank · head width · bytes."""
    return 2 * kv_heads_per_rank(model, tensor_parallel) * model.head_dim * bytes_per_element


def kv_bytes_per_token(model: ModelSpec, bytes_per_element: float, tensor_parallel: int = 1) -> float:
    """One token across all layers (no window cap): 2 · L · KV heads · head width · bytes."""
    return model.num_layers * kv_bytes_per_token_layer(model, bytes_per_element, tensor_parallel)


def window_split(model: ModelSpec) -> tuple[int, int, int]:
    """(full-attention layers, sliding-window layers, window) — window 0 when there is none."""
    if not model.sliding_window:
        return model.num_layers, 0, 0
    windowed = model.sliding_window_layers
    return model.num_layers - windowed, windowed, model.sliding_window


def cached_positions(model: ModelSpec, tokens: int) -> int:
    """Layer-positions one sequence of ``tokens`` keeps: full layers keep all, windowed
    layers at most the window."""
    full, windowed, window = window_split(model)
    return full * tokens + windowed * (min(tokens, window) if windowed else 0)


def kv_cache_bytes(
    model: ModelSpec, tokens: int, batch: int, bytes_per_element: float, tensor_parallel: int = 1
) -> float:
    """KV cache of ``batch`` sequences of ``tokens``, windows respected, on one rank."""
    return kv_bytes_per_token_layer(model, bytes_per_element, tensor_parallel) * batch * cached_positions(model, tokens)


def lesson_kv_cache_bytes(layers: int, width: int, tokens: int, batch: int = 1, bytes_per_element: float = 2) -> float:
    """The lesson's form, 2·L·d·n·B·b: the same formula when every head has its own KV
    (KV heads · head width = d) and no layer has a window."""
    return 2 * layers * width * tokens * batch * bytes_per_element
