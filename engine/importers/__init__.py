"""Knowledge brought in from elsewhere, through the engine like any agent's writes.

    common          what every importer does: reading and checking the input whole, retaining the
                    original, request ids derived from the input, dry runs, progress
    conversations   what the chat exports share: a conversation, its export's conversation files, and
                    one page writer (a newer export revising the pages of the conversations that changed)
    edits           pages revised in the store since an import last wrote them: the edits a Markdown or
                    memory-core import run again keeps (``keptEdits``) unless told to replace them
    folders         the files of a folder given to an import: links never followed, dot-files left out
    exports         a chat export as its owner gave it: its conversations and the files they name, looked
                    for in its zip or folder only (a conversations.json given alone names none)
    formats         the owner's import formats, and one way to run any of them (here or in the engine)
    chatgpt         a ChatGPT data export, one page per conversation (its active branch)
    claude          a Claude data export, the same way
    markdown        a folder of Markdown notes (Obsidian, Logseq, basic-memory), links as relationships
    logseq          how a Logseq graph names its pages: namespaced file names, page properties, journal days
    mem0            a mem0 / OpenMemory export, each memory a claim
    memory_core     an OpenClaw workspace: MEMORY.md, USER.md, daily notes, imported memory, DREAMS.md
    memory_core_files   each workspace file read into its page and claims
    memory_core_entries one entry line: recall annotations, promote's provenance, USER.md directives
    locomo          the LoCoMo benchmark conversations, as an agent would have saved them
    demo            the demo store
    archive         knowledge export / knowledge import archive: one store's portable archive
    archive_format  the archive's manifest and members, checked whole before a restore writes
    archive_history what a copied git folder in an archive may hold: objects and refs, checked for form
    zipped          reading a zip from outside within bounds (members, size, compression ratio)
    jsonnumbers     an import's JSON, its numbers bounded as the vault's YAML bounds them
    json_shapes     an export's JSON checked as it is read: an array's items with their spans, objects' shapes
    methods         the operator methods knowledge serve adds: export, and imports as jobs
    answers         the declared answers: each format's import result, export and restore, their jobs
    summaries       what an import or an export says it did, in the CLI's and the window's words
"""
