"""Layer 2 — auto memory: where it lives, the store and its index, recall, history.

Pure domain (no daemon state, no event loop): `location` (which directory, is it on, is it
safe), `memfile` (the file format), `index` (MEMORY.md lines and caps), `dedupe`, `analysis` +
`dates` + `ranker` (the local recall ranker), `recall_query` (what of a long query is read),
`replies` (a query that names no topic), `recall_explain` (why a memory was recalled),
`manifest`, `taxonomy`, `instructions`, `quickadd`. Edges: `history` (versions on disk), `store`
(the warm view of one memory directory). Service: `service.AutoMemory` (the one every writer
uses), put together from `settings_cache`, `dirs` (choice and safety), `warmup` (first load and
sweep), `index_cache`, `writes` (write, delete, history, restore), `index_writer` (flush,
reconcile), `locks`, `layout`, `stamps`; `recall` (model selector with the local fallback),
`context` (the get_context provider).
"""
