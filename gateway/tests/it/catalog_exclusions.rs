//! One bad object never freezes the catalog, through a real gateway in file mode (real
//! python3, real HTTP, rmcp clients): a fn tool whose module is missing is left out and
//! its file-mates are served; API-key records sharing a prefix log no one in while every
//! other key works; a key revoked while a tool is broken (and while a tool file does not
//! even parse) stops working; user and tool swaps never wait for a stuck search index
//! rebuild; `/readyz` and `/metrics` give counts only. The shipped examples load with
//! nothing left out.

use crate::mcp_support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcc_gateway::auth::api_key;
use mcc_gateway::catalog::LiveCatalog;
use mcp_support::*;
use serde_json::{Value, json};

/// A good fn tool, a fn tool whose module exists nowhere (same interpreter batch), and
/// an exec tool, all in group `public`.
fn tools_yaml(modules: &Path) -> String {
    format!(
        "groups: [public]\nx-py: &py\n  cwd: {}\ntools:\n\
         \x20 - fn: good:hello\n    <<: *py\n\
         \x20 - fn: nowhere:missing\n    name: broken\n    <<: *py\n\
         \x20 - name: echo\n    description: Echo a message back.\n    exec: printf '%s' {{{{ message | quote }}}}\n    \
         params:\n      - name: message\n        type: str\n        required: true\n",
        modules.display()
    )
}

