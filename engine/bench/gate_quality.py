"""What the recall gate injects, measured on LoCoMo: gold pages, per-threshold precision and recall, ROC AUC.

A LoCoMo question's **gold pages** are the session pages (``knowledge import
locomo`` saves one ``event`` page per session) of its evidence turns: a
question citing ``D3:7`` needs the page of session 3 of its conversation.
Questions without evidence, and ``OFF_TOPIC_TURNS`` messages that no page of the
store is about, have no gold page: whatever the gate injects for them is
noise.

``quality`` turns the gate's decisions into the figures the report shows;
``fit_calibration`` fits the embedding provider's ``a`` and ``b``
(engine/index/similarity.py) by logistic regression on labelled pairs.
Both are plain functions of lists, so a hand-made case checks them.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Sequence

from ..core.answers import NotRequired, TypedDict
from ..gate.candidates import Candidate
from ..gate.scoring import cheap_order
from ..index.analysis import FUNCTION_WORDS

THRESHOLDS = tuple(round(0.05 * step, 2) for step in range(1, 20))

# Work and technical messages: LoCoMo's conversations are two friends' chats about their lives, so no page of
# the LoCoMo store is about any of these. Many share only function words ("the", "is", "for") with its pages.
OFF_TOPIC = (
    "When does the billing migration to Postgres finish?",
    "Why is the staging deploy failing on the database migration step?",
    "What is the p95 latency target for the checkout API?",
    "Who owns the Kubernetes cluster upgrade this quarter?",
    "Can you summarise the incident report for the outage on the payments service?",
    "What version of OpenSSL does the build image ship?",
    "How do I rotate the API keys for the analytics pipeline?",
    "Is the invoice export job still scheduled for midnight UTC?",
    "Which regions does the CDN cache purge cover?",
    "What did the security review say about the SSO integration?",
    "How many replicas does the search cluster run in production?",
    "When is the deadline for the SOC 2 evidence collection?",
    "What is the retry policy of the webhook dispatcher?",
    "Which compiler flags does the release build of the firmware use?",
    "Has the GDPR data retention script been run for the EU tenants?",
    "What is the schema of the events table in the warehouse?",
    "Why did the nightly ETL run take three hours longer than usual?",
    "Who approved the change to the load balancer health checks?",
    "What is the memory limit of the worker pods?",
    "How is the feature flag for the new pricing page rolled out?",
    "What does the error code E1042 in the sync client mean?",
    "Is the Terraform state for the VPC stored in the shared bucket?",
    "Which queue does the email notification service consume from?",
    "How long are the audit logs kept in cold storage?",
    "What is the budget for the cloud spend in the next fiscal year?",
    "When will the mobile app drop support for Android 9?",
    "Where is the runbook for the Redis failover?",
    "What is the exchange rate source used by the invoicing module?",
    "Did the vendor sign the data processing agreement?",
    "How do the unit tests mock the S3 client?",
    "What is the cron expression of the backup job?",
    "Which team is on call for the identity provider this week?",
    "What is the maximum payload size of the ingestion endpoint?",
    "Is the legacy SOAP API still used by any customer?",
    "How are database connection pools sized for the reporting service?",
    "What is the tax treatment of the reseller discounts?",
    "When does the TLS certificate of the status page expire?",
    "Why does the linter flag the generated protobuf files?",
    "What is the rollback plan for the message broker upgrade?",
    "Which columns of the customer table hold personal data?",
)

# Small talk and unrelated tasks an assistant is asked all day: a gate that injects a stored conversation for
# these injects junk. Written for the benchmark (none comes from LoCoMo); OFF_TOPIC_TURNS joins them with OFF_TOPIC.
SMALL_TALK = (
    "hi, how are you today?",
    "Hello!",
    "Good morning, hope you slept well.",
    "Thanks, that was helpful.",
    "ok",
    "Can you say that again, more briefly?",
    "lol that's funny",
    "What's up?",
    "Hey there, long time no see.",
    "Thank you so much!",
    "Never mind, forget it.",
    "Sounds good to me.",
    "I'm back, where were we?",
    "Goodnight!",
    "Are you there?",
    "Nice, let's keep going.",
    "How's your day going?",
    "Sorry, I got distracted for a minute.",
    "Please continue.",
    "Yes, exactly.",
    "No, that's not what I meant.",
    "Cool, thanks a lot.",
    "Hmm, let me think about it.",
    "Have a great weekend!",
    "Happy Friday!",
    "What can you do?",
    "Who are you?",
    "Tell me a joke.",
    "Good job.",
    "I appreciate your help today.",
    "Let's start over.",
    "See you tomorrow.",
    "That makes sense.",
    "Wait, what?",
    "Okay, next question.",
    "brb",
    "Can you help me with something?",
    "I have a quick question.",
    "You're the best.",
    "Hi again!",
)
UNRELATED_TASKS = (
    "write a haiku about autumn",
    "Translate 'where is the train station' into German.",
    "What is 17 times 23?",
    "Convert 72 degrees Fahrenheit to Celsius.",
    "Write a Python function that reverses a linked list.",
    "Explain the difference between TCP and UDP.",
    "What is the capital of Australia?",
    "Give me a regular expression that matches an email address.",
    "Summarise the plot of Hamlet in three sentences.",
    "How many ounces are in a pound?",
    "Write a limerick about a cat who codes.",
    "What is the derivative of x squared times sine x?",
    "Sort these numbers: 42, 7, 19, 3, 88.",
    "Explain what a monad is in simple terms.",
    "Draft a polite email declining a meeting invitation.",
    "What does the HTTP status code 418 mean?",
    "Write a SQL query that counts orders per customer.",
    "Who wrote Pride and Prejudice?",
    "What is the boiling point of water at high altitude?",
    "Generate five names for a coffee shop.",
    "Explain big O notation with an example.",
    "What is the square root of 1764?",
    "How do I center a div in CSS?",
    "Write a bash one-liner that counts lines in all .py files.",
    "What year did the Berlin Wall fall?",
    "Rewrite this sentence in the passive voice: the dog chased the ball.",
    "List the planets of the solar system in order.",
    "What is the time complexity of quicksort?",
    "Explain how a hash map handles collisions.",
    "Give me a synonym for 'ubiquitous'.",
    "How many bytes are in a kibibyte?",
    "Write a short product description for a steel water bottle.",
    "What is the chemical formula of table salt?",
    "Explain recursion to a five-year-old.",
    "Format today's date in ISO 8601.",
)
OFF_TOPIC_TURNS = OFF_TOPIC + SMALL_TALK + UNRELATED_TASKS

class FunctionWordFigures(TypedDict):
    """How often shortlists hold pages sharing only function words with the message (shares, and counts)."""
    noGoldTurns: int
    noGoldReached: float
    noGoldOnly: float
    noGoldPerTurn: float
    goldTurns: int
    goldOnlyThroughFunctionWords: float
    goldPagesThroughFunctionWords: int
    goldPagesShortlisted: int


class ThresholdRow(TypedDict):
    """The pages injected at one threshold: precision, recall, F1, per turn, and turns without gold injected."""
    threshold: float
    precision: float
    recall: float
    f1: float
    perTurn: float
    noGoldInjected: float
    offTopicInjected: float   # of the off-topic turns alone (category "off-topic")


class SlotShare(TypedDict):
    """Of the shortlisted gold pages, the share among the first N; of the turns, those with one there."""
    goldPages: float
    turns: float


class CascadePlacement(TypedDict):
    """Per cheap order, per number of long slots N, where the gold pages land."""
    turns: int
    goldPages: int
    orders: dict[str, dict[int, SlotShare]]


class LatencyFigures(TypedDict):
    """Milliseconds: the median, the 95th percentile and the slowest."""
    p50: float
    p95: float
    max: float


class ModeQuality(TypedDict):
    """One candidate mode's figures (``quality``); the gate benchmark adds the cascade's placement (embedding
    models) and the turns' latency."""
    turns: int
    withGold: int
    withoutGold: int
    hit: float
    shortlistRecall: float
    shortlisted: float
    noGoldShortlisted: float
    auc: float
    thresholds: list[ThresholdRow]
    best: ThresholdRow | None
    cascade: NotRequired[CascadePlacement]
    latency: NotRequired[LatencyFigures]


