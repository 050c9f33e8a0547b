"""Each published real-GPU memory figure (memory_figures.json) as a Plan, or why it cannot be one.

One function, :func:`map_figure`, reads a record's recipe and returns a :class:`Mapped`: the
Plan the app would be given for that run, or the capabilities the app lacks to express it
(each named, never dropped), plus whether the figure can be scored at all (a metric the
source does not state, a padded batch whose length at the peak is unknown).

The mapping's own choices are written here once, with their reason:

- a recipe's unstated optimizer implementation is torch.optim's default on CUDA, foreach
  (every source here runs torch.optim.AdamW directly or through HF Trainer's ``adamw_torch``,
  transformers < 4.55 with torch < 2.8, where the fused default did not exist yet);
- an unstated attention kernel is SDPA (lit-gpt and transformers' default);
- FSDP1 (FULL_SHARD) is planned as FSDP2: both keep 1/N of every parameter, gradient and
  optimizer state and gather one wrapped unit at a time (the flat-parameter bookkeeping
  differs, not the bytes a rank holds);
- Answer.AI's FSDP1 runs, and PEFT's FSDP guide's (accelerate's ``fsdp_cpu_ram_efficient_loading``),
  wrap a model held on the CPU (rank 0) or the meta device with ``sync_module_states``: planned
  with ``parallel.fsdp1_wrap`` (``FSDP1_WRAP_FAMILIES``, ``FSDP1_WRAP_SOURCES``); Answer.AI's loop keeps
  the model output through the backward (``loop_keeps_output``, ``KEEPS_OUTPUT_FAMILIES``);
- those FSDP1 runs keep ``parallel.grad_sync`` at "auto": PEFT's guide trains through accelerate's
  ``accumulate`` (no_sync for every micro-batch but the last, core.parallel.layout.fsdp_no_sync);
  Answer.AI's rows run one micro-batch a step, where the setting has no effect;
- gpt-oss under transformers 4.x held on the CPU when kernels ran (FSDP) loops over its experts
  (``experts_loop``, :func:`_experts_loop`); on one GPU the hub's MegaBlocks layer runs them grouped;
- a recipe's ``float8`` is torchao's Float8Linear with dynamic tensorwise scaling, the
  default recipe, unless its ``float8_recipe`` names another: "rowwise" is the plan's rowwise
  scaling (torchtitan's ``--float8.recipe_name=rowwise``), "rowwise_with_gw_hp" the plan's
  "rowwise-gw-hp" and torchao's MX recipes "mxfp8_cublas" / "mxfp8_cublas_rceil" its "mxfp8"; a recipe
  the plan does not have is listed as missing (:data:`_FLOAT8_RECIPES`); ``compile`` is torch.compile
  over the model (stack "compile"), and over
  the loss too (``compiled_loss``) where the torchtitan commit that ran compiles it;
- lit-gpt / litgpt figures run the plan setting ``litgpt`` (its loss and loop) on the model
  with its own head (LitGPT never ties it when fine-tuning), its one-op GELU and no dropout
  (``_litgpt_model``);
- the PyTorch release (``hardware.torch_version``) and ``TORCH_NCCL_AVOID_RECORD_STREAMS`` are set
  where the record or its source says which ran (``TORCH_RELEASES``); elsewhere the default
  (2.8 and later), which only FSDP2 plans read;
- Megatron-LM's CI cases (``megatron_ci.py``) run a GPTModel given by its dimensions, in bf16
  with no autocast (Megatron-Core's Float16Module), on the plan's Megatron stack under its DDP
  or distributed optimizer (``_megatron_plan``): Megatron's own state, not a torch DDP's;
- an Unsloth run (``framework`` "Unsloth ...") is the plan setting ``unsloth`` with its checkpointing
  policy "unsloth"; a run of the Cut Cross-Entropy releases (2024.12 to 2025.7) or the README's
  Dec 2024 table also has ``fused_loss`` (its record's ``fused_ce_or_liger``), which comes first;
- a record's ``use_cache`` (transformers' config default, on where the script never turned it off and
  HF's own gradient checkpointing did not) is the plan's ``training_kv_cache``, and its
  ``loop_keeps_output`` true the loop that drops the model output after the step, while "until-next-forward"
  (llama-recipes before its PR #41: ``outputs = model(**batch)`` rebinds only when the next call returns)
  and ``fsdp_limit_all_gathers`` false (FSDP1's rate limiter off) are listed as missing;
- a record's ``parallel.grad_sync`` is the plan's ``parallel.grad_sync`` ("auto" where it names none):
  NeMo Automodel's loop calls FSDP2's ``set_requires_gradient_sync(False)`` on every micro-batch but the
  last ("no_sync");
- a record's ``model_changes`` names the catalogue model's fields its code changes (LLMs-from-scratch's
  hand-written GPT-2: untied head, no q/k/v bias, torch's GELU, no KV cache, a padded vocabulary);
- a card outside the catalogue is a custom card of the memory its driver reports (A10G:
  23,028 MiB; the 96 GB H100 of Grand Teton: 96 GiB; an unnamed "48 GB GPU": 48 GiB).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from core.catalogue import find_model
from core.dtypes import Autocast, Dtype, MpDtype, Quant
from core.errors import PlanError
from core.files.runconfig.torchtitan import FLOAT8_RECIPES as TITAN_FLOAT8_RECIPES
from core.files.runconfig.torchtitan import MX_RECIPES as TITAN_MX_RECIPES
from core.model import ModelSpec
from core.plan import (
    Attention,
    CheckpointPolicy,
    Float8,
    FsdpUnits,
    GradSync,
    Hardware,
    LoraSettings,
    MegatronCeFusion,
    Method,
    MoeDispatcher,
    MoeLayer,
    Offload,
    Optimizer,
    OptimizerImpl,
    Parallelism,
    PipelineSchedule,
    Plan,
    Preset,
    RoadVariant,
    Stack,
    Strategy,
    TorchVersion,
    TransformersLoss,
    Workload,
)
from core.units import MiB

GiB: Final = 2**30

# Families for leave-one-source-out: figures written by the same people share a family, and a
# constant is never fitted on the family it is scored on. torchtune's four entries are one
# team; torchtitan is a different team, code and cluster; Trainy ran torchtitan's code on its
# own machines; PEFT's method comparison and its accelerate docs are one organisation.
FAMILY: Final = {
    "torchtune-readme-flags-2024-11": "torchtune",
    "torchtune-readme-llama31-2024-09": "torchtune",
    "torchtune-tutorials-llama2-2024-04": "torchtune",
    "torchtune-readme-llama2-2024-05": "torchtune",
    "litgpt-resource-tables-2023": "lightning",
    "litgpt-config-hub-2024": "lightning",
    "peft-method-comparison-metamathqa": "huggingface",
    "peft-docs-accelerate-2024-03": "huggingface",
    "answerai-fsdp-qlora-bench-2024-03": "answerai",
    "torchtitan-perf-2024-12": "torchtitan",
    "trainy-whitefiber-h200-2025-06": "trainy",
    "axolotl-example-readmes-2025": "axolotl",
    "liger-hf-example-2024-08": "linkedin",
    "ibm-fms-acceleration-a100-2025-02": "ibm",
    "unsloth-readme-context-2025-01": "unsloth",
    "megatron-lm-ci-golden-values": "megatron",
    "unsloth-notebooks-2025": "unsloth",
    # torchao's float8 / MX READMEs: the torchao team ran torchtitan's code on its own H100, MI300X and
    # B200 nodes (other people and runs than the torchtitan team's table or Trainy's).
    "torchao-float8-torchtitan-2025": "torchao",
    # ModelScope SWIFT's benchmark tables: its own trainer, scripts and A100s (Alibaba).
    "ms-swift-benchmark-2024-01": "modelscope",
    # Sebastian Raschka's LLMs-from-scratch: his own hand-written GPT and loop on his own A100s.
    "rasbt-llms-from-scratch-speed-2025-02": "rasbt",
    # torchao's low-bit optimizer README: its author's torchtune runs (other people than torchao's float8 team).
    "torchao-low-bit-optim-2024-09": "torchao-optim",
    # AWS's torchtitan test case: torchtitan's code on AWS's own 32 H100s (not the torchtitan, Trainy or torchao runs).
    "aws-awsome-distributed-torchtitan-2025-03": "aws",
    # llama-recipes' maintainers (Andrew Gu, Hamid Shojanazeri): their llama_finetuning.py (FSDP1, Hugging Face
    # Llama) on AWS A100s, July-September 2023; no other source ran that script.
    "llama-recipes-fsdp-2023": "llama-recipes",
    # FlagPerf (BAAI): its own harness, machines and nvidia-smi monitor; the LoRA case's loop is adapted from
    # llama-recipes' but runs on one GPU after PR #41's fix, by other people on other cards.
    "flagperf-nvidia-smi-2023": "flagperf",
    # An outside transformers contributor's (vasqu) GPT-2 SDPA benchmark on his own RTX 3080 Ti (PR #31172):
    # fxmarty's forward/backward loop, no other source's code, people or card.
    "transformers-gpt2-sdpa-pr-2024-06": "transformers-sdpa",
    # NVIDIA's NeMo Automodel team: its own recipe (transformers' GPT-2 under its FSDP2 manager and loop) in its
    # pretraining guide's sample log; no other source ran that code (Megatron-LM's CI is other code and people).
    "nemo-automodel-gpt2-pretrain-2025-09": "nemo-automodel",
    # DeepSpeed's developers: their own ZeRO-3 engine under a plain torch.nn model and loop written for the example
    # (DeepSpeedExamples training/bf16_master_weight); FlagPerf and PEFT run DeepSpeed under transformers/accelerate.
    "deepspeed-examples-bf16-master-2025-12": "deepspeed-examples",
    # One developer's own trainer (ljm565/universal-llm-trainer: its loop, loss and padding over transformers and
    # PEFT) on his own H100; no other source is his or runs that loop.
    "ljm565-universal-llm-trainer-2025-03": "universal-llm-trainer",
    # One person's Colab notebook (transformers Trainer + PEFT, Qwen2-0.5B) on a free T4; no other source is his.
    "bharathbattu-lora-vs-fft-t4-2026-03": "bharathbattu",
    # Prime Intellect's prime-rl: its own FSDP2 trainer, loop, LM head and fake data on its own machines.
    "prime-rl-bench-baselines-2026-01": "prime-rl",
    # torchtitan's own pull requests (branch h83evid): the torchtitan team's logs, so torchtitan's family.
    "torchtitan-pr-logs-llama3-8b-2025": "torchtitan",
    "torchtitan-qwen3-32b-pr-2025-09": "torchtitan",
    "torchtitan-moe-pr-logs-2025-2026": "torchtitan",
    # NVIDIA's DeepEP integration of torchtitan (PR #2107): NVIDIA's people on their own 512 H100s, torchtitan's code.
    "torchtitan-deepep-pr-2025-12": "nvidia-torchtitan",
}

# Cards outside gpus.json, by the memory their driver reports (decimal GB for custom_gpu).
_CUSTOM_CARDS: Final = {
    "NVIDIA A10G": 23_028 * MiB / 1e9,  # nvidia-smi on AWS g5: 23028MiB
    "NVIDIA H100 SXM HBM2e 96 GB (Grand Teton, 500 W)": 96 * GiB / 1e9,
    # torchtitan's PR logs print each reading as a share of the card: 81.85 GiB = 86.17 % (PR #1690) -> 94.99 GiB.
    "NVIDIA H100 SXM 96 GB (torchtitan's logged capacity, 94.99 GiB)": 94.99 * GiB / 1e9,
    "48 GB GPU (unnamed)": 48 * GiB / 1e9,
    "24 GB GPU (unnamed)": 24 * GiB / 1e9,
    "80 GB GPU (unnamed)": 80 * GiB / 1e9,
}
# Cards named without their memory: the size the record's assumptions settle on.
_NAMED_CARDS: Final = {
    "A100": "a100-80gb-sxm",  # torchtune rows: the 60 GiB reading needs the 80 GB card
    "NVIDIA A100 80GB": "a100-80gb-sxm",
    "NVIDIA A100 40GB": "a100-40gb-sxm",
}
# An unnamed card: the figure does not depend on it (it only sets the verdict).
_PLACEHOLDER_CARD: Final = "a100-80gb-sxm"

_OPTIMIZERS: Final = {
    "adamw": Optimizer.ADAMW,
    "adamw8bit": Optimizer.ADAMW_8BIT,
    "paged_adamw_32bit": Optimizer.PAGED_ADAMW,
    "paged_adamw_8bit": Optimizer.PAGED_ADAMW_8BIT,
    # branch h57opt (2026-12-05): torchao's low-bit AdamW and llama-recipes' AnyPrecisionAdamW (HELD_OUT_OPTIMIZERS)
    "ao_adamw8bit": Optimizer.AO_ADAMW_8BIT,
    "ao_adamw4bit": Optimizer.AO_ADAMW_4BIT,
    "anyprecision_adamw": Optimizer.ANYPRECISION_ADAMW,
    # branch h60opt (2026-12-05): PEFT's LoRA-FA (HELD_OUT_OPTIMIZERS; _LORA_FA_FIGURES)
    "lora_fa": Optimizer.LORA_FA,
}
# Figures whose recipe says optimizer "other" for PEFT's LoRA-FA: the method comparison's results file runs
# ``optimizer_type: "lora-fa"`` (huggingface/peft 51c2ff66 method_comparison/MetaMathQA/experiments/lora/
# llama-3.2-3B-rank32-lorafa/training_params.json; utils.py line 283 builds it with create_lorafa_optimizer).
_LORA_FA_FIGURES: Final = frozenset({"peft-mc-lora--llama-3.2-3B-rank32-lorafa"})
# Figures whose recipe says method "other" for PEFT's trainable-tokens method (branch h61mts2), with the rows they
# train: the results file's peft_config is ``peft_type: "TRAINABLE_TOKENS"``, ``token_indices: [128000, 128001]``
# (huggingface/peft 51c2ff66 method_comparison/MetaMathQA/results/trainable_tokens--llama-3.2-3B-sos+eos.json;
# "num_trainable_params": 6144 = 2 × 3,072).
_TRAINABLE_TOKENS_FIGURES: Final = {"peft-mc-trainable_tokens--llama-3.2-3B-sos+eos": 2}
# Figures whose recipe says method "other" for PEFT's FourierFT and RoAd (branch h76peft), with the method and the
# settings their results files' peft_config names (huggingface/peft 51c2ff66 method_comparison/MetaMathQA/results/
# fourierft--llama-3.2-3B-default.json: "n_frequency": 1000, fourierft--llama-3.2-3B-n_frequency-5000.json: 5000,
# both on "target_modules": ["q_proj", "v_proj"]; road--llama-3.2-3B-lr_0.001.json: "variant": "road_2",
# "target_modules": ["v_proj", "q_proj"]). Their "num_trainable_params" (56000, 280000, 229376) are the plan's.
_OTHER_PEFT_FIGURES: Final = {
    "peft-mc-fourierft--llama-3.2-3B-default": ("fourierft", {"r": 1000, "targets": ["q_proj", "v_proj"]}),
    "peft-mc-fourierft--llama-3.2-3B-n_frequency-5000": ("fourierft", {"r": 5000, "targets": ["q_proj", "v_proj"]}),
    "peft-mc-road--llama-3.2-3B-lr_0.001": ("road", {"road_variant": "road_2", "targets": ["q_proj", "v_proj"]}),
    # Branch h78peft, the same results files' peft_config: vblora--llama-3.2-3B-default ("r": 4, "num_vectors": 256,
    # "vector_length": 256, "topk": 2, "target_modules": ["v_proj", "q_proj"]), randlora--llama-3.2-3B-default ("r":
    # 32, q_proj and v_proj), shira--llama-3.2-3B-lr_0.0003-random_seed_42 ("r": 32, "mask_type": "random", q_proj and
    # v_proj). Their "num_trainable_params" (1212416, 9289728, 9175040) are the plan's.
    "peft-mc-vblora--llama-3.2-3B-default": ("vblora", {"r": 4, "targets": ["q_proj", "v_proj"]}),
    "peft-mc-randlora--llama-3.2-3B-default": ("randlora", {"r": 32, "targets": ["q_proj", "v_proj"]}),
    "peft-mc-shira--llama-3.2-3B-lr_0.0003-random_seed_42": ("shira", {"r": 32, "targets": ["q_proj", "v_proj"]}),
    # Branch h80boft: boft--llama-3.2-3B-default ("boft_block_size": 4, "boft_block_num": 0, "boft_n_butterfly_factor":
    # 1, "boft_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]); "num_trainable_params" 802816, the plan's.
    "peft-mc-boft--llama-3.2-3B-default": ("boft", {"oft_block_size": 4, "targets": ["q_proj", "v_proj"]}),
}
_ATTENTION: Final = {
    None: Attention.SDPA,
    "sdpa": Attention.SDPA,
    "eager": Attention.EAGER,  # scores and probabilities kept (LLMs-from-scratch's hand-written attention)
    "flash2": Attention.FLASH,
    "flash3": Attention.FLASH,
    # cuDNN's SDPA kernel, which torchtitan puts first on compute capability 10.0 (pytorch/torchtitan
    # 6fc499f6 torchtitan/models/attention.py: ``if has_cuda_capability(10, 0):
    # cls.backends.insert(0, SDPBackend.CUDNN_ATTENTION)``), keeps O(N) memory like flash; torchtitan's
    # op-SAC save list did not name it until b39377f9 (2025-12-01, "add all SDPA backends to
    # op_sac_save_list"), so per-op SAC recomputed it and kept no output or log-sum-exp, as it does for
    # the flash-attn package's own op: planned as Attention.FLASH, whose op SAC keeps no attention
    # output (core.training.activations.selective_saved). Only torchao's B200 rows (torchtitan
    # 6fc499f6) are recorded with it.
    "sdpa-cudnn": Attention.FLASH,
}
_STRATEGY: Final = {
    "fsdp1": Strategy.FSDP,
    "fsdp2": Strategy.FSDP,
    "ddp": Strategy.DDP,
    "zero3": Strategy.ZERO3,
    "single": Strategy.DDP,
}
# Target names of lit-gpt and torchtune, as the matrices they adapt.
_TARGETS: Final = {
    "query": ("q_proj",),
    "key": ("k_proj",),
    "value": ("v_proj",),
    "projection": ("o_proj",),
    "mlp": ("gate_proj", "up_proj", "down_proj"),
    "output_proj": ("o_proj",),
    "w1": ("gate_proj",),
    "w2": ("down_proj",),
    "w3": ("up_proj",),
    "all linear": ("all-linear",),
    # The output head: litgpt's lora_head, torchtune's apply_lora_to_output (core.model.HEAD_TARGET).
    "head": ("lm_head",),
    "output": ("lm_head",),
}
# Scopes that are readings after the model is built and wrapped, before the first step.
_INIT_SCOPES: Final = ("after model initialisation", "torch.cuda.memory_reserved right after fsdp wrapping")
# Scopes that are readings of the first training step alone (the peak counters reset when training starts):
# no earlier step has left its sharded gradients cached on the reduce-scatter stream.
_FIRST_STEP_SCOPES: Final = ("reserved peak of step 1 ",)
# Sources whose training loop empties the allocator's cache right before the step that sets the
# peak, so no free block of an earlier step is left at it. PEFT's method comparison
# (huggingface/peft 51c2ff6, method_comparison/MetaMathQA): run.py calls
# ``torch_accelerator_module.empty_cache()`` after every step with ``step % 10 == 0``
# (ACCELERATOR_EMPTY_CACHE_SCHEDULE); utils.py's BucketIterator yields buckets of batch_size ×
# BUCKET_FACTOR = 4 × 20 samples, 20 steps, each sorted longest first ("sort long to short
# instead to encounter possible OOM errors as early as possible"), and the steps count from 1;
# so the longest batch of every bucket, where the peak is, is step 20k + 1, right after the
# empty_cache of step 20k.
_CACHE_EMPTIED_BEFORE_PEAK: Final = frozenset({"peft-method-comparison-metamathqa"})
# Sources held out of every fit: scored with the constant fitted on the other families and never
# fitted on, so a source added to check the estimate moves no constant and no other family's
# score (issue 22's independent evidence; docs/REAL_GPU_MEMORY.md, "torchao's float8 tables, held out").
# Figures of methods the planner gained after the fragmentation constant was set (branch h41soft, 2026-12-05:
# PEFT's prompt tuning and P-tuning rows of the method comparison, until then method 'other'): scored with the
# constant fitted without their family, never fitted on, so expressing them moves no constant. Branch h52pfx
# (2026-12-05) adds the same comparison's prefix tuning and LN tuning rows on the same terms.
# LoHa and LoKr (branch h53lyco, 2026-12-05) likewise, VeRA (h53vera), OFT (h54oft), AdaLoRA (h54ada) and MiSS
# (h58peft) too.
HELD_OUT_METHODS: Final = frozenset(
    {
        "prompt-tuning",
        "p-tuning",
        "prefix-tuning",
        "ln-tuning",
        "loha",
        "lokr",
        "vera",
        "oft",
        "adalora",
        "miss",
        "trainable-tokens",  # branch h61mts2 (2026-12-06)
        "fourierft",  # branch h76peft (2026-12-07)
        "road",  # branch h76peft (2026-12-07)
        "vblora",  # branch h78peft (2026-12-07)
        "randlora",  # branch h78peft (2026-12-07)
        "shira",  # branch h78peft (2026-12-07)
        "boft",  # branch h80boft (2026-12-07)
    }
)
# Figures of optimizers the planner gained after the constant was set (branch h57opt, 2026-12-05: torchao's
# AdamW8bit / AdamW4bit, AnyPrecisionAdamW): scored, never fitted on, on the same terms.
# PEFT's LoRA-FA (branch h60opt, 2026-12-05) likewise.
HELD_OUT_OPTIMIZERS: Final = frozenset({"ao_adamw8bit", "ao_adamw4bit", "anyprecision_adamw", "lora_fa"})
HELD_OUT_SOURCES: Final = frozenset(
    {
        "torchao-float8-torchtitan-2025",
        "ms-swift-benchmark-2024-01",
        "rasbt-llms-from-scratch-speed-2025-02",
        "torchao-low-bit-optim-2024-09",
        "aws-awsome-distributed-torchtitan-2025-03",
        "llama-recipes-fsdp-2023",
        "flagperf-nvidia-smi-2023",
        "transformers-gpt2-sdpa-pr-2024-06",
        "nemo-automodel-gpt2-pretrain-2025-09",
        "deepspeed-examples-bf16-master-2025-12",
        # Issue 22 item 6 (branch h54memev): everyday single-GPU fine-tuning recipes found after the constants were set.
        "ljm565-universal-llm-trainer-2025-03",
        "bharathbattu-lora-vs-fft-t4-2026-03",
        # Issue 22 item 6 (branch h80evid): sources found after the constants were set, never tuned on.
        "prime-rl-bench-baselines-2026-01",
        # Issue 22 item 6 (branch h83evid): torchtitan pull requests' own step logs, 2025-2026.
        "torchtitan-pr-logs-llama3-8b-2025",
        "torchtitan-qwen3-32b-pr-2025-09",
        "torchtitan-moe-pr-logs-2025-2026",
        "torchtitan-deepep-pr-2025-12",
    }
)


@dataclass(frozen=True)
class Mapped:
    """One figure: the plan the app is given for it, or what the app lacks to express it."""

    figure: Mapping[str, Any]
    plan: Plan | None
    missing: tuple[str, ...] = ()  # capabilities the app lacks (empty: expressed)
    unscored: str = ""  # why the figure is listed but not scored ("" when it is scored)
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def id(self) -> str:
        return str(self.figure["id"])

    @property
    def source(self) -> str:
        return str(self.figure["source_id"])

    @property
    def family(self) -> str:
        return FAMILY[self.source]

    @property
    def metric(self) -> str:
        return str(self.figure["metric"])

    @property
    def reading_rank(self) -> str:
        """Whose reading the source publishes: "last" (the last rank, the last pipeline stage:
        Megatron-LM's tensorboard writer, megatron/training/global_vars.py at d98e8a64,
        ``args.rank == (args.world_size - 1)``) or "worst" (the rank the estimate judges)."""
        return "last" if self.family == "megatron" else "worst"

    @property
    def expressible(self) -> bool:
        return self.plan is not None and not self.missing

    @property
    def scored(self) -> bool:
        return self.expressible and not self.unscored

    @property
    def held_out(self) -> bool:
        """The figure's source is held out of every fit (``HELD_OUT_SOURCES``), or its method is one
        added after the constants were set (``HELD_OUT_METHODS``), or its optimizer (``HELD_OUT_OPTIMIZERS``)."""
        recipe = self.figure["recipe"]
        return (
            self.source in HELD_OUT_SOURCES
            or recipe["method"] in HELD_OUT_METHODS
            or recipe["optimizer"] in HELD_OUT_OPTIMIZERS
        )

    @property
    def cache_emptied_before_peak(self) -> bool:
        """The run empties the allocator's cache right before the step that sets its peak."""
        return self.source in _CACHE_EMPTIED_BEFORE_PEAK

    @property
    def first_step(self) -> bool:
        """A reading of the first training step alone: no last step's gradients are cached at it."""
        return str(self.figure["scope"]).lower().startswith(_FIRST_STEP_SCOPES)

    @property
    def model_init(self) -> bool:
        """A reading taken after the model is built, before any step (weights only)."""
        scope = str(self.figure["scope"]).lower()
        return self.figure["recipe"]["micro_batch"] is None or scope.startswith(_INIT_SCOPES)


