"""How much of a matmul's tensor-core work its shape wastes: tile and wave quantization.

NVIDIA's "Matrix Multiplication Background User's Guide"
(docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication, §"Dimension
Quantization Effects" and §"Typical Tile Dimensions In cuBLAS And Performance") says how a GEMM's
output (M × N) is cut into thread-block tiles, one tile per SM at a time:

- **tile quantization**: a dimension that is not a multiple of the tile leaves the last tile
  partly empty, and the empty part costs as much as the full one;
- **wave quantization**: the tiles run in waves of one per SM; the last wave, partly full,
  costs a whole one.

cuBLAS's most efficient tiles are 256 × 128 and 128 × 256 (the guide's list, "most efficient"
first: 256x128 and 128x256, 128x128, 256x64 and 64x256, 128x64 and 64x128, 64x64 "least
efficient"); the guide's A100 example runs one 256 × 128 tile per SM, a wave of 108 tiles. The
share of the launched tile slots the output fills is the matmul's shape efficiency; its time at
the peak is its FLOPs ÷ that share. Calculon (calculon-ai/calculon@caa4b11, calculon/processor.py,
systems/*.json ``gflops_efficiency``) sizes the same effect by a step curve of each op's FLOPs; the
tile count says which shapes lose, not only how big they are.

An output of fewer tiles than the card has SMs is split along its reduction: "For small problems,
however, there are too few threadblocks to efficiently occupy the entire GPU. As a recourse,
parallelizing the reduction performed during the inner product computation enables more
threadblocks to execute concurrently" (CUTLASS, media/docs/efficient_gemm.md, "Parallelized
Reductions: Split K"; cuBLASLt's ``CUBLASLT_ALGO_CONFIG_SPLITK_NUM``): a training step's weight
gradient (hidden × hidden, reduced over every token of the micro-batch) is such a matmul in a
small model. It is split into as many parts as whole copies of its tiles fit in one wave.

A matmul with an output side under a tile (a LoRA adapter's rank, a router's experts) is not
counted: it moves far more bytes than it computes, and its time is the roofline's bytes
(core.training.speed), which the tile does not change.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Final

# The guide's two most efficient cuBLAS tiles (rows × columns of the output), both orientations.
TILES: Final = ((256, 128), (128, 256))
# Below this on either output side the matmul is bandwidth-bound and left unquantized (above).
SMALLEST_SIDE: Final = 128


@lru_cache(maxsize=4096)
def shape_efficiency(m: float, n: float, sms: int | None, batch: int = 1) -> float:
    """The share of its launched tile slots an (m × n) output fills, with the better of the two
    orientations of cuBLAS's most efficient tile; 1.0 for a side under SMALLEST_SIDE. An output
    of less than one wave is split along its reduction (split-K, above) into as many parts as
    whole copies of it fit in a wave.

    ``batch`` outputs of the same shape launched as one batched GEMM (torch.bmm / baddbmm:
    cuBLAS's strided-batched GEMM, one grid over every matrix's tiles) share the waves: each
    matrix is tile-quantized alone, and the batch's tiles together fill the waves."""
    if m < SMALLEST_SIDE or n < SMALLEST_SIDE:
        return 1.0
    best = 0.0
    for rows, cols in TILES:
        tiles = math.ceil(m / rows) * math.ceil(n / cols) * batch
        fill = m * n * batch / (tiles * rows * cols)  # tile quantization
        if sms:
            blocks = tiles * max(1, sms // tiles)  # split-K below one wave
            fill *= blocks / (math.ceil(blocks / sms) * sms)  # wave quantization
        best = max(best, fill)
    return best
