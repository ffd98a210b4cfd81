"""Knowledge brought in from elsewhere, through the engine like any agent's writes.

    locomo          the LoCoMo benchmark conversations, as an agent would have saved them
    demo            the demo store
    archive         knowledge export / knowledge import archive: one store's portable archive
    archive_format  the archive's manifest and members, checked whole before a restore writes
"""