# The low-precision recipes a record's ``float8_recipe`` may name, as the plan's Float8 (None: the
# record's ``float8`` flag alone, tensorwise). torchtitan's ``--float8.recipe_name`` takes "tensorwise",
# "rowwise" and "rowwise_with_gw_hp" (pytorch/torchtitan 2c8b5947 torchtitan/config/job_config.py, class
# Float8); "rowwise_with_gw_hp" keeps the weight gradient's matmul in high precision (the plan's
# "rowwise-gw-hp"). torchtitan's ``--model.converters=mx --mx.recipe_name=...`` recipes are torchao's MX
# linears (pytorch/torchtitan 6fc499f6 torchtitan/components/quantization/mx.py): "mxfp8_cublas" and
# "mxfp8_cublas_rceil" differ only in how the E8M0 scale is rounded (torchao 0.13.0
# torchao/prototype/mx_formats/config.py ``from_recipe_name``: ScaleCalculationMode.RCEIL), not in what
# is cast, saved or multiplied: both the plan's "mxfp8".
_FLOAT8_RECIPES: Final = {
    None: Float8.TENSORWISE,
    **{name: Float8(value) for name, value in {**TITAN_FLOAT8_RECIPES, **TITAN_MX_RECIPES}.items()},
}


def _float8(recipe: Mapping[str, Any]) -> Float8:
    """The plan's float8 setting for a recipe (see :data:`_FLOAT8_RECIPES`)."""
    if not recipe["float8"]:
        return Float8.NONE
    return _FLOAT8_RECIPES[recipe.get("float8_recipe")]


