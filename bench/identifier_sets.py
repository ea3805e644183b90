"""Identifier-style recall test set for the memory ranker, written blind.

MEMORIES holds 36 short project notes from one fictional web/backend product
(TypeScript/React frontend, Python and Go services, PostgreSQL, GitHub Actions
CI). About 24 center on a camelCase/PascalCase identifier, about 6 on
snake_case / kebab-case / SCREAMING_CASE / dotted identifiers, and 6 on
mixed-case product names; several deliberately share identifier parts
(session, token, user, profile, client, settings, retry). ABOUT_ONE pairs 48
developer prompts with the index of the single memory each is about (16 in
plain words, 16 restyling the identifier, 16 using it as written). ABOUT_NONE
holds 30 prompts that share a word or identifier part with the memories but
are answered by none of them. This file was written blind, without reading
the ranker's code under /work/main.
"""

from __future__ import annotations

MEMORIES: list[dict[str, str]] = [
    # 0
    {
        "name": "refreshSessionToken runs before profile load",
        "description": "refreshSessionToken() must complete before loadUserProfile is called on app start",
        "body": "The `refreshSessionToken()` helper in `src/auth/session.ts` must run before `loadUserProfile()` during app bootstrap, otherwise the profile request goes out with an expired bearer token and returns 401. It writes the new token to the `sessionToken` field of the auth store.",
    },
    # 1
    {
        "name": "UserProfileService caches profiles for 60 seconds",
        "description": "UserProfileService in the Go account service keeps an in-memory LRU of profiles with a 60s TTL",
        "body": "`UserProfileService` in `services/account/profile.go` keeps an in-memory LRU of up to 10k profiles with a 60-second TTL. After updating a profile, call `InvalidateProfile(userID)` or other pods will serve stale avatars and display names for up to a minute.",
    },
    # 2
    {
        "name": "NotificationBell useEffect must unsubscribe",
        "description": "The useEffect in NotificationBell has to return a cleanup that closes the websocket subscription",
        "body": "`NotificationBell.tsx` opens a websocket subscription inside `useEffect`; the effect must return a cleanup that calls `unsubscribe()`. Without it, React StrictMode's double-mount in dev opens two sockets and every notification shows up twice.",
    },
    # 3
    {
        "name": "Billing page uses getServerSideProps for auth",
        "description": "pages/billing/index.tsx fetches the plan in getServerSideProps and redirects when the cookie is missing",
        "body": "`pages/billing/index.tsx` loads the customer's plan in `getServerSideProps` rather than on the client, so the price never flashes. If the `sid` cookie is missing it returns `{ redirect: { destination: '/login' } }` instead of rendering.",
    },
    # 4
    {
        "name": "JSONDecodeError sends message to dead-letter queue",
        "description": "In the Python ingest worker, a JSONDecodeError on a payload routes the message to the DLQ without retrying",
        "body": "When the ingest worker hits `JSONDecodeError` while parsing a queue message, it does not retry; the raw bytes go to the `ingest-dlq` queue and a warning is logged with the message id. Malformed JSON never becomes valid on retry, so retrying just burns the budget.",
    },
    # 5
    {
        "name": "Use the shared HttpClient, never http.DefaultClient",
        "description": "Go services must make outbound requests through HttpClient in internal/httpx, which sets timeouts",
        "body": "All outbound calls from Go services go through `HttpClient` in `internal/httpx/client.go`, which sets a 10s timeout and adds OpenTelemetry spans. `http.DefaultClient` has no timeout and once hung the payments worker for hours, so the linter bans it.",
    },
    # 6
    {
        "name": "tokenBucket rate limiter per API key",
        "description": "The Go gateway rate-limits each API key with a tokenBucket of 100 requests per minute",
        "body": "`tokenBucket` in `gateway/ratelimit/bucket.go` is keyed by API key, refills at 100 tokens per minute with a burst of 20, and lives in Redis so all gateway replicas share it. Exceeding it returns 429 with a `Retry-After` header.",
    },
    # 7
    {
        "name": "useFeatureFlag defaults to off",
        "description": "The useFeatureFlag hook returns false until /api/flags responds",
        "body": "`useFeatureFlag('flagName')` reads from the flags fetched once from `/api/flags` at startup and returns `false` while loading. New features must therefore render the old UI by default; never gate on `undefined`.",
    },
    # 8
    {
        "name": "OrderStatusBadge color mapping",
        "description": "OrderStatusBadge maps each order status enum value to a fixed color; new statuses need an entry",
        "body": "`OrderStatusBadge` in `src/components/orders/` maps `OrderStatus` values to badge colors via a `Record<OrderStatus, BadgeColor>`. Adding a status to the backend enum without adding it here breaks the type check, which is intentional.",
    },
    # 9
    {
        "name": "AppErrorBoundary reports to Sentry",
        "description": "Every route is wrapped in AppErrorBoundary, which reports render crashes to Sentry and shows a retry screen",
        "body": "`AppErrorBoundary` wraps each route in `src/routes.tsx`; its `componentDidCatch` sends the error and component stack to Sentry tagged with the current route name. Don't catch errors inside components just to hide them; let them bubble to the boundary.",
    },
    # 10
    {
        "name": "createCheckoutSession needs an idempotency key",
        "description": "createCheckoutSession passes an idempotency key derived from the cart id to Stripe",
        "body": "`createCheckoutSession()` in `api/src/billing/checkout.ts` calls Stripe with an idempotency key of `cart:${cartId}:${cartVersion}` so double-clicks on Pay don't create two sessions. Bump `cartVersion` whenever the cart contents change.",
    },
    # 11
    {
        "name": "InvoiceRepository uses soft deletes",
        "description": "InvoiceRepository never DELETEs rows; it sets deleted_at and all invoice queries filter on it",
        "body": "`InvoiceRepository` in `services/billing/invoice_repo.go` implements `Delete` as `UPDATE invoices SET deleted_at = now()`. Every sqlc query for invoices must include `deleted_at IS NULL`, and auditors need deleted invoices kept for seven years.",
    },
    # 12
    {
        "name": "formatCurrency takes integer cents",
        "description": "formatCurrency(amountCents, currency) expects integer minor units, never floats",
        "body": "`formatCurrency(amountCents, currency)` in `src/lib/money.ts` wraps `Intl.NumberFormat` and expects integer minor units straight from the API. Passing dollars as a float shows prices 100x too small; the API never sends floats for money.",
    },
    # 13
    {
        "name": "Search box uses useDebouncedValue at 300ms",
        "description": "ProductSearch debounces the query with useDebouncedValue(query, 300) before calling the search API",
        "body": "`ProductSearch` passes the input through `useDebouncedValue(query, 300)` before calling the search endpoint; lowering the delay overloaded Elasticsearch during load tests. Keep the debounce in the hook, not in the input's `onChange`.",
    },
    # 14
    {
        "name": "WebhookDispatcher signs payloads with HMAC",
        "description": "WebhookDispatcher in the Python notifications service signs every outgoing webhook with HMAC-SHA256",
        "body": "`WebhookDispatcher` in `notifications/webhooks.py` signs the raw JSON body with HMAC-SHA256 using the customer's endpoint secret and sends it as the `X-Signature` header. Re-serializing the body after signing breaks verification on the customer side.",
    },
    # 15
    {
        "name": "newPgxPool caps connections at 20",
        "description": "Each Go service opens Postgres via newPgxPool with MaxConns 20 to stay under pgbouncer limits",
        "body": "`newPgxPool()` in `internal/db/pool.go` sets `MaxConns` to 20 and `MaxConnIdleTime` to 5 minutes. With 12 replicas that already totals 240 connections, so raise pgbouncer's pool size before bumping it.",
    },
    # 16
    {
        "name": "UserSettingsSchema is shared by client and API",
        "description": "The zod UserSettingsSchema in packages/shared validates settings in both the form and the API",
        "body": "`UserSettingsSchema` lives in `packages/shared/src/schemas.ts` and is imported by both the settings form and the Node API handler. Add new fields there first with `.optional()` so old clients keep validating.",
    },
    # 17
    {
        "name": "queryClient staleTime and invalidation",
        "description": "The React Query queryClient uses a 30s staleTime; mutations must invalidate their query keys",
        "body": "The single `queryClient` created in `src/lib/query.ts` has `staleTime: 30_000` and `retry: 1`. Every mutation must call `queryClient.invalidateQueries({ queryKey: [...] })` for the lists it affects, or the UI shows old data for 30 seconds.",
    },
    # 18
    {
        "name": "AuthProvider exposes currentUser, client-only",
        "description": "AuthProvider and useAuth give currentUser on the client; they cannot be used in server components",
        "body": "`AuthProvider` in `src/auth/AuthProvider.tsx` exposes `currentUser` and `signOut` through `useAuth()`. It depends on `localStorage`, so server components must read the user from the request cookie instead.",
    },
    # 19
    {
        "name": "CsvExportJob streams in 5000-row chunks",
        "description": "CsvExportJob in the Python reports service streams rows in chunks of 5000 to keep memory flat",
        "body": "`CsvExportJob` in `reports/jobs/csv_export.py` uses a server-side cursor and writes 5000 rows at a time to S3 via multipart upload. Loading the whole queryset first OOM-killed the worker on exports over two million rows.",
    },
    # 20
    {
        "name": "retryWithBackoff adds full jitter",
        "description": "retryWithBackoff in the frontend fetch wrapper uses exponential backoff with full jitter and only retries idempotent methods",
        "body": "`retryWithBackoff()` in `src/lib/fetcher.ts` doubles the delay starting from 200ms with full jitter and only retries GET and PUT. POSTs are never retried automatically because order creation is not idempotent.",
    },
    # 21
    {
        "name": "ImageUploader uses presigned S3 URLs",
        "description": "ImageUploader uploads directly to S3 with a presigned PUT URL from /api/uploads, max 10 MB",
        "body": "`ImageUploader` asks `/api/uploads/presign` for a presigned PUT URL and uploads the file straight to S3, so image bytes never pass through our API. Files over 10 MB are rejected client-side before requesting the URL.",
    },
    # 22
    {
        "name": "PermissionGuard only hides UI",
        "description": "PermissionGuard hides UI by role but the API must still enforce permissions",
        "body": '`<PermissionGuard require="billing:write">` hides buttons the user lacks permission for, based on `currentUser.roles`. It is purely cosmetic; every API route still checks permissions server-side with `requirePermission()`.',
    },
    # 23
    {
        "name": "EventBus is in-process and not durable",
        "description": "The Go EventBus in the orders service is an in-memory pub/sub; anything that must survive restarts goes to Kafka",
        "body": "`EventBus` in `services/orders/internal/events/bus.go` dispatches events to subscribers in the same process via goroutines. Events are lost on restart, so anything another service depends on must be published to Kafka through the outbox table instead.",
    },
    # 24
    {
        "name": "load_settings is cached; clear it in tests",
        "description": "load_settings() in config/settings.py merges env vars over settings.toml and is wrapped in lru_cache",
        "body": "`load_settings()` in `config/settings.py` reads `settings.toml`, then overrides values with environment variables prefixed `APP_`. It is wrapped in `functools.lru_cache`, so tests that change env vars must call `load_settings.cache_clear()`.",
    },
    # 25
    {
        "name": "session_timeout is 30 minutes idle",
        "description": "The session_timeout setting in the Python auth service expires idle sessions after 30 minutes",
        "body": "`session_timeout` in the auth service's settings is 1800 seconds of inactivity, measured from the last authenticated request. Security asked that it never exceed 30 minutes; the absolute session lifetime is separately capped at 12 hours.",
    },
    # 26
    {
        "name": "Migration script supports --dry-run",
        "description": "scripts/migrate.py --dry-run prints the SQL without applying it; use it before every prod migration",
        "body": "Run `python scripts/migrate.py --dry-run` against production first; it executes the pending SQL in a transaction that is rolled back and prints it. The deploy runbook requires pasting the dry-run output into the release ticket.",
    },
    # 27
    {
        "name": "x-request-id is propagated end to end",
        "description": "The gateway sets x-request-id if absent and every service must forward and log it",
        "body": "The Go gateway generates an `x-request-id` header (UUIDv7) when the client didn't send one, and every Python and Go service forwards it on outbound calls and logs it as `request_id`. Use it to correlate log lines across services in Grafana Loki.",
    },
    # 28
    {
        "name": "MAX_RETRIES for background tasks is 5",
        "description": "MAX_RETRIES in worker/constants.py caps Celery task retries at 5",
        "body": "`MAX_RETRIES = 5` in `worker/constants.py` is applied to every Celery task through the base task class, together with `retry_backoff=True`. Tasks that call third-party APIs should lower it rather than raise it, since each retry holds a worker slot.",
    },
    # 29
    {
        "name": "Use pathlib instead of os.path.join",
        "description": "Python code uses pathlib.Path; os.path.join is flagged by the ruff PTH rules",
        "body": 'New Python code must build paths with `pathlib.Path` (`base / "exports" / name`) instead of `os.path.join`. Ruff\'s PTH rules are enabled in `pyproject.toml`, so `os.path.join` and `os.makedirs` fail lint in CI.',
    },
    # 30
    {
        "name": "GitHub Actions caches the pnpm store",
        "description": "The ci.yml workflow on GitHub Actions caches the pnpm store keyed on pnpm-lock.yaml",
        "body": "`.github/workflows/ci.yml` uses `actions/setup-node` with `cache: pnpm`, keyed on `pnpm-lock.yaml`. If installs get slow on GitHub Actions, check whether the lockfile is changing in every commit, which busts the cache.",
    },
    # 31
    {
        "name": "PostgreSQL autovacuum tuned for the events table",
        "description": "The events table in PostgreSQL 15 has aggressive per-table autovacuum settings",
        "body": "Our PostgreSQL 15 cluster runs autovacuum on the `events` table with `autovacuum_vacuum_scale_factor = 0.01` because it gets millions of updates a day. Without it, table bloat doubled query times on the activity feed.",
    },
    # 32
    {
        "name": "TypeScript strict with noUncheckedIndexedAccess",
        "description": "The frontend tsconfig enables strict and noUncheckedIndexedAccess; don't silence errors with non-null assertions",
        "body": "The TypeScript config in `tsconfig.base.json` enables `strict` and `noUncheckedIndexedAccess`, so array and record lookups are typed `T | undefined`. Handle the undefined case instead of adding `!`; the lint config forbids non-null assertions.",
    },
    # 33
    {
        "name": "Legacy JavaScript widgets must stay ES5",
        "description": "Files under public/legacy are plain JavaScript loaded by partner sites and are not built or type-checked",
        "body": "The embeddable widgets in `public/legacy/*.js` are plain JavaScript served to partner sites, some still on old browsers, so they must stay ES5 with no build step. Do not convert them to modules or add optional chaining.",
    },
    # 34
    {
        "name": "macOS dev setup needs libpq and arm64 images",
        "description": "On macOS (Apple Silicon) developers need Homebrew libpq for psycopg and must use arm64 Docker images",
        "body": "Local setup on macOS requires `brew install libpq` and adding its `bin` to PATH before `pip install psycopg`. On Apple Silicon the docker-compose file pins `platform: linux/arm64` for the database; the amd64 image runs under emulation and is very slow.",
    },
    # 35
    {
        "name": "Google OAuth uses PKCE and registered redirect URIs",
        "description": "Sign-in with Google uses the OAuth authorization code flow with PKCE; redirect URIs must be registered per environment",
        "body": "Login uses the Google OAuth 2.0 authorization code flow with PKCE, handled in `src/auth/oauth.ts`. Each environment's callback URL (`/auth/callback`) must be registered in the Google Cloud console, otherwise login fails with `redirect_uri_mismatch`.",
    },
]

