"""SDPA as an A100/H100 (sm80/sm90) would run it, for fake-CUDA runs.

On a CPU-only build ``F.scaled_dot_product_attention`` on (fake) CUDA tensors falls
back to the math kernel, because the CUDA ``_fused_sdp_choice`` stub does not exist.
:func:`patched_sdpa` replaces it, for the duration of a run, with a Python mirror of
ATen's ``scaled_dot_product_attention`` composite (aten/src/ATen/native/transformers/
attention.cpp) and of the CUDA backend choice (sdp_utils.cpp), in PyTorch's default
priority order flash -> memory-efficient -> math (cuDNN attention is last in that
order and never reached: math accepts everything).

The chosen kernel's ATen op is called directly; those ops have meta kernels and
autograd formulas, so autograd saves exactly what it saves on a GPU
(flash: out + logsumexp fp32 [B,H,S]; efficient: out + logsumexp fp32 [B,H,ceil32(S)];
math: the composite's own ops, scores included).

:class:`KernelWorkspaceMode` adds the scratch buffers the CUDA backward kernels
allocate internally (not visible as op outputs), so that the tracker sees them
alive at the same time as the kernel's outputs.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

_LOW = (torch.float16, torch.bfloat16)


def _release(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string such as ``2.13.0+cpu``."""
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


#: Whether the installed torch's CUDA memory-efficient kernel takes grouped-query k / v (``enable_gqa``, k and v
#: with fewer heads than q, at most one mask-free call). Through 2.13 sdp_utils.cpp's
#: ``check_grouped_query_attention`` refused them for that kernel and such a call ran the math kernel; from 2.14
#: it takes them (pytorch/pytorch PR 191085, in the 2.14.1 wheel; tools/measure/release_check.py; the planner's
#: rule is core.training.attention.efficient_takes_gqa). The op's signature is unchanged (2.14.1
#: torch/_meta_registrations.py ``meta__scaled_dot_product_efficient_attention``): k / v go in at their own heads.
EFFICIENT_TAKES_GQA = _release(torch.__version__) >= (2, 14)

#: counts of kernel choices made during the current run: {"flash": n, ...}
CHOICES: Counter[str] = Counter()
#: number of SDPA calls that got a materialised attn_mask
MASKED_CALLS: Counter[str] = Counter()


