# SPDX-License-Identifier: MIT
"""The report as text, from the JSON answers, for where mlmonctl is not
installed: the run's summary, then one table of ops per category (count,
total, avg, min, max, p50, p90, p99, and share of all the ops' total, as
mlmonctl report prints it)."""


def _fmt(v, unit="", digits=1):
    if v is None:
        return "-"
    return f"{v:.{digits}f}{unit}"


# MiB, the package's one unit of memory for people: the report's, and the
# profiler's "MB" (which its API reference computes as bytes / 1024 / 1024)
MIB = 1048576.0


def mib(b):
    """Bytes in MiB; None stays None (a figure mlmond could not read)."""
    return None if b is None else b / MIB


def format_report(run, latency):
    s = run.get("summary") or {}
    out = [f"run {run.get('id')}" + (f" ({run['name']})" if run.get("name") else "") + f": {run.get('state')}"]
    out.append(f"  pid: {run.get('pid')}  wall: {_fmt(s.get('wall_time_s'), ' s')}  "
               f"cpu: {_fmt(s.get('cpu_time_s'), ' s', 2)} ({_fmt(s.get('cpu_util_avg_pct'), '%')})")
    out.append(f"  peak RSS: {_fmt(mib(s.get('peak_rss_bytes')), ' MiB')}  "
               f"final RSS: {_fmt(mib(s.get('final_rss_bytes')), ' MiB')}  "
               f"peak GPU memory: {_fmt(mib(s.get('peak_gpu_mem_bytes')), ' MiB')}")
    if s.get("peak_pss_bytes") is not None:
        # a tree's footprint: each page its forked workers share counted once
        out.append(f"  peak PSS: {_fmt(mib(s.get('peak_pss_bytes')), ' MiB')}  "
                   f"final PSS: {_fmt(mib(s.get('final_pss_bytes')), ' MiB')}")
    ops = latency.get("ops") or {}
    if not ops:
        out.append("No timed operations in this span.")
        return "\n".join(out) + "\n"
    by_cat = {}
    for name, o in ops.items():
        by_cat.setdefault(o.get("category") or "-", []).append((name, o))
    cols = ("op", "count", "total_ms", "avg_ms", "min_ms", "max_ms", "p50_ms", "p90_ms", "p99_ms", "share")
    total = sum(o.get("total_ms") or 0 for o in ops.values()) or None
    for cat in sorted(by_cat):
        rows = sorted(by_cat[cat], key=lambda x: -(x[1].get("total_ms") or 0))
        out.append(f"\ncategory {cat}")
        table = [cols]
        for name, o in rows:
            share = None if total is None else 100.0 * (o.get("total_ms") or 0) / total
            table.append((name, str(o.get("count")), _fmt(o.get("total_ms")), _fmt(o.get("mean_ms"), "", 3),
                          _fmt(o.get("min_ms"), "", 3), _fmt(o.get("max_ms"), "", 3), _fmt(o.get("p50_ms"), "", 3),
                          _fmt(o.get("p90_ms"), "", 3), _fmt(o.get("p99_ms"), "", 3), _fmt(share, "%")))
        widths = [max(len(r[i]) for r in table) for i in range(len(cols))]
        for r in table:
            out.append("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(out) + "\n"
