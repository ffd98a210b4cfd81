"""Finding knowledge: BM25 keyword search with signed cursors, search_knowledge (lexical,
semantic, hybrid, rrf and addressed reads), and the passages that best match a message.

    keyword         knowledge_grep and memory/search over current records
    knowledge_base  search_knowledge, the spec 004 read shapes
    passages        best-matching blank-line passages of a page
"""
