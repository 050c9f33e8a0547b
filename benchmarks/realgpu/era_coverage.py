"""How many start-up logs back each vLLM / SGLang era of the planner's rules (issue 23).

Counts the KV-cache cases `serving.py` scores, by the era of the release each log is mapped to
(core.serving.vllm_versions.ERAS, core.serving.sglang_versions.ERAS), split into logs the
constants are fitted on and held-out logs. Run: ``python -m benchmarks.realgpu.era_coverage``.
"""

from __future__ import annotations

from collections import Counter

from benchmarks.realgpu.serving import Case, all_cases
from core.serving import sglang_versions, vllm_versions


def era_name(case: Case) -> str:
    """The era of the engine release a KV case's plan runs under."""
    assert case.plan is not None
    inf = case.plan.inference
    if inf.engine.value == "vllm":
        return "vLLM " + vllm_versions.era_of(inf.vllm_version).name
    return "SGLang " + sglang_versions.era_of(inf.sglang_version).name


def coverage(cases: list[Case]) -> list[tuple[str, int, int, int]]:
    """(era, fitted logs, held-out logs, sources) for every era, the empty ones included."""
    kv = [case for case in cases if case.table == "kv" and case.plan is not None]
    fitted = Counter(era_name(c) for c in kv if not c.held_out)
    held = Counter(era_name(c) for c in kv if c.held_out)
    sources: dict[str, set[str]] = {}
    for case in kv:
        sources.setdefault(era_name(case), set()).add(case.source)
    names = ["vLLM " + era.name for era in vllm_versions.ERAS] + ["SGLang " + era.name for era in sglang_versions.ERAS]
    return [(name, fitted[name], held[name], len(sources.get(name, ()))) for name in names]


def table(rows: list[tuple[str, int, int, int]]) -> str:
    lines = ["| era | logs fitted on | held-out logs | sources |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {fit} | {held} | {src} |" for name, fit, held, src in rows]
    return "\n".join(lines)


def main() -> int:
    print(table(coverage(all_cases())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
