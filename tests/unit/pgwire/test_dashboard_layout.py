"""The dashboard's pictures without a server: the layered DAG layout
(pgwire/dashboard/layout.py), the SVG it becomes (svg.py) and the rates (rates.py)."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

from pgwire.dashboard.layout import NODE_H, assign_layers, crossings, layout
from pgwire.dashboard.rates import Rates
from pgwire.dashboard.svg import human, job_svg, latency_svg, lineage_svg

SVG = "{http://www.w3.org/2000/svg}"


def test_layers_are_longest_paths_and_every_edge_points_down() -> None:
    nodes = ["t", "u", "join", "agg", "mat"]
    edges = [("t", "join"), ("u", "join"), ("join", "agg"), ("agg", "mat"), ("t", "mat")]
    layer = assign_layers(nodes, edges)
    assert layer == {"t": 0, "u": 0, "join": 1, "agg": 2, "mat": 3}
    lay = layout(nodes, edges)
    for r in lay.edges:
        assert lay.boxes[r.source].y + NODE_H <= lay.boxes[r.target].y
        assert r.points[0][1] == lay.boxes[r.source].y + NODE_H  # leaves the bottom
        assert r.points[-1][1] == lay.boxes[r.target].y  # enters the top


def test_long_edges_route_through_one_dummy_per_crossed_layer() -> None:
    lay = layout(["t", "a", "b", "c"], [("t", "a"), ("a", "b"), ("b", "c"), ("t", "c")])
    (long,) = [r for r in lay.edges if (r.source, r.target) == ("t", "c")]
    assert len(long.via) == 2  # layers 1 and 2
    assert len(long.points) == 4
    assert [lay.layers.index(next(row for row in lay.layers if d in row)) for d in long.via] == [
        1,
        2,
    ]
    assert set(lay.boxes) == {"t", "a", "b", "c"}  # dummies are not drawn as boxes


def test_boxes_of_one_layer_do_not_overlap() -> None:
    nodes = [f"r{i}" for i in range(5)] + ["u1", "u2", "m"]
    edges = [(f"r{i}", "u1" if i % 2 else "u2") for i in range(5)] + [("u1", "m"), ("u2", "m")]
    lay = layout(nodes, edges)
    for a, b in itertools.combinations(lay.boxes.values(), 2):
        if a.y == b.y:
            assert a.x + a.w <= b.x or b.x + b.w <= a.x


def test_barycenter_sweeps_remove_avoidable_crossings() -> None:
    # given in an order that crosses: x->q, y->p with p listed before q
    nodes = ["x", "y", "p", "q", "z"]
    edges = [("x", "q"), ("y", "p"), ("p", "z"), ("q", "z")]
    lay = layout(nodes, edges)
    assert crossings(lay) == 0
    assert lay.layers[1] == ["q", "p"]


def test_a_cycle_does_not_hang_and_every_node_is_placed() -> None:
    lay = layout(["a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "a")])
    assert set(lay.boxes) == {"a", "b", "c"}
    assert len(lay.edges) == 3


def _job() -> dict[str, object]:
    return {
        "id": 7,
        "name": "v<&>",
        "kind": "materialized view",
        "nodes": [
            {"id": "rel:1", "kind": "relation", "label": "t<script>", "rel_id": 1},
            {
                "id": "n0",
                "kind": "node",
                "label": "StreamHashAgg",
                "operator": "HashAggOp",
                "detail": "group_key: [k], aggs: [count]",
                "rows": 10,
                "cpu_seconds": 0.5,
                "rows_per_s": 1234.0,
                "cpu_share": 0.25,
                "state_tables": [{"id": 1001, "name": "n0.groups", "keys": 3, "bytes": None}],
                "state_keys": 3,
                "state_bytes": None,
            },
            {
                "id": "n1",
                "kind": "node",
                "label": "StreamMaterialize",
                "operator": "ColumnarMaterializeOp",
                "rows": 3,
                "cpu_seconds": 0.0,
                "rows_per_s": None,
                "cpu_share": None,
                "rows_stored": 3,
                "state_tables": [{"id": 1002, "name": "mat.segments", "keys": 1, "bytes": 2500}],
                "state_keys": 1,
                "state_bytes": 2500,
            },
        ],
        "edges": [["rel:1", "n0"], ["n0", "n1"]],
    }


def test_job_svg_is_valid_xml_with_escaped_names_and_per_operator_figures() -> None:
    text = job_svg(_job(), {1: "table"})
    assert "<script>" not in text
    root = ET.fromstring(text)  # well-formed
    assert root.get("data-job") == "7"
    groups = {g.get("data-node"): g for g in root.iter(f"{SVG}g")}
    assert set(groups) == {"rel:1", "n0", "n1"}
    agg = [t.text for t in groups["n0"].iter(f"{SVG}text")]
    # a size that could not be sampled this time falls back to the entry count
    assert agg == ["StreamHashAgg", "1.2k rows/s · cpu 25%", "state 3 keys"]
    assert "n0.groups" in groups["n0"].find(f"{SVG}title").text  # type: ignore[union-attr]
    mat = [t.text for t in groups["n1"].iter(f"{SVG}text")]
    assert mat == ["StreamMaterialize", "3 rows", "3 rows · state ≈2.4 KB"]
    rel = [t.text for t in groups["rel:1"].iter(f"{SVG}text")]
    assert rel == ["t<script>", "table"]
    assert len(list(root.iter(f"{SVG}path"))) == 3  # the arrow marker + 2 edges


def test_latency_svg_draws_one_spike_per_barrier() -> None:
    empty = ET.fromstring(latency_svg([]))
    assert "no barrier yet" in "".join(empty.itertext())
    pts = [[100.0, 1, 5.0], [101.0, 2, 50.0], [103.0, 3, 10.0]]
    root = ET.fromstring(latency_svg(pts))
    (bars,) = [p for p in root.iter(f"{SVG}path") if p.get("class") == "barriers"]
    assert bars.get("d", "").count("M") == 3
    assert "epoch 3" in "".join(root.itertext())


def test_human_numbers() -> None:
    assert [human(None), human(0), human(12), human(1234), human(2.5e6), human(0.25)] == [
        "-",
        "0",
        "12",
        "1.2k",
        "2.5M",
        "0.2",
    ]


def _snap(t: float, rows: int, node_rows: int, cpu: float) -> dict[str, object]:
    return {
        "time": t,
        "relations": [{"id": 1, "counter": rows}, {"id": 2, "counter": None}],
        "jobs": [
            {
                "id": 3,
                "nodes": [
                    {"id": "rel:1", "kind": "relation"},
                    {"id": "n0", "kind": "node", "rows": node_rows, "cpu_seconds": cpu},
                ],
            }
        ],
    }


def test_rates_compare_readings_of_the_window_and_forget_resets() -> None:
    r = Rates(window_s=10.0, min_gap_s=0.5)
    first = r.annotate(_snap(100.0, 0, 0, 0.0))
    assert first["relations"][0]["rows_per_s"] is None  # type: ignore[index]
    second = r.annotate(_snap(102.0, 200, 100, 0.5))
    assert second["relations"][0]["rows_per_s"] == 100.0  # type: ignore[index]
    assert second["relations"][1]["rows_per_s"] is None  # type: ignore[index]
    node = second["jobs"][0]["nodes"][1]  # type: ignore[index]
    assert node["rows_per_s"] == 50.0 and node["cpu_share"] == 0.25
    # a reading too close to the last one is not kept; the rate still uses the oldest
    r.annotate(_snap(102.1, 210, 100, 0.5))
    assert len(r.readings) == 2
    # the window slides: readings older than 10 s are dropped (one older is kept)
    for t in (105.0, 108.0, 111.0, 114.0):
        r.annotate(_snap(t, int((t - 100) * 100), 0, 0.0))
    assert r.readings[0][0] >= 102.0
    # a counter that went down was reset: unknown, not negative
    reset = r.annotate(_snap(115.0, 5, 0, 0.0))
    assert reset["relations"][0]["rows_per_s"] is None  # type: ignore[index]


def test_lineage_svg_draws_relations_top_down_and_links_jobs() -> None:
    rels = [
        {"id": 1, "name": "t", "kind": "table", "depends_on": [], "rows": 5, "schema": "public"},
        {"id": 2, "name": "mv", "kind": "materialized view", "depends_on": [1], "rows": 2},
        {"id": 3, "name": "s<k>", "kind": "sink", "depends_on": [2], "schema": "x", "errors": 4},
    ]
    root = ET.fromstring(lineage_svg(rels, jobs={2, 3}))
    boxes = {g.get("data-relation"): g for g in root.iter(f"{SVG}g")}
    assert set(boxes) == {"t", "mv", "s<k>"}
    texts = {k: [t.text for t in g.iter(f"{SVG}text")] for k, g in boxes.items()}
    assert texts["t"] == ["t", "table", "5 rows"]
    assert texts["s<k>"] == ["x.s<k>", "sink", "4 errors"]

    def top(name: str) -> float:
        return float(boxes[name].find(f".//{SVG}rect").get("y"))  # type: ignore[union-attr, arg-type]

    assert top("t") < top("mv") < top("s<k>")
    links = [a.get("href") for a in root.iter(f"{SVG}a")]
    assert links == ["#job-2", "#job-3"]
    assert lineage_svg([]) == ""
