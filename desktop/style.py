"""Qt's Fusion style, with check box and radio button frames that can be seen on a dark palette.

Fusion (the style Qt uses where the desktop has no Qt theme of its own: X11
without KDE or GNOME's platform theme, Xvfb, the offscreen platform) draws an
indicator's frame a little darker than the window colour.  On a light palette
that reads; on a dark one (``desktop/theme.py``'s own) it is all but invisible:
about 1.1:1 against the window and 1.05:1 inside a table cell, so an unticked
*Needed* box in the gate's labelling table, *Include non-current records* or
*writesEnabled* look like nothing at all.  ``DeskStyle`` draws Fusion's
indicator and then, on a dark palette only, its frame again in the palette's
placeholder colour (above 3:1 against both, the contrast WCAG asks of a
control's outline).  Every other element is Fusion's own.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QPainter, QPalette, QPen
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleFactory, QStyleOption

from .common.widgets import is_dark

_BOX = QStyle.PrimitiveElement.PE_IndicatorCheckBox     # item views' check boxes are drawn as this too
_RADIO = QStyle.PrimitiveElement.PE_IndicatorRadioButton


class DeskStyle(QProxyStyle):
    """Fusion, with an indicator frame that reads on a dark palette (see the module's text)."""

    def drawPrimitive(self, element: QStyle.PrimitiveElement, option: QStyleOption,  # noqa: N802 - Qt's name
                      painter: QPainter, widget: Any = None) -> None:
        super().drawPrimitive(element, option, painter, widget)
        if element not in (_BOX, _RADIO) or not is_dark(option.palette):
            return
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(option.palette.color(QPalette.ColorRole.PlaceholderText), 1.0))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        rect = QRectF(option.rect).adjusted(0.5, 0.5, -1.5, -1.5)
        if element == _RADIO:
            painter.drawEllipse(rect)
        else:
            painter.drawRoundedRect(rect, 2.0, 2.0)
        painter.restore()


_installed: list[DeskStyle] = []  # kept alive beside the application that uses it


def install(app: QApplication) -> None:
    """Use ``DeskStyle`` where the application runs with Fusion (a native style is left alone)."""
    if isinstance(app.style(), DeskStyle) or app.style().name().lower() != "fusion":
        return
    style = DeskStyle(QStyleFactory.create("fusion"))
    _installed.append(style)
    app.setStyle(style)
