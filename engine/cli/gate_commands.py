"""``knowledge gate suggest``: recall gate thresholds from the owner's labelled shadow turns (docs/recall-gate.md).

On the desk (desk.py): beside a serving engine it asks it as the operator
(``operator/suggestGateThresholds``), otherwise an engine of this process
reads the store's gate log.  Nothing is written: the owner applies the
proposal in the window's Recall gate view or in config.json.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..core.words import counted
from ..gate.suggest import DEFAULT_POINTER_PRECISION, DEFAULT_PRECISION, in_force_phrase, tier_phrases
from ..state.statedir import StateDir
from .desk import open_desk
from .sync_commands import store_choice


def add_gate_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    gate = commands.add_parser("gate", parents=[common], help="the recall gate: thresholds from your labels")
    actions = gate.add_subparsers(dest="gate_command", required=True, metavar="ACTION")
    suggest = actions.add_parser(
        "suggest", parents=[common], help="propose highThreshold (and pointer and skip-hint cutoffs) for a precision",
        description="From the shadow turns you labelled in the Recall gate view (which pages each turn needed), "
                    "proposes the lowest highThreshold whose precision on your labels is at least --precision, "
                    "with the precision and recall it expects and how many labels it rests on; and "
                    "mediumThreshold and skipHintBelow where they help. Without enough labels it says why, "
                    "and shows where the gate would fire over the logged turns. Nothing is written.")
    store_choice(suggest)
    suggest.add_argument("--precision", type=float, default=DEFAULT_PRECISION,
                         help="the share of injected pages that should be needed (default %(default)s)")
    suggest.add_argument("--pointer-precision", type=float, default=None,
                         help="the same for pointer lines (mediumThreshold), below --precision (default "
                              f"{DEFAULT_POINTER_PRECISION:g} where --precision is above it, else no pointer "
                              "cutoff is proposed)")
    suggest.add_argument("--json", action="store_true", help="print the engine's answer as JSON")
    suggest.set_defaults(handler=cmd_gate_suggest, reads_state=True)


def cmd_gate_suggest(args: argparse.Namespace, state: StateDir) -> int:
    with open_desk(state) as desk:
        answer = desk.suggest_gate_thresholds(args.store, args.agent, args.precision, args.pointer_precision)
    print(json.dumps(answer, indent=2, ensure_ascii=False) if args.json else suggestion_text(answer))
    return 0


def suggestion_text(answer: dict[str, Any]) -> str:
    """The proposal, the tiers not proposed and why, and where the gate would fire, as the owner reads them."""
    lines = [f"Recall gate thresholds for precision {answer['precision']:g}, from {answer['labelled']:,} labelled "
             f"of {answer['turns']:,} scored turns of {answer['model'] or '(no Decision model)'} "
             f"({answer['neededScored']:,} of {answer['neededPages']:,} needed pages scored)."]
    if answer["otherModelTurns"]:
        lines.append(f"  {answer['otherModelTurns']:,} turns scored by another Decision model are left out.")
    high, now = answer["highThreshold"], in_force_phrase(answer)
    if high is None:
        lines.append(f"No proposal: {answer.get('reason', 'not enough labels')}.")
        if now is not None:
            lines.append(f"  The labels so far at {now}.")
    else:
        lines.extend(f"  {phrase}" for phrase in tier_phrases(answer))
        if now is not None:
            lines.append(f"  To compare, {now}.")
        lines.extend(f"  {note}." for note in answer["notes"])
        lines.append("Apply: the Recall gate view's Tuning tab (Apply the proposal), or in config.json "
                     f"\"recallGate\": {json.dumps(answer['apply'])}")
    shape = answer["distribution"]
    if not shape["turns"]:
        lines.append("No scored turns in the gate log yet: run the gate in shadow mode (with \"journal\": true "
                     "to label turns).")
        return "\n".join(lines)
    tops = shape["turnTopScores"]
    lines.append(f"Where the gate would fire over the {shape['turns']:,} logged turns (labels or not):")
    if tops is not None:
        lines.append("  each turn's best page: " + ", ".join(f"{key} {tops[key]:g}" for key in
                                                              ("p50", "p75", "p90", "p95", "p99", "max")))
    lines.extend(f"  at {row['threshold']:<7g} {counted(row['turnsInjecting'], 'turn')} would inject "
                 f"({row['share']:.0%}), {row['pagesPerTurn']:g} pages per turn" for row in shape["firing"])
    return "\n".join(lines)