ABOUT_ONE: list[tuple[str, int]] = [
    # plain words, no identifier (16)
    ("why does the first request after startup get a 401 with an expired token", 0),
    ("why do edited display names take a minute to show up", 1),
    ("notifications appear twice in dev mode, why?", 2),
    ("how does the billing page redirect when you're not logged in", 3),
    ("what happens when the ingest worker gets malformed json", 4),
    ("how are api keys rate limited at the gateway", 6),
    ("what does a new feature flag return while flags are still loading", 7),
    ("where do we send frontend render crashes", 9),
    ("how do we stop double clicks on pay from creating two stripe sessions", 10),
    ("can invoices ever be hard deleted from the database?", 11),
    ("prices are showing up 100x too small", 12),
    ("how do customers verify our webhook signatures", 14),
    ("exports over two million rows crash the worker", 19),
    ("are order events durable if the service restarts?", 23),
    ("how long can a session sit idle before it expires", 25),
    ("how do i correlate logs for one request across services", 27),
    # identifier in a different style than the memory (16)
    ("refresh_session_token keeps failing on startup", 0),
    ("where do we call user_profile_service invalidation", 1),
    ("http_client timeout in the go services", 5),
    ("TokenBucket burst size?", 6),
    ("use_feature_flag default value", 7),
    ("add a new status to order_status_badge", 8),
    ("create_checkout_session idempotency key format", 10),
    ("format_currency expects what units", 12),
    ("where does webhook-dispatcher get the hmac secret", 14),
    ("new_pgx_pool max conns", 15),
    ("csv_export_job chunk size", 19),
    ("RetryWithBackoff jitter settings", 20),
    ("loadSettings returns stale values in my tests", 24),
    ("what is sessionTimeout set to", 25),
    ("is dryRun supported by the migrate script?", 26),
    ("maxRetries for celery tasks", 28),
    # identifier exactly as written, or product name in any casing (16)
    ("getServerSideProps on the billing page", 3),
    ("AppErrorBoundary sentry tags", 9),
    ("InvoiceRepository Delete method", 11),
    ("useDebouncedValue delay in product search", 13),
    ("adding a new optional field to UserSettingsSchema", 16),
    ("queryClient invalidateQueries after a mutation", 17),
    ("can I use AuthProvider in a server component?", 18),
    ("ImageUploader max file size", 21),
    ("PermissionGuard require prop", 22),
    ("why does os.path.join fail lint", 29),
    ("github actions cache", 30),
    ("Postgres vacuum settings for events", 31),
    ("typescript noUncheckedIndexedAccess errors everywhere", 32),
    ("can i use optional chaining in the legacy javascript widgets", 33),
    ("macos setup for psycopg", 34),
    ("oauth redirect_uri_mismatch on staging", 35),
]

