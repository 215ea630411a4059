#!/usr/bin/env bash
# Rebuilds vault-example's wiki the way an agent would build it: three sources ingested into raw/,
# pages written and revised through `engram wiki` (the CLI face of the MCP tools), one answer filed
# back, one contradiction planted on purpose for `engram lint` to find. `make example-wiki` runs it;
# the vault's pinned clock (`now` in engram.toml) makes every byte it writes reproducible.
#
# Usage: examples/build-example-wiki.sh [ENGRAM] [VAULT]
set -euo pipefail
ENGRAM=${1:-engram}
VAULT=${2:-vault-example}
HERE=$(cd "$(dirname "$0")" && pwd)
AGENT=agent:example
wiki() { "$ENGRAM" wiki "$@" --vault "$VAULT" --writer "$AGENT" > /dev/null; }

rm -rf "$VAULT/raw" "$VAULT/wiki" "$VAULT/.engram/wiki"
"$ENGRAM" setup "$VAULT" --skip-model-check > /dev/null  # raw/, wiki/ and wiki/AGENTS.md

# --- Ingest: the originals stay byte for byte in raw/; HTML also gets its Markdown text form.
ingest() { "$ENGRAM" ingest "$HERE/wiki-sources/$1" --vault "$VAULT" --writer "$AGENT" \
             --origin "examples/wiki-sources/$1" --title "$2" > /dev/null; }
ingest idempotency-keys.md "Idempotency Keys for Retry-Safe APIs"
ingest connection-pooling.html "Connection Pooling with PgBouncer"
ingest visibility-timeouts.txt "Visibility Timeouts in Message Queues"
KEYS=raw/idempotency-keys-for-retry-safe-apis.md
POOL=raw/connection-pooling-with-pgbouncer.md
QUEUE=raw/visibility-timeouts-in-message-queues.md

# --- One summary page per source (kind source), then the concepts and entities they touch.
wiki write "Idempotency Keys for Retry-Safe APIs" --kind source --source "$KEYS" \
  --summary "Why a retried request must carry the same key, and how the server stores it." --body - <<'EOF'
A client that times out cannot know whether the server did the work, so it retries; an
[[Idempotency Key]] makes the retry return the first result instead of running twice.

## Key points

- The server stores the key, a fingerprint of the body and the result in the same transaction as
  the side effect.
- A retry while the first attempt runs gets `409`; the same key with another body gets `422`.
- Keys expire after a window such as twenty-four hours.
- The client makes one key per logical operation, before the first attempt.
- Each downstream hop (ledger, notification, webhook) needs its own key derived from the first.

Our own decision is in [[ADR-002 Idempotency Keys for Payments]].
EOF

wiki write "Connection Pooling with PgBouncer" --kind source --source "$POOL" \
  --summary "Pool modes, what transaction pooling breaks, and how big a pool should be." --body - <<'EOF'
Each PostgreSQL connection is a server process; [[PgBouncer]] lets thousands of clients share a
few dozen of them. See [[Connection Pooling]] for the idea itself.

## Key points

- Session pooling is safe for everything; transaction pooling is where the savings are; statement
  pooling forbids multi-statement transactions.
- Transaction pooling loses session state: `SET` without `LOCAL`, advisory locks outside a
  transaction, `LISTEN`, temporary tables.
- A pool of twenty to forty server connections serves most mid-sized databases.

Our database choice: [[ADR-001 Postgres as Primary Database]]; tuning notes: [[Postgres Tuning]].
EOF

wiki write "Visibility Timeouts in Message Queues" --kind source --source "$QUEUE" \
  --summary "At-least-once delivery: visibility timeouts, heartbeats, dead-letter queues." --body - <<'EOF'
A received message is hidden, not deleted, for the [[Visibility Timeout]]; a consumer that
crashes lets it reappear, so delivery is at least once.

## Key points

- The default visibility timeout of Amazon SQS is 30 seconds.
- A job longer than the timeout is delivered twice unless the worker extends the timeout as a
  heartbeat.
- After maxReceiveCount failed receives (about five) the redrive policy moves the message to a
  dead-letter queue.
- Every consumer must be idempotent: record the message's [[Idempotency Key]] with its side effect.

We run this on [[Amazon SQS]]: [[ADR-003 SQS for Background Jobs]].
EOF