/// A gateway (`api_key` auth, memory sessions) over `tools_yaml` and `users`.
async fn start_gateway(users: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let modules = dir.path().join("modules");
    std::fs::create_dir_all(&modules).unwrap();
    std::fs::write(
        modules.join("good.py"),
        "def hello(name: str) -> str:\n    \"\"\"Say hello.\"\"\"\n    return 'hello ' + name\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(dir.path().join("tools/tools.yaml"), tools_yaml(&modules)).unwrap();
    std::fs::write(dir.path().join("users.yaml"), users).unwrap();
    let s = settings(dir.path(), "api_key", None);
    start_with(s, dir).await
}

async fn initialize_status(url: &str, token: &str) -> u16 {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    mcp_support::http_client()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .body(init.to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn get(url: String) -> (u16, String) {
    let r = mcp_support::http_client().get(url).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Polls `check` every 100 ms for up to `secs` seconds.
async fn eventually<F: std::future::Future<Output = bool>>(
    secs: u64,
    check: impl Fn() -> F,
) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_cannot_be_introspected_is_left_out_and_the_rest_served() {
    let key = api_key::mint(None).unwrap();
    let users = users_file(&[("bob", &["public"], &[&key])]);
    let server = start_gateway(&users).await;
    let client = with_token(&server.url, key.raw.expose(), true).await;

    let described = call_text(&client, "describe_tools", json!({})).await;
    assert!(
        described.contains("## public.hello\nSay hello."),
        "{described}"
    );
    assert!(described.contains("## public.echo"), "{described}");
    assert!(!described.contains("broken"), "{described}");
    assert_eq!(
        call_text(
            &client,
            "execute",
            json!({"key": "public.hello", "params": {"name": "ann"}})
        )
        .await,
        "hello ann"
    );
    let missing = call_text(&client, "execute", json!({"key": "public.broken"})).await;
    assert!(missing.contains("public.broken"), "{missing}");
    client.cancel().await.unwrap();

    // Ready, with counts only: no tool key, no introspection output, no user, no key.
    let (status, body) = get(format!("{}/readyz", server.base)).await;
    assert_eq!(status, 200, "{body}");
    let detail: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(detail["catalog"]["tools"], 2, "{detail}");
    assert_eq!(detail["catalog"]["excluded_tools"], 1, "{detail}");
    assert_eq!(detail["catalog"]["excluded_api_keys"], 0, "{detail}");
    assert!(detail["catalog"]["last_error"].is_null(), "{detail}");
    for secret in [
        "nowhere",
        "broken",
        "ModuleNotFound",
        "bob",
        key.entry.prefix.as_str(),
    ] {
        assert!(!body.contains(secret), "/readyz shows {secret}: {body}");
    }
    let (_, metrics) = get(format!("{}/metrics", server.base)).await;
    assert!(
        metrics.contains("mcc_catalog_excluded_tools 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("mcc_catalog_excluded_api_keys 0"),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_records_sharing_a_prefix_are_left_out_and_the_rest_served() {
    let shared = api_key::mint(None).unwrap();
    let own = api_key::mint(None).unwrap();
    // carol's record copies bob's prefix (with another hash): neither logs anyone in.
    let mut copied = api_key::mint(None).unwrap();
    copied.entry.prefix = shared.entry.prefix.clone();
    let users = users_file(&[
        ("bob", &["public"], &[&shared]),
        ("carol", &["public"], &[&copied]),
        ("dave", &["public"], &[&own]),
    ]);
    let server = start_gateway(&users).await;
    assert_eq!(
        initialize_status(&server.url, shared.raw.expose()).await,
        401
    );
    assert_eq!(
        initialize_status(&server.url, copied.raw.expose()).await,
        401
    );
    let client = with_token(&server.url, own.raw.expose(), true).await;
    assert!(
        call_text(&client, "whoami", json!({}))
            .await
            .starts_with("username: dave\n")
    );
    client.cancel().await.unwrap();
    let (status, body) = get(format!("{}/readyz", server.base)).await;
    assert_eq!(status, 200, "{body}");
    let detail: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(detail["catalog"]["excluded_api_keys"], 2, "{detail}");
    assert_eq!(detail["catalog"]["users"], 3, "{detail}");
    assert!(!body.contains(&shared.entry.prefix), "{body}");
    let (_, metrics) = get(format!("{}/metrics", server.base)).await;
    assert!(
        metrics.contains("mcc_catalog_excluded_api_keys 2"),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_while_a_tool_is_broken_stops_working() {
    let key = api_key::mint(None).unwrap();
    let users = users_file(&[("bob", &["public"], &[&key])]);
    let server = start_gateway(&users).await;
    assert_eq!(initialize_status(&server.url, key.raw.expose()).await, 200);

    // The tool file no longer parses: the last good tools stay, and /readyz says where.
    std::fs::write(
        server.tools_file(),
        "tools:\n  - name: x\n    exec: [unclosed\n",
    )
    .unwrap();
    let base = server.base.clone();
    let reported = eventually(10, || {
        let base = base.clone();
        async move {
            let (_, body) = get(format!("{base}/readyz")).await;
            body.contains("tools.yaml")
        }
    })
    .await;
    assert!(reported, "the broken tool file was never reported");

    // Revoke: still applies, with one tool left out and the tool file broken.
    std::fs::write(
        server.dir.path().join("users.yaml"),
        "users:\n  - username: bob\n    groups: [public]\n",
    )
    .unwrap();
    let url = server.url.clone();
    let raw = key.raw.expose().to_owned();
    let refused = eventually(5, || {
        let (url, raw) = (url.clone(), raw.clone());
        async move { initialize_status(&url, &raw).await == 401 }
    })
    .await;
    assert!(
        refused,
        "a revoked key kept working while a tool was broken"
    );
    let (status, body) = get(format!("{}/readyz", server.base)).await;
    assert_eq!(status, 200, "a replica with a catalog stays ready: {body}");
    server.stop().await;
}

/// An OpenAI-compatible embeddings endpoint answering 4-dimensional vectors, which
/// holds every request while `stuck` is set (`held` counts the requests it held).
fn embeddings_server(stuck: Arc<AtomicBool>, held: Arc<AtomicUsize>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = axum::Router::new().route(
                "/v1/embeddings",
                axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
                    let (stuck, held) = (stuck.clone(), held.clone());
                    async move {
                        if stuck.load(Ordering::SeqCst) {
                            held.fetch_add(1, Ordering::SeqCst);
                        }
                        while stuck.load(Ordering::SeqCst) {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        let n = body["input"].as_array().map_or(0, Vec::len);
                        let data: Vec<Value> = (0..n)
                            .map(|i| json!({"index": i, "embedding": [1.0, i as f32, 0.5, 0.25]}))
                            .collect();
                        axum::Json(json!({"data": data}))
                    }
                }),
            );
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{addr}/v1")
}

/// The search index rebuild is stuck on an embeddings endpoint that does not answer: a
/// revocation and a new tool still apply within the reload interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swaps_never_wait_for_a_stuck_search_rebuild() {
    let stuck = Arc::new(AtomicBool::new(false));
    let held = Arc::new(AtomicUsize::new(0));
    let url = embeddings_server(stuck.clone(), held.clone());
    let key = api_key::mint(None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("users.yaml"),
        users_file(&[("bob", &["public"], &[&key])]),
    )
    .unwrap();
    let mut s = settings(dir.path(), "api_key", None);
    s.search.embeddings_url = Some(url);
    s.search.embeddings_model = Some("fake".into());
    let server = start_with(s, dir).await;
    assert_eq!(initialize_status(&server.url, key.raw.expose()).await, 200);

    // From now on every embedding request hangs: a tool edit starts a rebuild that
    // cannot finish (its new description must be embedded).
    stuck.store(true, Ordering::SeqCst);
    let added = format!(
        "{TOOLS}  - name: fresh\n    groups: [public]\n    description: Added while search is stuck.\n    exec: echo fresh\n"
    );
    std::fs::write(server.tools_file(), added).unwrap();
    let base = server.base.clone();
    let generation = || {
        let base = base.clone();
        async move {
            let (_, body) = get(format!("{base}/readyz")).await;
            let v: Value = serde_json::from_str(&body).unwrap();
            v["catalog"]["generation"].as_u64().unwrap_or(0)
        }
    };
    assert!(
        eventually(10, || async { generation().await >= 2 }).await,
        "the new tools were never installed"
    );

    assert!(
        eventually(5, || async { held.load(Ordering::SeqCst) == 1 }).await,
        "the search rebuild never asked for embeddings"
    );

    // A second tool edit and a revocation while that rebuild is still stuck.
    let again = format!(
        "{TOOLS}  - name: fresher\n    groups: [public]\n    description: Added while search is still stuck.\n    exec: echo fresher\n"
    );
    std::fs::write(server.tools_file(), again).unwrap();
    std::fs::write(
        server.dir.path().join("users.yaml"),
        "users:\n  - username: bob\n    groups: [public]\n",
    )
    .unwrap();
    let started = Instant::now();
    let (u, raw) = (server.url.clone(), key.raw.expose().to_owned());
    let refused = eventually(5, || {
        let (u, raw) = (u.clone(), raw.clone());
        async move { initialize_status(&u, &raw).await == 401 }
    })
    .await;
    assert!(refused, "the revocation waited for the search rebuild");
    assert!(
        eventually(5, || async { generation().await >= 3 }).await,
        "the second tool edit waited for the search rebuild"
    );
    assert_eq!(
        held.load(Ordering::SeqCst),
        1,
        "one rebuild, stuck all along (the next waits for it)"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    stuck.store(false, Ordering::SeqCst);
    server.stop().await;
}

/// examples/ and examples/users/users.yaml, as the README runs them (from the repository
/// root): every tool served, nothing left out.
#[test]
fn the_shipped_examples_load_with_nothing_left_out() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    std::env::set_current_dir(root).unwrap();
    let live = LiveCatalog::load(
        vec!["examples/".to_string()],
        Some(root.join("examples/users/users.yaml")),
        mcc_catalog::introspect::Introspector::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let status = live.status();
    assert_eq!(status.excluded_tools, 0, "{status:?}");
    assert_eq!(status.excluded_api_keys, 0, "{status:?}");
    assert!(status.last_error.is_none(), "{status:?}");
    assert_eq!(status.tools, 10, "{status:?}");
    assert!(live.snapshot().tool("osint.stats").is_some());
}
