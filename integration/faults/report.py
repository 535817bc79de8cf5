"""The fault suite's output: a table of the figures, the RSS bound, the log lines worth reading
when a phase fails."""
import json
import re

MB = 1024 * 1024
RSS_GROWTH_BYTES = 30 * MB   # a process may grow by this much over the run...
RSS_GROWTH_RATIO = 0.5       # ...and by this fraction of its RSS at the start: both bounds hold


def rss_problems(samples, last, growth_bytes=RSS_GROWTH_BYTES, growth_ratio=RSS_GROWTH_RATIO):
    """Compares each process's RSS at the end (`last`: key -> (pid, bytes)) with its first
    sample (`samples`, oldest first: the same for a restarted process's new pid). Returns
    (problems, {key: [start MB, end MB]})."""
    found, tab = [], {}
    for key, (pid, end) in sorted(last.items()):
        start = next((s[key][1] for s in samples if key in s and s[key][0] == pid and s[key][1]),
                     None)
        if not start or not end:
            continue
        tab[key] = [round(start / MB, 1), round(end / MB, 1)]
        grew = end - start
        if grew > growth_bytes or grew > growth_ratio * start:
            found.append("%s (pid %d) grew from %.1f MB to %.1f MB (bound: +%.0f MB and +%.0f%%)"
                         % (key, pid, start / MB, end / MB, growth_bytes / MB,
                            100 * growth_ratio))
    return found, tab


def table(figs, rss):
    """A plain-text table of the phases' figures."""
    head = ("fault", "sent", "gw0/gw1", "err", "lost", "hung", "recov s", "TTFT ms b/a",
            "net %", "machine %", "hit b/a", "max lat s")
    rows = [head]
    for f in figs:
        pg = f["per_gateway_sent"]
        rows.append((f["fault"], str(f["sent"]), "%s/%s" % (pg.get("gw0"), pg.get("gw1")),
                     str(f["clear_error"]), "%d (+%d cut)" % (f["lost"] - f["lost_excused"],
                                                              f["lost_excused"])
                     if f["lost_excused"] else str(f["lost"]),
                     str(f["hung"]), str(f["recovery_s"]),
                     "%s/%s" % (f["ttft_before_ms"], f["ttft_after_ms"]),
                     str(f["ttft_net_change_pct"]), str(f["machine_change_pct"]),
                     "%s/%s" % (f["hit_before"], f["hit_after"]), str(f["max_latency_s"])))
    w = [max(len(r[i]) for r in rows) for i in range(len(head))]
    out = ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)) for r in rows]
    if rss:
        out.append("RSS MB start -> end: " + ", ".join("%s %s->%s" % (k, a, b)
                                                       for k, (a, b) in sorted(rss.items())))
    return "\n".join(out)


_LEVEL = re.compile(r"level=(warn|error)")


def log_excerpt(fleet, res, per_proc=12):
    """The warn and error lines of every process of the fleet (killed ones too), the last
    `per_proc` of each."""
    out = []
    for p in fleet.stack.procs:
        try:
            lines = [ln for ln in p.log().splitlines() if _LEVEL.search(ln)]
        except OSError:
            continue
        if lines:
            out.append("----- %s pid %d (%s)" % (p.name, p.proc.pid, p.log_path))
            out += lines[-per_proc:]
    return "\n".join(out)[-12000:]


def write_figures(path, plan, figs, rss):
    """Writes the run's figures as JSON to `path` (nothing when path is empty)."""
    if not path:
        return
    with open(path, "w") as f:
        json.dump({"plan": {k: v for k, v in vars(plan).items()}, "faults": figs,
                   "rss_mb": rss}, f, indent=1)
