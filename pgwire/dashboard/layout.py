"""A layered drawing of a directed acyclic graph (a streaming job's dataflow), no graphviz.

The classic Sugiyama steps, each in its simplest useful form:

1. **Layers**: a node's layer is the longest path from a node without inputs (so every
   edge points downward, upstream relations on top, the job's output at the bottom).
2. **Dummy nodes**: an edge spanning several layers gets one invisible node per layer it
   crosses, so it is routed around the boxes and takes part in the ordering.
3. **Order within layers**: start in input order, then a few down and up sweeps that sort
   each layer by the barycenter (mean position) of each node's neighbours in the layer
   above (below), which removes most crossings of the small graphs jobs have.
4. **Coordinates**: boxes of a fixed size, each layer centred horizontally; a dummy node
   takes a narrow slot.

Input nodes are ids in any order, edges (source, target) pairs; a cycle (which a stream
plan never has) is broken by ignoring the edges that close it. `layout()` returns boxes
and edge polylines in pixels; `pgwire.dashboard.svg` draws them.
"""

from __future__ import annotations

from dataclasses import dataclass

NODE_W = 210.0
NODE_H = 58.0
DUMMY_W = 24.0
GAP_X = 28.0
GAP_Y = 36.0
MARGIN = 12.0
SWEEPS = 4


@dataclass
class Box:
    x: float  # left
    y: float  # top
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2


@dataclass
class Route:
    source: str
    target: str
    via: list[str]  # the dummy nodes the edge passes, top to bottom
    points: list[tuple[float, float]]  # polyline: bottom of source ... top of target


@dataclass
class Layout:
    boxes: dict[str, Box]  # the real nodes' boxes
    edges: list[Route]
    layers: list[list[str]]  # real and dummy ids per layer, in drawing order
    width: float
    height: float


def assign_layers(nodes: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Longest-path layering (Kahn's order; edges closing a cycle are ignored)."""
    known = set(nodes)
    preds: dict[str, list[str]] = {n: [] for n in nodes}
    succs: dict[str, list[str]] = {n: [] for n in nodes}
    for s, t in edges:
        if s in known and t in known and s != t:
            preds[t].append(s)
            succs[s].append(t)
    indeg = {n: len(preds[n]) for n in nodes}
    layer = dict.fromkeys(nodes, 0)
    ready = [n for n in nodes if indeg[n] == 0]
    done: set[str] = set()
    while len(done) < len(nodes):
        if not ready:  # a cycle: release the first node still waiting
            ready = [next(n for n in nodes if n not in done)]
        n = ready.pop(0)
        if n in done:
            continue
        done.add(n)
        for t in succs[n]:
            if t in done:
                continue
            layer[t] = max(layer[t], layer[n] + 1)
            indeg[t] -= 1
            if indeg[t] == 0:
                ready.append(t)
    return layer


def layout(nodes: list[str], edges: list[tuple[str, str]]) -> Layout:
    """Boxes and edge routes for the graph; see the module docstring."""
    layer = assign_layers(nodes, edges)
    n_layers = max(layer.values(), default=-1) + 1
    layers: list[list[str]] = [[] for _ in range(n_layers)]
    for n in nodes:
        layers[layer[n]].append(n)
    # split long edges into unit edges through dummy nodes
    dummies: set[str] = set()
    unit: list[tuple[str, str]] = []
    chains: list[tuple[str, str, list[str]]] = []
    for k, (s, t) in enumerate(edges):
        if s not in layer or t not in layer or s == t:
            continue
        ls, lt = layer[s], layer[t]
        if lt <= ls:  # an edge closing a cycle: drawn straight, not ordered
            chains.append((s, t, []))
            continue
        path = [s]
        for d in range(ls + 1, lt):
            dummy = f"\x00{k}.{d}"
            dummies.add(dummy)
            layers[d].append(dummy)
            layer[dummy] = d
            path.append(dummy)
        path.append(t)
        unit.extend(zip(path, path[1:]))
        chains.append((s, t, path[1:-1]))
    _order(layers, unit)
    boxes = _coordinates(layers, dummies)
    width = max((b.x + b.w for b in boxes.values()), default=0.0) + MARGIN
    height = max((b.y + b.h for b in boxes.values()), default=0.0) + MARGIN
    routes: list[Route] = []
    for s, t, via in chains:
        a, b = boxes[s], boxes[t]
        pts = [(a.cx, a.y + a.h)]
        pts += [(boxes[d].cx, boxes[d].y + boxes[d].h / 2) for d in via]
        pts.append((b.cx, b.y))
        routes.append(Route(s, t, via, pts))
    real = {n: boxes[n] for n in nodes}
    return Layout(real, routes, layers, width, height)


def _order(layers: list[list[str]], unit: list[tuple[str, str]]) -> None:
    """Barycenter sweeps, in place: down (by the layer above), then up (by the one below)."""
    ups: dict[str, list[str]] = {}
    downs: dict[str, list[str]] = {}
    for s, t in unit:
        ups.setdefault(t, []).append(s)
        downs.setdefault(s, []).append(t)
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        rng = range(1, len(layers)) if down else range(len(layers) - 2, -1, -1)
        for i in rng:
            ref = layers[i - 1] if down else layers[i + 1]
            pos = {n: p for p, n in enumerate(ref)}
            nbrs = ups if down else downs
            current = {n: p for p, n in enumerate(layers[i])}
            bary = {}
            for n in layers[i]:
                ps = [pos[m] for m in nbrs.get(n, ()) if m in pos]
                bary[n] = sum(ps) / len(ps) if ps else float(current[n])
            layers[i].sort(key=lambda n: (bary[n], current[n]))


def _coordinates(layers: list[list[str]], dummies: set[str]) -> dict[str, Box]:
    def row_width(row: list[str]) -> float:
        ws = [DUMMY_W if n in dummies else NODE_W for n in row]
        return sum(ws) + GAP_X * max(len(ws) - 1, 0)

    widest = max((row_width(r) for r in layers), default=0.0)
    boxes: dict[str, Box] = {}
    for i, row in enumerate(layers):
        x = MARGIN + (widest - row_width(row)) / 2
        y = MARGIN + i * (NODE_H + GAP_Y)
        for n in row:
            w = DUMMY_W if n in dummies else NODE_W
            boxes[n] = Box(x, y, w, NODE_H)
            x += w + GAP_X
    return boxes


def crossings(lay: Layout) -> int:
    """Pairs of edge segments between the same two adjacent layers that cross."""
    pos = {n: (li, p) for li, row in enumerate(lay.layers) for p, n in enumerate(row)}
    segs: list[tuple[int, int, int]] = []  # (upper layer, upper position, lower position)
    for r in lay.edges:
        chain = [r.source, *r.via, r.target]
        for a, b in zip(chain, chain[1:]):
            (la, pa), (lb, pb) = pos[a], pos[b]
            if lb == la + 1:
                segs.append((la, pa, pb))
    n = 0
    for i, (l1, a1, b1) in enumerate(segs):
        for l2, a2, b2 in segs[i + 1 :]:
            if l1 == l2 and (a1 - a2) * (b1 - b2) < 0:
                n += 1
    return n
