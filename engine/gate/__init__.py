"""The recall gate: per user turn, which stored pages the message needs, asked of the Decision
model under a deadline, in off, shadow or live mode.

    turn        gate_turn: authorize, shortlist, score, inject, log
    candidates  keyword and model shortlists, excerpts
    scoring     plan the scoring to the deadline; tiers and the injected block
    journal     the gate log and the shadow journal
    suggest     thresholds from the owner's labels for an asked precision; where the gate fires without them
    stats       score histograms and what-if figures for tuning
"""
