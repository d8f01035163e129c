//! `kith seed-data`: a realistic follow graph, generated inside PostgreSQL
//! (no rows travel from the client), consistent across the truth, the
//! follower projection and `user_stats`.
//!
//! - Users get consecutive ids after the largest existing one.
//! - The first `celebrities` of them are each followed by
//!   `celebrity_followers` distinct users.
//! - The other edges go from a uniformly random user to one of the other
//!   (non-celebrity) users drawn log-uniformly (`floor(m^u) - 1`, u uniform):
//!   a Zipf-like tail where the top tenth of users holds most followers and
//!   most users have few, as in real graphs. Duplicates and self-follows are
//!   dropped and drawn again, up to four times the edges asked for.
//! - With `communities` K > 1, user `i` (counted from the first) belongs to
//!   community `i mod K`, and 80% of each user's ordinary follows go to its
//!   own community (drawn log-uniformly there), the rest anywhere — the
//!   clustered structure friends-of-friends suggestions rely on.
//! - Follow times spread over the last three years, in whole milliseconds.
//! - PostgreSQL's `random()` is seeded, so a plan always makes the same graph
//!   on the same server version.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Double, Text};
use diesel_async::RunQueryDsl;

use super::PgConn;

/// What to generate.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Users to create.
    pub users: i64,
    /// Follow edges to create in all (celebrities' included).
    pub edges: i64,
    /// Accounts followed by `celebrity_followers` users each.
    pub celebrities: i64,
    /// Followers of each celebrity (at most `users - 1`).
    pub celebrity_followers: i64,
    /// Handle prefix; handles are `{prefix}{n}`.
    pub prefix: String,
    /// Seed of PostgreSQL's `random()`, in [-1, 1].
    pub seed: f64,
    /// Communities (0 or 1: none).
    pub communities: i64,
}

/// What was generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// First user id.
    pub first_id: i64,
    /// Users created.
    pub users: i64,
    /// Edges created.
    pub edges: i64,
}

/// Rows written per statement.
const BATCH: i64 = 500_000;

#[derive(QueryableByName)]
struct Number {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Generates the graph of `plan`, calling `progress` as it goes.
pub async fn generate(
    conn: &mut PgConn,
    plan: &Plan,
    mut progress: impl FnMut(&str),
) -> diesel::QueryResult<Summary> {
    let invalid = |m: &str| diesel::result::Error::QueryBuilderError(m.to_owned().into());
    if plan.users < 2 || plan.edges < 0 || plan.celebrities < 0 || plan.celebrities > plan.users {
        return Err(invalid(
            "need at least 2 users and no more celebrities than users",
        ));
    }
    if plan.celebrity_followers > plan.users - 1 {
        return Err(invalid("a celebrity can have at most users - 1 followers"));
    }
    let n = plan.users;
    diesel::sql_query("SELECT setseed($1)")
        .bind::<Double, _>(plan.seed)
        .execute(conn)
        .await?;
    let Number { n: first } = diesel::sql_query("SELECT coalesce(max(id), 0) + 1 AS n FROM users")
        .get_result(conn)
        .await?;

    let mut done = 0;
    while done < n {
        let size = BATCH.min(n - done);
        diesel::sql_query(
            "WITH new_users AS (
                 INSERT INTO users (id, handle, display_name)
                 SELECT $1 + g, $3 || g, 'Seed user ' || g FROM generate_series($2, $2 + $4 - 1) AS g
                 RETURNING id)
             INSERT INTO user_stats (user_id) SELECT id FROM new_users",
        )
        .bind::<BigInt, _>(first)
        .bind::<BigInt, _>(done)
        .bind::<Text, _>(&plan.prefix)
        .bind::<BigInt, _>(size)
        .execute(conn)
        .await?;
        done += size;
        progress(&format!("users {done}/{n}"));
    }
    // Later users created the ordinary way get ids after these.
    diesel::sql_query(
        "SELECT setval(pg_get_serial_sequence('users', 'id'), (SELECT max(id) FROM users))",
    )
    .execute(conn)
    .await?;

