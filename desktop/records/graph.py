"""A picture of a page's connections: the record, its relationships and linked records, as a graph to click through.

The data is ``operator/links``, the answer the record page's Links tab
shows: typed connections (a relationship record between two pages, drawn as
an edge named by its relation), the records a page names (subject,
endpoints, typed fields), claims about it, and backlinks.  With *Two hops*
the window asks ``operator/links`` for each linked record too.  Edges carry
an arrowhead at the end they point to (``from`` to ``to`` for a
relationship; the naming record to the named one otherwise).

A neighbourhood is capped so that the picture stays readable: at most
``FIRST_HOP_MAX`` records around the centre and ``SECOND_HOP_MAX`` around
each of those, ``NODES_MAX`` records in all; what is left out around a
record becomes one "+N more" node beside it (its tooltip says where to see
them all: the Links tab).  The layout is radial: the centre, the
first hop on a ring, each second-hop record in its parent's sector on an
outer ring, the rings wide enough that no two nodes come closer than
``NODE_SPACING``; labels sit outward, away from the centre.

Clicking a node centres the graph on that record and opens it in the
Records view (``sig_record_requested``); clicking a relationship's label
opens the relationship record there; *Back* returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QKeySequence, QPainter, QPainterPath, QPalette, QPen, QPolygonF, QWheelEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QGraphicsEllipseItem,
    QGraphicsPathItem,
    QGraphicsPolygonItem,
    QGraphicsScene,
    QGraphicsSceneMouseEvent,
    QGraphicsSimpleTextItem,
    QGraphicsView,
    QHBoxLayout,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.core.words import for_count

from ..common.charts import blend
from ..common.widgets import plain_label, unread_text
from ..tasks import EngineTasks

FIRST_HOP_MAX = 12
SECOND_HOP_MAX = 4
NODES_MAX = 40            # records drawn (the centre included); "+N more" nodes come on top
NODE_SPACING = 150.0      # the least distance between two node centres, in scene units (room for a label)
FIRST_RING = 200.0
RING_STEP = 200.0
NODE_RADIUS, CENTRE_RADIUS = 12.0, 20.0
LABEL_CHARS = 22
EDGE_LABEL_CHARS = 20
MORE = "more:"            # the id prefix of a "+N more" node


@dataclass
class Node:
    id: str
    title: str
    kind: str | None = None
    status: str | None = None
    hop: int = 0
    parent: str | None = None     # the node it was reached from (the layout places it in that one's sector)
    more: int = 0                 # a "+N more" node: how many records were left out

    @property
    def is_more(self) -> bool:
        return self.id.startswith(MORE)

    @property
    def openable(self) -> bool:
        return not self.is_more and self.status not in ("missing", "duplicate")


@dataclass
class Edge:
    a: str
    b: str
    labels: list[str] = field(default_factory=list)
    to_b: bool = False            # an arrowhead at b (something points from a to b)
    to_a: bool = False
    via: list[str] = field(default_factory=list)   # relationship records drawn as this edge
    seen: set[tuple[Any, ...]] = field(default_factory=set)

    def add(self, source: str, label: str, key: tuple[Any, ...], via: str | None = None) -> None:
        """One link from ``source`` to the other end; the same link seen from both ends counts once."""
        if key in self.seen:
            return
        self.seen.add(key)
        if label not in self.labels:
            self.labels.append(label)
        if source == self.a:
            self.to_b = True
        else:
            self.to_a = True
        if via and via not in self.via:
            self.via.append(via)


@dataclass
class Graph:
    centre: str
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: dict[frozenset[str], Edge] = field(default_factory=dict)
    left_out: int = 0             # records that "+N more" nodes stand for

    def records(self) -> int:
        """Nodes that are records (the centre included), not "+N more"."""
        return sum(1 for node in self.nodes.values() if not node.is_more)

    def edge(self, one: str, other: str) -> Edge:
        key = frozenset((one, other))
        if key not in self.edges:
            self.edges[key] = Edge(one, other)
        return self.edges[key]

    def link(self, source: str, target: str, label: str, key: tuple[Any, ...], via: str | None = None) -> None:
        self.edge(source, target).add(source, label, key, via)


@dataclass(frozen=True)
class Neighbour:
    """One link in an ``operator/links`` answer, seen from the record asked about."""
    record: dict[str, Any]        # {id, title, kind, type, status}
    label: str
    outgoing: bool                # the record asked about points at this one
    key: tuple[Any, ...]          # the same link, whichever end it is read from
    via: str | None = None


def neighbours(record_id: str, links: dict[str, Any]) -> list[Neighbour]:
    """Every linked record of one ``operator/links`` answer: connections, then references, claims, backlinks."""
    found: list[Neighbour] = []
    for connection in links.get("connections") or []:
        far, via = connection.get("record") or {}, (connection.get("via") or {}).get("id")
        if not far.get("id"):
            continue
        outgoing = connection.get("direction") == "out"
        ends = (record_id, far["id"]) if outgoing else (far["id"], record_id)
        found.append(Neighbour(far, str(connection.get("relation") or "related"), outgoing, ("via", via, *ends),
                               via))
    for reference in links.get("references") or []:
        target = reference.get("record") or {}
        if target.get("id"):
            field = str(reference.get("field"))
            # The far end's backlink names only the top-level field ("fields" for "fields.project").
            found.append(Neighbour(target, field, True, ("names", record_id, target["id"], field.split(".")[0])))
    for claim in links.get("claims") or []:
        if claim.get("id"):
            found.append(Neighbour(claim, "claim", False, ("names", claim["id"], record_id, "subject")))
    for back in links.get("backlinks") or []:
        if back.get("id"):
            for name in back.get("fields") or ["names"]:
                found.append(Neighbour(back, name, False, ("names", back["id"], record_id, name)))
    return found


def _node(record: dict[str, Any], hop: int, parent: str | None) -> Node:
    title = record.get("title") or ("(missing record)" if record.get("status") == "missing" else record["id"])
    return Node(record["id"], str(title), record.get("kind"), record.get("status"), hop, parent)


def _add_more(graph: Graph, parent: str, hop: int, count: int) -> None:
    if count <= 0:
        return
    more = Node(f"{MORE}{parent}", f"+{count} more", hop=hop, parent=parent, more=count)
    graph.nodes[more.id] = more
    graph.edge(parent, more.id)
    graph.left_out += count


def build_graph(centre: dict[str, Any], links: dict[str, Any],
                second: dict[str, dict[str, Any]] | None = None) -> Graph:
    """The neighbourhood of ``centre`` ({id, title, kind?}) from its links and, for two hops, its neighbours'.

    ``second`` maps a first-hop record id to its ``operator/links`` answer.
    """
    graph = Graph(centre["id"])
    graph.nodes[centre["id"]] = Node(centre["id"], str(centre.get("title") or centre["id"]), centre.get("kind"),
                                     centre.get("status"), 0, None)
    around = neighbours(centre["id"], links)
    others = list(dict.fromkeys(n.record["id"] for n in around if n.record["id"] != centre["id"]))
    shown = set(others[:FIRST_HOP_MAX])
    for neighbour in around:
        far = neighbour.record["id"]
        if far not in shown:
            continue
        if far not in graph.nodes:
            graph.nodes[far] = _node(neighbour.record, 1, centre["id"])
        source, target = (centre["id"], far) if neighbour.outgoing else (far, centre["id"])
        graph.link(source, target, neighbour.label, neighbour.key, neighbour.via)
    _add_more(graph, centre["id"], 1, len(others) - len(shown))

    for parent in [node_id for node_id, node in list(graph.nodes.items()) if node.hop == 1]:
        answer = (second or {}).get(parent)
        if answer is None:
            continue
        added, left = 0, set()
        for neighbour in neighbours(parent, answer):
            far = neighbour.record["id"]
            if far in (graph.centre, parent) or far in left:
                continue   # the centre's own links are drawn already, from its answer
            if far not in graph.nodes:
                if added >= SECOND_HOP_MAX or graph.records() >= NODES_MAX:
                    left.add(far)
                    continue
                graph.nodes[far] = _node(neighbour.record, 2, parent)
                added += 1
            source, target = (parent, far) if neighbour.outgoing else (far, parent)
            graph.link(source, target, neighbour.label, neighbour.key, neighbour.via)
        _add_more(graph, parent, 2, len(left))
    return graph


def radial_layout(graph: Graph) -> dict[str, QPointF]:
    """Scene positions: the centre at the origin, the first hop on a ring, the second on an outer ring.

    Each first-hop record gets a sector as wide as the second-hop records
    it leads to (at least one share), so its own are drawn just beyond it;
    both rings are wide enough that neighbours on them are ``NODE_SPACING``
    apart.
    """
    positions = {graph.centre: QPointF(0.0, 0.0)}
    first = [node for node in graph.nodes.values() if node.hop == 1]
    if not first:
        return positions
    children: dict[str, list[Node]] = {node.id: [] for node in first}
    for node in graph.nodes.values():
        if node.hop == 2 and node.parent in children:
            children[node.parent].append(node)
    weights = [max(1, len(children[node.id])) for node in first]
    unit = 2 * math.pi / sum(weights)
    angles, taken = [], 0
    for weight in weights:
        angles.append(-math.pi / 2 + (taken + weight / 2) * unit)
        taken += weight
    gaps = [(weights[n] + weights[(n + 1) % len(first)]) / 2 * unit for n in range(len(first))]
    ring = FIRST_RING if len(first) == 1 else max(FIRST_RING, _chord_radius(min(gaps)))
    for node, angle in zip(first, angles):
        positions[node.id] = _polar(ring, angle)
    if not any(children.values()):
        return positions
    outer = max(ring + RING_STEP, _chord_radius(unit))
    for node, angle in zip(first, angles):
        group = children[node.id]
        for number, child in enumerate(group):
            positions[child.id] = _polar(outer, angle + (number - (len(group) - 1) / 2) * unit)
    return positions


def _polar(radius: float, angle: float) -> QPointF:
    return QPointF(radius * math.cos(angle), radius * math.sin(angle))


def _chord_radius(angle: float) -> float:
    """The radius at which two points ``angle`` apart on a circle are ``NODE_SPACING`` apart."""
    return NODE_SPACING / (2 * math.sin(min(angle, math.pi) / 2))


def label_offset(position: QPointF, width: float, height: float, radius: float) -> QPointF:
    """Where a node's label goes (its top-left, relative to the node): outward, away from the centre."""
    length = math.hypot(position.x(), position.y())
    if length < 1e-6:
        return QPointF(-width / 2, radius + 2)
    ux, uy = position.x() / length, position.y() / length
    x = -width / 2 if abs(ux) < 0.35 else (radius + 4 if ux > 0 else -radius - 4 - width)
    y = -height / 2 if abs(uy) < 0.35 else (radius + 2 if uy > 0 else -radius - 2 - height)
    if abs(ux) >= 0.35 and abs(uy) >= 0.35:   # a diagonal: beside the node, a little outward
        y = -height / 2 + (height / 2 if uy > 0 else -height / 2)
    return QPointF(x, y)


