"""Knowledge brought in from elsewhere, through the engine like any agent's writes.

    locomo  the LoCoMo benchmark conversations, as an agent would have saved them
    demo    the demo store
"""
