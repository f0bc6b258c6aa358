//! Schema rules checked on an installed database: comments everywhere, no foreign keys, exact-byte keys.

use orbit::testing::TestDb;

#[tokio::test]
async fn no_foreign_keys_and_a_comment_on_every_table_and_column() {
    let db = TestDb::installed().await;
    let fks: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.referential_constraints WHERE constraint_schema = DATABASE()",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(fks, 0);
    let bare_tables: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = DATABASE() AND (table_comment IS NULL OR table_comment = '')",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert!(
        bare_tables.is_empty(),
        "tables without a comment: {bare_tables:?}"
    );
    let bare_columns: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(CONCAT(table_name, '.', column_name) AS CHAR) FROM information_schema.columns WHERE table_schema = DATABASE() AND (column_comment IS NULL OR column_comment = '')",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert!(
        bare_columns.is_empty(),
        "columns without a comment: {bare_columns:?}"
    );
    let engines: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = DATABASE() AND engine <> 'InnoDB'",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert!(engines.is_empty(), "non-InnoDB tables: {engines:?}");
}

/// The key columns compare by exact bytes: no case folding, no normalisation, no PAD SPACE.
#[tokio::test]
async fn concurrency_keys_compare_by_exact_bytes() {
    let db = TestDb::installed().await;
    let keys = ["object/A", "object/a", "\u{e9}", "e\u{301}", "k", "k "];
    for key in keys {
        sqlx::query("INSERT INTO orbit_resource (namespace_id, concurrency_key, created_at, updated_at) VALUES (1, ?, NOW(6), NOW(6))")
            .bind(key)
            .execute(&db.pool)
            .await
            .unwrap_or_else(|e| panic!("{key:?} collided with another key: {e}"));
    }
    for key in keys {
        let stored: Vec<Vec<u8>> = sqlx::query_scalar("SELECT concurrency_key FROM orbit_resource WHERE namespace_id = 1 AND concurrency_key = ?")
            .bind(key)
            .fetch_all(&db.pool)
            .await
            .unwrap();
        assert_eq!(stored, vec![key.as_bytes().to_vec()], "lookup of {key:?}");
    }
    // The unique key still refuses a true duplicate.
    let dup = sqlx::query("INSERT INTO orbit_resource (namespace_id, concurrency_key, created_at, updated_at) VALUES (1, 'k', NOW(6), NOW(6))")
        .execute(&db.pool)
        .await;
    assert!(dup.is_err(), "an exact duplicate key must be refused");
}

#[tokio::test]
async fn key_columns_hold_191_four_byte_characters() {
    let db = TestDb::installed().await;
    let key = "\u{1F600}".repeat(191);
    sqlx::query("INSERT INTO orbit_resource (namespace_id, concurrency_key, created_at, updated_at) VALUES (1, ?, NOW(6), NOW(6))")
        .bind(&key)
        .execute(&db.pool)
        .await
        .unwrap();
    let back: Vec<u8> =
        sqlx::query_scalar("SELECT concurrency_key FROM orbit_resource WHERE namespace_id = 1")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(back, key.as_bytes());
}