def elided(text: str, limit: int = LABEL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


# --- drawing ---------------------------------------------------------------------------------------


class NodeItem(QGraphicsEllipseItem):
    """A record (or "+N more") as a disc with its title below; a click is reported to the view."""

    def __init__(self, node: Node, view: "ConnectionsGraph") -> None:
        radius = CENTRE_RADIUS if node.hop == 0 else NODE_RADIUS
        super().__init__(-radius, -radius, 2 * radius, 2 * radius)
        self.node, self.view = node, view
        self.setAcceptHoverEvents(True)
        if node.openable and node.hop:
            self.setCursor(Qt.CursorShape.PointingHandCursor)
        detail = f"{node.kind or ''} · {node.status or ''}".strip(" ·")
        if node.is_more:
            tip = (f"{node.more} more linked records are not drawn; the record page's Links tab lists "
                   "them all")
        elif node.openable:
            tip = f"{node.title}\n{detail}\n{node.id}\nClick to centre on this record and open it"
        else:
            tip = f"{node.title}\n{node.id} ({node.status}): not in this partition"
        self.setToolTip(tip)
        self.label = QGraphicsSimpleTextItem(elided(node.title), self)
        font = self.label.font()
        font.setBold(node.hop == 0)
        self.label.setFont(font)
        self.radius = radius

    def place(self, position: QPointF, leads_on: bool = False) -> None:
        """At ``position``; the label outward, or centred below when edges go on outward from this node."""
        self.setPos(position)
        box = self.label.boundingRect()
        self.label.setPos(QPointF(-box.width() / 2, self.radius + 2) if leads_on
                          else label_offset(position, box.width(), box.height(), self.radius))

    def label_rect(self) -> QRectF:
        return self.label.sceneBoundingRect()

    def mousePressEvent(self, event: QGraphicsSceneMouseEvent) -> None:  # noqa: N802 - Qt's name
        if event.button() == Qt.MouseButton.LeftButton and self.node.openable and self.node.hop:
            self.view.sig_node_clicked.emit(self.node.id)
            event.accept()
            return
        super().mousePressEvent(event)


def label_words(label: str) -> str:
    """An edge's name as the Links tab says it: ``works at`` for ``works_at``, ``project`` for ``fields.project``."""
    return label.removeprefix("fields.").replace("_", " ")


class EdgeLabel(QGraphicsSimpleTextItem):
    """An edge's relation names; for a typed relationship, a click opens the relationship record."""

    def __init__(self, edge: Edge, view: "ConnectionsGraph") -> None:
        names = ", ".join(label_words(label) for label in edge.labels)
        super().__init__(elided(names, EDGE_LABEL_CHARS))
        self.edge, self.view = edge, view
        if edge.via:
            self.setCursor(Qt.CursorShape.PointingHandCursor)
            self.setToolTip(f"{names}\nClick to open the relationship record ({edge.via[0]})")
        else:
            self.setToolTip(names)

    def mousePressEvent(self, event: QGraphicsSceneMouseEvent) -> None:  # noqa: N802 - Qt's name
        if event.button() == Qt.MouseButton.LeftButton and self.edge.via:
            self.view.sig_edge_clicked.emit(self.edge.via[0])
            event.accept()
            return
        super().mousePressEvent(event)


class ConnectionsGraph(QGraphicsView):
    """The scene of one neighbourhood; the wheel zooms, dragging the background pans."""

    sig_node_clicked = Signal(str)
    """A record's node was clicked (its id)."""

    sig_edge_clicked = Signal(str)
    """A typed relationship's label was clicked (the relationship record's id)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.graph: Graph | None = None
        self.positions: dict[str, QPointF] = {}
        self.items_by_id: dict[str, NodeItem] = {}
        self.edge_labels: dict[frozenset[str], EdgeLabel] = {}
        self.setAccessibleName("Connections graph")

    def show_graph(self, graph: Graph) -> None:
        scene = self.scene()
        scene.clear()
        self.graph, self.positions, self.items_by_id, self.edge_labels = graph, radial_layout(graph), {}, {}
        palette = self.palette()
        text, base = palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.Base)
        accent, muted = palette.color(QPalette.ColorRole.Highlight), palette.color(QPalette.ColorRole.PlaceholderText)
        scene.setBackgroundBrush(QBrush(base))
        edge_pen = QPen(blend(text, base, 0.45), 1.4)
        for edge in graph.edges.values():
            self._draw_edge(edge, edge_pen, muted)
        fills = {"entity": blend(accent, base, 0.55), "claim": blend(text, base, 0.3),
                 "relationship": blend(accent, text, 0.4)}
        parents = {node.parent for node in graph.nodes.values() if node.hop == 2}
        for node in graph.nodes.values():
            item = NodeItem(node, self)
            item.place(self.positions[node.id], node.id in parents)
            item.setZValue(2)
            if node.hop == 0:
                item.setBrush(QBrush(accent))
                item.setPen(QPen(text, 2))
            elif node.openable:
                item.setBrush(QBrush(fills.get(node.kind or "", blend(accent, base, 0.3))))
                item.setPen(QPen(text, 1))
            else:
                item.setBrush(QBrush(base))
                item.setPen(QPen(muted, 1.5, Qt.PenStyle.DashLine))
            item.label.setBrush(QBrush(text if node.openable or node.is_more else muted))
            scene.addItem(item)
            self.items_by_id[node.id] = item
        scene.setSceneRect(scene.itemsBoundingRect().adjusted(-40, -40, 40, 40))
        self.fit()

    def _draw_edge(self, edge: Edge, pen: QPen, muted: Any) -> None:
        """A spoke (to the centre, or from a record to one it leads to) is straight; any other edge bows
        away from the centre, so that it never runs through a node between its ends."""
        scene = self.scene()
        start, end = self.positions[edge.a], self.positions[edge.b]
        path = QPainterPath(start)
        control = _bow(start, end) if self._crosses(edge) else (start + end) / 2
        path.quadTo(control, end)
        line = QGraphicsPathItem(path)
        line.setPen(pen)
        line.setZValue(0)
        scene.addItem(line)
        if edge.labels:
            line.setToolTip(", ".join(edge.labels))
        for at, pointed in ((end, edge.to_b), (start, edge.to_a)):
            if pointed:
                arrow = QGraphicsPolygonItem(_arrowhead(control, at, self._radius(at)))
                arrow.setBrush(QBrush(pen.color()))
                arrow.setPen(QPen(Qt.PenStyle.NoPen))
                arrow.setZValue(1)
                scene.addItem(arrow)
        if edge.labels:
            label = EdgeLabel(edge, self)
            label.setBrush(QBrush(muted))
            box = label.boundingRect()
            middle = path.pointAtPercent(0.5)
            label.setPos(middle.x() - box.width() / 2, middle.y() - box.height() / 2)
            label.setZValue(1)
            scene.addItem(label)
            self.edge_labels[frozenset((edge.a, edge.b))] = label

    def _crosses(self, edge: Edge) -> bool:
        """Whether an edge joins two records that are not centre and spoke, or parent and child."""
        nodes = self.graph.nodes if self.graph else {}
        one, other = nodes.get(edge.a), nodes.get(edge.b)
        if one is None or other is None or 0 in (one.hop, other.hop):
            return False
        return one.parent != other.id and other.parent != one.id

    def _radius(self, point: QPointF) -> float:
        return CENTRE_RADIUS if point == QPointF(0.0, 0.0) else NODE_RADIUS

    def fit(self) -> None:
        rect = self.scene().sceneRect()
        if rect.isValid():
            self.fitInView(rect, Qt.AspectRatioMode.KeepAspectRatio)
            if self.transform().m11() > 1.0:      # never enlarge a small neighbourhood past its natural size
                self.resetTransform()
                self.centerOn(0.0, 0.0)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self.fit()

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 - Qt's name
        factor = 1.15 if event.angleDelta().y() > 0 else 1 / 1.15
        self.scale(factor, factor)

    def edge_label_rect(self, one: str, other: str) -> QRectF:
        """Where an edge's label is, in viewport coordinates."""
        label = self.edge_labels[frozenset((one, other))]
        return QRectF(self.mapFromScene(label.sceneBoundingRect()).boundingRect())

    def node_rect(self, node_id: str) -> QRectF:
        """Where a node's disc is, in viewport coordinates."""
        item = self.items_by_id[node_id]
        return QRectF(self.mapFromScene(item.sceneBoundingRect()).boundingRect())


def _bow(start: QPointF, end: QPointF) -> QPointF:
    """A control point beside the middle of start-end, on the side away from the centre."""
    middle = (start + end) / 2
    dx, dy = end.x() - start.x(), end.y() - start.y()
    length = math.hypot(dx, dy) or 1.0
    normal = QPointF(-dy / length, dx / length)
    if normal.x() * middle.x() + normal.y() * middle.y() < 0:
        normal = -normal
    return middle + normal * (0.3 * length)


def _arrowhead(tail: QPointF, tip: QPointF, radius: float, size: float = 9.0) -> QPolygonF:
    dx, dy = tip.x() - tail.x(), tip.y() - tail.y()
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    point = QPointF(tip.x() - ux * radius, tip.y() - uy * radius)
    back = QPointF(point.x() - ux * size, point.y() - uy * size)
    side = QPointF(-uy * size / 2, ux * size / 2)
    return QPolygonF([point, back + side, back - side])


class ConnectionsWindow(QDialog):
    """A window beside the Records view: the graph around one record, centred again on each click."""

    sig_record_requested = Signal(str)
    """A node was clicked: the Records view opens that record (its id)."""

    sig_graph_shown = Signal(object)
    """A neighbourhood is drawn (the ``Graph``)."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.agent: str | None = None
        self.centre: dict[str, Any] | None = None
        self._back: list[dict[str, Any]] = []
        self._generation = 0
        self.setWindowTitle("Connections")
        self.view = ConnectionsGraph(self)
        self.view.sig_node_clicked.connect(self._on_node_clicked)
        self.view.sig_edge_clicked.connect(self.sig_record_requested.emit)   # the graph stays where it is
        self.back_button = QPushButton("&Back")
        self.back_button.setShortcut(QKeySequence(QKeySequence.StandardKey.Back))
        self.back_button.setToolTip("The record shown before this one")
        self.back_button.clicked.connect(self.go_back)
        self.two_hops = QCheckBox("&Two hops")
        self.two_hops.setToolTip("Also the records linked to each linked record")
        self.two_hops.toggled.connect(lambda _: self.reload())
        self.fit_button = QPushButton("&Fit")
        self.fit_button.setToolTip("Show the whole graph (the wheel zooms, dragging pans)")
        self.fit_button.clicked.connect(self.view.fit)
        self.jump = QComboBox()
        self.jump.setToolTip("Centre on one of the linked records (the keyboard's way to click a node)")
        self.jump.setAccessibleName("Centre on a linked record")
        self.jump.setMinimumContentsLength(24)
        self.jump.activated.connect(self._on_jump)
        jump_label = plain_label("&Centre on:")
        jump_label.setBuddy(self.jump)
        self.status = plain_label()
        self.status.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.back_button)
        row.addWidget(self.two_hops)
        row.addWidget(self.fit_button)
        row.addWidget(jump_label)
        row.addWidget(self.jump)
        row.addWidget(self.status, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.view, 1)
        self.resize(900, 700)
        self._update_back()

    def show_record(self, agent: str, record: dict[str, Any]) -> None:
        """Draw the neighbourhood of ``record`` ({id, title, kind?}) in ``agent``'s private partition."""
        if self.centre is not None and self.agent == agent and self.centre["id"] != record["id"]:
            self._back.append(self.centre)
        elif self.agent != agent:
            self._back.clear()
        self.agent, self.centre = agent, dict(record)
        self.reload()

    def reload(self) -> None:
        if self.agent is None or self.centre is None:
            return
        self._generation += 1
        generation, agent, centre = self._generation, self.agent, self.centre
        self.setWindowTitle(f"Connections of {elided(str(centre.get('title') or centre['id']), 60)}")
        self.status.setText("Loading…")
        self._update_back()

        def first(links: dict[str, Any]) -> None:
            if generation != self._generation:
                return
            graph = build_graph(centre, links)
            wanted = [node.id for node in graph.nodes.values() if node.hop == 1 and node.openable]
            if not self.two_hops.isChecked() or not wanted:
                self._show(graph)
                return
            answers: dict[str, dict[str, Any]] = {}
            pending = set(wanted)

            def arrived(node_id: str, answer: dict[str, Any] | None) -> None:
                if generation != self._generation:
                    return
                pending.discard(node_id)
                if answer is not None:
                    answers[node_id] = answer
                if not pending:
                    self._show(build_graph(centre, links, answers))

            for node_id in wanted:
                self.tasks.request("operator/links", {"agent": agent, "id": node_id},
                                   lambda answer, n=node_id: arrived(n, answer),
                                   on_error=lambda _message, n=node_id: arrived(n, None), owner=self)

        def failed(message: str) -> None:
            if generation == self._generation:  # the record deleted, say, while its graph was open
                drawn = " What is drawn is as it was before." if self.view.graph is not None else ""
                self.status.setText(unread_text(message) + drawn)

        self.tasks.request("operator/links", {"agent": agent, "id": centre["id"]}, first, on_error=failed,
                           owner=self)

    def _show(self, graph: Graph) -> None:
        self.view.show_graph(graph)
        self.jump.clear()
        for node in sorted((n for n in graph.nodes.values() if n.hop and n.openable),
                           key=lambda n: (n.hop, n.title.casefold())):
            self.jump.addItem(f"{elided(node.title, 40)} ({node.kind or 'record'})", node.id)
        self.jump.setCurrentIndex(-1)
        records = sum(1 for node in graph.nodes.values() if node.hop and not node.is_more)
        hops = "two hops" if self.two_hops.isChecked() else "one hop"
        text = f"{records:,} linked records within {hops}"
        if graph.left_out:
            links = for_count(graph.left_out, "link is", "links are")
            text += f"; {graph.left_out:,} more {links} not drawn (the record's Links tab lists them all)"
        self.status.setText(text + ". Click a record to centre on it.")
        self.sig_graph_shown.emit(graph)

    def _on_node_clicked(self, node_id: str) -> None:
        if self.view.graph is None or self.agent is None:
            return
        node = self.view.graph.nodes[node_id]
        self.show_record(self.agent, {"id": node.id, "title": node.title, "kind": node.kind, "status": node.status})
        self.sig_record_requested.emit(node.id)

    def _on_jump(self, index: int) -> None:
        node_id = self.jump.itemData(index)
        if node_id:
            self._on_node_clicked(node_id)

    def go_back(self) -> None:
        if self._back and self.agent is not None:
            self.centre = self._back.pop()
            self.reload()
            self.sig_record_requested.emit(self.centre["id"])

    def _update_back(self) -> None:
        self.back_button.setEnabled(bool(self._back))

    def node_ids(self) -> list[str]:
        return list(self.view.graph.nodes) if self.view.graph else []
