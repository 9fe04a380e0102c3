#!/usr/bin/env python3
"""Plots moe-bench sweeps: output throughput and P99 inter-token latency vs
concurrency, one line per sweep (e.g. with and without KV offload to host),
as an SVG; prints the same figures as a Markdown table. Standard library only.

  plot-serving.py --out serving.svg recompute=a.json offload=b.json
"""
import argparse
import json
import math
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
W, H, PAD_L, PAD_R, PAD_T, PAD_B = 420, 300, 70, 16, 34, 46


def panel(x0, title, xs_all, series, ylabel):
    """One chart: log2 x axis (concurrency), linear y axis from 0."""
    top = max(y for _, pts in series for _, y in pts) or 1
    # A round tick step (1, 2 or 5 x 10^k) giving 4-8 ticks.
    step = 10 ** math.floor(math.log10(top / 5))
    step *= next(m for m in (1, 2, 5, 10) if top / (step * m) <= 8)
    ticks = math.ceil(top * 1.05 / step)
    ymax = ticks * step
    lx0, lx1 = math.log2(min(xs_all)), math.log2(max(xs_all))
    span = (lx1 - lx0) or 1

    def px(x):
        return x0 + PAD_L + (math.log2(x) - lx0) / span * (W - PAD_L - PAD_R)

    def py(y):
        return PAD_T + (1 - y / ymax) * (H - PAD_T - PAD_B)

    out = [f'<text x="{x0 + W / 2}" y="20" text-anchor="middle" font-weight="bold">{title}</text>',
           f'<line x1="{x0 + PAD_L}" y1="{py(0)}" x2="{x0 + W - PAD_R}" y2="{py(0)}" stroke="black"/>',
           f'<line x1="{x0 + PAD_L}" y1="{PAD_T}" x2="{x0 + PAD_L}" y2="{py(0)}" stroke="black"/>']
    for x in sorted(set(xs_all)):
        out.append(f'<text x="{px(x)}" y="{py(0) + 16}" text-anchor="middle">{x:g}</text>')
    for i in range(ticks + 1):
        y = step * i
        out.append(f'<line x1="{x0 + PAD_L - 4}" y1="{py(y)}" x2="{x0 + W - PAD_R}" y2="{py(y)}" '
                   f'stroke="#ddd"/>')
        out.append(f'<text x="{x0 + PAD_L - 6}" y="{py(y) + 4}" text-anchor="end">{y:g}</text>')
    out.append(f'<text x="{x0 + W / 2}" y="{H - 8}" text-anchor="middle">concurrency</text>')
    out.append(f'<text transform="translate({x0 + 14},{H / 2}) rotate(-90)" '
               f'text-anchor="middle">{ylabel}</text>')
    for i, (_, pts) in enumerate(series):
        c = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"/>')
        out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{c}"/>' for x, y in pts]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="SVG file to write")
    ap.add_argument("runs", nargs="+", help="label=moe-bench.json (closed-loop sweeps)")
    a = ap.parse_args()
    runs = []
    for spec in a.runs:
        label, sep, path = spec.partition("=")
        if not sep:
            sys.exit(f"plot-serving.py: error: expected label=file.json, got '{spec}'")
        try:
            levels = json.load(open(path))["levels"]
            pts = [(l["concurrency"], l) for l in levels]
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"plot-serving.py: error: {path}: not a closed-loop moe-bench JSON ({e})")
        runs.append((label, pts))
    xs = [x for _, pts in runs for x, _ in pts]
    tput = [(lab, [(x, l["output_tokens_per_second"]) for x, l in pts]) for lab, pts in runs]
    itl = [(lab, [(x, l["itl_ms"]["p99"]) for x, l in pts]) for lab, pts in runs]
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{H + 24}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{2 * W}" height="{H + 24}" fill="white"/>']
    svg += panel(0, "output tokens/s", xs, tput, "tokens / s")
    svg += panel(W, "P99 inter-token latency", xs, itl, "ms")
    for i, (label, _) in enumerate(runs):
        c = COLOURS[i % len(COLOURS)]
        svg.append(f'<rect x="{PAD_L + 140 * i}" y="{H + 6}" width="14" height="4" fill="{c}"/>')
        svg.append(f'<text x="{PAD_L + 140 * i + 20}" y="{H + 12}">{label}</text>')
    svg.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(svg) + "\n")

    print("| preemption | concurrency | req/s | output tok/s | TTFT p99 ms | ITL median / p99 ms "
          "| preemptions (swapped / recomputed) | host swap MiB out / in |")
    print("|---|---|---|---|---|---|---|---|")
    for label, pts in runs:
        for x, l in pts:
            print(f"| {label} | {x} | {l['requests_per_second']:.1f} | "
                  f"{l['output_tokens_per_second']:.0f} | {l['ttft_ms']['p99']:.1f} | "
                  f"{l['itl_ms']['median']:.2f} / {l['itl_ms']['p99']:.2f} | {l['preemptions']} "
                  f"({l['swap_outs']} / {l['preemptions'] - l['swap_outs']}) | "
                  f"{l['swap_out_bytes'] / 2**20:.2f} / {l['swap_in_bytes'] / 2**20:.2f} |")


if __name__ == "__main__":
    main()
