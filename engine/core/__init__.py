"""Shared ground with no knowledge of the product: the error tree, ids and timestamps, safe file
access, the SQLite wrapper, findings, fault injection, label rules, wire parameter checks and the
job runner.  Imports nothing else of the engine.

    errors     every error the engine raises, one tree, each with its wire reason
    ids        record, store and publication ids; UTC timestamps; session UUIDs
    files      root-relative paths that never pass a symlink; atomic, durable writes
    syncfs     one sync of a whole file system for many new files (Linux 5.8+), else an fsync each
    db         one SQLite connection behind a small class: atomic(), named migrations
    findings   a validation finding (code, message, path, line) and its bounds
    faults     KNOWLEDGE_FAULT: injected crashes and disk errors at named steps
    labels     which titles read like instructions or markup (shown as ids only)
    tags       when two spellings are one tag (Unicode case folding), for the import and the tag filter
    params     the one reader of wire parameters: declared specs, the edge rules, tools/list's schemas
    answers    declared answers (TypedDict) and the output schemas generated from them
    methods    one declaration for every tool, host and operator method: name, params, answer, handler
    jobs       the operator's long work, each on its own thread, with progress and cancel
    changes    what changed, pushed to subscribed operator connections
    attachments  the suffixes of the images and files an embed names (not notes)
    links      record links (knowledge://record/<store>/<id>): the form, the strict parser, receipts' links
    connections  the agents and instances seen connected recently (in memory, bounded)
    malloc     how many malloc arenas the engine's threads share (glibc)
"""