def function_word_only(message_terms: Iterable[str], page_terms: Iterable[str], function_terms: set[str]) -> bool:
    """Whether the page shares terms with the message, and all of them are function words."""
    shared = set(message_terms) & set(page_terms)
    return bool(shared) and shared <= function_terms


def function_word_figures(turns: Sequence[dict[str, Any]]) -> FunctionWordFigures:
    """How often a shortlist holds pages that share only function words with the message.

    Each turn carries ``reachedByFunctionWords``: how many of its shortlisted pages share only function words,
    and ``gold``/``goldByFunctionWords``: its gold pages, and how many of those were shortlisted that way.
    """
    with_gold = [t for t in turns if t["gold"]]
    without = [t for t in turns if not t["gold"]]
    return {
        "noGoldTurns": len(without),
        "noGoldReached": sum(1 for t in without if t["reachedByFunctionWords"]) / len(without) if without
        else math.nan,
        "noGoldOnly": sum(1 for t in without if t["scores"] and t["reachedByFunctionWords"] == len(t["scores"]))
        / len(without) if without else math.nan,
        "noGoldPerTurn": sum(t["reachedByFunctionWords"] for t in without) / len(without) if without else math.nan,
        "goldTurns": len(with_gold),
        "goldOnlyThroughFunctionWords": sum(1 for t in with_gold if t["goldByFunctionWords"]) / len(with_gold)
        if with_gold else math.nan,
        "goldPagesThroughFunctionWords": sum(t["goldByFunctionWords"] for t in with_gold),
        "goldPagesShortlisted": sum(len(set(t["gold"]) & set(t["scores"])) for t in with_gold),
    }