def _missing(recipe: Mapping[str, Any]) -> list[str]:
    """The capabilities a recipe needs that the app does not have."""
    out = []
    if recipe["float8"] and recipe.get("float8_recipe") not in _FLOAT8_RECIPES:
        out.append(f"low-precision training recipe {recipe['float8_recipe']} (torchao)")
    if recipe["catalogue_id"] is None:
        out.append(f"model not in the catalogue ({recipe['model']})")
    if recipe["parallel"]["strategy"] == "device-map":
        out.append("layers split over GPUs in one process (transformers device_map)")
    if recipe["method"] == "other":
        out.append(
            "PEFT / lit-gpt method other than LoRA, QLoRA, DoRA, IA3, prompt tuning, P-tuning, prefix tuning, "
            "LN tuning, LoHa, LoKr, VeRA, OFT, AdaLoRA, MiSS, trainable tokens, FourierFT, RoAd, VB-LoRA, RandLoRA, "
            "SHiRA, BOFT or lit-gpt's Adapter / Adapter v2"
        )
    if recipe["optimizer"] is not None and recipe["optimizer"] not in _OPTIMIZERS:
        out.append(f"optimizer {recipe['optimizer']}")
    lora = recipe["lora"] or {}
    if any("target_parameters" in t for t in lora.get("targets", ())):
        # PEFT's ParamWrapper (peft 0.17.0 tuners/lora/layer.py ``_activate_lora``) adds B·A to the whole 3-D
        # expert parameter through a parametrization each forward (a merged experts × in × out weight, which the
        # experts' matmuls save), axolotl's gpt-oss row on two layers only: neither a per-layer target nor that
        # term is a plan input.
        out.append("LoRA on MoE expert parameters (target_parameters: a merged expert weight each forward, per layer)")
    if recipe.get("loop_keeps_output") == "until-next-forward":
        out.append("a loop that keeps the previous step's output (logits, past_key_values) through the next forward")
    if recipe.get("fsdp_limit_all_gathers") is False:
        out.append("FSDP1 without its all-gather rate limiter (limit_all_gathers=False)")
    if recipe["parallel"].get("ep_comm_backend") == "deepep":
        # torchtitan's --parallelism.expert_parallel_comm_backend=deepep (PR #2107): DeepEP's dispatch and its
        # NVSHMEM buffers, which PyTorch's allocator never sees; the plan's dispatch outside Megatron is all-to-all.
        out.append("DeepEP expert dispatch outside Megatron-Core (its NVSHMEM buffers are not PyTorch's)")
    if recipe.get("loss") in _LOSSES_MISSING:
        out.append(_LOSSES_MISSING[recipe["loss"]])
    era = _unsloth_era(recipe)
    if era == "fast-ce":
        out.append("Unsloth before 2024.12: Fast_CrossEntropyLoss over the whole logits (not modelled)")
    elif era == "2025.8":
        out.append("Unsloth 2025.8.x: Cut Cross-Entropy or its own fused loss (806bee2, 2025-08-13): not known which")
    return out


