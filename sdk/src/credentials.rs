//! The credentials file written by `orbit admin bootstrap` (mode 0600).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Credentials {
    pub token: String,
    pub application_id: u64,
    pub environment_id: u64,
    pub namespace_id: u64,
    pub queue_id: String,
    pub credential_id: u64,
    pub scopes: Vec<String>,
    /// The database the credential was created in, as `host:port/database` (never a password);
    /// `orbit dev` makes a new credential when it names another database. Absent in files of
    /// older releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
}

impl Credentials {
    /// Reads and parses the file.
    pub fn load(path: impl AsRef<std::path::Path>) -> std::io::Result<Credentials> {
        let text = std::fs::read_to_string(path.as_ref())?;
        serde_json::from_str(&text)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }
}
