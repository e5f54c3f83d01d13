"""Inline SVG pictures for the dashboard: a job's dataflow and the barrier latency chart.

Server-rendered strings (the page inserts them as they come in the JSON API), so the
browser needs no drawing library. Every text from the catalog (relation names, operator
details) is XML-escaped here; nothing else in the page builds markup from data.

* `job_svg(job, rel_kinds)`: the boxes and edges of `pgwire.dashboard.layout` with, per
  operator, its name as EXPLAIN prints it, rows/s and CPU share (from
  `pgwire.dashboard.rates`), and its state size (bytes estimated from a sample of its
  state tables' encoded entries; a view's materialize also shows the rows it stores);
  the full EXPLAIN detail and the state tables are the box's tooltip (`<title>`).
* `lineage_svg(relations)`: every relation as a box (rows, rows/s, errors) with arrows
  from what it reads to what reads it;
* `latency_svg(points)`: barrier duration over wall-clock time, one spike per barrier
  (an idle server runs no barrier, so a line between them would invent values), with
  the maximum and the time span on the axes.
"""

from __future__ import annotations

from html import escape
from typing import Any

from pgwire.dashboard.layout import NODE_H, NODE_W, layout

LABEL_CHARS = 29
_STYLE = {
    "relation": ("#e8f1fb", "#4a78b0"),
    "node": ("#ffffff", "#666666"),
    "sink": ("#fdf1e4", "#b4792f"),
}


def human(n: float | None, unit: str = "") -> str:
    """12, 1.2k, 3.4M ... (None: '-')."""
    if n is None:
        return "-"
    a = abs(n)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{n / div:.1f}{suffix}{unit}"
    if isinstance(n, float) and not n.is_integer():
        return f"{n:.1f}{unit}"
    return f"{int(n)}{unit}"


def human_bytes(n: float) -> str:
    """512 B, 1.2 KB, 3.4 MB (powers of 1024)."""
    for div, unit in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{int(n)} B"


def _clip(text: str, n: int = LABEL_CHARS) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def node_lines(node: dict[str, Any], rel_kinds: dict[int, str]) -> list[str]:
    """The text lines of one box (first: the title)."""
    kind = node["kind"]
    if kind == "relation":
        return [str(node["label"]), rel_kinds.get(int(node.get("rel_id", -1)), "relation")]
    if kind == "sink":
        return [str(node["label"]), "writer"]
    rate = node.get("rows_per_s")
    flow = f"{human(rate)} rows/s" if rate is not None else f"{human(node.get('rows'))} rows"
    cpu = node.get("cpu_share")
    if cpu is not None:
        flow += f" · cpu {cpu * 100:.0f}%"
    lines = [str(node["label"]), flow]
    state = []
    if node.get("rows_stored") is not None:
        state.append(f"{human(node['rows_stored'])} rows")
    if node.get("state_tables"):
        size = node.get("state_bytes")
        if size is not None:
            state.append(f"state ≈{human_bytes(size)}")
        else:
            state.append(f"state {human(node.get('state_keys', 0))} keys")
    lines.append(" · ".join(state) if state else "stateless")
    return lines


def _tooltip(node: dict[str, Any]) -> str:
    parts = [str(node.get("label", ""))]
    if node.get("operator"):
        parts[0] += f" ({node['operator']})"
    if node.get("detail"):
        parts.append(str(node["detail"]))
    if node.get("kind") == "node":
        parts.append(f"rows out since start: {node.get('rows', 0)}")
        parts.append(f"cpu seconds: {node.get('cpu_seconds', 0.0):.3f}")
    for t in node.get("state_tables", []):
        size = "?" if t.get("bytes") is None else human_bytes(t["bytes"])
        parts.append(f"state table {t['id']} {t['name']}: {t['keys']} keys, ≈{size}")
    return "\n".join(parts)


