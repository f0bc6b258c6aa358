//! Operator credentials: queue-list scope, revocation, and what must already exist.

use orbit::db::credentials::NewCredential;
use orbit::db::tasks::TaskFilter;
use orbit::db::DbError;
use orbit::testing::{Fixture, ALL_SCOPES};

fn new_credential(token: &str, queues: &[&str]) -> NewCredential {
    NewCredential {
        application: "app".into(),
        environment: "test".into(),
        namespace: "default".into(),
        queue_ids: queues.iter().map(|q| q.to_string()).collect(),
        token_hash: orbit::auth::token_hash(token).to_vec(),
        token_hint: orbit::auth::token_hint(token),
        scopes: ALL_SCOPES.iter().map(|s| s.to_string()).collect(),
        label: "ops".into(),
    }
}

#[tokio::test]
async fn a_queue_list_restricts_the_credential_to_those_queues() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let q3 = f.queue("q3").await;
    let token = orbit::auth::generate_token();
    let created =
        f.db.credential_create(&new_credential(&token, &[&f.queue_id, &q2, &q2]))
            .await
            .unwrap();
    assert_eq!(created.application_id, f.application_id);
    assert_eq!(created.namespace_id, f.namespace_id);
    let hash = orbit::auth::token_hash(&token);

    let listed =
        f.db.task_submit(&hash, "a", &f.task(&q2, ""))
            .await
            .unwrap();
    assert!(!listed.replayed);
    f.db.task_submit(&hash, "b", &f.task(&f.queue_id, "k"))
        .await
        .unwrap();
    let err =
        f.db.task_submit(&hash, "c", &f.task(&q3, ""))
            .await
            .unwrap_err();
    assert!(matches!(err, DbError::PermissionDenied(_)), "{err:?}");
    // Creating a queue needs the whole namespace.
    assert!(matches!(
        f.db.queue_create(&hash, None, "q4", None, None)
            .await
            .unwrap_err(),
        DbError::PermissionDenied(_)
    ));
    let queues: Vec<String> =
        f.db.queue_list(&hash, 100, None)
            .await
            .unwrap()
            .into_iter()
            .map(|q| q.id)
            .collect();
    let mut expected = vec![f.queue_id.clone(), q2.clone()];
    expected.sort();
    assert_eq!(queues, expected, "a queue listed twice is granted once");

    // '[]' = every queue of the namespace, present and future.
    let all = orbit::auth::generate_token();
    f.db.credential_create(&new_credential(&all, &[]))
        .await
        .unwrap();
    let all = orbit::auth::token_hash(&all);
    f.db.task_submit(&all, "d", &f.task(&q3, "")).await.unwrap();
    let q5 =
        f.db.queue_create(&all, None, "q5", None, None)
            .await
            .unwrap();
    f.db.task_submit(&all, "e", &f.task(&q5.id, ""))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_revoked_credential_is_unauthenticated() {
    let f = Fixture::new().await;
    let token = orbit::auth::generate_token();
    let created =
        f.db.credential_create(&new_credential(&token, &[]))
            .await
            .unwrap();
    let hash = orbit::auth::token_hash(&token);
    f.db.task_submit(&hash, "a", &f.task(&f.queue_id, ""))
        .await
        .unwrap();
    let s = f.session("w", true, &[&f.queue_id]).await;
    let sess =
        f.db.session_open(
            &hash,
            &orbit::db::workers::SessionOpen {
                worker_id: "revoked-worker".into(),
                capacity: 4,
                queue_ids: vec![f.queue_id.clone()],
                ..Default::default()
            },
        )
        .await
        .unwrap();

    let revoked = f.db.credential_revoke(created.credential_id).await.unwrap();
    assert_eq!(revoked.credential_id, created.credential_id);
    let again = f.db.credential_revoke(created.credential_id).await.unwrap();
    assert_eq!(
        again, revoked,
        "idempotent: the first revocation time stays"
    );

    for err in [
        f.db.task_submit(&hash, "b", &f.task(&f.queue_id, ""))
            .await
            .unwrap_err(),
        f.db.task_list(&hash, &TaskFilter::default(), 10, None)
            .await
            .unwrap_err(),
        f.db.queue_list(&hash, 10, None).await.unwrap_err(),
    ] {
        assert!(matches!(err, DbError::Unauthenticated(_)), "{err:?}");
    }
    // Its open session gets no more grants; other credentials are untouched.
    assert!(f
        .db
        .task_claim(sess.session_id, 10, 30_000)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(f.db.task_claim(s, 10, 30_000).await.unwrap().len(), 1);
    assert!(matches!(
        f.db.credential_revoke(987_654).await.unwrap_err(),
        DbError::NotFound(_)
    ));
}

#[tokio::test]
async fn unknown_names_and_queues_are_not_found() {
    let f = Fixture::new().await;
    let other = orbit::auth::generate_token();
    let theirs =
        f.db.admin_bootstrap(&orbit::db::queues::Bootstrap {
            application: "other-app".into(),
            environment: "test".into(),
            namespace: "default".into(),
            queue: "theirs".into(),
            token_hash: orbit::auth::token_hash(&other).to_vec(),
            token_hint: orbit::auth::token_hint(&other),
            scopes: vec!["tasks:read".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let token = orbit::auth::generate_token();
    let cases: Vec<(NewCredential, &str)> = vec![
        (
            NewCredential {
                application: "nope".into(),
                ..new_credential(&token, &[])
            },
            "application",
        ),
        (
            NewCredential {
                environment: "prod".into(),
                ..new_credential(&token, &[])
            },
            "environment",
        ),
        (
            NewCredential {
                namespace: "elsewhere".into(),
                ..new_credential(&token, &[])
            },
            "namespace",
        ),
        (new_credential(&token, &[&theirs.queue_id]), "queue"),
        (
            new_credential(&token, &["0123456789abcdef0123456789abcdef"]),
            "queue",
        ),
    ];
    for (c, what) in cases {
        match f.db.credential_create(&c).await.unwrap_err() {
            DbError::NotFound(m) => assert!(m.starts_with(what), "{what}: {m}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    let invalid = [
        NewCredential {
            scopes: vec!["tasks:everything".into()],
            ..new_credential(&token, &[])
        },
        NewCredential {
            token_hash: vec![1, 2, 3],
            ..new_credential(&token, &[])
        },
    ];
    for c in invalid {
        assert!(matches!(
            f.db.credential_create(&c).await.unwrap_err(),
            DbError::InvalidArgument(_)
        ));
    }
    let bad_json = sqlx::query(
        "CALL orbit_credential_create('app', 'test', 'default', '{}', ?, 'x', 'tasks:read', '')",
    )
    .bind(&orbit::auth::token_hash(&token)[..])
    .fetch_all(f.db.pool())
    .await
    .unwrap_err();
    assert!(
        bad_json.to_string().contains("INVALID_ARGUMENT"),
        "{bad_json}"
    );
    // Nothing was created by the refused calls; a token hash is used once.
    f.db.credential_create(&new_credential(&token, &[]))
        .await
        .unwrap();
    assert!(matches!(
        f.db.credential_create(&new_credential(&token, &[]))
            .await
            .unwrap_err(),
        DbError::StateConflict(_)
    ));
}
