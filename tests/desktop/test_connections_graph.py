"""The connections graph: a record's neighbourhood from operator/links, capped, laid out readably, clicked through."""

from __future__ import annotations

import itertools
import math
from typing import Any

from PySide6.QtCore import Qt

from engine.access.authority import AgentCaller

from desktop.records.graph import (
    FIRST_HOP_MAX,
    NODE_SPACING,
    NODES_MAX,
    SECOND_HOP_MAX,
    ConnectionsGraph,
    build_graph,
    radial_layout,
)
from tests.desktop.test_records_view import make_view, open_titled


def brief(number: int, kind: str = "entity", status: str = "current") -> dict[str, Any]:
    return {"id": f"en_{number:026d}", "title": f"Record {number} with a rather long title", "kind": kind, "type": "thing", "status": status}


def links(base: int, connections: int, backlinks: int = 0) -> dict[str, Any]:
    return {"connections": [{"relation": f"rel_{n}", "direction": "out" if n % 2 else "in",
                             "via": {"id": f"re_{base}_{n}"}, "record": brief(base * 100 + n)}
                            for n in range(connections)],
            "references": [], "claims": [],
            "backlinks": [{**brief(base * 100 + 50 + n, "claim"), "fields": ["subject"]} for n in range(backlinks)]}


def test_a_large_neighbourhood_is_capped_with_a_more_node() -> None:
    centre = brief(0)
    graph = build_graph(centre, links(1, 30, 10))
    records = [node for node in graph.nodes.values() if node.hop == 1 and not node.is_more]
    more = [node for node in graph.nodes.values() if node.is_more]
    assert len(records) == FIRST_HOP_MAX and len(more) == 1
    assert more[0].more == 40 - FIRST_HOP_MAX == graph.left_out and more[0].title == f"+{40 - FIRST_HOP_MAX} more"
    first = graph.edges[frozenset((centre["id"], brief(100)["id"]))]
    second = graph.edges[frozenset((centre["id"], brief(101)["id"]))]
    assert first.labels == ["rel_0"] and first.a == brief(100)["id"] and first.to_b and not first.to_a, \
        "an incoming relationship points at the centre"
    assert second.a == centre["id"] and second.to_b and second.via == ["re_1_1"]


def test_two_hops_add_each_neighbours_links_once_and_cap_them() -> None:
    centre = brief(0)
    near = links(1, 3)
    a, b, c = (brief(100 + n)["id"] for n in range(3))
    second = {
        # a's answer: the centre again (the same relationship seen from a's end), b, and seven records of its own
        a: {"connections": [{"relation": "rel_0", "direction": "out", "via": {"id": "re_1_0"}, "record": centre},
                            {"relation": "knows", "direction": "out", "via": {"id": "re_ab"}, "record": brief(101)}]
            + [{"relation": "has", "direction": "out", "via": {"id": f"re_a{n}"}, "record": brief(900 + n)}
               for n in range(7)], "references": [], "claims": [], "backlinks": []},
        # b's answer: the same a-b relationship from b's end, and b naming c in a typed field
        b: {"connections": [{"relation": "knows", "direction": "in", "via": {"id": "re_ab"}, "record": brief(100)}],
            "references": [{"field": "fields.project", "record": brief(102)}], "claims": [], "backlinks": []},
        # c's answer: that field seen from c's end, as a backlink
        c: {"connections": [], "references": [], "claims": [],
            "backlinks": [{**brief(101), "fields": ["fields"]}]},
    }
    graph = build_graph(centre, near, second)
    centre_a = graph.edges[frozenset((centre["id"], a))]
    assert centre_a.labels == ["rel_0"] and centre_a.via == ["re_1_0"], "seen from both ends, drawn once"
    a_b = graph.edges[frozenset((a, b))]
    assert a_b.labels == ["knows"] and a_b.a == a and a_b.to_b and not a_b.to_a
    own = [node for node in graph.nodes.values() if node.hop == 2 and node.parent == a and not node.is_more]
    assert len(own) == SECOND_HOP_MAX and graph.nodes[f"more:{a}"].more == 7 - SECOND_HOP_MAX
    b_c = graph.edges[frozenset((b, c))]
    assert b_c.labels == ["fields.project"] and b_c.a == b and b_c.to_b and not b_c.to_a, "one link, once"
    assert not any(node.parent == c and node.hop == 2 for node in graph.nodes.values())
    without = build_graph(centre, near, {a: second[a]})
    assert c in without.nodes and frozenset((b, c)) not in without.edges, \
        "a record without an answer (not found, say) just has no second hop"

    crowded = build_graph(centre, links(1, 12), {brief(100 + n)["id"]: links(2 + n, 9) for n in range(12)})
    assert sum(1 for node in crowded.nodes.values() if not node.is_more) == NODES_MAX


