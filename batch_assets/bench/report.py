"""The benchmark report: per-stage numbers against their DuckDB floors, targets, text/Markdown/JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

STAGE_VS_FLOOR_MAX = 2.5  # target: each stage within 2.5x its persisting floor (same run)
TOTAL_VS_FLOOR_MAX = 2.0  # target: the stages' total within 2x the floors' total (same run)
RSS_VS_FLOOR_MAX = 1.1  # target: each stage's peak RSS within 1.1x the floors' peak (the highest
# floor process of the run, as floors_bench.py runs them all in one process)


def _fmt_int(n: float | int | None) -> str:
    return "-" if n is None else f"{n:,.0f}"


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


@dataclass
class StageResult:
    stage: str  # manifest | shards | ingest | parse | apply | reconcile
    function: str  # the product function measured
    wall_s: float
    cpu_s: float
    items_per_s: float
    peak_rss_mb: float
    base_rss_mb: float
    floor: str  # what the floor statement is
    floor_wall_s: float
    floor_peak_rss_mb: float
    load_avg: float | None = None  # 1-min load average at the stage's start (other work on the host)
    result: dict = field(default_factory=dict)
    inside: str | None = None  # the stage that runs this one inside itself (not added to the total)
    floor_cpu_s: float | None = None  # user+sys of the floor process (less sensitive to other load than wall)
    # Each run's times when the benchmark repeats (`--repeat K`): wall_s / floor_wall_s above are their medians.
    runs: list[dict] = field(default_factory=list)
    # Read from storage by the stage process (page-cache misses); None where the platform cannot tell.
    disk_read_mb: float | None = None

    @property
    def ratio(self) -> float:
        return self.wall_s / self.floor_wall_s if self.floor_wall_s > 0 else float("inf")

    @property
    def rss_ratio(self) -> float:
        return self.peak_rss_mb / self.floor_peak_rss_mb if self.floor_peak_rss_mb else float("inf")

    @property
    def within_target(self) -> bool:
        return self.ratio <= STAGE_VS_FLOOR_MAX

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(
            ratio=round(self.ratio, 2),
            target_ratio=STAGE_VS_FLOOR_MAX,
            rss_ratio=round(self.rss_ratio, 2),
            verdict=_verdict(self.within_target),
        )
        return d


@dataclass
class BenchReport:
    items: int
    workdir: str
    environment: dict
    rss_method: str
    setup: dict  # setup step -> {wall_s, ...}
    stages: list[StageResult]
    outputs: dict  # generated provider files and their counts
    reconciliation: dict
    checks: list[dict]
    report_path: str | None = None

    # --- totals and targets (a stage run inside another is counted there, not again) ---
    @property
    def total_wall_s(self) -> float:
        return sum(s.wall_s for s in self.stages if not s.inside)

    @property
    def floor_total_s(self) -> float:
        return sum(s.floor_wall_s for s in self.stages if not s.inside)

    @property
    def total_ratio(self) -> float:
        return self.total_wall_s / self.floor_total_s if self.floor_total_s > 0 else float("inf")

    @property
    def max_peak_rss_mb(self) -> float:
        return max((s.peak_rss_mb for s in self.stages), default=0.0)

    @property
    def max_floor_peak_rss_mb(self) -> float:
        return max((s.floor_peak_rss_mb for s in self.stages), default=0.0)

    @property
    def total_within_target(self) -> bool:
        return self.total_ratio <= TOTAL_VS_FLOOR_MAX

    @property
    def peak_within_target(self) -> bool:
        return self.max_peak_rss_mb <= RSS_VS_FLOOR_MAX * self.max_floor_peak_rss_mb

    def stage_peak_ok(self, s: StageResult) -> bool:
        return s.peak_rss_mb <= RSS_VS_FLOOR_MAX * self.max_floor_peak_rss_mb

    @property
    def correct(self) -> bool:
        return all(c["ok"] for c in self.checks)

    @property
    def targets_met(self) -> bool:
        return self.total_within_target and self.peak_within_target and all(s.within_target for s in self.stages)

    def _verdict_of(self, s: StageResult) -> str:
        return _verdict(s.within_target and self.stage_peak_ok(s))

    def stage(self, name: str) -> StageResult:
        return next(s for s in self.stages if s.stage == name)

    # --- renderings ---
    def as_dict(self) -> dict:
        return {
            "items": self.items,
            "workdir": self.workdir,
            "environment": self.environment,
            "rss_method": self.rss_method,
            "setup": self.setup,
            "stages": [
                {**s.as_dict(), "peak_verdict": _verdict(self.stage_peak_ok(s)), "verdict": self._verdict_of(s)}
                for s in self.stages
            ],
            "total_wall_s": round(self.total_wall_s, 3),
            "floor_total_s": round(self.floor_total_s, 3),
            "total_ratio": round(self.total_ratio, 2),
            "total_target_ratio": TOTAL_VS_FLOOR_MAX,
            "total_verdict": _verdict(self.total_within_target),
            "max_peak_rss_mb": round(self.max_peak_rss_mb, 1),
            "max_floor_peak_rss_mb": round(self.max_floor_peak_rss_mb, 1),
            "target_rss_ratio": RSS_VS_FLOOR_MAX,
            "peak_verdict": _verdict(self.peak_within_target),
            "targets_met": self.targets_met,
            "correct": self.correct,
            "outputs": self.outputs,
            "reconciliation": self.reconciliation,
            "checks": self.checks,
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, ensure_ascii=False, default=str)

    def _repeats(self) -> list[str]:
        """With `--repeat K`: what the table's medians are of, one line per stage."""
        k = max((len(s.runs) for s in self.stages), default=0)
        if k < 2:
            return []
        return [
            f"Each floor and stage ran {k} times, alternating, each pair from the same copy of the warehouse; "
            "the table shows the medians (peaks: the highest run). Runs, stage s / floor s:"
        ] + [
            f"- {s.stage}: " + ", ".join(f"{r['wall_s']:.2f} / {r['floor_wall_s']:.2f}" for r in s.runs)
            for s in self.stages
        ]

    def _rows(self) -> list[list[str]]:
        rows = []
        for s in self.stages:
            rows.append(
                [
                    s.stage,
                    f"{s.wall_s:.2f}",
                    f"{s.floor_wall_s:.2f}",
                    f"{s.ratio:.2f}x",
                    f"{s.cpu_s:.1f}",
                    "-" if s.floor_cpu_s is None else f"{s.floor_cpu_s:.1f}",
                    _fmt_int(s.items_per_s),
                    f"{s.peak_rss_mb:,.0f}",
                    f"{s.floor_peak_rss_mb:,.0f}",
                    f"{s.rss_ratio:.2f}x",
                    self._verdict_of(s) + (f" (runs inside {s.inside}; not in the total)" if s.inside else ""),
                ]
            )
        rows.append(
            [
                "total",
                f"{self.total_wall_s:.2f}",
                f"{self.floor_total_s:.2f}",
                f"{self.total_ratio:.2f}x",
                f"{sum(s.cpu_s for s in self.stages if not s.inside):.1f}",
                f"{sum(s.floor_cpu_s or 0 for s in self.stages if not s.inside):.1f}",
                _fmt_int(self.items / self.total_wall_s if self.total_wall_s else None),
                f"{self.max_peak_rss_mb:,.0f}",
                f"{self.max_floor_peak_rss_mb:,.0f}",
                f"{self.max_peak_rss_mb / self.max_floor_peak_rss_mb:.2f}x" if self.max_floor_peak_rss_mb else "-",
                f"total <= {TOTAL_VS_FLOOR_MAX:g}x floors: {_verdict(self.total_within_target)}; "
                f"every stage <= {STAGE_VS_FLOOR_MAX:g}x its floor: "
                f"{_verdict(all(s.within_target for s in self.stages))}; "
                f"every stage's peak <= {RSS_VS_FLOOR_MAX:g}x the floors' peak: {_verdict(self.peak_within_target)}",
            ]
        )
        return rows

    HEADER = [
        "stage",
        "wall s",
        "floor s",
        "stage/floor",
        "cpu s",
        "floor cpu s",
        "items/s",
        "peak RSS MB",
        "floor RSS MB",
        "RSS/floor",
        "verdict",
    ]

    def markdown(self) -> str:
        lines = [
            f"Benchmark at {self.items:,} items ({self.environment.get('cpus')} cores, DuckDB "
            f"{self.environment.get('duckdb')}); floors are plain DuckDB statements that persist the same results "
            "(CREATE TABLE AS / COPY / INSERT ... ON CONFLICT, then CHECKPOINT) over the same data, each in its own "
            "process like its stage, in the same run; cpu s = user+sys of the stage process; RSS/floor = the stage's "
            "peak over its own floor's (the peak target is <= 1.1x the highest floor peak of the run); a stage "
            "that runs inside another is not added to the total.",
            "",
            "| " + " | ".join(self.HEADER) + " |",
            "|" + "|".join(["---"] + ["---:"] * 9 + ["---"]) + "|",
        ]
        for r in self._rows():
            lines.append("| " + " | ".join(r) + " |")
        repeats = self._repeats()
        if repeats:
            lines += [""] + repeats
        lines += ["", "Floors:"] + [f"- {s.stage}: {s.floor}" for s in self.stages]
        return "\n".join(lines)

    def text(self) -> str:
        rows = [self.HEADER] + self._rows()
        widths = [max(len(r[i]) for r in rows[:-1]) for i in range(len(self.HEADER))]
        out = [f"batch_assets benchmark: {self.items:,} items, workdir {self.workdir}"]
        for name, info in self.setup.items():
            out.append(f"  setup {name}: {info['wall_s']:.2f} s")
        out.append("")
        for i, r in enumerate(rows):
            if i == len(rows) - 1:
                cells = [c.rjust(widths[j]) if j else c.ljust(widths[j]) for j, c in enumerate(r[:-1])]
                out.append("  ".join(cells) + "  " + r[-1])
            else:
                out.append(
                    "  ".join(c.ljust(widths[j]) if j in (0, 10) else c.rjust(widths[j]) for j, c in enumerate(r))
                )
            if i == 0:
                out.append("  ".join("-" * w for w in widths))
        repeats = self._repeats()
        out += [""] + (repeats + [""] if repeats else [])
        for s in self.stages:
            if s.result.get("statements"):
                out.append(f"slowest statements of {s.stage} ({s.wall_s:.2f} s):")
                for st in s.result["statements"]:
                    out.append(f"  {st['seconds']:8.2f} s  x{st['calls']:<4} {st['sql']}")
        loads = [s.load_avg for s in self.stages if s.load_avg is not None]
        if loads:
            out.append(
                "host load (1-min avg at stage start): "
                f"{', '.join(f'{s.stage} {s.load_avg:.1f}' for s in self.stages)} "
                f"on {self.environment.get('cpus')} cores; cpu s = user+sys of the stage process (all threads)"
            )
        out.append(f"peak RSS: {self.rss_method}")
        rec = self.reconciliation
        out.append(
            f"reconciliation: items {rec.get('manifest_items')}, succeeded {rec.get('succeeded')}, "
            f"failed {rec.get('failed_total')}, quarantined {rec.get('quarantined')}, applied {rec.get('applied')}, "
            f"failed to parse {rec.get('failed_to_parse')}, stale {rec.get('stale')}, missing {rec.get('missing')}"
        )
        for c in self.checks:
            out.append(f"  [{'ok' if c['ok'] else 'FAILED'}] {c['check']}: {c['detail']}")
        if self.report_path:
            out.append(f"report: {self.report_path}")
        return "\n".join(out)

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "bench_report.json"
        self.report_path = str(path)
        path.write_text(self.to_json() + "\n", encoding="utf-8")
        (directory / "bench_report.md").write_text(self.markdown() + "\n", encoding="utf-8")
        return path