def choose_backend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None,
    is_causal: bool,
    enable_gqa: bool,
) -> str:
    """The kernel PyTorch picks on sm80/sm90 for dense 4-D inputs."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return "math"
    same_dtype = q.dtype == k.dtype == v.dtype
    hq, hk, hv = q.size(1), k.size(1), v.size(1)
    d_q, d_k, d_v = q.size(-1), k.size(-1), v.size(-1)
    heads_equal = hq == hk == hv
    gqa_ok = enable_gqa and hk == hv and hk > 0 and hq % hk == 0
    strides_ok = q.stride(-1) == 1 and k.stride(-1) == 1 and v.stride(-1) == 1
    nonzero = q.size(-2) > 0 and k.size(-2) > 0
    # flash (check_flash_attention): fp16/bf16, no mask, head dim <= 256 and equal,
    # GQA supported, causal needs square seq lens.
    if (
        same_dtype
        and q.dtype in _LOW
        and attn_mask is None
        and d_q == d_k == d_v
        and d_q <= 256
        and (heads_equal or gqa_ok)
        and not (is_causal and q.size(-2) != k.size(-2))
        and strides_ok
        and nonzero
    ):
        return "flash"
    # memory-efficient (check_mem_efficient_attention): fp32/fp16/bf16, any mask,
    # head dims aligned (4 elements fp32, 8 otherwise); grouped-query heads from 2.14 only.
    align = 4 if q.dtype == torch.float32 else 8
    gqa_efficient = gqa_ok and EFFICIENT_TAKES_GQA
    if (
        same_dtype
        and q.dtype in (torch.float32, *_LOW)
        and d_q == d_k
        and d_q % align == 0
        and d_v % align == 0
        and (heads_equal or gqa_efficient)
        and strides_ok
        and nonzero
    ):
        return "efficient"
    return "math"


def _convert_boolean_attn_mask(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.where(mask.logical_not(), -math.inf, torch.zeros((), dtype=dtype, device=mask.device))


def _pad_last_dim(t: torch.Tensor, multiple: int) -> torch.Tensor:
    d = t.size(-1)
    if d % multiple == 0:
        return t
    return F.pad(t, (0, multiple - d % multiple))


def _preprocess_mask(mask: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    align = 16
    last = mask.size(-1)
    if last % align != 0 or mask.stride(-2) % align != 0:
        pad = (align - last % align) % align
        padded = torch.empty((*mask.shape[:-1], last + pad), dtype=mask.dtype, device=mask.device)
        padded = padded[..., :last]
        padded.copy_(mask)
        mask = padded
    return mask.expand(q.size(0), q.size(1), q.size(2), k.size(2))


def sdpa_cuda(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    # The Autocast kernel of aten::scaled_dot_product_attention (CUDA list: lower_precision_fp)
    # casts floating inputs to the autocast dtype, then runs the op with autocast excluded.
    if torch.is_autocast_enabled("cuda"):
        low = torch.get_autocast_dtype("cuda")

        def cast(t: torch.Tensor | None) -> torch.Tensor | None:
            if t is None or not t.is_floating_point() or t.dtype in (low, torch.float64):
                return t
            return t.to(low)

        query, key, value, attn_mask = cast(query), cast(key), cast(value), cast(attn_mask)
        with torch.autocast("cuda", enabled=False):
            return _sdpa_cuda_noautocast(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    return _sdpa_cuda_noautocast(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def _sdpa_cuda_noautocast(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    backend = choose_backend(query, key, value, attn_mask, is_causal, enable_gqa)
    CHOICES[backend] += 1
    if attn_mask is not None:
        MASKED_CALLS[backend] += 1
    mask = _convert_boolean_attn_mask(attn_mask, query.dtype)
    if backend == "flash":
        og = query.size(-1)
        og_scale = scale if scale is not None else 1.0 / math.sqrt(og)
        qp, kp, vp = (_pad_last_dim(t, 8) for t in (query, key, value))
        out = aten._scaled_dot_product_flash_attention(qp, kp, vp, dropout_p, is_causal, False, scale=og_scale)[0]
        return out[..., :og] if out.size(-1) != og else out
    if backend == "efficient":
        compute_lse = torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad)
        if mask is not None:
            mask = _preprocess_mask(mask, query, key)
        return aten._scaled_dot_product_efficient_attention(
            query, key, value, mask, compute_lse, dropout_p, is_causal, scale=scale
        )[0]
    return aten._scaled_dot_product_attention_math(
        query, key, value, mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa
    )[0]


@contextlib.contextmanager
def patched_sdpa() -> Iterator[None]:
    orig = F.scaled_dot_product_attention

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        if query.device.type != "cuda":
            return orig(
                query,
                key,
                value,
                attn_mask=attn_mask,
                dropout_p=dropout_p,
                is_causal=is_causal,
                scale=scale,
                enable_gqa=enable_gqa,
            )
        return sdpa_cuda(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)

    F.scaled_dot_product_attention = sdpa
    torch.nn.functional.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        F.scaled_dot_product_attention = orig
        torch.nn.functional.scaled_dot_product_attention = orig


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


class KernelWorkspaceMode(TorchDispatchMode):
    """Allocate (and free right after) the scratch memory CUDA attention backward kernels use.

    flash (FlashAttention-2 mha_bwd): softmax_d fp32 [B,H,ceil128(Sq)], dq_accum fp32
    [B,ceil128(Sq),H,ceil32(D)], and for grouped-query attention dk/dv expanded to all
    query heads ([B,Sk,H,D] each, input dtype) before being summed down.
    memory-efficient (xFormers cutlass backward): delta fp32 [B,H,Sq]; for fp16/bf16 a
    fp32 grad-Q accumulator [B,Sq,H,D]; from 2.14, for grouped-query k / v, dk/dv written at
    every query head ([B,Sk,H,D] each, input dtype: kernel_backward.h ``grad_key_ptr`` /
    ``grad_value_ptr`` as [Mk, nHq, K]) and summed per group after the kernel.
    Must be entered inside (after) the MemTracker so its allocations are tracked.
    """

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        scratch: list[torch.Tensor] = []
        if func is aten._scaled_dot_product_flash_attention_backward.default:
            q, k = args[1], args[2]
            if q.device.type == "cuda":
                b, h, sq, d = q.shape
                sk, hk = k.size(2), k.size(1)
                sq_r = _round_up(sq, 128)
                d_r = _round_up(d, 32) if d <= 192 else 256
                dev = q.device
                scratch.append(torch.empty((b, h, sq_r), dtype=torch.float32, device=dev))
                scratch.append(torch.empty((b, sq_r, h, d_r), dtype=torch.float32, device=dev))
                if hk != h:
                    scratch.append(torch.empty((b, sk, h, d), dtype=q.dtype, device=dev))
                    scratch.append(torch.empty((b, sk, h, d), dtype=q.dtype, device=dev))
        elif func is aten._scaled_dot_product_efficient_attention_backward.default:
            q, k = args[1], args[2]
            if q.device.type == "cuda":
                b, h, sq, d = q.shape
                sk, hk = k.size(2), k.size(1)
                dev = q.device
                scratch.append(torch.empty((b, h, sq), dtype=torch.float32, device=dev))
                if q.dtype != torch.float32:
                    scratch.append(torch.empty((b, sq, h, d), dtype=torch.float32, device=dev))
                if hk != h:  # only reached from 2.14 (choose_backend)
                    scratch.append(torch.empty((b, sk, h, d), dtype=q.dtype, device=dev))
                    scratch.append(torch.empty((b, sk, h, d), dtype=q.dtype, device=dev))
        out = func(*args, **kwargs)
        del scratch
        return out
