//! The REST surface beside MCP, for people and scripts: `GET /v1/tools` (JSON, Markdown
//! or HTML), `GET|POST /v1/tools/{key}` (describe, execute), `GET /v1/search`,
//! `GET /v1/whoami`, and MCC's unversioned spellings of the same routes (`/tools`,
//! `/tools/{key}`, `/search`, `/whoami`) as aliases; `GET /v1/audit` (administrators:
//! the audit trail, [`audit`]) has no alias (MCC has no such route). `GET /v1/openapi.json` serves the
//! OpenAPI 3.1 document, generated from the handlers and their types by utoipa.
//!
//! This module owns the routes, their status codes and JSON shapes ([`types`],
//! [`error`]) and the tool list's representations ([`format`]). What a call does is
//! [`crate::calls`]' — the same pipeline MCP runs: authentication ([`crate::auth`]'s
//! middleware, so `Authorization: Bearer` and `X-API-Key`), RBAC, validation, rate
//! limits, session context, the concurrency limiter, the response size limit, metrics
//! and the audit trail. What REST does differently: a key the caller may not run is a
//! 404 exactly like an unknown key, missing params are a 400 (no questions), and a call that
//! needs approval is a 428 with a ticket to answer with ([`approval`]). What
//! keeps browsers out is [`guard`] (rmcp's Host/Origin rules for `/mcp`, JSON POSTs).

pub mod approval;
pub mod audit;
pub mod error;
pub mod format;
pub mod guard;
pub mod handlers;
pub mod types;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::middleware;
use axum::response::IntoResponse;
use utoipa::openapi::OpenApi as Document;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{self, Authenticator};
use crate::calls::Shared;
use crate::config::ServerSettings;
use handlers::RestState;

/// Where the versioned routes live; the same routes without it are MCC's spellings.
pub const PREFIX: &str = "/v1";

/// Where the OpenAPI document is served (without authentication).
pub const OPENAPI_PATH: &str = "/v1/openapi.json";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "MCC gateway REST API",
        description = "The REST surface beside MCP: the caller's tools, search, whoami and execute, \
                       with the same authentication, RBAC, rate limits, sessions and audit trail as \
                       MCP. See docs/rest.md."
    ),
    modifiers(&Credentials),
    security(("bearer" = []), ("api_key" = [])),
    tags(
        (name = "tools", description = "List, describe and run the caller's tools"),
        (name = "search", description = "Find tools by what they do"),
        (name = "identity", description = "Who the caller is"),
        (name = "audit", description = "The audit trail (members of the admin group)"),
        (name = "meta", description = "This document"),
    )
)]
struct ApiDoc;

/// The credentials [`crate::auth`] takes: a bearer token (JWT, API key or ServiceAccount
/// token, by `auth.backend`) or an API key in `X-API-Key`.
struct Credentials;

impl Modify for Credentials {
    fn modify(&self, openapi: &mut Document) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A JWT, an API key (mcc_…) or a Kubernetes ServiceAccount token, as auth.backend says",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-API-Key",
                "An API key (mcc_…), on the api_key and kubernetes backends",
            ))),
        );
    }
}

/// The document's own route.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    tag = "meta",
    security(()),
    responses((status = 200, description = "This OpenAPI 3.1 document", content_type = "application/json")),
)]
async fn openapi_json(State(doc): State<Arc<str>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        doc.to_string(),
    )
}

/// The route template a REST request path belongs to, in its `/v1` form (MCC's aliases
/// count as their `/v1` twins), for the `path` label of the HTTP metrics; `None` for a
/// path that is not a REST route.
pub fn route_label(path: &str) -> Option<&'static str> {
    if path == "/v1/audit" {
        return Some("/v1/audit");
    }
    let path = path.strip_prefix(PREFIX).unwrap_or(path);
    match path {
        "/tools" => Some("/v1/tools"),
        "/search" => Some("/v1/search"),
        "/whoami" => Some("/v1/whoami"),

        "/openapi.json" => Some(OPENAPI_PATH),
        p if p
            .strip_prefix("/tools/")
            .is_some_and(|k| !k.is_empty() && !k.contains('/')) =>
        {
            Some("/v1/tools/{key}")
        }
        _ => None,
    }
}

/// The authenticated routes (paths without [`PREFIX`]) and their operations.
fn api() -> (Router<RestState>, Document) {
    OpenApiRouter::new()
        .routes(routes!(handlers::list_tools))
        .routes(routes!(handlers::get_tool, handlers::execute_tool))
        .routes(routes!(handlers::search_tools))
        .routes(routes!(handlers::whoami))
        .split_for_parts()
}

/// The authenticated routes served only under [`PREFIX`] (paths without it).
fn api_v1_only() -> (Router<RestState>, Document) {
    OpenApiRouter::new()
        .routes(routes!(audit::read_audit))
        .split_for_parts()
}

