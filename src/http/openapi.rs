//! The OpenAPI document, generated from the handlers' annotations (utoipa) and served at
//! `/v1/openapi.json`. The routes' modules name their own envelope types (the concrete
//! `{"data": …, "request_id": …}` shape a route returns) and import nothing from here.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(title = "Orbit", description = "Durable keyed-concurrency tasks on MySQL/MariaDB stored procedures. \
        Every endpoint except /healthz, /readyz and /v1/openapi.json requires `Authorization: Bearer <token>` (/metrics: a credential with the metrics:read scope)."),
    modifiers(&BearerAuth),
    tags(
        (name = "tasks", description = "Submit and follow tasks"),
        (name = "queues", description = "Queues of a namespace"),
        (name = "keys", description = "The key inspector: who holds a key, its token, who waits (read-only)"),
        (name = "attempts", description = "Attempt history, with concurrency tokens (grants nothing)"),
        (name = "plans", description = "Schedules that fire tasks"),
        (name = "workers", description = "The worker WebSocket (docs/protocol.md)"),
        (name = "operations", description = "Health, readiness, metrics, this document"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}
