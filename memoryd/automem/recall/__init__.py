"""Recall: which memories (at most 5) a query gets, and why.

`pick` is the `recall` method's logic: a small model picks from the manifest, or the local
ranker does (and always when there is no model, or the model fails). What a query is read as:
`query` (its start and end, when long), `pasted` (the code and output pasted into it, apart
from the user's own lines), `replies` (a reply such as "continue" or "thanks" names no topic
and is not ranked; its misspellings' forms from `typos`, the real words they make from
`reply_lookalikes`). The local ranker: `ranker` (BM25F and its signals), over `analysis`
(tokens, stems, stop words) and `dates` (dates in memories and in queries). `explain` says what
the ranker saw in a memory it returned; `surfaced` remembers what each session was shown.
`keysets` holds the indexes' key → values maps (most keys have one value).
All of it is pure domain logic but `pick`, which reads the memories it returns and asks the
model; the sentence-embedding side is `../embeddings/`.
"""
