//! Every setting Kith reads, in one table: its variable, default, section
//! and meaning. The parser ([`super::Config::from_lookup`]) takes its
//! defaults from here, and `docs/configuration.md` is generated from here
//! ([`super::reference()`]); tests check that the two never drift.

pub use super::catalog::{Kind, Section, Setting};
use super::catalog::{unset, value};

/// Every setting, by section.
pub const SECTIONS: &[Section] = &[
    Section {
        title: "PostgreSQL",
        settings: &[
            value(
                "DATABASE_URL",
                "postgres://kith:kith@127.0.0.1:5432/kith",
                "PostgreSQL, the truth",
            ),
            unset(
                "DATABASE_SESSION_URL",
                "PostgreSQL itself, for what needs a session of its own: migrations, the relay's leadership lock, the projector's lease keeper, the user and notify caches' notices, reconcile's lock and the operator commands. Unset: `DATABASE_URL`. Set it when `DATABASE_URL` goes through a transaction pooler: a listening session proves a notice reaches it before its cache serves, and through a transaction pooler none does (the log says so each minute, and the cache's reads go to PostgreSQL)",
            )
            .rule("set when `KITH_PG_STATEMENT_CACHE` is `false` (`DATABASE_URL` is then a transaction pooler)"),
            unset(
                "DATABASE_REPLICA_URL",
                "a streaming replica (or several hosts, e.g. with `target_session_attrs=read-only`) for what the caches miss: list pages past the cached windows, and user rows the process does not hold. Only while its session has replayed the reader's own last write in this process and is behind by no more than `KITH_REPLICA_MAX_LAG_MS`; otherwise, and when it fails, the primary answers (`kith_replica_reads_total`)",
            ),
            value(
                "KITH_REPLICA_MAX_LAG_MS",
                "1000",
                "how far behind the primary the read replica may be and still answer",
            ),
            value(
                "KITH_PG_STATEMENT_CACHE",
                "true",
                "keep prepared statements on the pooled connections of `DATABASE_URL`. `false` when `DATABASE_URL` is a transaction pooler (PgBouncer `pool_mode = transaction`): each statement is sent unnamed with its values in one round trip, no session setting is made (set `statement_timeout` in the pooler's `connect_query` or on the role), and `DATABASE_SESSION_URL` is required",
            ),
            value(
                "DATABASE_POOL_SIZE",
                "16",
                "PostgreSQL connections per process",
            )
            .at_least(1.0),
            value(
                "KITH_STATEMENT_TIMEOUT_MS",
                "4000",
                "PostgreSQL `statement_timeout` of every pooled connection of `serve` / `run` / `relay` / `project` (0 = none), below the request deadline so that a request's abandoned statements end soon after it; a cancelled statement answers `TIMEOUT`. The operator commands (`verify`, `reconcile`, `rebuild-cache`, `user`, `dead-letters`) run without one",
            ),
            value(
                "KITH_WRITE_BATCH",
                "128",
                "most follows and unfollows gathered into one transaction (group commit): changes asked while `KITH_WRITE_BATCHES_IN_FLIGHT` batches are in flight wait and go together in the next, so a lone change waits for nothing; each is still acknowledged only once committed, and refused or failed alone. 1: one transaction per change (1 to 1000)",
            )
            .within(1.0, 1000.0),
            value(
                "KITH_WRITE_BATCHES_IN_FLIGHT",
                "2",
                "group-commit batches one process runs at once (1 to 16)",
            )
            .within(1.0, 16.0),
            value(
                "KITH_AUTO_MIGRATE",
                "true",
                "apply migrations on `serve` / `run`",
            ),
        ],
    },
    Section {
        title: "Redis",
        settings: &[
            value(
                "REDIS_URL",
                "redis://127.0.0.1:6379/0",
                "Redis: rate limits, caches. `redis+cluster://host:port,host:port,…` (or `rediss+cluster://`) names a Redis Cluster by some of its nodes (see [operations.md](operations.md#redis-cluster))",
            ),
            value("REDIS_POOL_SIZE", "16", "Redis connections per process")
            .at_least(1.0),
            value(
                "KITH_REDIS_PREFIX",
                "",
                "prefix for every Redis key (isolates tenants and tests)",
            ),
            value(
                "KITH_REDIS_TIMEOUT_MS",
                "1000",
                "deadline of connecting to Redis and of each Redis answer (waiting for a free pooled connection, PostgreSQL's or Redis's, is bounded at half the request deadline)",
            )
            .at_least(10.0),
        ],
    },
    Section {
        title: "Kafka and the pipeline",
        settings: &[
            value("KAFKA_BROKERS", "127.0.0.1:9092", "Kafka bootstrap servers"),
            Setting {
                name: "KITH_KAFKA_<PROPERTY>",
                default: None,
                doc: "any librdkafka property for every Kafka client: the name lowercased, `_` read as `.` (`KITH_KAFKA_SECURITY_PROTOCOL=SASL_SSL` is `security.protocol`)",
                kind: Kind::Family,
                min: None,
                max: None,
                rule: None,
            },
            unset(
                "KITH_KAFKA_PROPERTIES_FILE",
                "librdkafka properties from a `name=value` file (read first; the variables above override it)",
            ),
            value(
                "KITH_FOLLOW_TOPIC",
                "kith.follow-events",
                "topic of follow events (outbox → projector)",
            ),
            value(
                "KITH_CONTENT_TOPIC",
                "kith.content-events",
                "topic of content events from other services",
            ),
            value(
                "KITH_DEAD_LETTER_TOPIC",
                "kith.dead-letters",
                "where undecodable or unappliable events go",
            ),
            value(
                "KITH_TOPIC_PARTITIONS",
                "6",
                "partitions of the topics Kith creates at start-up",
            )
            .at_least(1.0),
            value(
                "KITH_TOPIC_REPLICATION_FACTOR",
                "3",
                "replicas of each partition of the topics Kith creates (`scripts/dev` and the tests set 1: the local broker is one node)",
            )
            .at_least(1.0),
            value(
                "KITH_TOPIC_MIN_INSYNC_REPLICAS",
                "2",
                "`min.insync.replicas` of the topics Kith creates: with `acks=all`, a write is acknowledged once this many replicas hold it",
            )
            .at_least(1.0)
            .rule("at most `KITH_TOPIC_REPLICATION_FACTOR`"),
            value(
                "KITH_CONSUMER_GROUP",
                "kith-projector",
                "names the projectors that share the partitions (and their positions, kept in PostgreSQL)",
            ),
            value(
                "KITH_RELAY_BATCH",
                "500",
                "outbox rows published per relay round",
            )
            .at_least(1.0),
            value(
                "KITH_RELAY_POLL_MS",
                "1000",
                "relay fallback poll when no wake-up arrives (writers wake relays after each commit)",
            )
            .at_least(10.0),
            value(
                "KITH_PROJECTOR_BATCH",
                "500",
                "events applied per projector transaction",
            )
            .at_least(1.0),
            value(
                "KITH_FETCH_WAIT_MS",
                "25",
                "longest a projector fetch waits on the broker. tansu answers a fetch only when this expires, and its CPU per event follows how often it is asked: at 1,000 events/s with the relay's origin header, 1.00 ms of its CPU per event with 10 ms (send → consumed p99 50 ms), 0.90 ms with 25 ms (p99 56 ms), 0.67 ms with 50 ms (p99 103 ms). Kafka answers as soon as records arrive, so there this bounds only the fetches of an idle partition",
            ),
            value(
                "KITH_PROJECTOR_IDLE_POLL_MS",
                "1000",
                "a projector with nothing to read for two fetch waits stops fetching until a relay announces events (in its process, or on the Redis channel `kith:produced`), and looks anyway this often: the longest delay of events no relay announces (content events from other services) while the topics are idle. 0: never stop fetching (against Kafka, where a waiting fetch costs little, this is a choice, not a need)",
            )
            .rule("0, or at least 10"),
            value(
                "KITH_PROJECTOR_LEASE_MS",
                "5000",
                "how long a projector's hold on a partition outlives its last heartbeat (it heartbeats every fifth of it)",
            )
            .at_least(500.0),
            value(
                "KITH_CONTENT_LEDGER_RETENTION_HOURS",
                "720",
                "how long content event ids are remembered (keep it above the content topic's retention)",
            )
            .at_least(1.0),
        ],
    },
    Section {
        title: "Consistency",
        settings: &[
            value(
                "KITH_RECONCILE_INTERVAL_SECS",
                "0",
                "`kith run` / `kith project`: repair the projection and counters from the truth this often (0 = never)",
            ),
            value(
                "KITH_COUNTER_CHECK_INTERVAL_SECS",
                "300",
                "sampled check of a read user's counters against the truth, at most once per user per interval (0 = off)",
            ),
        ],
    },
    Section {
        title: "Caches and reads",
        settings: &[
            value(
                "KITH_LIST_CACHE_SIZE",
                "1000",
                "newest edges a followers list cache holds after a fill",
            )
            .at_least(1.0),
            value(
                "KITH_FOLLOWING_CACHE_SIZE",
                "10000",
                "newest edges a following list cache holds after a fill (at least `KITH_LIST_CACHE_SIZE`, at most 100000). A following list up to this size is cached whole, so that whether its owner follows anyone is answered from Redis alone: above `KITH_MAX_FOLLOWINGS`, every ordinary account's list is whole",
            )
            .within(0.0, super::MAX_FOLLOWING_CACHE_SIZE as f64),
            value("KITH_LIST_CACHE_TTL_SECS", "3600", "life of a list cache")
            .at_least(1.0),
            value(
                "KITH_HOT_FOLLOWERS",
                "100000",
                "list size from which the first pages are also held in process (moka)",
            ),
            value(
                "KITH_HOT_PAGE_TTL_MS",
                "1000",
                "life of an in-process hot page",
            )
            .at_least(1.0),
            value(
                "KITH_LOADER_DELAY_MS",
                "0",
                "how long a DataLoader collects keys before its one batched fetch. With 0 the fetch task is spawned while a level's resolvers are polled together and runs right after them on the same worker, so it still gets every key of the level (the round-trip tests check it) without a timer per level: 3,004–3,051 req/s in process against 2,600–2,640 with 1 ms (`cargo bench --bench profile_query`)",
            ),
            value(
                "KITH_USER_CACHE_CAPACITY",
                "100000",
                "user rows held in process (0: none)",
            ),
            value(
                "KITH_NOTIFY_CACHE_MEMBERS",
                "1000000",
                "members of the notify followers lists (`notifyFollowers`) held in process, all lists together, about 60 bytes each; a list longer than this is paged from PostgreSQL (0: none held)",
            ),
            value(
                "KITH_USER_CACHE_TTL_SECS",
                "60",
                "longest life of a user row held in process (changes drop it at once through PostgreSQL's `NOTIFY`; 0: none held)",
            ),
            value(
                "KITH_INTERSECTION_WALK_MAX",
                "20000",
                "most edges of the smaller list `commonFollowing` / `knownFollowers` walk (past it they cover its newest edges and say so); at most 20000, what the complexity model charges",
            )
            .within(1.0, super::MAX_INTERSECTION_WALK as f64),
            value(
                "KITH_INTERSECTION_CACHE_TTL_SECS",
                "300",
                "life of a computed `commonFollowing` / `knownFollowers` / `knownFollowersCount` in process (a follow or unfollow by either user drops it at once)",
            ),
            value(
                "KITH_MAX_CONCURRENT_FILLS",
                "4",
                "list-cache fills started by reads that may run at once in one process (past it, pages are read from PostgreSQL and nothing is filled)",
            ),
            value(
                "KITH_MAX_FILLS_PER_SEC",
                "200",
                "lists reads may fill per second in one process, whoever asks (past it, pages are read from PostgreSQL until the budget refills). Only lists of active users are ever filled",
            )
            .at_least(1.0),
            value(
                "KITH_FILL_MEMORY_LIMIT",
                "0",
                "Redis `used_memory` (bytes) that what reads cache may take it to: past it, reads fill no list cache and write back no counter record (pages and counters are read from PostgreSQL until caches expire) and writes drop the cached lists they would grow (`kith_caches_shed_total`), so a crawl of every public list cannot take Redis to its `maxmemory`, where every write would fail `OOM`. Each fill is counted at the most it can take (120 bytes a member of `KITH_LIST_CACHE_SIZE` or `KITH_FOLLOWING_CACHE_SIZE`) against a look at Redis at most 10 ms old. 0: three quarters of Redis's `maxmemory` (of the fullest primary, on a cluster), and no limit on a Redis without one (`kith_list_fills_skipped_total{reason=\"memory\"}`)",
            ),
        ],
    },
    Section {
        title: "Requests and their limits",
        settings: &[
            value(
                "KITH_MAX_QUERY_DEPTH",
                "12",
                "deepest GraphQL selection accepted",
            ),
            value(
                "KITH_MAX_QUERY_COMPLEXITY",
                "20000",
                "most complex GraphQL query accepted (`first`/`last` multiply the cost of what they select; an `offset` costs one unit per 10 rows it skips)",
            ),
            value(
                "KITH_MAX_OFFSET",
                "10000",
                "deepest `offset` a list accepts (Elasticsearch's `max_result_window`); cursors reach any depth",
            )
            .at_least(0.0),
            value(
                "KITH_MAX_ALIASES",
                "50",
                "most aliased fields in one GraphQL document",
            ),
            value(
                "KITH_MAX_ROOT_FIELDS",
                "20",
                "most root fields in one operation",
            ),
            value(
                "KITH_MAX_BODY_BYTES",
                "1048576",
                "largest request body; a larger one is answered `413` as soon as it passes the limit",
            )
            .at_least(1024.0),
            value(
                "KITH_MAX_QUERY_BYTES",
                "65536",
                "longest GraphQL query text (over POST, GET or WebSocket); a longer one is refused with `INVALID_INPUT` before it is parsed (parsing takes far more memory than the text). Variables stay under `KITH_MAX_BODY_BYTES`",
            )
            .at_least(1024.0)
            .rule("at most `KITH_MAX_BODY_BYTES`"),
            value(
                "KITH_WRITE_TIMEOUT_SECS",
                "30",
                "how long one write of an answer may wait for the client to read; past it the connection is dropped, so a client that stops reading (an export it never takes, a WebSocket it ignores) holds nothing for longer. A client that reads slowly but reads is kept",
            ),
            value(
                "KITH_PUBLIC_CACHE_SECS",
                "5",
                "how long a shared cache (a CDN) may keep an anonymous `GET /graphql` answer without errors (`Cache-Control: public, max-age=…`; 0: `no-cache`). An answer to a bearer token is always `private, no-cache`, and every answer varies by `Authorization` and `Accept`",
            ),
            value(
                "KITH_INTROSPECTION",
                "true",
                "answer introspection (`__schema`, `__type`), which GraphiQL and every schema tool need; `false` refuses it with `INTROSPECTION_DISABLED`",
            ),
            value(
                "KITH_REQUEST_TIMEOUT_MS",
                "5000",
                "deadline of one GraphQL request, at most 60000; past it the request is dropped (connections returned) and answered `TIMEOUT`",
            )
            .within(10.0, super::MAX_REQUEST_TIMEOUT_MS as f64),
            value(
                "KITH_APQ_CACHE_BYTES",
                "16777216",
                "query text learnt from clients through Automatic Persisted Queries, held in process (0: APQ off, hashes alone answered `PERSISTED_QUERY_NOT_SUPPORTED`)",
            ),
            unset(
                "KITH_PERSISTED_QUERIES_FILE",
                "a persisted-query manifest (Apollo's `apollo-persisted-query-manifest` JSON, or an object of SHA-256 → query text), read at start",
            ),
            value(
                "KITH_PERSISTED_ONLY",
                "false",
                "run only the operations of that manifest (allow-list mode)",
            )
            .rule("`false`, or `true` with a manifest of at least one operation (`KITH_PERSISTED_QUERIES_FILE`)"),
        ],
    },
    Section {
        title: "Live updates (WebSocket)",
        settings: &[
            value(
                "KITH_MAX_LIVE_CONNECTIONS_PER_USER",
                "10",
                "WebSocket connections (`/graphql`, `graphql-transport-ws`) one user may hold open on one replica",
            ),
            value(
                "KITH_MAX_SUBSCRIPTIONS_PER_CONNECTION",
                "20",
                "subscriptions one WebSocket connection may run at once",
            ),
            value(
                "KITH_MAX_OPERATIONS_PER_CONNECTION",
                "4",
                "queries and mutations one WebSocket connection runs at once; more wait their turn (at most 64 waiting; past that `RATE_LIMITED`), so one socket cannot take every PostgreSQL connection",
            )
            .at_least(1.0),
            value(
                "KITH_LIVE_COUNTERS_INTERVAL_MS",
                "250",
                "`userCountersChanged` sends at most one update per interval (changes in between are coalesced)",
            )
            .within(1.0, 60_000.0),
            value(
                "KITH_WS_INIT_TIMEOUT_MS",
                "10000",
                "how long a WebSocket may take to authenticate (`connection_init`) before it is dropped",
            ),
        ],
    },
    Section {
        title: "HTTP",
        settings: &[
            value(
                "KITH_HTTP_ADDR",
                "127.0.0.1:8080",
                "where `kith serve` / `kith run` listen",
            ),
            value(
                "KITH_CORS_ORIGINS",
                "",
                "comma-separated origins a browser may call the API from (`*` = any); none by default",
            ),
            value(
                "KITH_METRICS_ADDR",
                "127.0.0.1:9464",
                "where `GET /metrics` is served, on a listener of its own (every `kith` job process serves it; an address already taken is logged and skipped); `off`: not served",
            ),
            value(
                "KITH_SERVER_TIMING",
                "false",
                "send each API answer's time in Kith, from its request's head reaching the router (its body still to be read) to its answer's head, as `Server-Timing: kith;dur=<ms>`, with the time and number of the PostgreSQL statements and Redis round trips made for it (`pg;dur=<ms>;desc=\"<n> statements\"`, `redis;dur=<ms>;desc=\"<n> round trips\"`): a client tells Kith's time from the network's and its own, and what a slow answer waited for (browsers' tools show it). Off by default, since it hands every caller an exact clock of Kith's work (a side channel a network's noise otherwise blurs)",
            ),
        ],
    },
    super::settings_auth::AUTHENTICATION,
    super::settings_accounts::RATE_LIMITS,
    super::settings_accounts::PORTABILITY,
    super::settings_accounts::SUGGESTIONS,
    Section {
        title: "Logs",
        settings: &[
            value(
                "KITH_LOG_FORMAT",
                "text",
                "the logs' format (they go to stderr)",
            )
            .rule("`text` or `json`"),
            Setting {
                name: "RUST_LOG",
                default: Some("info"),
                doc: "tracing filter",
                kind: Kind::External,
                min: None,
                max: None,
                rule: None,
            },
        ],
    },
];

/// The default of setting `name`, as its variable would spell it (`None`:
/// unset, or not a setting).
pub fn default_of(name: &str) -> Option<&'static str> {
    all().find(|s| s.name == name).and_then(|s| s.default)
}

/// The setting whose variable is `name`.
pub fn find(name: &str) -> Option<&'static Setting> {
    all().find(|s| s.name == name)
}

/// Every setting, in the order they are documented.
pub fn all() -> impl Iterator<Item = &'static Setting> {
    SECTIONS.iter().flat_map(|section| section.settings.iter())
}
