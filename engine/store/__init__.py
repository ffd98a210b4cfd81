"""One physical store: its database, its catalog of the vault's files, and the publication that
writes records without ever leaving one half done.  Inputs are parsed and checked here, credentials
refused, history kept in git, outside edits noticed.

    store        a store's directories, state.sqlite and identity checks
    catalog      the vault's files as rows: status, names, references, findings (the writing half)
    catalog_reads  the typed reads everyone else makes: frozen rows, the current-record rule once
    walk         which files a partition holds, their stamps, the entries a walk refuses
    record_rows  one record file as its catalog row; many of them parsed in worker processes
    index_ledger   what the search index has seen of the catalog
    outbox       the git outbox: publications waiting to become commits
    publication  journal, install, acknowledge; recovery rolls forward or back
    writes       plans of save_page and remember (claims, corrections, relationships)
    inputs       typed inputs of the write operations, and the edge rules every parser uses
    credentials  secrets refused at the door (detect-secrets and named patterns)
    placeholders  values examples write where a credential would go (`value`, `YOUR_API_KEY`)
    disguises    escapes, entities, NFKC, invisible and look-alike characters, base64: undone for the check
    attached_text  an attached file as the check reads it: UTF-16, gzip and zip members, binary runs
    reads        exact and history reads, diagnostics, line windows, references
    answers      what those reads and the publications answer, declared (engine/core/answers.py)
    attachments  knowledge_attach and knowledge_attach_file: retained originals
    open_store   OpenStore: a store as work on its lane reaches it (the runtime implements it)
    githistory   the vault's git repository: commits of exactly the published bytes
    portable     what an archive carries out of a store, and a store built back from it
    watcher      watchdog feed of outside edits
"""
