#!/usr/bin/env python3
"""Renders inferplane's Grafana dashboards to SVG from a live Prometheus, without Grafana: each
panel where its gridPos puts it, every query run as a range query, time series as lines and
stat panels as their last value. For pictures in docs and for checking a dashboard against
real data; Grafana itself draws them better.

    python3 deploy/grafana/render.py --prometheus http://127.0.0.1:9090 --minutes 15 \\
        --out deploy/grafana/previews [--var tenant=team-a]

integration/test_observability.py renders every dashboard from the stack it scrapes (into a
temporary folder; into $IPL_DASHBOARD_PREVIEWS when that is set). Python 3 stdlib only.
"""
import argparse
import glob
import json
import math
import os
import re
import time
import urllib.parse
import urllib.request
from xml.sax.saxutils import escape

HERE = os.path.dirname(os.path.abspath(__file__))
COL, ROW = 50, 28  # px per grid column (24 of them) and per grid row unit
COLORS = ["#7eb26d", "#eab839", "#6ed0e0", "#ef843c", "#e24d42", "#1f78c1", "#ba43a9",
          "#705da0", "#508642", "#cca300"]


def query_range(prom, expr, start, end, step):
    url = prom + "/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.load(r)
    if doc.get("status") != "success":
        raise ValueError("%s: %s" % (expr, doc.get("error")))
    return doc["data"]["result"]


def substitute(expr, variables, rate_interval):
    expr = expr.replace("$__rate_interval", rate_interval)
    for k, v in variables.items():
        expr = expr.replace("$" + k, v)
    return expr


def legend(fmt, labels):
    """Grafana's legendFormat: {{label}} replaced by its value, "" when the series lacks it."""
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""),
                  fmt or "{{__name__}}").strip()


def fmt_value(v, unit):
    if v is None or math.isnan(v):
        return "n/a"
    if unit == "percentunit":
        return "%.1f%%" % (100 * v)
    if unit == "s":
        return "%.3g s" % v if v >= 1 else "%.3g ms" % (v * 1000)
    if unit == "currencyUSD":
        return "$%.4g" % v
    return "%.4g" % v


def series_of(prom, panel, variables, start, end, step, rate_interval):
    """[(legend, [(t, v)])] of every query of the panel."""
    out = []
    for t in panel.get("targets", []):
        for r in query_range(prom, substitute(t["expr"], variables, rate_interval), start, end,
                             step):
            pts = [(float(ts), float(v)) for ts, v in r["values"]]
            pts = [(ts, v) for ts, v in pts if math.isfinite(v)]
            out.append((legend(t.get("legendFormat"), r["metric"]), pts))
    return out


