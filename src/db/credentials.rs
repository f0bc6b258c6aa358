//! Operator credential procedures: `orbit_credential_create`, `orbit_credential_revoke`,
//! `orbit_credential_list`. They take no bearer token (like `orbit_admin_bootstrap`): only operators reach them.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Arg, Db, DbError};

/// What `orbit_credential_create` creates. Everything named must already exist.
#[derive(Clone, Debug, Default)]
pub struct NewCredential {
    pub application: String,
    pub environment: String,
    pub namespace: String,
    /// Queues of the namespace the credential reaches; empty = every queue, present and future.
    pub queue_ids: Vec<String>,
    /// SHA-256 of a fresh random token ([`crate::auth::token_hash`]).
    pub token_hash: Vec<u8>,
    pub token_hint: String,
    pub scopes: Vec<String>,
    pub label: String,
}

/// The ids `orbit_credential_create` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CreatedCredential {
    pub credential_id: u64,
    pub application_id: u64,
    pub environment_id: u64,
    pub namespace_id: u64,
}

/// What `orbit_credential_revoke` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RevokedCredential {
    pub credential_id: u64,
    /// The first revocation's time (revoking again keeps it).
    pub revoked_at: DateTime<Utc>,
}

/// One credential as `orbit_credential_list` shows it (never its token or hash).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CredentialInfo {
    pub credential_id: u64,
    pub application: String,
    pub environment: String,
    pub label: String,
    /// The first characters of the token, to recognise it.
    pub token_hint: String,
    pub scopes: Vec<String>,
    /// Names of the namespaces it reaches.
    pub namespaces: Vec<String>,
    /// The queues it is limited to; empty = every queue of its namespaces.
    pub queue_ids: Vec<String>,
    pub created_at: DateTime<Utc>,
    /// `None` while active.
    pub revoked_at: Option<DateTime<Utc>>,
}

impl Db {
    /// `orbit_credential_list`: up to `limit` (1-1000) credentials in id order after `after_id`,
    /// of one application (by name) or all; revoked ones only when asked.
    pub async fn credential_list(
        &self,
        application: Option<&str>,
        include_revoked: bool,
        limit: u32,
        after_id: Option<u64>,
    ) -> Result<Vec<CredentialInfo>, DbError> {
        let list = |s: Option<String>| -> Vec<String> {
            s.unwrap_or_default()
                .split(',')
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect()
        };
        self.call(
            "orbit_credential_list",
            &[
                application.into(),
                include_revoked.into(),
                u64::from(limit).into(),
                after_id.map_or(Arg::Null, Arg::U64),
            ],
            |c| {
                Ok(CredentialInfo {
                    credential_id: c.u64()?,
                    application: c.text()?,
                    environment: c.text()?,
                    label: c.text()?,
                    token_hint: c.text()?,
                    scopes: list(c.opt_text()?),
                    namespaces: list(c.opt_text()?),
                    queue_ids: list(c.opt_text()?),
                    created_at: c.time()?,
                    revoked_at: c.opt_time()?,
                })
            },
        )
        .await
    }

    /// `orbit_credential_create`.
    pub async fn credential_create(&self, c: &NewCredential) -> Result<CreatedCredential, DbError> {
        let queues = serde_json::to_string(&c.queue_ids).expect("strings serialise");
        let scopes = c.scopes.join(",");
        self.call_one(
            "orbit_credential_create",
            &[
                c.application.as_str().into(),
                c.environment.as_str().into(),
                c.namespace.as_str().into(),
                queues.as_str().into(),
                Arg::Bytes(&c.token_hash),
                c.token_hint.as_str().into(),
                scopes.as_str().into(),
                c.label.as_str().into(),
            ],
            |r| {
                Ok(CreatedCredential {
                    credential_id: r.u64()?,
                    application_id: r.u64()?,
                    environment_id: r.u64()?,
                    namespace_id: r.u64()?,
                })
            },
        )
        .await
    }

    /// `orbit_credential_revoke` (idempotent).
    pub async fn credential_revoke(
        &self,
        credential_id: u64,
    ) -> Result<RevokedCredential, DbError> {
        self.call_one("orbit_credential_revoke", &[credential_id.into()], |r| {
            Ok(RevokedCredential {
                credential_id: r.u64()?,
                revoked_at: r.time()?,
            })
        })
        .await
    }
}

impl Db {
    /// `orbit_credential_check`: the credential id when the token is active and holds `scope`.
    pub async fn credential_check(&self, token_hash: &[u8], scope: &str) -> Result<u64, DbError> {
        self.call_one(
            "orbit_credential_check",
            &[Arg::Bytes(token_hash), scope.into()],
            |c| c.u64(),
        )
        .await
    }
}
