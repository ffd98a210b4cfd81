"""The vault's files as data: Markdown records with YAML frontmatter, the ontology, retained
evidence and the store manifest.  Pure functions of bytes; no store, no database.

    frontmatter  the one place vault YAML becomes data (bounded, hostile input is a finding)
    records      knowledge-record-v1: parse, check and render pages, claims, relationships
    ontology     the shipped ontology.yaml and a vault's private extensions
    evidence     retained source files and their immutable descriptors
    manifest     vault.json and the partition markers
"""
