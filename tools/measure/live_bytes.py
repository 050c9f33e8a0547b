"""Live storage bytes under a TorchDispatchMode, for the CPU checks run as scripts from this folder
(fsdp1_root_check.py, litgpt_qkv_check.py import it as ``from live_bytes import LiveBytes``).

Every storage an op creates inside the mode is counted once (by its data pointer); a weakref finalizer
gives its bytes back when the storage dies. ``peak`` and ``at`` keep the high point and the op that
reached it, ``log`` the live bytes after each op. Storages freed by ``resize_(0)`` (FSDP1's resharding
on several ranks) are not seen."""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class LiveBytes(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.live, self.peak, self.at = 0, 0, ""
        self.seen: dict[int, int] = {}
        self.log: list[tuple[str, int]] = []

    def _free(self, key: int, size: int) -> None:
        self.live -= size
        self.seen.pop(key, None)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if key and key not in self.seen:
                    self.seen[key] = storage.nbytes()
                    self.live += storage.nbytes()
                    weakref.finalize(storage, self._free, key, storage.nbytes())
        if self.live > self.peak:
            self.peak, self.at = self.live, str(func)
        self.log.append((str(func), self.live))
        return out