def panel_svg(panel, series, start, end):
    g = panel["gridPos"]
    x, y, w, h = g["x"] * COL, g["y"] * ROW + 40, g["w"] * COL, g["h"] * ROW
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
    parts = ['<g transform="translate(%d,%d)">' % (x, y),
             '<rect x="2" y="2" width="%d" height="%d" rx="3" fill="#181b1f" stroke="#2c3235"/>'
             % (w - 4, h - 4),
             '<text x="10" y="20" fill="#d8d9da" font-size="13">%s</text>'
             % escape(panel["title"])]
    if panel["type"] == "row":
        return '<text x="%d" y="%d" fill="#d8d9da" font-size="15" font-weight="bold">%s</text>' % (
            x + 6, y + 20, escape(panel["title"]))
    if panel["type"] == "stat":  # the last value of each series (up to 4), as Grafana does
        shown = [(name, pts[-1][1] if pts else None) for name, pts in series[:4]] or [("", None)]
        size = 30 if len(shown) == 1 else 16
        for i, (name, last) in enumerate(shown):
            label = fmt_value(last, unit) if len(shown) == 1 else "%s: %s" % (
                name, fmt_value(last, unit))
            parts.append('<text x="%d" y="%d" fill="#73bf69" font-size="%d" '
                         'text-anchor="middle">%s</text>'
                         % (w / 2, h / 2 + 16 + (i - (len(shown) - 1) / 2) * 22, size,
                            escape(label)))
        parts.append("</g>")
        return "".join(parts)
    px, py, pw, ph = 70, 30, w - 84, h - 70
    values = [v for _, pts in series for _, v in pts]
    if not values:
        parts.append('<text x="%d" y="%d" fill="#8e8e8e" font-size="12" text-anchor="middle">'
                     'no data</text></g>' % (w / 2, h / 2))
        return "".join(parts)
    lo, hi = min(0.0, min(values)), max(values)
    hi = hi if hi > lo else lo + 1
    parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#2c3235"/>'
                 % (px, py + ph, px + pw, py + ph))
    for frac in (0, 0.5, 1):
        vy = py + ph - frac * ph
        parts.append('<text x="%d" y="%d" fill="#8e8e8e" font-size="10" text-anchor="end">%s'
                     '</text>' % (px - 4, vy + 3, escape(fmt_value(lo + frac * (hi - lo), unit))))
    span = max(end - start, 1)
    for i, (name, pts) in enumerate(series[:10]):
        color = COLORS[i % len(COLORS)]
        coords = " ".join("%.1f,%.1f" % (px + (ts - start) / span * pw,
                                         py + ph - (v - lo) / (hi - lo) * ph) for ts, v in pts)
        parts.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>'
                     % (color, coords))
        lx, ly = 10 + (i % 3) * (w - 20) / 3, h - 30 + (i // 3) * 12
        if ly < h - 6:
            parts.append('<rect x="%.0f" y="%.0f" width="8" height="3" fill="%s"/>'
                         '<text x="%.0f" y="%.0f" fill="#bdbdbd" font-size="10">%s</text>'
                         % (lx, ly - 3, color, lx + 11, ly, escape(name[:40])))
    parts.append("</g>")
    return "".join(parts)


def render(prom, board, start, end, variables, rate_interval="1m"):
    """The SVG text of one dashboard (its JSON model) over [start, end]."""
    step = max((end - start) / 120.0, 1.0)
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in board["panels"])
    width, height = 24 * COL, bottom * ROW + 50
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
             'font-family="sans-serif">' % (width, height),
             '<rect width="100%" height="100%" fill="#111217"/>',
             '<text x="10" y="26" fill="#ffffff" font-size="18">%s</text>'
             % escape(board["title"] + "  " + " ".join("%s=%s" % kv
                                                       for kv in sorted(variables.items())))]
    for p in board["panels"]:
        series = [] if p["type"] == "row" else series_of(prom, p, variables, start, end, step,
                                                         rate_interval)
        parts.append(panel_svg(p, series, start, end))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def render_all(prom, out, start, end, variables, rate_interval="1m"):
    """Writes <out>/<dashboard>.svg for every deploy/grafana/*.json; returns the paths."""
    os.makedirs(out, exist_ok=True)
    paths = []
    for path in sorted(glob.glob(os.path.join(HERE, "*.json"))):
        with open(path) as f:
            board = json.load(f)
        svg = os.path.join(out, os.path.basename(path)[:-5] + ".svg")
        with open(svg, "w") as f:
            f.write(render(prom, board, start, end, variables, rate_interval))
        paths.append(svg)
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prometheus", required=True, help="base URL, e.g. http://127.0.0.1:9090")
    ap.add_argument("--minutes", type=float, default=15, help="how far back (default 15)")
    ap.add_argument("--out", required=True, help="folder for the SVG files")
    ap.add_argument("--var", action="append", default=[], help="NAME=VALUE of a variable")
    ap.add_argument("--rate-interval", default="1m", help="what $__rate_interval becomes")
    a = ap.parse_args()
    variables = {"pool": ".*", "tenant": ".*"}
    variables.update(v.split("=", 1) for v in a.var)
    end = time.time()
    for p in render_all(a.prometheus, a.out, end - 60 * a.minutes, end, variables,
                        a.rate_interval):
        print(p)


if __name__ == "__main__":
    main()