wiki write "Idempotency Key" --kind concept --source "$KEYS" --source "$QUEUE" \
  --summary "A client-chosen key that makes a retried operation run once." \
  --link "Idempotency Keys for Retry-Safe APIs" --body - <<'EOF'
A unique value the client sends with one logical operation. The server records it with the
operation's result, atomically with the side effect, and answers a repeat with the stored result.

## Rules of thumb

- Generate it once per operation, before the first attempt; a new key per attempt defeats it.
- Reject the same key with a different request body: the key names one operation.
- Queue consumers use the message's key the same way, because a queue delivers at least once
  (see [[Visibility Timeout]]).
EOF

wiki write "Connection Pooling" --kind concept --source "$POOL" \
  --summary "Many client connections sharing a few database connections." \
  --link "Connection Pooling with PgBouncer" --body - <<'EOF'
Opening a database connection per request does not scale: each PostgreSQL connection is a process
with its own memory, and `max_connections` runs out before the CPU does. A pooler lends a small set
of server connections to many clients.

The pool should be sized to what the database can keep busy (about its cores times a small
factor), not to the number of clients. [[PgBouncer]] is the pooler we use.
EOF

wiki write "PgBouncer" --kind entity --source "$POOL" \
  --summary "The lightweight PostgreSQL connection pooler." --body - <<'EOF'
A single-process connection pooler for PostgreSQL, configured per database with a pool mode:
session, transaction or statement. In transaction mode it returns the server connection at
`COMMIT`, so anything kept on the connection (session `SET`, `LISTEN`, temporary tables) breaks.

Recent releases track protocol-level prepared statements with `max_prepared_statements`.
See [[Connection Pooling]].
EOF

wiki write "Visibility Timeout" --kind concept --source "$QUEUE" \
  --summary "How long a received queue message stays hidden before it is redelivered." \
  --link "Visibility Timeouts in Message Queues" --body - <<'EOF'
While a consumer works on a message, the queue hides it; if the consumer does not delete it before
the timeout, the message becomes visible again and another consumer gets it.

- Set it above the slowest job's duration, or extend it from the worker as a heartbeat.
- Redelivery is normal, so consumers deduplicate with an [[Idempotency Key]].
EOF

# The planted contradiction: this page was written from memory, not from the source, and gets the
# default wrong (the source says 30 seconds). `engram lint` reports the pair.
wiki write "Amazon SQS" --kind entity --source "$QUEUE" \
  --summary "AWS's managed message queue, which runs our background jobs." --body - <<'EOF'
A managed queue with at-least-once delivery, a per-queue [[Visibility Timeout]] and redrive to a
dead-letter queue.

- The default visibility timeout of Amazon SQS is 60 seconds.
- Messages can be delivered twice, so consumers must be idempotent.
EOF

# --- A revision, as an agent makes one: read the revision, then edit a section against it.
REV=$("$ENGRAM" wiki read "Amazon SQS" --vault "$VAULT" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["revision"])')
"$ENGRAM" wiki edit "Amazon SQS" --vault "$VAULT" --writer "$AGENT" --expected-revision "$REV" \
  --section "How we use it" --section-body - > /dev/null <<'EOF'
Our jobs and their settings: [[ADR-003 SQS for Background Jobs]].
EOF

# --- Query that compounds: an answer filed back as a synthesis page.
"$ENGRAM" wiki answer "How do we make webhook retries safe?" --vault "$VAULT" --writer "$AGENT" \
  --title "Safe Webhook Retries" --page "Idempotency Key" --page "Visibility Timeout" --page "Amazon SQS" \
  --answer - > /dev/null <<'EOF'
Treat every delivery as possibly the second one. The sender puts one idempotency key on each
logical webhook and reuses it on every retry; the receiver stores the key with the effect in one
transaction and answers a repeat with the stored result. Where the webhook is sent from a queue
job, the job's visibility timeout must exceed its slowest run, or the job is sent twice while the
first attempt is still running.
EOF

# The synthesis would be an orphan (only index.md links it): the concept it answers for links it.
REV=$("$ENGRAM" wiki read "Idempotency Key" --vault "$VAULT" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["revision"])')
"$ENGRAM" wiki edit "Idempotency Key" --vault "$VAULT" --writer "$AGENT" --expected-revision "$REV" \
  --find "(see [[Visibility Timeout]])." --replace "(see [[Visibility Timeout]] and [[Safe Webhook Retries]])." > /dev/null

"$ENGRAM" lint "$VAULT" --log > /dev/null || true  # findings are expected: the planted one
