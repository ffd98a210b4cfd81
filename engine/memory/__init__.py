"""The memory provider's surfaces: the memory prompt, the Knowledge Index, owner-approved recall
and its candidates, the flush plan, and the ontology tool's views.

    memory_prompt    the selected-provider prompt
    knowledge_index  the ## Knowledge Index, byte-identical per session
    index_selection  what it lists as of a moment: the kept selection and the one from every row
    recall           knowledge_recall approvals, candidates, the pre-compaction flush
    ontology_views   knowledge_ontology: catalog, definitions, sources, diagnostics
"""
