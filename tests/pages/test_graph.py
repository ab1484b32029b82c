"""runs.presenters.graph: DAG layering and the ledger bar chart (pure)."""

from runs.presenters.graph import bar_chart, layers, layout_workflow

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


def test_workflow_step_order_follows_the_dag_then_the_declaration():
    from runs.presenters.graph import merged_step_order, workflow_step_order

    wf = {
        "steps": [{"id": "publish"}, {"id": "b-review"}, {"id": "a-review"}, {"id": "parse"}],
        "edges": [
            {"from": "parse", "to": "b-review"},
            {"from": "parse", "to": "a-review"},
            {"from": "b-review", "to": "publish"},
            {"from": "a-review", "to": "publish"},
        ],
    }
    assert workflow_step_order(wf) == ["parse", "b-review", "a-review", "publish"]
    assert workflow_step_order(None) == []
    assert merged_step_order([wf, {"steps": [{"id": "extra"}, {"id": "parse"}]}]) == [
        "parse",
        "b-review",
        "a-review",
        "publish",
        "extra",
    ]


def test_day_chart_fills_calendar_gaps_and_scales_each_panel():
    from datetime import date

    from runs.presenters.graph import DAY_PANEL_H, day_chart

    chart = day_chart(
        [
            {"day": "2026-03-03", "cost": 0.5, "tokens": 100},
            {"day": "2026-03-01", "cost": 1.0, "tokens": 400},
            {"day": "not a day", "cost": 9, "tokens": 9},
        ],
        currency="USD",
    )
    assert [b.day for b in chart.bars] == ["2026-03-01", "2026-03-02", "2026-03-03"]
    assert [b.cost_h for b in chart.bars] == [DAY_PANEL_H, 0, DAY_PANEL_H // 2]
    assert [b.tokens_h for b in chart.bars] == [DAY_PANEL_H, 0, round(DAY_PANEL_H / 4)]
    assert chart.bars[0].cost_y + chart.bars[0].cost_h == chart.cost_base
    assert day_chart([], currency="USD") is None
    ranged = day_chart(
        [{"day": "2026-03-03", "cost": 1, "tokens": 1}],
        currency="USD",
        first=date(2026, 3, 1),
        last=date(2026, 3, 7),
    )
    assert (ranged.first, ranged.last, len(ranged.bars)) == ("2026-03-01", "2026-03-07", 7)
    long = day_chart(
        [{"day": "2020-01-01", "cost": 1, "tokens": 1}, {"day": "2022-01-01", "cost": 1, "tokens": 1}],
        currency="",
    )
    assert len(long.bars) == 366 and long.clipped == 732 - 366 and long.last == "2022-01-01"
