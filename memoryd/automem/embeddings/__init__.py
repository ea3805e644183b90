"""Optional sentence embeddings for recall (`pip install memoryd[embeddings]`).

`encoder` loads a small sentence-embedding model (ONNX, run by onnxruntime, tokenised by
`tokenizers`); `vectors` keeps one vector per memory, computed once per content hash and
stored in the state directory; `semantic` ties them to a memory directory and answers
"how close is each memory to this query". Nothing here is imported unless the extra is
installed and embeddings are on, so the daemon's idle memory does not grow without it.
"""
