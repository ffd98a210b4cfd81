"""Render the PNG icon sizes from knowledge-desk.svg (run after editing the SVG; the PNGs are committed).

    QT_QPA_PLATFORM=offscreen python packaging/icons/render.py
"""

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
HERE = Path(__file__).parent


def main() -> None:
    app = QGuiApplication([])  # noqa: F841 - Qt needs an application for painting
    renderer = QSvgRenderer(str(HERE / "knowledge-desk.svg"))
    for size in SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        image.save(str(HERE / f"knowledge-desk-{size}.png"))


if __name__ == "__main__":
    main()
