"""The recall gate's settings: every key of the ``recallGate`` block, edited and checked by the engine.

Ranges and rules live in the engine (engine/state/gate_settings.py): every edit is
sent to ``operator/checkGateSettings`` shortly after the owner stops typing,
and its answer shows next to the field it names.  Saving checks once more,
then writes with ``operator/setGateSettings``.  The block written keeps the
keys the owner had written and adds only those that differ from the
defaults (``checkGateSettings`` of ``{}`` says what they are), so a saved
form does not pin every default forever.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ..common.widgets import plain_label
from ..tasks import EngineTasks

CHECK_DELAY_MS = 300
WHERE = "recallGate."


@dataclass(frozen=True)
class Field:
    key: str
    label: str
    kind: str            # choice | int | threshold | optional | bool
    help: str
    choices: tuple[str, ...] = ()


FIELDS = (
    Field("mode", "Mode", "choice", "off: the gate never runs. shadow: everything except the injection, kept in "
          "the gate log (and the journal when it is on). live: matched pages are added to the turn.",
          ("off", "shadow", "live")),
    Field("candidates", "Candidates", "choice", "keyword: pages sharing words with the message (BM25). hybrid: "
          "those joined with the pages nearest in meaning (needs the search's embedding model). model: "
          "the labels of every page, shortlisted by the Decision model.", ("keyword", "hybrid", "model")),
    Field("maxCandidates", "Pages scored per turn", "int", "maxCandidates: at most this many pages are asked about."),
    Field("highThreshold", "Inject at or above", "threshold", "highThreshold: a page scoring at least this is "
          "injected (live) or would be (shadow). Tune it with the Tuning tab."),
    Field("mediumThreshold", "Pointer line from", "optional", "mediumThreshold: pages scoring between this and "
          "highThreshold get a one-line pointer instead of their text. Off: no pointers."),
    Field("skipHintBelow", "Skip hint below", "optional", "skipHintBelow: when every page scores below this, the "
          "turn gets a one-line 'nothing matched' hint. Off: no hint."),
    Field("excerpts", "Excerpts per page", "int", "excerpts: passages taken from each page."),
    Field("excerptChars", "Characters per excerpt", "int", "excerptChars"),
    Field("pageChars", "Characters per page", "int", "pageChars: all of a page's excerpts together."),
    Field("timeoutMs", "Budget per turn (ms)", "int", "timeoutMs: the whole gate's time per turn. The Models "
          "view's benchmark says how many tokens it holds on this machine."),
    Field("longWindows", "Long windows (cascade)", "int", "longWindows: with a cross-encoder, this many pages, "
          "the likeliest by a cheap score (keyword rank, and similarity when the search has an embedding model), "
          "get the reranker's long excerpt windows and the rest the 32-token minimum. 0: every page the same window."),
    Field("maxIndexChars", "Label index characters", "int", "maxIndexChars: the size of the label index that "
          "model candidates are chosen from."),
    Field("journal", "Keep a shadow journal", "bool", "journal: owner-private shadow turns keep their message "
          "text, so you can label and replay them. Never logged; Labelling can clear it."),
)
KEYS = tuple(field.key for field in FIELDS)


class GateSettingsForm(QWidget):
    """Every ``recallGate`` key with its own error line; Save writes only after the engine's check passed."""

    sig_settings_loaded = Signal(object)
    """``operator/gateSettings`` answered (after loading or saving); the argument is its result."""

    sig_checked = Signal(object)
    """The engine checked the form: ``{valid, effective}`` or ``{valid: false, message, field}``."""

    sig_settings_saved = Signal(object)
    """The block was written; the argument is the fresh ``operator/gateSettings`` result."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.current: dict[str, Any] | None = None
        self.defaults: dict[str, Any] | None = None
        self.check_result: dict[str, Any] | None = None
        self._filling = False
        self._generation = 0
        self._saved: dict[str, Any] | None = None  # the form's values when last saved (the confirmation stays)
        self.inputs: dict[str, Any] = {}
        self.switches: dict[str, QCheckBox] = {}
        self.errors: dict[str, QLabel] = {}
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(CHECK_DELAY_MS)
        self._timer.timeout.connect(self.check)

        self.status = plain_label()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        form = QFormLayout()
        for field in FIELDS:
            form.addRow(field.label, self._field_row(field))
        self.general_error = plain_label()
        self.general_error.setWordWrap(True)
        self.general_error.hide()
        self.save_button = QPushButton("&Save settings")
        self.save_button.setToolTip("Check with the engine, then write the recallGate block to config.json")
        self.save_button.clicked.connect(self.save)
        self.revert_button = QPushButton("Re&vert")
        self.revert_button.clicked.connect(self.load)
        self.defaults_button = QPushButton("&Defaults")
        self.defaults_button.clicked.connect(self.fill_defaults)
        self.verdict = plain_label()
        buttons = QHBoxLayout()
        for button in (self.save_button, self.revert_button, self.defaults_button):
            buttons.addWidget(button)
        buttons.addWidget(self.verdict, 1)

        inner = QWidget()
        inner_layout = QVBoxLayout(inner)
        inner_layout.addWidget(self.status)
        inner_layout.addLayout(form)
        inner_layout.addWidget(self.general_error)
        inner_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(inner)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll, 1)
        layout.addLayout(buttons)
        self._update_buttons()

    def _field_row(self, field: Field) -> QWidget:
        editor: Any
        row = QHBoxLayout()
        if field.kind == "choice":
            editor = QComboBox()
            editor.addItems(list(field.choices))
            editor.currentIndexChanged.connect(self._on_edited)
        elif field.kind == "bool":
            editor = QCheckBox()
            editor.toggled.connect(self._on_edited)
        elif field.kind == "int":
            editor = QSpinBox()
            editor.setRange(0, 1_000_000)   # the engine says what is allowed, next to the field
            editor.setGroupSeparatorShown(True)
            editor.valueChanged.connect(self._on_edited)
        else:
            editor = QDoubleSpinBox()
            editor.setRange(0.0, 1.0)
            editor.setDecimals(3)
            editor.setSingleStep(0.05)
            editor.valueChanged.connect(self._on_edited)
        editor.setToolTip(field.help)
        editor.setAccessibleName(field.label)
        self.inputs[field.key] = editor
        if field.kind == "optional":
            switch = QCheckBox("on")
            switch.toggled.connect(editor.setEnabled)
            switch.toggled.connect(self._on_edited)
            switch.setToolTip(field.help)
            self.switches[field.key] = switch
            row.addWidget(switch)
        row.addWidget(editor)
        row.addStretch(1)
        error = plain_label()
        error.setWordWrap(True)
        error.hide()
        self.errors[field.key] = error
        holder = QWidget()
        column = QVBoxLayout(holder)
        column.setContentsMargins(0, 0, 0, 0)
        column.addLayout(row)
        column.addWidget(error)
        return holder

    # --- values -----------------------------------------------------------------------------------

    def values(self) -> dict[str, Any]:
        """Every key as the form shows it (``None``: an optional tier switched off)."""
        values: dict[str, Any] = {}
        for field in FIELDS:
            editor = self.inputs[field.key]
            if field.kind == "choice":
                values[field.key] = editor.currentText()
            elif field.kind == "bool":
                values[field.key] = editor.isChecked()
            elif field.kind == "int":
                values[field.key] = editor.value()
            else:
                value = round(editor.value(), 3)
                values[field.key] = value if field.kind == "threshold" or self.switches[field.key].isChecked() \
                    else None
        return values

    def block(self) -> dict[str, Any]:
        """The ``recallGate`` block to write: keys already written, and every key that differs from its default."""
        written = (self.current or {}).get("recallGate") or {}
        defaults = self.defaults or {}
        return {key: value for key, value in self.values().items()
                if key in written or key not in defaults or value != defaults[key]}

    def set_values(self, values: dict[str, Any]) -> None:
        self._filling = True
        try:
            for field in FIELDS:
                value, editor = values.get(field.key), self.inputs[field.key]
                if field.kind == "choice":
                    editor.setCurrentIndex(max(0, editor.findText(str(value))))
                elif field.kind == "bool":
                    editor.setChecked(bool(value))
                elif field.kind == "int":
                    editor.setValue(int(value or 0))
                else:
                    if field.kind == "optional":
                        self.switches[field.key].setChecked(value is not None)
                        editor.setEnabled(value is not None)
                    editor.setValue(float(value) if value is not None else 0.5)
        finally:
            self._filling = False
        self._on_edited()

    def set_value(self, key: str, value: Any) -> None:
        """Change one field (the Tuning tab's "use this threshold"); nothing is saved until Save."""
        self.set_values({**self.values(), key: value})

    # --- talking to the engine -----------------------------------------------------------------------

    def load(self) -> None:
        """The settings in force and the defaults (``checkGateSettings`` of an empty block)."""
        self.tasks.request("operator/checkGateSettings", {"recallGate": {}}, self._on_defaults, owner=self)
        self.tasks.request("operator/gateSettings", None, self._on_settings, owner=self)

    def _on_defaults(self, result: dict[str, Any]) -> None:
        self.defaults = result.get("effective") or {}

    def _on_settings(self, result: dict[str, Any]) -> None:
        self.current = result
        self.status.setText(status_text(result))
        effective = result.get("effective") or {**(self.defaults or {}), "mode": "off"}
        self.set_values(effective)
        self.sig_settings_loaded.emit(result)

    def _on_edited(self, *_: Any) -> None:
        if self._filling:
            return
        self.check_result = None
        self._update_buttons()
        self._timer.start()

    def check(self) -> None:
        """Ask the engine whether the form's block is valid; the answer shows next to the field."""
        self._timer.stop()
        self._generation += 1
        generation, block = self._generation, self.block()
        self.tasks.request("operator/checkGateSettings", {"recallGate": block},
                           lambda result: self._on_checked(generation, result), owner=self)

    def _on_checked(self, generation: int, result: dict[str, Any]) -> None:
        if generation != self._generation:
            return   # the form changed since; a newer check is on its way
        self.check_result = result
        for label in (*self.errors.values(), self.general_error):
            label.hide()
        if not result.get("valid"):
            key = str(result.get("field") or "").removeprefix(WHERE)
            label = self.errors.get(key, self.general_error)
            label.setText(f"⚠ {result.get('message')}")
            label.show()
        self._update_buttons()
        self.sig_checked.emit(result)

    def save(self) -> None:
        """Check, then write; an invalid form is never sent to setGateSettings."""
        self._timer.stop()
        self._generation += 1
        generation, block = self._generation, self.block()

        def checked(result: dict[str, Any]) -> None:
            self._on_checked(generation, result)
            if result.get("valid") and generation == self._generation:
                self.tasks.request("operator/setGateSettings", {"recallGate": block}, self._on_saved, owner=self)

        self.tasks.request("operator/checkGateSettings", {"recallGate": block}, checked, owner=self)

    def apply_changes(self, changes: dict[str, Any]) -> None:
        """Write ``changes`` onto the saved ``recallGate`` block at once (the Tuning tab's proposal); edits not
        saved yet are not written, and the form then shows what was saved."""
        written = (self.current or {}).get("recallGate")
        block = {**(written if isinstance(written, dict) else {}), **changes}
        self._timer.stop()
        self._generation += 1
        self.tasks.request("operator/setGateSettings", {"recallGate": block}, self._on_saved, owner=self)

    def _on_saved(self, result: dict[str, Any]) -> None:
        self._on_settings(result)
        self._saved = self.values()
        self._update_buttons()
        self.sig_settings_saved.emit(result)

    def fill_defaults(self) -> None:
        if self.defaults is not None:
            self.set_values(self.defaults)

    def _update_buttons(self) -> None:
        valid = bool(self.check_result and self.check_result.get("valid"))
        self.save_button.setEnabled(self.current is not None and (self.check_result is None or valid))
        if self._saved is not None and self._saved == self.values():
            self.verdict.setText("Saved to config.json.")  # until the owner edits the form again
        elif self.check_result is None:
            self.verdict.setText("")
        else:
            self.verdict.setText("Valid." if valid else "Not valid: see the field marked ⚠.")


def status_text(result: dict[str, Any]) -> str:
    """The Decision model's state and any config problem, in a sentence or two."""
    decision = result.get("decision") or {}
    model = result.get("decisionModel")
    if not model:
        line = "No decisionModel is chosen, so the gate skips every turn (choose one in the Models view)."
    else:
        state = decision.get("state")
        rate = f", {decision['tokensPerSecond']:,.0f} tokens/s" if decision.get("tokensPerSecond") else ""
        reason = f": {decision['reason']}" if decision.get("reason") else ""
        line = f"Decision model {model}: {state}{rate}{reason}."
    if result.get("recallGate") is None:
        line += " No recallGate block is written: the gate does not run until you save one."
    if result.get("problem"):
        line += f" config.json has a problem (the last valid settings stay in force): {result['problem']}"
    return line
