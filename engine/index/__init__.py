"""What is derived from the catalog to search it: the tantivy keyword index, the text analyzer,
the embedding model and the sqlite-vec vector index.  Rebuildable from the catalog at any time.

    tantivy_index  one tantivy index per partition, caught up before each search
    analysis       the analyzer both tantivy and passages use (any script)
    embedding      in-process ONNX sentence embeddings
    vectors        sqlite-vec vectors, cached by model and text hash
    searchable     SearchableStore: an open store with its indexes, as search reaches it on the lane
"""
