"""The recall gate's settings: every key of the ``recallGate`` block, edited and checked by the engine.

Ranges and rules live in the engine (engine/state/gate_settings.py): every edit is
sent to ``operator/checkGateSettings`` shortly after the owner stops typing,
and its answer shows next to the field it names.  Saving checks once more,
then writes with ``operator/setGateSettings``.  The block written keeps the
keys the owner had written and adds only those that differ from the
defaults (``checkGateSettings`` of ``{}`` says what they are), so a saved
form does not pin every default forever.

Under each field, and in its tooltip, the owner reads what the setting does,
what moving it gains and costs, and its default as the engine answers it (for
``highThreshold``, the one documented for the Decision model in force), with a
link to its section of docs/recall-gate.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.gate.suggest import DIGITS

from ..common.widgets import named, plain_label
from ..tasks import EngineTasks

CHECK_DELAY_MS = 300
# A threshold shows and keeps as many decimals as a proposal has (0.0562): with fewer, a form saved after the
# proposal was applied wrote it back rounded (0.056), and a pointer line just below the inject line could round
# onto it.
THRESHOLD_DECIMALS = DIGITS


def threshold_text(value: float) -> str:
    """A threshold as the owner reads it everywhere: two decimals (0.55, 0.60), or all it has (0.0562), as the
    proposal says it and Apply writes it."""
    return f"{value:.2f}" if abs(value - round(value, 2)) < 1e-9 else f"{value:g}"
WHERE = "recallGate."
DOCS = Path(__file__).resolve().parents[2] / "docs" / "recall-gate.md"   # beside the sources, not in a wheel


@dataclass(frozen=True)
class Field:
    key: str
    label: str
    kind: str            # choice | int | threshold | optional | bool
    does: str            # what the setting does, in the owner's words
    trade_off: str       # what moving it gains and costs
    section: str         # its section of docs/recall-gate.md (the heading's anchor)
    choices: tuple[str, ...] = ()


FIELDS = (
    Field("mode", "Mode", "choice",
          "Whether the gate runs and whether it changes what your agents see. Off: it never runs. Shadow: it "
          "picks pages and notes them in the gate log, but the agent's prompt stays as it was. Live: the pages "
          "it picks are added to the agent's prompt.",
          "Shadow is the safe way to see how it would do; live changes your agents' answers.",
          "settings", ("off", "shadow", "live")),
    Field("candidates", "Candidates", "choice",
          "How the gate finds the pages worth asking about. Keyword: pages that share words with the message. "
          "Hybrid: those and the pages closest in meaning (needs the search's embedding model). Model: the "
          "gate's model picks from the list of every page's name.",
          "Hybrid finds pages worded differently from the message, a little slower; model suits small vaults.",
          "candidates", ("keyword", "hybrid", "model")),
    Field("maxCandidates", "Pages scored per turn", "int",
          "How many pages the gate asks about for each message.",
          "More finds pages it would otherwise miss, but each takes time and the budget per turn may run out.",
          "candidates"),
    Field("highThreshold", "Inject at or above", "threshold",
          "How sure the gate must be before it adds a page to the agent's prompt (0 to 1).",
          "Higher: fewer wrong pages, more missed ones. Lower: more of the right pages, and more wrong ones. "
          "The Tuning tab shows what each value gives on your labelled turns.",
          "the-default-threshold"),
    Field("mediumThreshold", "Pointer line from", "optional",
          "Pages the gate is less sure about, from this score up to the one above, get a one-line mention the "
          "agent can follow instead of their text.",
          "Lower: more mentions, each a line of the prompt. Off: no mentions.",
          "tiers-and-what-is-injected"),
    Field("skipHintBelow", "Skip hint below", "optional",
          "When no page reaches this score, the agent is told in one line that nothing in its knowledge matched.",
          "Higher: the hint comes more often, sometimes when a page would have helped. Off: no hint.",
          "tiers-and-what-is-injected"),
    Field("excerpts", "Excerpts per page", "int",
          "How many passages of each page are added to the prompt.",
          "More gives the agent more of the page; fewer keeps the prompt short.",
          "tiers-and-what-is-injected"),
    Field("excerptChars", "Characters per excerpt", "int",
          "How long each passage is, in characters.",
          "Longer passages carry more context and take more room in the prompt.",
          "tiers-and-what-is-injected"),
    Field("pageChars", "Characters per page", "int",
          "The most text one page can add to the prompt, its passages together.",
          "Keeps one long page from crowding out the others; too low cuts passages short.",
          "tiers-and-what-is-injected"),
    Field("timeoutMs", "Budget per turn (ms)", "int",
          "How long the gate may take for one message before the agent goes on without the pages not yet scored.",
          "Longer lets a slow model score more pages; shorter keeps your agents quick. The Models view's "
          "benchmark says how much this machine does in that time.",
          "scoring-to-the-deadline"),
    Field("longWindows", "Long windows (cascade)", "int",
          "With a reranking model: how many of the likeliest pages are read at length; the rest are read briefly.",
          "More reads more of each page and catches more, but takes longer. 0: every page is read the same.",
          "scoring-to-the-deadline"),
    Field("maxIndexChars", "Label index characters", "int",
          "Only for model candidates: how much of the list of page names the gate's model reads to choose from.",
          "Larger reaches more pages of a big vault, but takes longer.",
          "candidates"),
    Field("journal", "Keep a shadow journal", "bool",
          "Keeps the messages of your own agents' shadow turns on this machine, so you can mark the right "
          "pages in Labelling and replay them. Never written to the log; Labelling can clear it.",
          "On: better tuning from your own turns. Off: no message text is kept.",
          "the-gate-log-and-the-shadow-journal"),
)
KEYS = tuple(field.key for field in FIELDS)
LABELS = {field.key: field.label for field in FIELDS}
_KEY_WORD = re.compile(r"\b(?:recallGate\.)?(" + "|".join(KEYS) + r")\b")


def in_form_words(message: str, key: str = "") -> str:
    """The engine's message about ``key`` as the form says it: its keys by the labels the form shows ("Pointer
    line from" for ``mediumThreshold``), the field's own name left out where the error stands beside it."""
    own = re.match(rf"(?:recallGate\.)?{re.escape(key)} (\w)", message) if key in LABELS else None
    if own:
        message = own.group(1).upper() + message[own.end():]
    return _KEY_WORD.sub(lambda found: f"“{LABELS[found.group(1)]}”", message)


