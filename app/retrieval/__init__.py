"""Local retrieval primitives shared by the tool ranker and knowledge bases.

Domain-free and offline: tokenisation (`text`), BM25F postings (`lexical`), WordLlama static
embeddings (`embedding`) and score fusion (`fusion`). See docs/architecture.md.
"""