_SESSION_TITLE = re.compile(r"^(?P<pair>.+), session (?P<number>[0-9]+) \(")
_EVIDENCE = re.compile(r"D:?([0-9]+):([0-9]+)")


def session_pages(data: Sequence[dict[str, Any]], pages: Iterable[tuple[str, str]]) -> dict[tuple[int, int], str]:
    """(sample index, session number) -> page id, from the store's (page id, title) pairs."""
    pairs = {f"{s['conversation']['speaker_a']} and {s['conversation']['speaker_b']}": index
             for index, s in enumerate(data)}
    found = {}
    for page_id, title in pages:
        match = _SESSION_TITLE.match(title or "")
        if match and match["pair"] in pairs:
            found[(pairs[match["pair"]], int(match["number"]))] = page_id
    return found


def gold_questions(data: Sequence[dict[str, Any]], sessions: dict[tuple[int, int], str],
                   samples: Iterable[int]) -> list[dict[str, Any]]:
    """Every question of the chosen samples with its gold pages (the sessions of its evidence turns)."""
    questions = []
    for index in samples:
        for qa in data[index]["qa"]:
            evidence = [item for item in qa.get("evidence") or [] if isinstance(item, str)]
            numbers = {int(session) for item in evidence for session, _ in _EVIDENCE.findall(item)}
            gold = sorted({sessions[(index, n)] for n in numbers if (index, n) in sessions})
            questions.append({"sample": index, "message": qa["question"], "category": qa.get("category"),
                              "gold": gold})
    return questions


def off_topic_questions() -> list[dict[str, Any]]:
    return [{"sample": None, "message": message, "category": "off-topic", "gold": []} for message in OFF_TOPIC_TURNS]