# Losses a record's ``loss`` may name that the plan has no setting for. "logits-sum": fxmarty's SDPA training
# benchmark backpropagates ``outputs.logits.sum()`` (huggingface/optimum 20c204f6
# tests/benchmark/benchmark_bettertransformer_training_minimal.py ``training_fn``; transformers PR #31172's GPT-2
# rows), no cross-entropy. "eager-compute-dtype", a hand-written loop's ``F.cross_entropy(logits.flatten(0, 1),
# targets.flatten())`` on 16-bit logits (rasbt/LLMs-from-scratch 908dd2f ch05/10_llm-training-speed,
# ``calc_loss_batch``), is the plan's ``loss_16bit`` since 2026-12-04 (_loss below).
_LOSSES_MISSING: Final[dict[str, str]] = {
    "logits-sum": "a benchmark loop whose loss is logits.sum() (no cross-entropy)",
}
_LOSS_16BIT: Final = "eager-compute-dtype"
# prime-rl's RL trainer (PrimeIntellect-ai/prime-rl 8718eb143, models/layers/lm_head.py FusedOutputLinear, chunk_size
# 2048 from rl/config.py): per-token log-probs and entropy by an online logsumexp over vocabulary chunks, recomputed
# in the backward, feeding its policy loss (rl/loss.py: per-token tensors only). None of the other kernels holds what
# it holds (Liger's forms the input's gradient in the forward; the chunked cross-entropy keeps float32 N·V/8 chunks of
# log-softmax): the plan's ``logprob_head`` since branch h82rl (core.training.activations._logprob_head).
_LOSS_RL_LOGPROB: Final = "rl-chunked-logprob"
# torchtitan PR #996's chunked_cross_entropy_loss (pytorch/torchtitan e23bb707 components/loss.py, "Adapted from
# torchtune"): the logits' 8 sequence chunks upcast and cross-entropied one at a time, the plan's ``chunked_loss``
# (torchtune's), which does not hold the whole bf16 logits torchtitan's model still returns (the record says so).
_LOSS_TORCHTITAN_CHUNKED: Final = "torchtitan-chunked-ce"


# Unsloth's loss by release (unslothai/unsloth, unsloth/models/llama.py CausalLM_fast_forward):
# Apple's Cut Cross-Entropy from fa8e59e (2024-11-17), its own chunked fused loss from 806bee2
# (2025-08-13). Releases are named year.month.n: a release of those months cannot be placed.
def _unsloth_era(recipe: Mapping[str, Any]) -> str:
    """``"cce"``, ``"fused"``, ``"fast-ce"`` (before Cut Cross-Entropy) or ``"2025.8"`` / ``""``
    (unknown) for an Unsloth run; ``""`` for any other framework."""
    found = re.match(r"(\d{4})\.(\d+)", str((recipe.get("versions") or {}).get("unsloth", "")))
    if found is None:
        return ""
    release = (int(found.group(1)), int(found.group(2)))
    if release < (2024, 12):
        return "fast-ce"
    if release < (2025, 8):
        return "cce"
    return "2025.8" if release == (2025, 8) else "fused"


def _card(recipe: Mapping[str, Any]) -> Hardware:
    """The record's card, with the PYTORCH_CUDA_ALLOC_CONF its launcher set where the record names one (torchtitan's
    run_train.sh sets expandable_segments:True from March 2025: e23bb707 and later, branch h83evid)."""
    gpu = recipe["gpu"]
    conf = {"alloc_conf": str(recipe["alloc_conf"])} if recipe.get("alloc_conf") else {}
    if recipe["gpu_catalogue_id"]:
        return Hardware(gpu=recipe["gpu_catalogue_id"], headroom=0.0, **conf)
    if gpu in _CUSTOM_CARDS:
        return Hardware(gpu="custom", custom_memory_gb=round(_CUSTOM_CARDS[gpu], 3), headroom=0.0, **conf)
    return Hardware(gpu=_NAMED_CARDS.get(gpu, _PLACEHOLDER_CARD), headroom=0.0, **conf)