def job_svg(job: dict[str, Any], rel_kinds: dict[int, str] | None = None) -> str:
    """The job's dataflow picture (see the module docstring)."""
    kinds = rel_kinds or {}
    nodes = job["nodes"]
    by_id = {n["id"]: n for n in nodes}
    lay = layout([n["id"] for n in nodes], [(s, t) for s, t in job["edges"]])
    w, h = max(lay.width, NODE_W), max(lay.height, NODE_H)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="dataflow" data-job="{job["id"]}" '
        f'width="{w:.0f}" height="{h:.0f}" viewBox="0 0 {w:.0f} {h:.0f}" role="img" '
        f'aria-label="dataflow of {escape(str(job["name"]))}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#888"/></marker></defs>',
    ]
    for r in lay.edges:
        d = " ".join(
            f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(r.points)
        )
        out.append(
            f'<path class="edge" d="{d}" fill="none" stroke="#888" stroke-width="1.4" '
            f'marker-end="url(#arrow)" data-from="{escape(r.source)}" '
            f'data-to="{escape(r.target)}"/>'
        )
    for nid, box in lay.boxes.items():
        node = by_id[nid]
        fill, stroke = _STYLE.get(node["kind"], _STYLE["node"])
        cls = {"node": "op", "relation": "rel", "sink": "sink"}.get(node["kind"], "op")
        attrs = f'class="{cls}" data-node="{escape(nid)}"'
        if node.get("operator"):
            attrs += f' data-operator="{escape(str(node["operator"]))}"'
        out.append(f"<g {attrs}><title>{escape(_tooltip(node))}</title>")
        out.append(
            f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.0f}" height="{box.h:.0f}" '
            f'rx="6" fill="{fill}" stroke="{stroke}"/>'
        )
        for i, line in enumerate(node_lines(node, kinds)):
            weight = ' font-weight="bold"' if i == 0 else ""
            size = 12 if i == 0 else 11
            out.append(
                f'<text x="{box.cx:.1f}" y="{box.y + 17 + i * 15:.1f}" text-anchor="middle" '
                f'font-size="{size}"{weight}>{escape(_clip(line))}</text>'
            )
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def lineage_svg(relations: list[dict[str, Any]], jobs: set[int] | None = None) -> str:
    """Every relation and what it reads (`depends_on`): tables and sources on top, the
    views and sinks built on them below; a job's box links to its dataflow (#job-<id>)."""
    ids = {r["id"] for r in relations}
    nodes = [f"r{r['id']}" for r in relations]
    edges = [(f"r{d}", f"r{r['id']}") for r in relations for d in r["depends_on"] if d in ids]
    if not nodes:
        return ""
    lay = layout(nodes, edges)
    w, h = max(lay.width, NODE_W), max(lay.height, NODE_H)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="lineage" width="{w:.0f}" '
        f'height="{h:.0f}" viewBox="0 0 {w:.0f} {h:.0f}" role="img" aria-label="relations">',
        '<defs><marker id="arrow-l" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#888"/></marker></defs>',
    ]
    for r in lay.edges:
        d = " ".join(
            f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(r.points)
        )
        out.append(
            f'<path class="edge" d="{d}" fill="none" stroke="#888" stroke-width="1.4" '
            'marker-end="url(#arrow-l)"/>'
        )
    for rel in relations:
        box = lay.boxes[f"r{rel['id']}"]
        kind = str(rel["kind"])
        fill, stroke = _STYLE["relation"] if kind in ("table", "source") else _STYLE["node"]
        if kind == "sink":
            fill, stroke = _STYLE["sink"]
        name = (
            rel["name"]
            if rel.get("schema") in (None, "public")
            else (f"{rel['schema']}.{rel['name']}")
        )
        figures = []
        if rel.get("rows") is not None:
            figures.append(f"{human(rel['rows'])} rows")
        if rel.get("rows_per_s") is not None:
            figures.append(f"{human(rel['rows_per_s'])}/s")
        if rel.get("errors"):
            n = rel["errors"]
            figures.append(f"{human(n)} error{'' if n == 1 else 's'}")
        lines = [str(name), kind + (f" ({rel['connector']})" if rel.get("connector") else "")]
        lines.append(" · ".join(figures) if figures else (rel.get("state") or ""))
        link = jobs is not None and rel["id"] in jobs
        out.append(
            f'<g class="relation" data-relation="{escape(str(rel["name"]))}">'
            + (f'<a href="#job-{rel["id"]}">' if link else "")
            + f"<title>{escape(str(rel.get('definition', '')))}</title>"
            f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.0f}" height="{box.h:.0f}" '
            f'rx="6" fill="{fill}" stroke="{stroke}"/>'
        )
        for i, line in enumerate(lines):
            weight = ' font-weight="bold"' if i == 0 else ""
            out.append(
                f'<text x="{box.cx:.1f}" y="{box.y + 17 + i * 15:.1f}" text-anchor="middle" '
                f'font-size="{12 if i == 0 else 11}"{weight}>{escape(_clip(line))}</text>'
            )
        out.append(("</a>" if link else "") + "</g>")
    out.append("</svg>")
    return "".join(out)


def latency_svg(points: list[list[float]], width: int = 640, height: int = 150) -> str:
    """Barrier duration (ms) over time; `points` are (wall time, epoch, ms), oldest first."""
    pad_l, pad_b, pad_t = 48, 20, 8
    inner_w, inner_h = width - pad_l - 8, height - pad_b - pad_t
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="latency" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        'aria-label="barrier latency">',
        f'<rect x="{pad_l}" y="{pad_t}" width="{inner_w}" height="{inner_h}" fill="#fafafa" '
        'stroke="#ccc"/>',
    ]
    if not points:
        out.append(
            f'<text x="{pad_l + inner_w / 2}" y="{pad_t + inner_h / 2}" text-anchor="middle" '
            'font-size="12" fill="#888">no barrier yet</text></svg>'
        )
        return "".join(out)
    t0, t1 = points[0][0], points[-1][0]
    span = max(t1 - t0, 1e-3)
    top = max(p[2] for p in points) * 1.1 or 1.0
    base = pad_t + inner_h
    spikes = []
    for p in points:
        x = pad_l + (p[0] - t0) / span * inner_w
        spikes.append(f"M{x:.1f},{base} V{base - p[2] / top * inner_h:.1f}")
    out.append(
        f'<path class="barriers" d="{" ".join(spikes)}" stroke="#2f6fb3" stroke-width="1.5"/>'
    )
    out.append(
        f'<text x="{pad_l - 4}" y="{pad_t + 10}" text-anchor="end" font-size="10">'
        f"{top:.0f} ms</text>"
        f'<text x="{pad_l - 4}" y="{pad_t + inner_h}" text-anchor="end" font-size="10">0</text>'
        f'<text x="{pad_l}" y="{height - 5}" font-size="10">-{span:.{0 if span >= 10 else 1}f} s'
        "</text>"
        f'<text x="{pad_l + inner_w}" y="{height - 5}" text-anchor="end" font-size="10">'
        f"epoch {int(points[-1][1])}</text>"
    )
    out.append("</svg>")
    return "".join(out)