# --- the figures ----------------------------------------------------------------------------------


def quality(turns: Sequence[dict[str, Any]], thresholds: Sequence[float] = THRESHOLDS) -> ModeQuality:
    """Figures of one candidate mode and Decision model.

    Each turn is ``{"gold": [page ids], "scores": {shortlisted page id: probabilityTrue or None}}`` in
    shortlist order (best candidate first). A page counts as injected at threshold ``t`` when its score is at
    least ``t`` (the ``high`` tier); gold pages never shortlisted count as missed at every threshold.
    """
    with_gold = [turn for turn in turns if turn["gold"]]
    without = [turn for turn in turns if not turn["gold"]]
    off_topic = sum(1 for turn in turns if turn.get("category") == "off-topic")
    gold_total = sum(len(set(turn["gold"])) for turn in with_gold)
    shortlisted_gold = sum(len(set(turn["gold"]) & set(turn["scores"])) for turn in with_gold)
    rows: list[ThresholdRow] = []
    for threshold in thresholds:
        injected = hits = 0
        noisy = off_noisy = 0
        for turn in turns:
            chosen = {page for page, score in turn["scores"].items() if score is not None and score >= threshold}
            injected += len(chosen)
            hits += len(chosen & set(turn["gold"]))
            noisy += bool(chosen) and not turn["gold"]
            off_noisy += bool(chosen) and turn.get("category") == "off-topic"
        precision = hits / injected if injected else math.nan
        recall = hits / gold_total if gold_total else math.nan
        f1 = (2 * precision * recall / (precision + recall)
              if injected and gold_total and precision + recall > 0 else 0.0)
        rows.append({"threshold": threshold, "precision": precision, "recall": recall, "f1": f1,
                     "perTurn": injected / len(turns) if turns else math.nan,
                     "noGoldInjected": noisy / len(without) if without else math.nan,
                     "offTopicInjected": off_noisy / off_topic if off_topic else math.nan})
    scores, labels = [], []
    for turn in turns:
        for page, score in turn["scores"].items():
            if score is not None:
                scores.append(score)
                labels.append(page in turn["gold"])
    best = max(rows, key=lambda row: (row["f1"], row["threshold"])) if rows else None
    return {
        "turns": len(turns), "withGold": len(with_gold), "withoutGold": len(without),
        "hit": sum(bool(set(t["gold"]) & set(t["scores"])) for t in with_gold) / len(with_gold) if with_gold
        else math.nan,
        "shortlistRecall": shortlisted_gold / gold_total if gold_total else math.nan,
        "shortlisted": sum(len(t["scores"]) for t in turns) / len(turns) if turns else math.nan,
        "noGoldShortlisted": sum(bool(t["scores"]) for t in without) / len(without) if without else math.nan,
        "auc": roc_auc(scores, labels), "thresholds": rows, "best": best,
    }


CASCADE_ORDERS = ("shortlist", "similarity", "fused")
CASCADE_SLOTS = (1, 2, 3, 4, 5)