def test_the_layout_keeps_nodes_and_labels_apart(qtbot) -> None:
    for first, second in ((1, 0), (2, 0), (5, 0), (12, 0), (12, 4), (3, 9), (12, 9)):
        graph = build_graph(brief(0), links(1, first), {brief(100 + n)["id"]: links(2 + n, second)
                                                        for n in range(first)} if second else None)
        positions = radial_layout(graph)
        assert set(positions) == set(graph.nodes)
        for one, other in itertools.combinations(positions.values(), 2):
            assert math.dist((one.x(), one.y()), (other.x(), other.y())) >= NODE_SPACING - 1e-6
        view = ConnectionsGraph()
        qtbot.addWidget(view)
        view.show_graph(graph)
        labels = {node_id: item.label_rect() for node_id, item in view.items_by_id.items()}
        discs = {node_id: item.sceneBoundingRect() for node_id, item in view.items_by_id.items()}
        for (one, rect), (other, rect_other) in itertools.combinations(labels.items(), 2):
            assert not rect.intersects(rect_other), f"labels of {one} and {other} overlap ({first}, {second})"
        for node_id, rect in labels.items():
            assert not any(rect.intersects(disc) for other, disc in discs.items() if other != node_id)


def click_node(qtbot, window: Any, node_id: str) -> None:
    centre = window.view.node_rect(node_id).center().toPoint()
    qtbot.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton, pos=centre)