/// The OpenAPI document of every REST route: the versioned ones, MCC's aliases (marked
/// deprecated, operation ids prefixed `mcc_`) and the document's own route.
pub fn document() -> Document {
    let (_, api) = api();
    let (_, v1_only) = api_v1_only();
    let (_, own) = OpenApiRouter::<Arc<str>>::new()
        .routes(routes!(openapi_json))
        .split_for_parts();
    let mut doc = ApiDoc::openapi().merge_from(own);
    let components = doc.components.get_or_insert_with(Default::default);
    for part in [&api, &v1_only] {
        if let Some(c) = &part.components {
            components.schemas.extend(c.schemas.clone());
        }
    }
    for (path, item) in v1_only.paths.paths {
        doc.paths.paths.insert(format!("{PREFIX}{path}"), item);
    }
    for (path, item) in api.paths.paths {
        let mut alias = item.clone();
        for op in operations(&mut alias) {
            op.deprecated = Some(utoipa::openapi::Deprecated::True);
            op.operation_id = op.operation_id.take().map(|id| format!("mcc_{id}"));
            op.description = Some(format!(
                "MCC's spelling of `{PREFIX}{path}`. {}",
                op.description.take().unwrap_or_default()
            ));
        }
        doc.paths.paths.insert(format!("{PREFIX}{path}"), item);
        doc.paths.paths.insert(path, alias);
    }
    doc
}

fn operations(
    item: &mut utoipa::openapi::PathItem,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ]
    .into_iter()
    .filter_map(Option::as_mut)
}

/// The REST routes: behind `server`'s Host and Origin allow-lists ([`guard`]) and
/// `authenticator` (as `/mcp` is), bodies up to `server.max_request_body` bytes; the
/// OpenAPI document needs no credential.
pub fn router(
    shared: Arc<Shared>,
    authenticator: Authenticator,
    server: &ServerSettings,
) -> Router {
    let guard = guard::Guard {
        allowed_hosts: server.allowed_hosts.clone().into(),
        allowed_origins: server.allowed_origins.clone().into(),
    };
    let (api, _) = api();
    let (v1_only, _) = api_v1_only();
    let doc: Arc<str> = match serde_json::to_string_pretty(&document()) {
        Ok(text) => text.into(),
        Err(e) => {
            format!("{{\"error\": \"the OpenAPI document could not be written: {e}\"}}").into()
        }
    };
    let authenticated = Router::new()
        .nest(PREFIX, api.clone().merge(v1_only))
        .merge(api)
        .layer(DefaultBodyLimit::max(server.max_request_body))
        .layer(middleware::from_fn_with_state(
            authenticator,
            auth::authenticate_request,
        ))
        .with_state(shared);
    Router::new()
        .route(OPENAPI_PATH, axum::routing::get(openapi_json))
        .with_state(doc)
        .merge(authenticated)
        .layer(middleware::from_fn_with_state(guard, guard::check))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_label_routes_not_keys() {
        assert_eq!(
            route_label("/v1/tools/public.echo"),
            Some("/v1/tools/{key}")
        );
        assert_eq!(route_label("/tools/admin.shell"), Some("/v1/tools/{key}"));
        assert_eq!(route_label("/search"), Some("/v1/search"));
        assert_eq!(route_label("/v1/openapi.json"), Some(OPENAPI_PATH));
        assert_eq!(route_label("/v1/audit"), Some("/v1/audit"));
        assert_eq!(route_label("/openapi.json"), Some(OPENAPI_PATH));
        for other in [
            "/v1/tools/a/b",
            "/v1",
            "/v1/nothing",
            "/tools/",
            "/mcp",
            "/audit",
        ] {
            assert_eq!(route_label(other), None, "{other}");
        }
    }

    #[test]
    fn the_document_has_every_route_versioned_and_as_mccs_alias() {
        let doc = document();
        let paths: Vec<&str> = doc.paths.paths.keys().map(String::as_str).collect();
        for path in [
            "/v1/tools",
            "/v1/tools/{key}",
            "/v1/search",
            "/v1/whoami",
            "/v1/openapi.json",
            "/v1/audit",
            "/tools",
            "/tools/{key}",
            "/search",
            "/whoami",
        ] {
            assert!(paths.contains(&path), "{path} missing from {paths:?}");
        }
        let json = serde_json::to_value(&doc).unwrap();
        assert_eq!(json["openapi"], "3.1.0");
        assert_eq!(json["paths"]["/tools/{key}"]["post"]["deprecated"], true);
        assert_eq!(
            json["paths"]["/v1/tools/{key}"]["post"]["operationId"],
            "execute_tool"
        );
        assert!(json["components"]["schemas"]["ExecuteResult"].is_object());
        assert!(json["components"]["schemas"]["AuditPage"].is_object());
        assert!(
            !paths.contains(&"/audit"),
            "the audit route has no MCC alias"
        );
    }
}
