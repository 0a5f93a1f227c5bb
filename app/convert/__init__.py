"""Documents and pages to Markdown-like text, off the event loop and bounded.

Domain-free (layer 1): `html` (lxml, linear-time), `tables` (Markdown tables), `formats`
(detection and dispatch: text, Markdown, HTML, CSV, JSON), `office` (DOCX, XLSX, PPTX),
`books` (PDF, EPUB) and `pool` (the worker processes every conversion runs in, with a time
and a memory bound). See docs/knowledge.md.
"""
