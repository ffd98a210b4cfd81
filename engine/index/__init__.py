"""What is derived from the catalog to search it: the tantivy keyword index, the text analyzer,
the embedding model and the sqlite-vec vector index.  Rebuildable from the catalog at any time.

    tantivy_index  one tantivy index per partition, caught up before each search
    analysis       the analyzer both tantivy and passages use (any script)
    embedding      in-process ONNX sentence embeddings
    int8_graph     the int8 graph's weight products rewritten in memory to multiply in int8
    vectors        sqlite-vec vectors, cached by model and text hash
    vector_feed    the thread that embeds what publications added, off the lane
    searchable     SearchableStore: an open store with its indexes, as search reaches it on the lane
"""
