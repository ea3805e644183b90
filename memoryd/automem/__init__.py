"""Layer 2 — auto memory: where it lives, the store and its index, recall, history.

Pure domain (no daemon state, no event loop): `location` (which directory, is it on, is it
safe), `memfile` (the file format), `index` (MEMORY.md lines and caps), `dedupe`, `manifest`,
`taxonomy`, `instructions`, `quickadd`. Edges: `history` (versions on disk), `store` (the warm
view of one memory directory). Service: `service.AutoMemory` (the one every writer uses), put
together from `settings_cache`, `dirs` (choice and safety), `warmup` (first load and sweep),
`index_cache`, `writes` (write, delete, history, restore), `index_writer` (flush, reconcile),
`locks`, `layout`, `stamps`; `context` (the get_context provider).

Which memories a query gets is `recall/` (the local ranker, the model selector, what of a
query is read); the optional sentence-embedding side of it is `embeddings/`.
"""
