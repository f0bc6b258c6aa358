//! Test harness: a fresh, uniquely named database per test, with the extension installed through
//! the real migrate code, dropped again when the test ends (also when it panics). Tests therefore
//! run in parallel and never see each other's rows.
//!
//! The server comes from `ORBIT_TEST_MYSQL_DSN` (default `mysql://root@127.0.0.1:3306`).

use sqlx::mysql::MySqlPoolOptions;
use sqlx::{Connection, MySqlConnection, MySqlPool};

use crate::migrate;

/// The server tests create their databases on.
pub fn server_dsn() -> String {
    std::env::var("ORBIT_TEST_MYSQL_DSN")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_string())
}

/// A database that exists for one test.
pub struct TestDb {
    pub name: String,
    /// DSN of this database (server DSN + `/name`).
    pub dsn: String,
    pub pool: MySqlPool,
}

impl TestDb {
    /// Creates an empty database (no extension installed).
    pub async fn empty() -> TestDb {
        let server = server_dsn();
        let name = format!("orbit_t_{}", hex::encode(rand::random::<[u8; 6]>()));
        let mut admin = MySqlConnection::connect(&server)
            .await
            .unwrap_or_else(|e| panic!("test MariaDB at {server} is not reachable ({e}); start it or set ORBIT_TEST_MYSQL_DSN"));
        sqlx::raw_sql(&format!(
            "CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
        ))
        .execute(&mut admin)
        .await
        .expect("create test database");
        let _ = admin.close().await;
        let dsn = format!("{}/{name}", server.trim_end_matches('/'));
        let pool = MySqlPoolOptions::new()
            .max_connections(4)
            .connect(&dsn)
            .await
            .expect("connect to test database");
        TestDb { name, dsn, pool }
    }

    /// Creates a database and installs the extension with `migrate up`.
    pub async fn installed() -> TestDb {
        let db = TestDb::empty().await;
        let mut conn = db.conn().await;
        migrate::up(&mut conn, &migrate::embedded(), |_, _, _| {})
            .await
            .expect("migrate up");
        let _ = conn.close().await;
        db
    }

    /// A dedicated connection to this database (outside the pool).
    pub async fn conn(&self) -> MySqlConnection {
        MySqlConnection::connect(&self.dsn)
            .await
            .expect("connect to test database")
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Drop runs outside async context; use a short-lived runtime on its own thread so it works
        // whether or not the test's runtime is still alive.
        let server = server_dsn();
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async move {
                let mut admin = MySqlConnection::connect(&server).await.ok()?;
                sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS `{name}`"))
                    .execute(&mut admin)
                    .await
                    .ok()?;
                admin.close().await.ok()
            })
        })
        .join();
    }
}
