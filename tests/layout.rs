//! Module dependencies that must stay one-way (CONTRIBUTING, issue 30): the scheduler and the
//! session wake-ups know nothing of the HTTP layer that starts them, and the OpenAPI document is
//! assembled from route modules that do not import it back.

fn source(path: &str) -> String {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The lines of `path` (comments left out) that mention `needle`.
fn mentions(path: &str, needle: &str) -> Vec<String> {
    source(path)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_scheduler_and_the_wake_ups_import_nothing_from_http() {
    for path in ["src/scheduler.rs", "src/dispatch.rs"] {
        for needle in ["crate::http", "super::http", "http::"] {
            assert_eq!(
                mentions(path, needle),
                Vec::<String>::new(),
                "{path}: {needle}"
            );
        }
    }
}

#[test]
fn openapi_and_the_route_modules_do_not_import_each_other() {
    for path in ["src/http/tasks.rs", "src/http/queues.rs"] {
        assert_eq!(
            mentions(path, "super::openapi"),
            Vec::<String>::new(),
            "{path} imports the OpenAPI module"
        );
    }
    for needle in [
        "super::tasks",
        "super::queues",
        "crate::http::tasks",
        "crate::http::queues",
    ] {
        assert_eq!(
            mentions("src/http/openapi.rs", needle),
            Vec::<String>::new(),
            "openapi.rs: {needle}"
        );
    }
}