def test_show_connections_draws_the_page_and_clicking_a_node_centres_and_opens_it(qtbot, tasks,
                                                                                 gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    open_titled(qtbot, view, "Dana Whitaker")
    page = view.page
    dana, links_shown = page.record, page.links
    expected = {c["record"]["id"] for c in links_shown["connections"]} | {
        r["record"]["id"] for r in links_shown["references"]} | {c["id"] for c in links_shown["claims"]} | {
        b["id"] for b in links_shown["backlinks"]}
    assert len(expected) >= 3

    assert page.graph_button.isEnabled()
    qtbot.keyClick(page.graph_button, Qt.Key.Key_Space)
    window = view.connections_window
    qtbot.waitUntil(lambda: window.view.graph is not None, timeout=10_000)
    graph = window.view.graph
    assert window.isVisible() and window.windowTitle() == "Connections of Dana Whitaker"
    assert graph.centre == dana["id"] and set(window.node_ids()) == expected | {dana["id"]}
    northwind = next(c for c in links_shown["connections"] if c["relation"] == "works_at")
    edge = graph.edges[frozenset((dana["id"], northwind["record"]["id"]))]
    assert "works_at" in edge.labels and edge.via == [northwind["via"]["id"]]
    drawn = window.view.edge_labels[frozenset((dana["id"], northwind["record"]["id"]))]
    assert drawn.text() == "works at", "in words, as the Links tab says it, never the key works_at"
    assert "linked records within one hop" in window.status.text()

    with qtbot.waitSignal(page.sig_content_loaded, timeout=10_000):
        where = window.view.edge_label_rect(dana["id"], northwind["record"]["id"]).center().toPoint()
        qtbot.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton, pos=where)
    assert page.record["id"] == northwind["via"]["id"] and page.record["kind"] == "relationship", \
        "the relationship's label opens the relationship record"
    assert window.view.graph.centre == dana["id"], "and the graph stays where it is"

    target = northwind["record"]["id"]
    with qtbot.waitSignals([window.sig_graph_shown, page.sig_content_loaded], timeout=10_000):
        click_node(qtbot, window, target)
    assert window.view.graph.centre == target and page.record["id"] == target, "centred, and opened in Records"
    assert dana["id"] in window.node_ids() and window.back_button.isEnabled()
    assert window.windowTitle() == "Connections of Northwind Labs"

    with qtbot.waitSignal(window.sig_graph_shown, timeout=10_000) as blocker:
        window.two_hops.setChecked(True)
    assert any(node.hop == 2 for node in blocker.args[0].nodes.values()), "Dana's other links, two hops out"
    assert blocker.args[0].centre == target

    with qtbot.waitSignals([window.sig_graph_shown, page.sig_content_loaded], timeout=10_000):
        window.back_button.click()
    assert window.view.graph.centre == dana["id"] and page.record["id"] == dana["id"]

    listed = [window.jump.itemData(n) for n in range(window.jump.count())]
    drawn = {node.id for node in window.view.graph.nodes.values() if node.hop and node.openable}
    assert set(listed) == drawn and expected <= drawn and window.jump.currentIndex() == -1, \
        "every linked record drawn (two hops now), for the keyboard"
    atlas = next(c["record"]["id"] for c in links_shown["connections"] if c["relation"] == "works_on")
    with qtbot.waitSignals([window.sig_graph_shown, page.sig_content_loaded], timeout=10_000):
        window.jump.setFocus()
        window.jump.setCurrentIndex(listed.index(atlas))
        window.jump.activated.emit(listed.index(atlas))
    assert window.view.graph.centre == atlas and page.record["title"] == "Atlas Migration"
    assert not window.view.grab().isNull()
    window.close()


def test_an_agents_new_relationship_appears_in_the_open_graph(qtbot, served_engine, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    open_titled(qtbot, view, "Dana Whitaker")
    view.page.graph_button.click()
    window = view.connections_window
    qtbot.waitUntil(lambda: window.view.graph is not None, timeout=10_000)
    before = {node.title for node in window.view.graph.nodes.values()}
    assert "Ravi Menon" not in before

    gui_thread_guard.active = False   # the agent writes beside the window, as another process would
    try:
        caller = AgentCaller(served_engine.registry.add_credential("main"), {"kind": "owner-private"})
        served_engine.remember(caller, {"requestId": "graph-live", "items": [
            {"relation": "knows", "from": "Dana", "to": "Ravi",
             "excerpt": "Dana and Ravi met at the Atlas kick-off."}]})
    finally:
        gui_thread_guard.active = True
    with qtbot.waitSignal(window.sig_graph_shown, timeout=10_000) as blocker:
        view.live_refresh()   # what the window does on the engine's change notification
    graph = blocker.args[0]
    added = next(node for node in graph.nodes.values() if node.title == "Ravi Menon")
    edge = graph.edges[frozenset((graph.centre, added.id))]
    assert edge.labels == ["knows"] and edge.a == graph.centre and edge.to_b


def test_show_connections_is_a_menu_action_listed_with_its_shortcut(qtbot, connected_window) -> None:
    window = connected_window
    assert ("View", "Show connections", "Ctrl+Shift+G") in window.menus.shortcuts()  # F1 lists it
    window.connections_action.trigger()  # no record open: said, nothing opens
    assert window.messages.isVisible() and "Open a record" in window.messages.label.text()
    records = window.records_view
    window.show_view(window.views.index(records))  # where the window opens: its first page may be in already
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)
    open_titled(qtbot, records, "Dana Whitaker")
    records.recent_table.setFocus()
    qtbot.keyClick(window, Qt.Key.Key_G, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: records.connections_window is not None and records.connections_window.view.graph
                    is not None, timeout=10_000)
    assert records.connections_window.view.graph.centre == records.page.record["id"]
    records.connections_window.close()
