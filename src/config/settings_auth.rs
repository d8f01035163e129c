//! The settings of authentication: bearer tokens (HS256, an identity
//! provider's keys) and paging cursors' key (a part of `settings::SECTIONS`).

use super::catalog::{Section, unset, value};

/// How requests prove who sends them.
pub(super) const AUTHENTICATION: Section = Section {
    title: "Authentication",
    settings: &[
        unset(
            "KITH_JWT_SECRET",
            "HS256 key for bearer tokens (at least 16 bytes). Unset, a published development-only secret is used, which `serve` / `run` refuse on a non-loopback `KITH_HTTP_ADDR` while HS256 tokens are accepted (a deployment with only an identity provider needs none for tokens, but one for cursors: `KITH_CURSOR_KEY`)",
        )
        .rule("at least 16 bytes"),
        unset(
            "KITH_CURSOR_KEY",
            "key (at least 16 bytes) that signs paging cursors, so a client cannot forge a position. Unset: `KITH_JWT_SECRET`, else the published development secret, which `serve` / `run` refuse on a non-loopback `KITH_HTTP_ADDR` — also when tokens come only from an identity provider",
        )
        .rule("at least 16 bytes"),
        unset(
            "KITH_JWT_JWKS_URL",
            "an identity provider's JWKS (`https://…/.well-known/jwks.json`): RS256 / ES256 tokens are verified with its keys (re-read every `KITH_JWT_JWKS_TTL_SECS` in the background, and on an unknown `kid`)",
        ),
        unset(
            "KITH_JWT_PUBLIC_KEY_FILE",
            "instead, one PEM public key (RSA for RS256, P-256 for ES256)",
        ),
        value(
            "KITH_JWT_JWKS_TTL_SECS",
            "600",
            "how long a JWKS read is used; then it is read again in the background while requests keep verifying with the keys known (a provider that hangs or fails stalls no request whose key is known)",
        ),
        value(
            "KITH_JWT_JWKS_MIN_REFRESH_MS",
            "10000",
            "the shortest time between two reads of the JWKS (an unknown `kid` re-reads it at most this often)",
        ),
        unset(
            "KITH_JWT_ISSUER",
            "when set, the `iss` provider tokens must carry",
        ),
        unset(
            "KITH_JWT_AUDIENCE",
            "when set, the `aud` provider tokens must carry",
        ),
        value(
            "KITH_JWT_LEEWAY_SECS",
            "30",
            "clock skew allowed on `exp` and `nbf`",
        ),
        value(
            "KITH_JWT_USER_CLAIM",
            "sub",
            "the claim of a provider token that names the user",
        ),
        value(
            "KITH_SERVICE_CLIENTS",
            "",
            "the `sub` of each service whose tokens may carry Kith scopes (`kith:close-friends`, `kith:notify`), comma-separated; a token with a Kith scope and any other subject is refused (`UNAUTHENTICATED`), never taken as a service's nor as a user's; empty: no service tokens",
        ),
        value(
            "KITH_JWT_USER_LOOKUP",
            "id",
            "how that claim maps to a Kith user: by its numeric id, or by its handle",
        )
        .rule("`id` or `handle`"),
    ],
};
