"""Check boxes and radio buttons can be seen in the dark theme (Fusion alone draws their frames all but
invisible on a dark palette), in forms and inside tables; the light theme is drawn as Fusion draws it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QCheckBox, QRadioButton, QStyleFactory, QTableView, QWidget

from desktop.style import DeskStyle, install
from desktop.theme import own_palette
from tests.desktop.test_theme import contrast


def strongest_contrast(widget: QWidget, width: int, background: str) -> float:
    """The highest contrast against ``background`` of any pixel in the widget's first ``width`` columns."""
    image = widget.grab().toImage()
    return max(contrast(QColor(image.pixel(x, y)).name(), background)
               for x in range(min(width, image.width())) for y in range(image.height()))


def styled(qtbot, widget: QWidget, style, dark: bool) -> QWidget:
    qtbot.addWidget(widget)
    widget.setPalette(own_palette(dark))
    widget.setStyle(style)
    widget.resize(120, 30)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


_STYLES: list = []  # styles outlive the widgets drawn with them (a widget does not own its style)


@pytest.fixture
def fusion_styles(qapp) -> list:
    if not _STYLES:
        _STYLES.extend([QStyleFactory.create("fusion"), DeskStyle(QStyleFactory.create("fusion"))])
    return _STYLES


@pytest.mark.parametrize("kind", [QCheckBox, QRadioButton])
def test_an_unticked_indicator_reads_on_the_dark_window(qtbot, fusion_styles, kind) -> None:
    fusion, desk = fusion_styles
    window = own_palette(True).color(own_palette(True).ColorRole.Window).name()
    plain = strongest_contrast(styled(qtbot, kind(""), fusion, True), 22, window)
    ours = strongest_contrast(styled(qtbot, kind(""), desk, True), 22, window)
    assert plain < 2.0 <= 3.0 <= ours, (plain, ours)  # Fusion's frame is lost; ours has a control's 3:1


def test_an_unticked_box_in_a_table_cell_reads_on_the_dark_base(qtbot, fusion_styles) -> None:
    _, desk = fusion_styles
    model = QStandardItemModel(1, 1)
    item = QStandardItem("")
    item.setCheckable(True)
    item.setCheckState(Qt.CheckState.Unchecked)
    model.setItem(0, 0, item)
    view = QTableView()
    view.setModel(model)
    view.horizontalHeader().hide()
    view.verticalHeader().hide()
    styled(qtbot, view, desk, True)
    base = own_palette(True).color(own_palette(True).ColorRole.Base).name()
    assert strongest_contrast(view.viewport(), 30, base) >= 3.0


def test_the_light_theme_is_drawn_as_fusion_draws_it(qtbot, fusion_styles) -> None:
    fusion, desk = fusion_styles
    plain = styled(qtbot, QCheckBox("Include"), fusion, False).grab().toImage()
    ours = styled(qtbot, QCheckBox("Include"), desk, False).grab().toImage()
    assert plain == ours


def test_the_application_uses_it_where_qt_runs_fusion(qapp) -> None:
    assert qapp.style().name().lower() == "fusion" or isinstance(qapp.style(), DeskStyle)  # as offscreen runs
    install(qapp)
    install(qapp)  # once is enough
    assert isinstance(qapp.style(), DeskStyle)