ABOUT_NONE: list[str] = [
    "how do I tune the java garbage collector for lower pause times",
    "git rebase my branch onto main without losing commits",
    "what type of index should the email column have",
    "count the tokens in this prompt before sending it to the model",
    "what's a good bucket layout for prometheus histogram metrics",
    "how do I take a screenshot on a mac",
    "the user asked for a refund, draft a polite reply",
    "what's the standard error of this sample mean",
    "our client wants the landing page redesigned by friday",
    "write an agenda for tomorrow's sprint planning session",
    "help me update my linkedin profile headline",
    "what screen refresh rate does this monitor support",
    "which bus gets me to the office from the train station",
    "currency exchange rate from euro to yen today",
    "how do I check the status of my passport renewal",
    "guard clauses vs nested if statements, which is more readable",
    "schedule a job interview with the candidate on thursday",
    "open a csv in excel without it mangling the dates",
    "does this arduino button need a debounced input",
    "what are the side effects of ibuprofen",
    "let me do a dry run of my wedding toast",
    "schema markup for a recipe blog for better seo",
    "venue options for the company offsite event",
    "type annotations for python dataclasses with default factories",
    "decode this base64 string for me",
    "pick a nice script font for the wedding invitations",
    "what's my max heart rate for zone 2 training",
    "authentic carbonara recipe without cream",
    "regulation pool table dimensions for the office game room",
    "do I need permission to use the company logo in a conference talk",
]