    const INSERT_EDGES: &str =
        "INSERT INTO following (from_user_id, to_user_id, active, followed_at, version)
        SELECT f, t, TRUE,
               date_trunc('milliseconds', now() - random() * interval '1095 days'), 1
          FROM (%PAIRS%) AS pairs(f, t)
         WHERE f <> t
        ON CONFLICT DO NOTHING";
    let mut edges = 0;
    for c in 0..plan.celebrities {
        let celebrity = first + c;
        let mut from = 0;
        while from < plan.celebrity_followers {
            let size = BATCH.min(plan.celebrity_followers - from);
            // Followers are the users after the celebrity, wrapping around:
            // distinct, and never the celebrity itself.
            let pairs =
                "SELECT $1 + ($2 + 1 + g) % $3, $2 + $1 FROM generate_series($4, $4 + $5 - 1) AS g";
            edges += diesel::sql_query(INSERT_EDGES.replace("%PAIRS%", pairs))
                .bind::<BigInt, _>(first)
                .bind::<BigInt, _>(c)
                .bind::<BigInt, _>(n)
                .bind::<BigInt, _>(from)
                .bind::<BigInt, _>(size)
                .execute(conn)
                .await? as i64;
            from += size;
            progress(&format!(
                "celebrity {celebrity}: {from}/{} followers",
                plan.celebrity_followers
            ));
        }
    }
    let others = n - plan.celebrities;
    let budget = 4 * (plan.edges - edges).max(0);
    let mut drawn = 0;
    while edges < plan.edges && drawn < budget && others > 1 {
        let size = BATCH.min(plan.edges - edges);
        // Any source; the target log-uniform among the others. With
        // communities, the target's community is the source's (80%) or any,
        // and within it log-uniform over its members among the others
        // (relative index `celebrities + t` is in community
        // `(celebrities + t) mod K`).
        let pairs = if plan.communities > 1 {
            "SELECT $1 + s,
                    $1 + $4 + least(
                      ((c - $4) % $6 + $6) % $6
                        + $6 * (floor(power(greatest($5 / $6, 2)::DOUBLE PRECISION, random()))::BIGINT - 1),
                      $5 - 1)
               FROM (SELECT s, CASE WHEN random() < 0.8 THEN s % $6
                                    ELSE floor(random() * $6)::BIGINT END AS c
                       FROM (SELECT floor(random() * $2)::BIGINT AS s
                               FROM generate_series(1, $3)) AS a) AS b"
        } else {
            "SELECT $1 + floor(random() * $2)::BIGINT,
                    $1 + $4 + least(floor(power($5::DOUBLE PRECISION, random()))::BIGINT - 1, $5 - 1)
               FROM generate_series(1, $3) WHERE $6 > 0"
        };
        edges += diesel::sql_query(INSERT_EDGES.replace("%PAIRS%", pairs))
            .bind::<BigInt, _>(first)
            .bind::<BigInt, _>(n)
            .bind::<BigInt, _>(size)
            .bind::<BigInt, _>(plan.celebrities)
            .bind::<BigInt, _>(others)
            .bind::<BigInt, _>(plan.communities.max(1))
            .execute(conn)
            .await? as i64;
        drawn += size;
        progress(&format!("edges {edges}/{}", plan.edges));
    }

    progress("follower projection");
    diesel::sql_query(
        "INSERT INTO follower (to_user_id, from_user_id, active, followed_at, version)
         SELECT to_user_id, from_user_id, active, followed_at, version
           FROM following WHERE from_user_id BETWEEN $1 AND $2",
    )
    .bind::<BigInt, _>(first)
    .bind::<BigInt, _>(first + n - 1)
    .execute(conn)
    .await?;
    progress("counters");
    diesel::sql_query(
        "UPDATE user_stats s
            SET followings = coalesce(o.n, 0), followers = coalesce(i.n, 0),
                version = kith_next_version(s.version)
           FROM generate_series($1, $2) AS u(id)
           LEFT JOIN (SELECT from_user_id AS id, count(*) AS n FROM following
                       WHERE from_user_id BETWEEN $1 AND $2 GROUP BY 1) o USING (id)
           LEFT JOIN (SELECT to_user_id AS id, count(*) AS n FROM follower
                       WHERE to_user_id BETWEEN $1 AND $2 GROUP BY 1) i USING (id)
          WHERE s.user_id = u.id",
    )
    .bind::<BigInt, _>(first)
    .bind::<BigInt, _>(first + n - 1)
    .execute(conn)
    .await?;
    progress("analyze");
    diesel::sql_query("ANALYZE users, following, follower, user_stats")
        .execute(conn)
        .await?;
    Ok(Summary {
        first_id: first,
        users: n,
        edges,
    })
}
