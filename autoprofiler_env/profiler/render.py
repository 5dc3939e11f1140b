"""A profile as a short, deterministic markdown text for an LLM (or a person).

Per section: the header metrics of the kernels that take most of the time, as ncu formats
them, then the section's findings, largest time-weighted estimated speedup first, each naming
the kernel it stands for (a rule fires per kernel; a finding of a kernel outside the table is
named with its share of the time, so that it is not read as the longest kernel's). The same
profile always renders to the same text.
"""

from __future__ import annotations

from autoprofiler_env.profiler.catalogue import Catalogue, load_catalogue
from autoprofiler_env.profiler.records import Profile


CHART_METRICS = 24
"""At most this many of a chart's or tables' section's own metrics a kernel (the roofline has
17, the memory tables 17, the hierarchical tensor roofline 268): past it, the non-zero ones up
to it."""


def render_markdown(profile: Profile, max_kernels: int = 3, max_findings: int = 4,
                    catalogue: Catalogue | None = None) -> str:
    """Renders ``profile``; an empty profile (no sections) renders to a one-line note."""
    if not profile.sections:
        return "No profile was collected for this program.\n"
    catalogue = catalogue or load_catalogue()
    shares = profile.shares()
    ranked = sorted(zip(profile.kernels, shares), key=lambda ks: (-ks[1], ks[0].id))
    top = ranked[:max_kernels]
    lines = [f"# Nsight Compute profile ({', '.join(profile.sections)})", ""]
    n = len(profile.kernels)
    lines.append(f"{n} kernel{'s' if n != 1 else ''}, {profile.duration_ns / 1e3:.1f} us of "
                 "GPU time in total. " + (f"The {len(top)} longest:" if len(top) > 1 else
                                           "The longest:" if n > 1 else "It:"))
    part = None  # a part of the forward: said, so that no total is misread
    if profile.kernels_capped:
        part = (f"Only the forward's first {len(profile.kernels)} kernels were profiled "
                "(ncu's launch cap).")
    elif (profile.profiled_share or 1.0) < 1.0:
        part = (f"Only the kernels of the forward's first {profile.ops_profiled} of "
                f"{profile.ops} operators were profiled.")
    if part:
        lines[-1:-1] = [part, ""]
    lines.append("")
    lines.append("| # | kernel | grid | block | time (us) | share |")
    lines.append("|---|---|---|---|---|---|")
    for i, (kernel, share) in enumerate(top, 1):
        lines.append(f"| {i} | `{kernel.short_name}` | {kernel.grid} | {kernel.block} | "
                     f"{(kernel.duration_ns or 0) / 1e3:.1f} | {share:.0%} |")
    findings = profile.findings()
    row = {kernel.id: i for i, (kernel, _) in enumerate(top, 1)}  # the table's rows
    for section_id in profile.sections:
        section = catalogue.sections.get(section_id)
        title = section.display_name if section else section_id
        lines += ["", f"## {title}"]
        for i, (kernel, _) in enumerate(top, 1):
            shown = [m for m in kernel.displayed if m.section == section_id]
            if shown:
                cells = "; ".join(f"{m.label} {m.value}{' ' + m.unit if m.unit else ''}"
                                  for m in shown)
                lines.append(f"- kernel {i}: {cells}")
            elif section is not None and section_id.endswith(("Chart", "Tables")):  # a
                # chart or tables (a roofline, the memory chart and tables): ncu prints no
                # values for them, so their own metrics, by name (not the launch's, in the table)
                own = [(name, kernel.metrics[name]) for name in section.metrics
                       if name in kernel.metrics and not name.startswith("launch__")]
                if len(own) > CHART_METRICS:  # the hierarchical rooflines' hundreds: the
                    # non-zero ones, as many as a prompt can take
                    left = [(n, v) for n, v in own if v != 0]
                    own, more = left[:CHART_METRICS], len(own) - len(left[:CHART_METRICS])
                else:
                    more = 0
                if own:
                    units = profile.units
                    cells = "; ".join(f"{name} {_number(value)}"
                                      f"{' ' + units[name] if name in units else ''}"
                                      for name, value in own)
                    lines.append(f"- kernel {i}: {cells}"
                                 + (f" (and {more} more of its metrics, zero or past the "
                                    f"first {CHART_METRICS})" if more else ""))
        ours = [r for r in findings if r.finding.section == section_id
                and r.finding.kind != "INF"]
        for finding, weighted, kernel, share in ours[:max_findings]:
            where = (f"kernel {row[kernel.id]}" if kernel.id in row else
                     f"`{kernel.short_name}`, {share:.0%} of the time")
            estimate = (f"est. speedup {finding.speedup_pct:.0f}%, {finding.speedup_type}, on "
                        f"{where}; {weighted:.1f}% weighted by the kernels' time"
                        if finding.speedup_pct is not None else f"on {where}")
            lines.append(f"- **{finding.kind} {finding.rule}** ({estimate}): {finding.message}")
    return "\n".join(lines) + "\n"


def _number(value) -> str:
    """A metric's value as the profile shows it: a number in four significant digits."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)