class HelpLine(QWidget):
    """A field's help: its words as plain text (never read as markup) and a "More…" link to its section of
    docs/recall-gate.md; ``linkActivated`` says which section, as a label's link would."""

    linkActivated = Signal(str)

    def __init__(self, section: str) -> None:
        super().__init__()
        self.section = section
        self.words = plain_label()
        self.words.setWordWrap(True)
        self.words.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        more = QPushButton("More…")
        more.setFlat(True)
        more.setCursor(Qt.CursorShape.PointingHandCursor)
        more.setToolTip(f"docs/recall-gate.md, section #{section}")
        more.setStyleSheet("QPushButton { color: palette(link); text-decoration: underline; border: none; padding: 0; }")
        more.clicked.connect(lambda: self.linkActivated.emit(self.section))
        self.more = more
        line = QHBoxLayout(self)
        line.setContentsMargins(0, 0, 0, 0)
        line.addWidget(self.words, 1)
        line.addWidget(more, 0, Qt.AlignmentFlag.AlignTop)

    def setText(self, text: str) -> None:
        self.words.setText(text)

    def text(self) -> str:
        return self.words.text()

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
        self._loaded: dict[str, Any] | None = None  # the form's values as the engine's settings last filled it
        self.inputs: dict[str, Any] = {}
        self.switches: dict[str, QCheckBox] = {}
        self.errors: dict[str, QLabel] = {}
        self.helps: dict[str, QLabel] = {}
        self.open_url: Callable[[QUrl], Any] = QDesktopServices.openUrl   # tests look instead of opening
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(CHECK_DELAY_MS)
        self._timer.timeout.connect(self.check)

        self.status = plain_label()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # A grid, not a QFormLayout: the form layout gave a field the height its help needs at another width,
        # cutting a help of four lines to three; a grid asks each row's height at the row's own width.
        form = QGridLayout()
        form.setColumnStretch(1, 1)
        for number, field in enumerate(FIELDS):
            row = self._field_row(field)
            label = plain_label(field.label)
            label.setBuddy(self.inputs[field.key])
            label.setMinimumHeight(self.inputs[field.key].sizeHint().height())   # level with its editor
            form.addWidget(label, number, 0, Qt.AlignmentFlag.AlignTop)
            form.addWidget(row, number, 1)
        self.general_error = plain_label()
        self.general_error.setWordWrap(True)
        self.general_error.hide()
        self.save_button = QPushButton("Sav&e settings")
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
        scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # no Tab stop of its own: Tab goes into the form
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
            editor.setDecimals(THRESHOLD_DECIMALS)
            editor.setSingleStep(0.05)
            editor.valueChanged.connect(self._on_edited)
        editor.setAccessibleName(field.label)
        self.inputs[field.key] = editor
        if field.kind == "optional":
            switch = named(QCheckBox("on"), f"{field.label}: on")
            switch.toggled.connect(editor.setEnabled)
            switch.toggled.connect(self._on_edited)
            self.switches[field.key] = switch
            row.addWidget(switch)
        row.addWidget(editor)
        row.addStretch(1)
        error = plain_label()
        error.setWordWrap(True)
        error.hide()
        self.errors[field.key] = error
        explained = HelpLine(field.section)
        named(explained.more, f"More about {field.label.lower()}")
        explained.linkActivated.connect(self._on_docs_link)
        self.helps[field.key] = explained
        holder = QWidget()
        column = QVBoxLayout(holder)
        column.setContentsMargins(0, 0, 0, 0)
        column.addLayout(row)
        column.addWidget(explained)
        column.addWidget(error)
        self._explain(field)
        return holder

    def _explain(self, field: Field) -> None:
        """The field's help line and tooltips, with its default once the engine has said it."""
        default = self.default_text(field.key)
        said = f"{field.does} {field.trade_off}" + (f" Default: {default}." if default else "")
        self.helps[field.key].setText(said)
        tip = "\n\n".join(part for part in (field.does, field.trade_off, default and f"Default: {default}.") if part)
        tip += f"\n\nIn config.json: {WHERE}{field.key}"
        self.inputs[field.key].setToolTip(tip)
        if field.key in self.switches:
            self.switches[field.key].setToolTip(tip)

    def default_text(self, key: str) -> str:
        """The default the engine reported for ``key`` in the owner's words ("" before it has answered)."""
        if self.defaults is None or key not in self.defaults:
            return ""
        value = self.defaults[key]
        if value is None or isinstance(value, bool):
            said = "on" if value else "off"
        elif isinstance(value, float):
            said = f"{value:.2f}"
        elif isinstance(value, int):
            said = f"{value:,}"
        else:
            said = str(value)
        model = (self.current or {}).get("decisionModel")
        if key == "highThreshold" and model:
            said += f", the one for the Decision model {model}"
        return said

    def _on_docs_link(self, section: str) -> None:
        if not DOCS.is_file():
            self.general_error.setText(f"The documentation is not installed with this copy: see "
                                       f"docs/recall-gate.md, section #{section}, in Knowledge Desk's sources.")
            self.general_error.show()
            return
        url = QUrl.fromLocalFile(str(DOCS))
        url.setFragment(section)
        self.open_url(url)

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
                value = round(editor.value(), THRESHOLD_DECIMALS)
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
        for field in FIELDS:
            self._explain(field)

    def _on_settings(self, result: dict[str, Any]) -> None:
        self.current = result
        self.status.setText(status_text(result))
        for field in FIELDS:
            self._explain(field)   # the Decision model named beside highThreshold's default
        effective = result.get("effective") or {**(self.defaults or {}), "mode": "off"}
        self.set_values(effective)
        self._loaded = self.values()
        self.sig_settings_loaded.emit(result)

    def edited(self) -> bool:
        """Whether the owner changed the form since the engine's settings filled it (a reload would lose it)."""
        return self._loaded is not None and self.values() != self._loaded

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
            label.setText(f"⚠ {in_form_words(str(result.get('message') or ''), key)}")
            label.setToolTip(f"The engine said: {result.get('message')}")
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
        self.write_block({**(written if isinstance(written, dict) else {}), **changes})

    def write_block(self, block: dict[str, Any]) -> None:
        """Write ``block`` as the whole ``recallGate`` block at once (undoing the proposal: the block as it was);
        edits not saved yet are not written."""
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