def cascade_placement(turns: Sequence[dict[str, Any]], slots: Sequence[int] = CASCADE_SLOTS) -> CascadePlacement:
    """How often the cascade's cheap order puts gold pages in its long-window slots.

    Each turn is as for ``quality``, its ``scores`` in shortlist order and each score a monotonic function of the
    message's similarity to the page (an ``embedding/`` Decision model: calibrated cosine similarity), so the
    similarity order and the fused order are those the gate's ``cheap_order`` computes.  Per order and number of
    long slots N: the share of the shortlisted gold pages among the first N, and of the turns with a gold page
    shortlisted, those with one among the first N.  ``shortlist`` at N is also where equal windows would put
    N pages; ``random`` is what an order knowing nothing would give (N / shortlisted, per turn).
    """
    figures: CascadePlacement = {"turns": 0, "goldPages": 0, "orders": {}}
    counted = [t for t in turns if set(t["gold"]) & set(t["scores"])]
    figures["turns"] = len(counted)
    figures["goldPages"] = sum(len(set(t["gold"]) & set(t["scores"])) for t in counted)
    for how in CASCADE_ORDERS:
        pages_in = {n: 0 for n in slots}
        turns_in = {n: 0 for n in slots}
        for turn in counted:
            pages = [Candidate(page, 0, "page", page, page) for page in turn["scores"]]
            similarities = {page: score for page, score in turn["scores"].items() if score is not None}
            order = [c.id for c in cheap_order(pages, similarities, how)]
            gold = set(turn["gold"])
            for n in slots:
                found = len(gold & set(order[:n]))
                pages_in[n] += found
                turns_in[n] += bool(found)
        figures["orders"][how] = {n: {"goldPages": pages_in[n] / figures["goldPages"] if counted else math.nan,
                                      "turns": turns_in[n] / len(counted) if counted else math.nan} for n in slots}
    figures["orders"]["random"] = {n: {"goldPages": sum(
        len(set(t["gold"]) & set(t["scores"])) * min(1.0, n / len(t["scores"])) for t in counted)
        / figures["goldPages"] if counted else math.nan, "turns": math.nan} for n in slots}
    return figures


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """The probability that a random positive scores above a random negative (ties count half)."""
    positives = sum(1 for label in labels if label)
    negatives = len(labels) - positives
    if not positives or not negatives:
        return math.nan
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    rank_sum, position = 0.0, 0
    while position < len(order):
        end = position
        while end + 1 < len(order) and scores[order[end + 1]] == scores[order[position]]:
            end += 1
        average = (position + end) / 2 + 1   # ranks from 1, ties share their mean rank
        rank_sum += average * sum(1 for i in order[position:end + 1] if labels[i])
        position = end + 1
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def fit_calibration(similarities: Sequence[float], labels: Sequence[bool], *, iterations: int = 50
                    ) -> tuple[float, float]:
    """``(a, b)`` of the logistic regression ``P(label) = sigmoid(a * similarity + b)`` (Newton's method)."""
    if not any(labels) or all(labels):
        raise ValueError("fitting a calibration needs both relevant and irrelevant pairs")
    a, b = 1.0, 0.0
    for _ in range(iterations):
        ga = gb = haa = hab = hbb = 0.0
        for x, y in zip(similarities, labels):
            z = a * x + b
            p = 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))
            error = p - (1.0 if y else 0.0)
            weight = max(p * (1 - p), 1e-12)
            ga, gb = ga + error * x, gb + error
            haa, hab, hbb = haa + weight * x * x, hab + weight * x, hbb + weight
        determinant = haa * hbb - hab * hab
        if determinant <= 0:
            break
        step_a = (hbb * ga - hab * gb) / determinant
        step_b = (haa * gb - hab * ga) / determinant
        a, b = a - step_a, b - step_b
        if abs(step_a) < 1e-9 and abs(step_b) < 1e-9:
            break
    return a, b


# --- the report ----------------------------------------------------------------------------------


def _figure(value: float, percent: bool = True) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.1%}" if percent else f"{value:.2f}"


