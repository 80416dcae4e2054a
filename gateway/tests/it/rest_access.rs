//! Who may use the REST surface and what it documents, against real gateways: credentials
//! are required as on `/mcp` (`Authorization: Bearer` or `X-API-Key`), anonymous callers
//! see public tools and are nobody, and the OpenAPI document covers every route the REST
//! router serves, every documented route answers, and the document validates as OpenAPI
//! 3.1 (with `openapi-spec-validator` when Python has it; SKIPPED loudly otherwise); a
//! web page cannot drive the routes through a browser (Host, Origin, JSON POSTs).

use crate::mcp_support;
use crate::rest_support;

use mcp_support::*;
use reqwest::StatusCode;
use rest_support::*;
use serde_json::Value;

#[tokio::test]
async fn credentials_are_required_as_on_mcp() {
    let key = mcc_gateway::auth::api_key::mint(None).unwrap();
    let users = (
        "users.yaml",
        users_file(&[("bob", &["public", "ops"], &[&key])]),
    );
    let server = start_configured("api_key", Some(&redis_url()), &[users], |_| {}).await;
    let http = http_client();
    for path in [
        "/v1/tools",
        "/v1/whoami",
        "/tools",
        "/v1/search?q=echo",
        "/v1/tools/public.echo",
    ] {
        let resp = http
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{path}");
        assert!(resp.headers().contains_key("www-authenticate"), "{path}");
    }
    let resp = post_body(&server.base, "/v1/tools/public.echo", r#"{"message": "x"}"#).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let bad = http
        .get(format!("{}/v1/whoami", server.base))
        .header("x-api-key", "mcc_000000000000_nope")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::UNAUTHORIZED);
    for (name, value) in [
        ("x-api-key", key.raw.expose().to_owned()),
        ("authorization", format!("Bearer {}", key.raw.expose())),
    ] {
        let me: Value = http
            .get(format!("{}/v1/whoami", server.base))
            .header(name, value)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(me["username"], "bob", "{name}");
    }
    // The document is open to all.
    let doc = http
        .get(format!("{}/v1/openapi.json", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(doc.status(), StatusCode::OK);
    server.stop().await;
}

#[tokio::test]
async fn anonymous_callers_see_public_tools_and_are_nobody() {
    let server = start_configured("api_key", Some(&redis_url()), &[], |s| {
        s.auth.allow_anonymous = true;
    })
    .await;
    let (status, list) = get(&server.base, "/v1/tools").await;
    assert_eq!(status, StatusCode::OK);
    let keys: Vec<&str> = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["public.ctx", "public.echo", "public.greet"]);
    let (status, body) = get(&server.base, "/v1/whoami").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"], "not_authenticated");
    server.stop().await;
}

/// Every (method, path) of the document, with `{key}` filled in.
fn operations(doc: &Value) -> Vec<(String, String)> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            ops.push((method.clone(), path.replace("{key}", "public.echo")));
        }
    }
    ops
}

#[tokio::test]
async fn the_openapi_document_covers_every_route_and_validates() {
    let server = start("dev-public").await;
    let (status, doc) = get(&server.base, "/v1/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0");

    // Every route the REST router serves is in the document...
    let ops = operations(&doc);
    for (method, path) in [
        ("get", "/v1/tools"),
        ("get", "/v1/tools/public.echo"),
        ("post", "/v1/tools/public.echo"),
        ("get", "/v1/search"),
        ("get", "/v1/whoami"),
        ("get", "/v1/openapi.json"),
        ("get", "/tools"),
        ("get", "/tools/public.echo"),
        ("post", "/tools/public.echo"),
        ("get", "/search"),
        ("get", "/whoami"),
    ] {
        assert!(
            ops.contains(&(method.to_string(), path.to_string())),
            "{method} {path} is not in the document: {ops:?}"
        );
    }
    // ...and everything in the document is served (a route the router lacks would be
    // axum's bare 404 or 405, without our JSON body).
    let http = http_client();
    for (method, path) in &ops {
        let url = format!("{}{path}?q=echo", server.base);
        let req = match method.as_str() {
            "get" => http.get(&url),
            "post" => http
                .post(&url)
                .header("content-type", "application/json")
                .body(r#"{"message": "hi"}"#),
            other => panic!("unexpected method {other}"),
        };
        let resp = req.send().await.unwrap();
        // The audit trail is the admin group's: a public caller is refused with our JSON
        // body (rest/audit.rs), which still proves the route is served.
        let expected = if path == "/v1/audit" {
            StatusCode::FORBIDDEN
        } else {
            StatusCode::OK
        };
        assert_eq!(resp.status(), expected, "{method} {path}");
        assert!(resp.text().await.unwrap().len() > 2, "{method} {path}");
    }
    // Routes that are not the REST surface's stay as they were.
    assert_eq!(get(&server.base, "/healthz").await.0, StatusCode::OK);
    assert_eq!(
        get(&server.base, "/v1/nothing").await.0,
        StatusCode::NOT_FOUND
    );

    // The document validates as OpenAPI 3.1.
    let file = server.dir.path().join("openapi.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let script = "import json, sys\n\
        try:\n    from openapi_spec_validator import validate\n\
        except ImportError:\n    sys.exit(77)\n\
        validate(json.load(open(sys.argv[1])))\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&file)
        .output();
    match out {
        Ok(out) if out.status.code() == Some(77) => eprintln!(
            "SKIPPED: the OpenAPI document was not validated: python3 has no openapi-spec-validator (pip install openapi-spec-validator)"
        ),
        Ok(out) => assert!(
            out.status.success(),
            "the OpenAPI document does not validate:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => eprintln!("SKIPPED: the OpenAPI document was not validated: no python3 ({e})"),
    }
    server.stop().await;
}

#[tokio::test]
async fn a_web_page_cannot_drive_the_rest_routes() {
    let server = start_configured("dev-admin", Some(&redis_url()), &[], |s| {
        s.server.allowed_origins = vec!["https://app.example.com".into()];
    })
    .await;
    let http = http_client();
    let url = format!("{}/v1/tools/public.echo", server.base);
    // A form or text/plain POST needs no CORS preflight: refused before anything runs.
    for simple in ["text/plain", "application/x-www-form-urlencoded"] {
        let resp = http
            .post(&url)
            .header("content-type", simple)
            .body(r#"{"message": "x"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(
            resp.status(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{simple}"
        );
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"], "unsupported_media_type");
    }
    let no_type = http.post(&url).send().await.unwrap();
    assert_eq!(no_type.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    // DNS rebinding: a Host that is not ours.
    let rebound = http
        .get(format!("{}/v1/whoami", server.base))
        .header("host", "evil.example:8000")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), StatusCode::FORBIDDEN);
    let body: Value = rebound.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("server.allowed_hosts"),
        "{body}"
    );
    // A page of another origin; the allowed one gets in.
    let from = |origin: &'static str| {
        http.get(format!("{}/v1/whoami", server.base))
            .header("origin", origin)
            .send()
    };
    assert_eq!(
        from("https://evil.example").await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        from("https://app.example.com").await.unwrap().status(),
        StatusCode::OK
    );
    // Nothing of it was run: no execute was audited or counted.
    let metrics = get_text(&format!("{}/metrics", server.base)).await;
    assert!(!metrics.contains("mcc_tool_calls_total{"), "{metrics}");
    server.stop().await;
}
