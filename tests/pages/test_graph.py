"""runs.graph: DAG layering and the ledger bar chart (pure)."""

from runs.graph import bar_chart, layers, layout_workflow

WF = {
    "id": "w",
    "version": 1,
    "steps": [{"id": "a"}, {"id": "b", "gatePolicy": "PAUSE_BEFORE"}, {"id": "c"}, {"id": "d"}],
    "edges": [
        {"id": "1", "from": "a", "to": "b"},
        {"id": "2", "from": "a", "to": "c"},
        {"id": "3", "from": "b", "to": "d"},
        {"id": "4", "from": "c", "to": "d"},
    ],
}


def test_layers_follow_the_longest_path():
    assert layers(["a", "b", "c", "d"], [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")]) == {
        "a": 0,
        "b": 1,
        "c": 2,
        "d": 3,
    }


def test_layout_places_columns_left_to_right_and_marks_gates():
    layout = layout_workflow(WF, step_status={"a": "completed"}, pending_steps={"b"})
    nodes = {n.id: n for n in layout.nodes}
    assert nodes["a"].x < nodes["b"].x == nodes["c"].x < nodes["d"].x
    assert nodes["b"].y != nodes["c"].y
    assert nodes["a"].status == "completed" and nodes["b"].gate == "pending" and nodes["c"].gate == ""
    assert len(layout.edges) == 4 and all(e.d.startswith("M") for e in layout.edges)
    assert layout.width >= nodes["d"].x + nodes["d"].w


def test_layout_tolerates_bad_edges_and_cycles():
    wf = {
        "steps": [{"id": "x"}, {"id": "y"}],
        "edges": [{"from": "x", "to": "zzz"}, {"from": "x", "to": "y"}, {"from": "y", "to": "x"}],
    }
    layout = layout_workflow(wf)
    assert {n.id for n in layout.nodes} == {"x", "y"}


def test_bar_chart_scales_to_the_largest_value():
    chart = bar_chart(
        [
            {"label": "a", "cost": 2.0, "tokens": 10, "currency": "USD"},
            {"label": "b", "cost": 1.0, "tokens": 0},
        ]
    )
    a, b = chart.bars
    assert a.cost_w == 2 * b.cost_w and b.tokens_w == 0 and a.tokens_w > 0
    assert bar_chart([]).bars == []