def render(figures: dict[str, Any], model: str) -> list[str]:
    """The quality sections of the benchmark's report (markdown lines)."""
    first, last = figures["samples"]
    lines = ["## Quality on LoCoMo", "",
             f"Conversations {first}-{last}: {figures['questions']} turns ({figures['sessionPages']} session pages "
             "in the store). Gold pages: the session pages of each question's evidence turns; turns without a "
             f"gold page: LoCoMo questions without evidence and {figures.get('offTopic', 0)} off-topic turns "
             "(work questions, small talk, unrelated tasks). "
             f"Decision model `{model}`. A page is injected at a threshold when its probabilityTrue is at least "
             "that (`highThreshold`); gold pages never shortlisted count as missed.", ""]
    if figures.get("fit"):
        fit = figures["fit"]
        lines += [f"Calibration fitted here ({fit['mode']} candidates, {fit['pairs']} scored pairs, "
                  f"{fit['relevant']} relevant): **a = {fit['a']:.4f}, b = {fit['b']:.4f}**.", ""]
    lines += ["| candidates | turns | shortlist hit | shortlist recall | shortlisted per turn | no-gold turns "
              "shortlisting anything | ROC AUC | best F1 (threshold) | p50 / p95 latency |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for mode, quality_figures in figures["modes"].items():
        best = quality_figures["best"] or {}
        latency = quality_figures.get("latency") or {}
        lines.append(
            f"| {mode} | {quality_figures['turns']} | {_figure(quality_figures['hit'])} | "
            f"{_figure(quality_figures['shortlistRecall'])} | {_figure(quality_figures['shortlisted'], False)} | "
            f"{_figure(quality_figures['noGoldShortlisted'])} | {_figure(quality_figures['auc'], False)} | "
            f"{_figure(best.get('f1'), False)} ({best.get('threshold')}) | "
            f"{latency.get('p50', math.nan):.1f} / {latency.get('p95', math.nan):.1f} ms |")
    lines.append("")
    words = figures.get("functionWords")
    if words:
        lines += ["### Pages offered through function words only (keyword candidates)", "",
                  f"A shortlisted page shares only function words with the message ({len(FUNCTION_WORDS)} English "
                  "articles, pronouns, auxiliaries, prepositions and question words, stemmed like the index).", "",
                  f"- turns without a gold page ({words['noGoldTurns']}): {_figure(words['noGoldReached'])} reach "
                  f"the Decision model with at least one such page, {_figure(words['noGoldOnly'])} with nothing "
                  f"else; {_figure(words['noGoldPerTurn'], False)} such pages per turn",
                  f"- turns with gold pages ({words['goldTurns']}): {words['goldPagesThroughFunctionWords']} of the "
                  f"{words['goldPagesShortlisted']} gold pages shortlisted share only function words with the "
                  f"question ({_figure(words['goldOnlyThroughFunctionWords'])} of these turns)", ""]
    for mode, quality_figures in figures["modes"].items():
        placement = quality_figures.get("cascade")
        if not placement:
            continue
        slots = sorted(next(iter(placement["orders"].values())))
        lines += [f"### The cascade's cheap order ({mode} candidates)", "",
                  f"{placement['turns']} turns with a gold page shortlisted ({placement['goldPages']} gold pages). "
                  "Share of those gold pages among the first N candidates of each order (in brackets: turns with "
                  "one there); `longWindows: N` gives exactly those N the long windows.", "",
                  "| order | " + " | ".join(f"N = {n}" for n in slots) + " |",
                  "| --- |" + " --- |" * len(slots)]
        for how, row in placement["orders"].items():
            lines.append(f"| {how} | " + " | ".join(
                f"{_figure(row[n]['goldPages'])}" + (f" ({_figure(row[n]['turns'])})" if not math.isnan(
                    row[n]["turns"]) else "") for n in slots) + " |")
        lines.append("")
    for mode, quality_figures in figures["modes"].items():
        lines += [f"### {mode} candidates, per threshold", "",
                  "| threshold | precision | recall | F1 | pages injected per turn | no-gold turns injected | "
                  "off-topic turns injected |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for row in quality_figures["thresholds"]:
            lines.append(f"| {row['threshold']:.2f} | {_figure(row['precision'])} | {_figure(row['recall'])} | "
                         f"{_figure(row['f1'], False)} | {_figure(row['perTurn'], False)} | "
                         f"{_figure(row['noGoldInjected'])} | {_figure(row['offTopicInjected'])} |")
        lines.append("")
    return lines