def _targets(names: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for name in names:
        out.extend(_TARGETS.get(name, (name,)))
    return tuple(dict.fromkeys(out))


def _roles(recipe: Mapping[str, Any], method: Method) -> dict[str, Any]:
    stored = Dtype(recipe["weights_dtype"])
    autocast = Autocast.NONE if _fsdp_mixed(recipe) is not None else Autocast(recipe["autocast"] or "none")
    adapter = Dtype(recipe["adapter_dtype"]) if recipe["adapter_dtype"] else Dtype.FP32
    if _deepspeed_bf16(recipe):
        # The float32 weights stay as recorded: the plan casts them itself at every stage and release
        # (core.roles.deepspeed_cast_weights). The records' DeepSpeed (2024) cast the whole module, PEFT's
        # float32 adapters too, at every stage: deepspeedai/DeepSpeed v0.14.0 ce78a632
        # deepspeed/runtime/engine.py ``_configure_distributed_model`` calls ``self.module.bfloat16()``.
        # Since b919284a (June 2026) a zero.Init model's parameters are skipped, which the plan follows
        # for the adapters PEFT adds after the load (core.roles.deepspeed_cast_adapters).
        adapter = Dtype.BF16
    return {
        "preset": Preset.CUSTOM,
        "weight_dtype": stored,
        "base_dtype": stored,
        "adapter_dtype": adapter if method is not Method.FULL else Dtype.FP32,
        "autocast": autocast,
    }


def _fsdp_mixed(recipe: Mapping[str, Any]) -> MpDtype | None:
    """FSDP with float32 weights and bf16 compute gathers the weights in bf16 rather than
    autocast them: FSDP2 as torchtitan runs it, MixedPrecisionPolicy(param_dtype=bf16,
    reduce_dtype=fp32); FSDP1 under accelerate's bf16, MixedPrecision(param_dtype=bf16,
    reduce_dtype=bf16) (accelerate sets the FSDP policy from its own mixed_precision). The
    reduce dtype is returned; None when the recipe is not such a run."""
    if recipe["weights_dtype"] != "fp32" or recipe["autocast"] != "bf16":
        return None
    return {"fsdp2": MpDtype.FP32, "fsdp1": MpDtype.BF16}.get(recipe["parallel"]["strategy"])


def _deepspeed_bf16(recipe: Mapping[str, Any]) -> bool:
    """DeepSpeed with ``bf16.enabled`` over a float32-loaded model with bf16 autocast: the engine casts
    the model to bf16 and keeps float32 masters in the optimizer (the plan's rule for the weights,
    core.roles.deepspeed_cast_weights; the mapping adds the 2024 releases' cast of the adapters)."""
    return (
        recipe["parallel"]["strategy"].startswith("zero")
        and recipe["weights_dtype"] == "fp32"
        and recipe["autocast"] == "bf16"
    )


def _float8_all_gather(figure: Mapping[str, Any]) -> bool:
    """FSDP2's float8 all-gather, on when the command the record quotes turns it on
    (torchtitan's default is off; torchtitan-perf-2024-12 does not say, so off there)."""
    return any("enable_fsdp_float8_all_gather" in a and "Command:" in a for a in figure.get("assumptions", ()))


# torchtitan cuts a rank's batch into as many pipeline micro-batches as there are pipeline ranks
# unless told otherwise (pytorch/torchtitan@9dec370 torchtitan/parallelisms/pipeline_llama.py:
# ``job_config.experimental.pipeline_parallel_microbatches or parallel_dims.pp``), and a
# multi-stage schedule (interleaved 1F1B) gets two stages per rank when no split points are given
# (torchtitan/parallelisms/pipelining_utils.py, generate_split_points: num_stages_per_rank = 2).
TORCHTITAN_STAGES_PER_RANK_INTERLEAVED: Final = 2


def _interleaved(figure: Mapping[str, Any]) -> bool:
    """The record names the interleaved 1F1B schedule (its quote or its assumptions)."""
    text = " ".join([str(figure.get("quote", "")), *map(str, figure.get("assumptions", ()))])
    return "interleaved 1f1b" in text.lower()


def _pipeline(recipe: Mapping[str, Any], family: str, interleaved: bool) -> dict[str, Any]:
    """Micro-batch size, micro-batch count and schedule of a pipelined torchtitan run: the
    recorded micro_batch is the rank's whole batch (the tables' "local batch size"), which the
    pipeline splits into ``pp`` micro-batches, or, where the record names torchtitan's newer
    ``pipeline_parallel_microbatch_size`` (``parallel.pp_microbatch_size``), into micro-batches of
    that size (pytorch/torchtitan d021aa9c torchtitan/distributed/pipeline_parallel.py:
    ``n_microbatches = batch_size // microbatch_size``, default size 1; two stages a rank for a
    multi-stage schedule when no layers per stage are given)."""
    pp = int(recipe["parallel"].get("pp") or 1)
    local = int(recipe["micro_batch"] or 1)
    accum = int(recipe["grad_accum"] or 1)
    size = int(recipe["parallel"].get("pp_microbatch_size") or 0)
    if pp == 1 or (family not in ("torchtitan", "trainy") and not size):
        return {"micro_batch": local, "grad_accum": accum, "parallel": {}}
    if not size:  # the older rule: pp micro-batches
        if local % pp:
            raise PlanError(f"a local batch of {local} does not split into {pp} pipeline micro-batches")
        size = local // pp
    if local % size:
        raise PlanError(f"a local batch of {local} does not split into micro-batches of {size}")
    schedule = {"schedule": PipelineSchedule.ONE_F_ONE_B}
    if interleaved:
        schedule = {
            "schedule": PipelineSchedule.INTERLEAVED,
            "virtual_stages": TORCHTITAN_STAGES_PER_RANK_INTERLEAVED,
        }
    return {"micro_batch": size, "grad_accum": accum * (local // size), "parallel": schedule}


# torchtitan has carved the embedding and [final norm, head] into FSDP2 units of their own since 83e69410
# (2025-07-28, "Improve reshard_after_forward logic"): of the recorded commits, torchao's MI300X (2c8b5947,
# 2025-08-08) and B200 (6fc499f6) runs are after it (git merge-base --is-ancestor); 9dec370 (Dec 2024),
# e7c0cae (June 2025, Trainy) and torchao's H100 window (069bae28..54ef4222, March 2025) are before.
# accelerate carves from v1.14.0 (PR #4015, 60b5c258, 2026-04-24); axolotl's accelerate git 9359a01
# (2025-07-30) is before it. Branch h83evid's PR logs: d66b72a6 (#1690, experiments/llama4/infra/parallelize.py
# apply_fsdp) and af35cfb1 (#2679, transformers_modeling_backend/parallelize.py) are after it; 5940ddeb, 88247277,
# 473674ac and e23bb707 (Feb-Mar 2025) before.
_TORCHTITAN_CARVED: Final = ("2c8b5947", "6fc499f6", "d66b72a6", "af35cfb1")
_ACCELERATE_CARVES: Final = (1, 14)


def _fsdp_units(recipe: Mapping[str, Any]) -> FsdpUnits:
    """The FSDP2 unit layout the record's framework release wraps (core.inputs.FsdpUnits)."""
    versions = recipe.get("versions") or {}
    if recipe["parallel"]["strategy"] != "fsdp2":
        return FsdpUnits.ROOT
    if str(versions.get("torchtitan") or "").startswith(_TORCHTITAN_CARVED):
        return FsdpUnits.CARVED
    found = re.match(r"v?(\d+)\.(\d+)\.", str(versions.get("accelerate") or ""))
    if found is not None and (int(found.group(1)), int(found.group(2))) >= _ACCELERATE_CARVES:
        return FsdpUnits.CARVED
    return FsdpUnits.ROOT


def _parallel(
    recipe: Mapping[str, Any], float8_all_gather: bool = False, fsdp1_wrap: bool = False, **pipeline: Any
) -> Parallelism:
    par = recipe["parallel"]
    reduce = _fsdp_mixed(recipe)
    gpus = int(par["gpus"] or 1)
    nodes = int(par.get("nodes") or 1)
    offload = {"none": Offload.NONE, "params": Offload.PARAMS, "optimizer": Offload.OPTIMIZER}[
        recipe["cpu_offload"] or "none"
    ]
    return Parallelism(
        nodes=nodes,
        gpus_per_node=gpus // nodes,
        strategy=_STRATEGY[par["strategy"]],
        tensor_parallel=int(par.get("tp") or 1),
        pipeline_parallel=int(par.get("pp") or 1),
        context_parallel=int(par.get("cp") or 1),
        # expert parallel outside Megatron-Core: torchtitan's --parallelism.expert_parallel_degree (branch h83evid)
        expert_parallel=int(par.get("ep") or 1),
        offload=offload,
        fsdp_param_dtype=MpDtype.BF16 if reduce is not None else MpDtype.STORED,
        fsdp_reduce_dtype=reduce if reduce is not None else MpDtype.STORED,
        fsdp_float8_all_gather=float8_all_gather and bool(recipe["float8"]) and par["strategy"] == "fsdp2",
        fsdp1_wrap=fsdp1_wrap and par["strategy"] == "fsdp1",
        grad_sync=GradSync(par.get("grad_sync") or GradSync.AUTO),
        # FSDP2's reshard_after_forward where the record names a policy (torchtitan PR #822's 'never')
        reshard_after_forward=bool(par.get("reshard_after_forward", True)),
        fsdp_units=_fsdp_units(recipe),
        # DeepSpeed's bf16.bf16_master_weights_and_grads / bf16.bf16_optimizer_states where the record's config
        # sets them (DeepSpeedExamples' bf16_full.json).
        bf16_master_weights=bool(par.get("bf16_master_weights_and_grads")),
        bf16_optimizer_states=bool(par.get("bf16_optimizer_states")),
        **_zero_bucket(par),
        **pipeline,
    )


# A DeepSpeed config's sizes where the record names them, as the plan's settings (the plan's defaults,
# DeepSpeed's zero/config.py defaults, elsewhere): FlagPerf cd568e3c training/benchmarks/llama2_7b/deepspeed/
# ds_config.json gives reduce_bucket_size 1e7, stage3_prefetch_bucket_size 1e7 (DeepSpeed's default 5e7),
# stage3_max_live_parameters 1e9 and stage3_max_reuse_distance 1e9.
_ZERO_SIZES: Final = {
    "reduce_bucket_size": "zero_bucket_elements",
    "stage3_prefetch_bucket_size": "zero3_prefetch_elements",
    "stage3_max_live_parameters": "zero3_max_live_elements",
    "stage3_max_reuse_distance": "zero3_max_reuse_elements",
}


def _zero_bucket(par: Mapping[str, Any]) -> dict[str, int]:
    """The DeepSpeed sizes the record names (:data:`_ZERO_SIZES`) as the plan's settings."""
    return {setting: int(par[key]) for key, setting in _ZERO_SIZES.items() if par.get(key)}


def _checkpointing(recipe: Mapping[str, Any]) -> dict[str, Any]:
    mode = recipe["checkpointing"]
    if mode in (None, "none"):
        return {"checkpointing": False}
    if mode == "op-sac":
        return {"checkpointing": True, "checkpoint_policy": CheckpointPolicy.OP}
    if mode == "unsloth":
        return {"checkpointing": True, "checkpoint_policy": CheckpointPolicy.UNSLOTH}
    return {"checkpointing": True, "checkpoint_policy": CheckpointPolicy.FULL}


# The methods whose base bitsandbytes may store: QLoRA, and lit-gpt's adapters under --quantize bnb.*.
_BNB_METHODS: Final = frozenset({"qlora", "adapter", "adapter_v2"})


def _bnb_legacy(recipe: Mapping[str, Any]) -> bool:
    """bitsandbytes before 0.43.2 (its 4-bit matmul kept its input). A version given as
    ">=0.43.0" is the release current when the figure was published (the record says which)."""
    text = str(recipe["versions"].get("bitsandbytes") or "")
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    if recipe["method"] not in _BNB_METHODS or not recipe["quant"] or found is None:
        return False
    return tuple(int(g) for g in found.groups()) < (0, 43, 2)


def _loss(recipe: Mapping[str, Any], family: str) -> dict[str, bool]:
    """lit-gpt's fine-tuning scripts are the plan setting ``litgpt`` (their head in 128-token
    slices, the loss in the compute dtype, the loop's logits kept: not torchtune's float32
    chunks, which is what ``chunked_loss`` models; mapped as chunked_loss before issue 22's
    third pass); torchtune's chunked output is chunked cross-entropy; Liger, Cut
    Cross-Entropy and fms-acceleration's fused kernels are fused."""
    if family == "lightning":
        return {"litgpt": True}
    if recipe.get("loss") == _LOSS_16BIT:  # the loop's own F.cross_entropy on 16-bit logits
        return {"loss_16bit": True}
    if recipe.get("loss") == _LOSS_RL_LOGPROB:  # prime-rl's RL head: per-token log-probs, no cross-entropy
        return {"logprob_head": True}
    if recipe.get("loss") == _LOSS_TORCHTITAN_CHUNKED:  # torchtitan's torchtune-style chunked cross-entropy
        return {"chunked_loss": True}
    if not recipe["fused_ce_or_liger"]:
        return {"compiled_loss": True} if _torchtitan_compiles_loss(recipe) else {}
    return {"chunked_loss": True} if family == "torchtune" else {"fused_loss": True}


# torchtitan compiled its loss with --training.compile until e8977b00 (2024-12-18, "turning off
# compile on loss function": the Dec 2024 performance table ran without it) and again from bbb1b616
# (2025-04-02, "refactor train_spec.loss_fn to build_loss_fn": build_cross_entropy_loss compiles it
# when job_config.training.compile; torchtitan/components/loss.py at e7c0cae, 2c8b5947 and 6fc499f6).
# Between them torchtitan/components/loss.py keeps "# compiled_cross_entropy_loss = torch.compile(...)"
# commented out ("compiling loss function causes CUDA errors, turning off for now"; at 069bae28 and
# 54ef4222, the window of torchao's H100 float8 table). A torchtitan run is said to compile its loss
# when its recorded commit is one of these, newer than bbb1b616: Trainy's (e7c0cae) and torchao's
# MI300X (2c8b5947) and B200 (6fc499f6) runs, and torchtitan's PRs #1690 (d66b72a6) and #2679 (af35cfb1):
# components/loss.py build_cross_entropy_loss compiles it when "loss" is in compile.components (the default).
_TORCHTITAN_LOSS_COMPILED: Final = ("e7c0cae", "2c8b5947", "6fc499f6", "d66b72a6", "af35cfb1")


def _torchtitan_compiles_loss(recipe: Mapping[str, Any]) -> bool:
    version = str((recipe.get("versions") or {}).get("torchtitan", ""))
    return bool(recipe["compile"]) and version.startswith(_TORCHTITAN_LOSS_COMPILED)


def model_changes(model: ModelSpec, recipe: Mapping[str, Any]) -> ModelSpec:
    """The catalogue model as the record's code builds it: ``model_changes`` names the ModelSpec fields
    it changes (LLMs-from-scratch's GPT-2: its own untied head, no query/key/value bias, a vocabulary
    padded to 50,304)."""
    changes = recipe.get("model_changes") or {}
    return replace(model, **changes) if changes else model


def _litgpt_model(model: ModelSpec, family: str) -> ModelSpec:
    """LitGPT's GPT has its own ``lm_head = nn.Linear(...)`` (litgpt/model.py at 00af8b0 and
    lit-gpt 8641822) and its fine-tuning scripts never tie it to the embedding (only
    pretrain.py reads ``train.tie_embeddings``): a tied catalogue model (Llama 3.2 1B / 3B,
    Falcon-7B) runs there with a head of its own, V·d more weights.

    Its GELU MLP is one op, ``torch.nn.functional.gelu(x, approximate=config.gelu_approximate)``
    (Lightning-AI/litgpt 5895df1 litgpt/model.py and lit-gpt 8641822 lit_gpt/model.py,
    ``GptNeoxMLP.forward``; Phi's ``gelu_approximate="tanh"``), not transformers' ``gelu_new``
    written out in tensor ops (NewGELUActivation), and the model has no dropout module at all
    (Phi-2's ``resid_pdrop`` is transformers'): the catalogue model is changed to match."""
    if family != "lightning":
        return model
    changes: dict[str, object] = {}
    if model.tie_embeddings:
        changes["tie_embeddings"] = False
    if model.activation == "gelu_new":
        changes["activation"] = "gelu_pytorch_tanh"
    if model.dropout or model.attention_dropout:
        changes.update(dropout=0.0, attention_dropout=0.0)
    return replace(model, **changes) if changes else model  # type: ignore[arg-type]


# Families whose FSDP1 runs wrap a model held on the CPU / meta device with sync_module_states:
# Answer.AI's train.py defaults to low_memory=True (rank 0 loads on the CPU, the others on meta)
# and passes sync_module_states=args["low_memory"], param_init_fn=to_empty on the other ranks
# (AnswerDotAI/fsdp_qlora e877dda, train.py); the benchmark's template command keeps it.
FSDP1_WRAP_FAMILIES: Final = ("answerai",)
# Sources whose FSDP1 runs load through accelerate's fsdp_cpu_ram_efficient_loading: PEFT's FSDP guide
# (huggingface/peft 6008f272, docs/source/accelerate/fsdp.md) configures both of its runs with
# ``fsdp_cpu_ram_efficient_loading: true`` and ``fsdp_sync_module_states: true`` ("We need to set
# `fsdp_cpu_ram_efficient_loading=true`, `fsdp_use_orig_params=false` and `fsdp_offload_params=true`"):
# rank 0 loads the model on the CPU, the others on the meta device, and FSDP1 wraps it with
# sync_module_states, the wrap parallel.fsdp1_wrap describes; PEFT's ``fsdp_auto_wrap_policy`` makes the
# LoRA layers units of their own beside each decoder layer, as Answer.AI's policy does.
# litgpt's config-hub full fine-tunes (litgpt 5895df1 ``litgpt/finetune/full.py``; the same in 0077627d): on
# several devices ``FSDPStrategy(auto_wrap_policy={Block}, ...)``, Lightning's torch FSDP1, over a model built
# on the meta device (``fabric.init_module(empty_init=(fabric.world_size > 1))``) and materialised by the
# wrap: FSDP1's flat parameters, whose root unit assembles its gradient from its views' at the backward's end
# (core.parallel.state._fsdp1_root_assembly). The wrap's own cache (a CPU model copied over) is a reserved
# figure; the source's figures are max_memory_allocated, which it does not enter.
FSDP1_WRAP_SOURCES: Final = ("peft-docs-accelerate-2024-03", "litgpt-config-hub-2024")
# Families whose training loop keeps the model output (its float32 logits) until after backward():
# Answer.AI's train.py binds ``output = model(input_ids, labels=..., attention_mask=None)``, calls
# ``loss.backward()`` and the optimizer step, and sets ``output = None`` only after them
# (AnswerDotAI/fsdp_qlora e877dda, train.py lines 841-894); the "ddp" rows run the same loop.
KEEPS_OUTPUT_FAMILIES: Final = ("answerai",)

# The transformers release line whose causal-LM loss a family's records ran (Plan.training_transformers,
# core.training.activations._logits_terms), where the record does not name the release: Answer.AI's README
# pins ``transformers!=4.38.*,!=4.39.*`` (AnswerDotAI/fsdp_qlora e877dda) and its benchmark ran in
# February-March 2024, before 4.40.0 (2024-04-18): a 4.37 release, as its loss_memory rule reads.
_TRANSFORMERS_OF_FAMILY: Final = {"answerai": TransformersLoss.V4_31_TO_4_45}


def _training_transformers(recipe: Mapping[str, Any], family: str) -> TransformersLoss:
    """The release line of the record's ``versions.transformers``: its first ``major.minor`` (a bound
    such as ``>=4.31.0`` or ``>4.38.2`` is read with the record's date: the releases then current are of
    the same line). A record that names none runs the newest (other code than transformers': the
    release does not matter to it)."""
    if family in _TRANSFORMERS_OF_FAMILY:
        return _TRANSFORMERS_OF_FAMILY[family]
    found = re.search(r"(\d+)\.(\d+)", str((recipe.get("versions") or {}).get("transformers") or ""))
    if found is None:
        return TransformersLoss.V5_ON
    release = (int(found[1]), int(found[2]))
    if (4, 31) <= release < (4, 46):
        return TransformersLoss.V4_31_TO_4_45
    if (4, 46) <= release < (4, 49):
        return TransformersLoss.V4_46_TO_4_48
    return TransformersLoss.V4_49_TO_4_57 if release < (5, 0) else TransformersLoss.V5_ON


# The PyTorch release each source ran, where the record or its source says, and whether
# TORCH_NCCL_AVOID_RECORD_STREAMS=1 was set (core.parallel.state._release_cache); keyed by source,
# and by the commit of the record's location where one source spans several runs:
# - torchtitan's December 2024 runs: the torch nightly 1963fc8 of 2024-12-23 (the record's
#   versions), a 2.6 pre-release; torchtitan 9dec370 torchtitan/utils.py ``init_distributed`` sets
#   TORCH_NCCL_AVOID_RECORD_STREAMS=1 (dropped in 681c66f once PyTorch made it the default);
# - Trainy's June 2025 runs: torch 2.8.0a0+5228986c39 (NGC 25.05; the record's versions), taken as
#   after the change that made avoiding record_stream the default (torchtitan e7c0cae, which ran
#   them, no longer sets the variable);
# - axolotl's gpt-oss README (ca796fb) points to "our latest Docker images": at ca796fb
#   .github/workflows/main.yml tags the torch 2.7.1 (cu126) image ``is_latest``; neither axolotl
#   nor accelerate 9359a01 sets the variable. Its Magistral and Devstral READMEs (other commits)
#   are left at the default: no image is read for them, and they run on one GPU;
# - torchao's H100 float8 table (pytorch/ao 8c81863b): torch 2.7.0a0+gitb98af95 (its README), on a
#   torchtitan commit between 069bae28 and 54ef4222, whose torchtitan/distributed/utils.py sets
#   TORCH_NCCL_AVOID_RECORD_STREAMS=1; its MI300X and B200 tables ran torch 2.9 nightlies on torchtitan
#   after 681c66f2 (which stopped setting it): the default;
# - torchtitan's Feb-Mar 2025 PR logs (branch h83evid): nightlies of those months (2.7 pre-releases) on commits
#   before 681c66f2, whose torchtitan/utils.py (distributed/utils.py from March) sets TORCH_NCCL_AVOID_RECORD_STREAMS=1;
#   PRs #1690 and #2679 ran after 681c66f2 on later nightlies: the default.
TORCH_RELEASES: Final[dict[tuple[str, str], tuple[TorchVersion, bool]]] = {
    ("torchtitan-perf-2024-12", ""): (TorchVersion.V2_5_TO_2_7, True),
    ("trainy-whitefiber-h200-2025-06", ""): (TorchVersion.V2_8, False),
    ("axolotl-example-readmes-2025", "ca796fb56e5bfa02ddd30464cfa5aabba4dd5f66"): (TorchVersion.V2_5_TO_2_7, False),
    ("torchao-float8-torchtitan-2025", "8c81863ba85cce742244c0151c6683c5696bbe04"): (TorchVersion.V2_5_TO_2_7, True),
    **{
        ("torchtitan-pr-logs-llama3-8b-2025", commit): (TorchVersion.V2_5_TO_2_7, True)
        for commit in (
            "5940ddeb532c60928314aa1a19b54e043eec2a44",  # PR #822
            "88247277c6b91b3490838dff08b0649c64c62e08",  # PR #820
            "473674acfddd51d40b524ddec5c7183494e0a5d7",  # PR #833
            "e23bb707d6ce308c3c316d92c40c12d841ddd886",  # PR #996
        )
    },
}


# transformers 4.55's gpt-oss runs its experts as a loop over stacked weights in training (plan setting
# ``experts_loop``) unless kernels' kernelize swapped in the hub's MegaBlocks layer. transformers v4.55.0
# modeling_utils.py ``from_pretrained`` kernelizes once, for ``Device(type=model.device.type)``, and
# kernels 0.9.0 (axolotl ca796fb requirements.txt) keeps a layer's own forward where the mapping has no
# entry for that device type (layer.py ``kernelize``; integrations/hub_kernels.py maps MegaBlocksMoeMLP for
# "cuda" and "rocm" only). axolotl ca796fb passes ``use_kernels`` to from_pretrained and sets no
# device_map under FSDP (src/axolotl/loaders/model.py ``_set_device_map_config``: "For other FSDP cases,
# don't set device_map at all"; its gpt-oss FSDP configs add experimental_skip_move_to_device), so the model
# is on the CPU when kernelized and keeps the loop; a one-GPU run loads on the GPU (device_map "auto")
# and gets MegaBlocks.
def _experts_loop(recipe: Mapping[str, Any]) -> bool:
    """Whether the run's experts loop over stacked weights (see the comment above)."""
    versions = recipe.get("versions") or {}
    transformers = str(versions.get("transformers") or "")
    on_cpu = recipe["parallel"]["strategy"] in ("fsdp", "fsdp2")
    return str(recipe["catalogue_id"] or "").startswith("gpt-oss") and transformers.startswith("4.") and on_cpu


# Elsewhere the release a record states (recipe.versions.torch, e.g. "2.0.1+cu118 (requirements.txt)", "2.1.0+cu121",
# "2.4.1", "2.9.0.dev20250815+cu128") sets the plan's: its leading major.minor picks the range. A range (">=2.2.0"),
# a nightly named by date or commit ("2.1.0 nightly", "1963fc8 (...)"), "not stated" or no version keeps the default,
# and so does a release before 2.4 on a record that names FSDP2, which no such release shipped (llama-recipes PR 165's
# prototype rows state the repository's 2.0.1 pin, not what that prototype ran on). FSDP1 records on an older release
# take it: the plan reads FSDP there as FSDP1 (core.inputs.TorchVersion).
_STATED_TORCH: Final = re.compile(r"^\s*(\d+)\.(\d+)(?:\.\d+)?(?:\.post\d+|\.dev\d+|a0)?(?:\+\S+)?(?:\s|$)")
_TORCH_RANGES: Final = (
    ((2, 0), TorchVersion.V2_0),
    ((2, 1), TorchVersion.V2_1_TO_2_3),
    ((2, 4), TorchVersion.V2_4),
    ((2, 5), TorchVersion.V2_5_TO_2_7),
    ((2, 8), TorchVersion.V2_8),
    ((2, 14), TorchVersion.V2_14),
)


def stated_torch_release(recipe: Mapping[str, Any]) -> TorchVersion | None:
    """The release range of the torch version ``recipe`` states, or None where it states none exactly."""
    text = str((recipe.get("versions") or {}).get("torch") or "")
    if "nightly" in text:
        return None
    match = _STATED_TORCH.match(text)
    if match is None:
        return None
    found = (int(match[1]), int(match[2]))
    release = None
    for floor, value in _TORCH_RANGES:
        if found >= floor:
            release = value
    older = release in (TorchVersion.V2_0, TorchVersion.V2_1_TO_2_3)
    return None if older and recipe["parallel"]["strategy"] == "fsdp2" else release


# Whose MoE layer a source's MoE rows run (plan setting ``moe_layer``): prime-rl 8718eb14 builds its own Qwen3-MoE
# on models/layers/moe.py, torchtitan's layer before e1f7f318 (the scatter-add form); torchtitan's PR #2107
# (d021aa9c) runs torchtitan's own DeepSeek-V3 on torchtitan/models/moe/moe.py, the bmm form. Only where the
# recipe's model names torchtitan's layer (torchtitan's PR #2679 runs transformers' Qwen3-MoE).
MOE_LAYERS: Final[dict[str, MoeLayer]] = {
    "prime-rl-bench-baselines-2026-01": MoeLayer.TORCHTITAN_SCATTER,
    "torchtitan-deepep-pr-2025-12": MoeLayer.TORCHTITAN_BMM,
}


def _moe_layer(source: str, recipe: Mapping[str, Any]) -> MoeLayer:
    """The MoE layer the run builds (``MOE_LAYERS``); transformers' where none is named."""
    if "torchtitan" in str(recipe["model"]):
        return MOE_LAYERS.get(source, MoeLayer.TRANSFORMERS)
    return MoeLayer.TRANSFORMERS


def _torch_release(figure: Mapping[str, Any]) -> dict[str, Any]:
    """The Hardware fields for the PyTorch release the figure's run used (``TORCH_RELEASES``, else the
    release its recipe states)."""
    source = str(figure["source_id"])
    location = figure.get("location")
    commit = str(location.get("commit") or "") if isinstance(location, Mapping) else ""
    found = TORCH_RELEASES.get((source, commit)) or TORCH_RELEASES.get((source, ""))
    if found is None:
        stated = stated_torch_release(figure["recipe"])
        return {} if stated is None else {"torch_version": stated}
    return {"torch_version": found[0], "nccl_avoid_record_streams": found[1]}


def _plan(
    recipe: Mapping[str, Any],
    family: str,
    float8_all_gather: bool = False,
    interleaved: bool = False,
    source: str = "",
    release: Mapping[str, Any] | None = None,
) -> Plan:
    method = Method(recipe["method"])
    lora = recipe["lora"] or {}
    model = find_model(recipe["catalogue_id"])
    impl = recipe["optimizer_impl"] or "foreach"
    pipeline = _pipeline(recipe, family, interleaved)
    workload = Workload(
        micro_batch=pipeline["micro_batch"],
        seq_len=int(recipe["seq_len"] or 1),
        grad_accum=pipeline["grad_accum"],
    )
    return Plan(
        model=_litgpt_model(model_changes(model.spec, recipe), family),
        model_id=model.id,
        method=method,
        lora=LoraSettings(
            rank=int(lora.get("r", 8)),
            alpha=float(lora.get("alpha") or 16),  # null: a method without alpha (VeRA); no effect on memory
            dropout=float(lora.get("dropout") or 0.0),
            targets=_targets(lora.get("targets", ["q_proj", "v_proj"])),
            ia3_feedforward=_targets(lora.get("ia3_feedforward", ["down_proj"])),
            **_litgpt_adapter(recipe, lora),
            virtual_tokens=int(lora.get("virtual_tokens", 20)),
            lokr_factor=int(lora.get("lokr_factor", -1)),
            oft_block_size=int(lora.get("oft_block_size", 32)),
            trainable_tokens=int(lora.get("trainable_tokens", 0)),
            road_variant=RoadVariant(lora.get("road_variant", "road_1")),
        )
        if lora
        else LoraSettings(),
        quant=Quant(recipe["quant"]) if recipe["quant"] else Quant.NF4,
        double_quant=bool(recipe["double_quant"]),
        optimizer=_OPTIMIZERS.get(recipe["optimizer"] or "adamw", Optimizer.ADAMW),
        optimizer_impl=OptimizerImpl(impl),
        attention=_ATTENTION[recipe["attention"]],
        workload=workload,
        optimizer_in_backward=bool(recipe["optimizer_in_backward"]),
        # Unsloth's own offload is its checkpointing policy, not torchtune's activation offloading.
        activation_offload=bool(recipe["activation_offload"]) and recipe["checkpointing"] != "unsloth",
        unsloth=str(recipe["framework"]).startswith("Unsloth"),
        bnb_legacy=_bnb_legacy(recipe),
        kbit_upcast=bool(recipe["prepare_model_for_kbit_training"]) and method is Method.QLORA,
        **_loss(recipe, family),
        loop_keeps_output=family in KEEPS_OUTPUT_FAMILIES or recipe.get("loop_keeps_output") is True,
        training_kv_cache=bool(recipe.get("use_cache")),
        training_transformers=_training_transformers(recipe, family),
        experts_loop=_experts_loop(recipe),
        moe_layer=_moe_layer(source, recipe),
        stack=Stack.COMPILE if recipe["compile"] else Stack.EAGER,
        float8=_float8(recipe),
        hardware=replace(_card(recipe), **(release or {})),
        parallel=_parallel(
            recipe,
            float8_all_gather,
            family in FSDP1_WRAP_FAMILIES or source in FSDP1_WRAP_SOURCES,
            **pipeline["parallel"],
        ),
        **_checkpointing(recipe),
        **_roles(recipe, method),
    )


def _litgpt_adapter(recipe: Mapping[str, Any], lora: Mapping[str, Any]) -> dict[str, Any]:
    """lit-gpt's Adapter settings (Config.adapter_prompt_length, adapter_start_layer; LitGPT's defaults
    unless the record says) and --quantize bnb.* as the adapter's quantised base."""
    if recipe["method"] not in ("adapter", "adapter_v2"):
        return {}
    return {
        "adapter_prompt_length": int(lora.get("adapter_prompt_length", 10)),
        "adapter_start_layer": int(lora.get("adapter_start_layer", 2)),
        "adapter_quantised": bool(recipe["quant"]),
    }


def _unscored(figure: Mapping[str, Any]) -> str:
    if figure["not_comparable_reason"]:
        return "not comparable: " + str(figure["not_comparable_reason"])
    if figure["metric"] == "unknown":
        return "metric not stated by the source (allocated, active or reserved)"
    return ""


# Megatron-LM's functional tests (megatron_ci.py): the strategy each case's recipe names.
_MEGATRON_STRATEGY: Final = {"megatron-ddp": Strategy.DDP, "megatron-distopt": Strategy.ZERO1}
# --recompute-granularity as the plan's checkpointing: full recomputes every block (the cases
# here: --recompute-method uniform, --recompute-num-layers 1); selective recomputes core attention.
_MEGATRON_RECOMPUTE: Final = {
    "none": {"checkpointing": False},
    "full": {"checkpointing": True, "checkpoint_policy": CheckpointPolicy.FULL},
    "selective": {"checkpointing": True, "checkpoint_policy": CheckpointPolicy.ATTENTION},
}


def megatron_model(recipe: Mapping[str, Any]) -> ModelSpec:
    """Megatron-Core's GPTModel from a record's dimensions (``model_dims``, defaults resolved by
    megatron_ci.py): the padded vocabulary, one fused q|k|v matrix (TE's
    LayerNormColumnParallelLinear ``linear_qkv``), learned absolute positions of
    ``max_positions`` rows unless RoPE, biases on the linear layers unless
    --disable-bias-linear, a GeLU MLP or a SwiGLU one, hidden and attention dropout."""
    dims = recipe["model_dims"]
    hidden, heads = int(dims["hidden"]), int(dims["heads"])
    swiglu = bool(dims["swiglu"])
    bias = bool(dims["bias_linear"])
    return ModelSpec(
        name=str(recipe["model"]),
        family="gpt",
        vocab_size=int(dims["padded_vocab"]),
        hidden_size=hidden,
        num_layers=int(dims["layers"]),
        num_heads=heads,
        num_kv_heads=int(dims["kv_heads"]),
        head_dim=hidden // heads,
        intermediate_size=int(dims["ffn"]),
        gated_mlp=swiglu,
        tie_embeddings=not dims["untied"],
        qkv_bias=bias,
        o_bias=bias,
        mlp_bias=bias,
        norm="rmsnorm" if dims["normalization"] == "RMSNorm" else "layernorm",
        learned_positions=int(dims["max_positions"]) if dims["position_embedding"] == "learned_absolute" else 0,
        max_position_embeddings=int(dims["max_positions"]),
        fused_qkv=True,
        activation="silu" if swiglu else "gelu",
        dropout=float(dims["hidden_dropout"]),
        attention_dropout=float(dims["attention_dropout"]),
        num_experts=int(dims["num_experts"]),
        experts_per_token=int(dims["router_topk"]),
    )


def _megatron_plan(recipe: Mapping[str, Any]) -> Plan:
    par = recipe["parallel"]
    vp = int(par["vp"])
    return Plan(
        model=megatron_model(recipe),
        preset=Preset.PURE_BF16,
        stack=Stack.MEGATRON,
        attention=_ATTENTION_MEGATRON[recipe["attention"]],
        optimizer=Optimizer.ADAMW,
        optimizer_impl=OptimizerImpl.FUSED,
        grad_clip=True,  # every case passes --clip-grad 1.0
        # --cross-entropy-loss-fusion runs Megatron-Core's native fused loss: Megatron-LM's arguments reject
        # the te implementation (NVIDIA/Megatron-LM d98e8a64 megatron/training/arguments.py, lines 1697-1702).
        megatron_ce_fusion=MegatronCeFusion.NATIVE if recipe["fused_ce_or_liger"] else MegatronCeFusion.OFF,
        # --moe-grouped-gemm: the experts as Transformer Engine's grouped linear layers (megatron_ci.py reads it).
        moe_grouped_gemm=bool(recipe.get("moe_grouped_gemm")),
        float8=Float8.TE if recipe["float8"] else Float8.NONE,
        workload=Workload(
            micro_batch=int(recipe["micro_batch"]), seq_len=int(recipe["seq_len"]), grad_accum=int(recipe["grad_accum"])
        ),
        hardware=Hardware(gpu=str(recipe["gpu_catalogue_id"]), headroom=0.0),
        parallel=Parallelism(
            nodes=int(par["nodes"]),
            gpus_per_node=int(par["gpus"]) // int(par["nodes"]),
            strategy=_MEGATRON_STRATEGY[par["strategy"]],
            tensor_parallel=int(par["tp"]),
            pipeline_parallel=int(par["pp"]),
            context_parallel=int(par["cp"]),
            expert_parallel=int(par["ep"]),
            sequence_parallel=bool(par["sequence_parallel"]),
            schedule=PipelineSchedule.INTERLEAVED if vp > 1 else PipelineSchedule.ONE_F_ONE_B,
            virtual_stages=vp,
            grad_reduce_in_fp32=bool(par["grad_reduce_in_fp32"]),
            # The MoE cases pass no --moe-token-dispatcher-type: Megatron-Core's default, allgather
            # (transformer_config.py at d98e8a64), which megatron_ci.py writes into the record.
            moe_dispatcher=MoeDispatcher(recipe.get("moe_token_dispatcher") or "alltoall"),
        ),
        **_MEGATRON_RECOMPUTE[recipe["checkpointing"]],
    )


# TE's flash / fused attention keeps no scores; its unfused backend and the local spec's
# DotProductAttention keep the softmax's probabilities as eager attention does, in 16 bits where the fused
# scale-mask-softmax kernel runs (core.training.attention.megatron_fused_softmax).
_ATTENTION_MEGATRON: Final = {"flash": Attention.FLASH, "eager": Attention.EAGER}


def map_figure(figure: Mapping[str, Any]) -> Mapped:
    """The plan for one figure of memory_figures.json, or the capabilities it lacks."""
    if figure["id"] in _LORA_FA_FIGURES:  # optimizer "other" in the record: LoRA-FA, which the plan now says
        figure = {**figure, "recipe": {**figure["recipe"], "optimizer": "lora_fa"}}
    if figure["id"] in _TRAINABLE_TOKENS_FIGURES:  # method "other" in the record: PEFT's trainable tokens
        rows = {"trainable_tokens": _TRAINABLE_TOKENS_FIGURES[figure["id"]]}
        figure = {**figure, "recipe": {**figure["recipe"], "method": "trainable-tokens", "lora": rows}}
    if figure["id"] in _OTHER_PEFT_FIGURES:  # method "other" in the record: a PEFT method the app has
        method, settings = _OTHER_PEFT_FIGURES[figure["id"]]
        figure = {**figure, "recipe": {**figure["recipe"], "method": method, "lora": settings}}
    recipe = figure["recipe"]
    if FAMILY[str(figure["source_id"])] == "megatron":
        try:
            return Mapped(figure, _megatron_plan(recipe), (), _unscored(figure))
        except PlanError as error:
            return Mapped(figure, None, (f"the plan refuses it: {error}",), _unscored(figure))
    missing = _missing(recipe)
    unscored = _unscored(figure)
    if missing:
        return Mapped(figure, None, tuple(missing), unscored)
    try:
        source = str(figure["source_id"])
        plan = _plan(
            recipe, FAMILY[source], _float8_all_gather(figure), _interleaved(figure), source, _torch_release(figure)
        )
    except PlanError as error:
        return Mapped(figure, None, (f"the plan refuses it: {error}",), unscored)
    return Mapped(figure, plan, (), unscored)
