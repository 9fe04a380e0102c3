#!/usr/bin/env python3
"""Draws timelines side by side from trace-event files (moe-run --trace,
moe-plan simulate --trace): one row per (file, rank, stream), launches in
one colour, collectives in another, on one time axis per panel; writes an
SVG (standard library only) and, when rsvg-convert is installed
(librsvg2-bin), a PNG beside it.

  plot-timeline.py --out timeline.svg --step-tokens N "measured=run.json" "simulated=sim.json"

Of each file, the first step of N tokens (the spans whose args.tokens is N
and whose args.step is that of the first of them) is drawn."""
import argparse
import html
import json
import shutil
import subprocess
import sys

ROW, LABEL_W, W, PAD = 22, 190, 900, 12
COLOURS = {"launch": "#4c78a8", "collective": "#e45756"}


def first_step(path, tokens):
    events = [e for e in json.load(open(path))["traceEvents"]
              if e.get("ph") == "X" and e.get("args", {}).get("tokens") == tokens]
    if not events:
        sys.exit(f"plot-timeline: {path} has no step of {tokens} tokens")
    first = min(events, key=lambda e: e["ts"])["args"].get("step", 0)
    step = [e for e in events if e["args"].get("step", 0) == first]
    t0 = min(e["ts"] for e in step)
    return [dict(e, ts=e["ts"] - t0) for e in step]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--step-tokens", type=int, required=True)
    ap.add_argument("timelines", nargs="+", help="LABEL=TRACE")
    a = ap.parse_args()
    panels = []
    for spec in a.timelines:
        label, path = spec.split("=", 1)
        panels.append((label, first_step(path, a.step_tokens)))
    span = max(e["ts"] + e["dur"] for _, step in panels for e in step)
    scale = (W - LABEL_W - PAD) / span
    rows = sum(len({(e["pid"], e["tid"]) for e in step}) for _, step in panels)
    height = PAD * 2 + ROW * (rows + 2 * len(panels)) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{height}" fill="white"/>']
    y = PAD
    for label, step in panels:
        end = max(e["ts"] + e["dur"] for e in step)
        out.append(f'<text x="{PAD}" y="{y + 14}" font-weight="bold">'
                   f'{html.escape(label)}: {end / 1000:.2f} ms</text>')
        y += ROW
        for pid, tid in sorted({(e["pid"], e["tid"]) for e in step}):
            out.append(f'<text x="{PAD}" y="{y + 14}">rank {pid} stream {tid}</text>')
            for e in step:
                if (e["pid"], e["tid"]) != (pid, tid):
                    continue
                x, w = LABEL_W + e["ts"] * scale, max(e["dur"] * scale, 0.5)
                colour = COLOURS.get(e.get("cat"), "#999")
                out.append(f'<rect x="{x:.2f}" y="{y + 3}" width="{w:.2f}" height="{ROW - 6}" '
                           f'fill="{colour}"><title>{html.escape(e["name"])} '
                           f'{e["dur"]:.0f} us</title></rect>')
            y += ROW
        y += ROW
    # The axis and the legend.
    ticks = 5
    for i in range(ticks + 1):
        x = LABEL_W + i * (W - LABEL_W - PAD) / ticks
        out.append(f'<text x="{x:.1f}" y="{y}" text-anchor="middle">'
                   f'{span * i / ticks / 1000:.1f} ms</text>')
    out.append(f'<rect x="{PAD}" y="{y + 8}" width="12" height="10" fill="{COLOURS["launch"]}"/>'
               f'<text x="{PAD + 16}" y="{y + 17}">computation</text>'
               f'<rect x="{PAD + 100}" y="{y + 8}" width="12" height="10" '
               f'fill="{COLOURS["collective"]}"/>'
               f'<text x="{PAD + 116}" y="{y + 17}">collective (emulated link)</text>')
    out.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    if shutil.which("rsvg-convert"):
        png = a.out.rsplit(".", 1)[0] + ".png"
        subprocess.run(["rsvg-convert", "-o", png, a.out], check=True)
        print(f"plot-timeline: wrote {a.out} and {png}")
    else:
        print(f"plot-timeline: wrote {a.out} (install librsvg2-bin for the PNG)")


if __name__ == "__main__":
    main()
