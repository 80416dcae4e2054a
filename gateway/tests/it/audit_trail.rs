//! The audit trail end to end, through real MCP clients: one event per search and per
//! execute of every outcome, read back from the Redis stream sink; a stream that cannot
//! be written never fails a call and its events are counted as dropped; the stdout sink
//! of the real binary (JSON lines) beside a JSON log; API-key callers recorded by their
//! public prefix only.

use crate::mcp_support;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

use mcp_support::*;
use serde_json::{Value, json};

fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("mcc-test-audit-{name}-{}-{nanos}", std::process::id())
}

#[tokio::test]
async fn every_search_and_execute_is_one_event_whatever_its_outcome() {
    let stream = unique("outcomes");
    let prefix = unique("outcomes-prefix");
    let mut servers = Vec::new();
    for auth in ["dev-admin", "dev-public"] {
        let dir = tempfile::tempdir().unwrap();
        let mut s = settings(dir.path(), auth, Some(&redis_url()));
        s.session.key_prefix = prefix.clone();
        s.audit.stream = Some(stream.clone());
        s.audit.params = true;
        s.rate_limit.tools = serde_json::from_value(json!({"public.ctx": "1/1h"})).unwrap();
        servers.push(start_with(s, dir).await);
    }
    let alice = stateless(&servers[0].url, TestClient::plain()).await;
    let bob = stateless(&servers[1].url, TestClient::plain()).await;

    let exec = |key: &str, params: Value| json!({"key": key, "params": params});
    call_text(&alice, "search", json!({"query": "echo a message"})).await;
    assert_eq!(
        call_text(
            &alice,
            "execute",
            exec("public.echo", json!({"message": "hi"}))
        )
        .await,
        "hi"
    );
    call(
        &alice,
        "execute",
        exec("admin.shell", json!({"command": "exit 3"})),
    )
    .await;
    call(&alice, "execute", exec("nope.tool", json!({}))).await;
    call(
        &alice,
        "execute",
        exec("public.greet", json!({"name": "x", "times": "many"})),
    )
    .await;
    call(&alice, "execute", exec("public.ctx", json!({}))).await;
    let limited = call(&alice, "execute", exec("public.ctx", json!({}))).await;
    assert!(text(&limited).starts_with("Rate limit exceeded"));
    call(
        &bob,
        "execute",
        exec("admin.shell", json!({"command": "id"})),
    )
    .await;

    let events = audit_events(&stream, 8).await;
    assert_eq!(events.len(), 8, "{events:#?}");
    let find = |outcome: &str| {
        events
            .iter()
            .find(|e| e["event"] == "execute" && e["outcome"] == outcome)
            .unwrap_or_else(|| panic!("no {outcome} event in {events:#?}"))
    };
    for e in &events {
        assert_eq!(e["credential"], "dev", "{e}");
        assert!(e["time"].as_str().unwrap().ends_with('Z'), "{e}");
        assert!(e["duration_ms"].as_f64().unwrap() >= 0.0, "{e}");
        assert!(e.get("key_prefix").is_none(), "{e}");
    }
    let search = events.iter().find(|e| e["event"] == "search").unwrap();
    assert_eq!(search["outcome"], "success");
    assert_eq!(search["query"], "echo a message");
    assert!(search["bytes_out"].as_u64().unwrap() > 0);

    let ok = find("success");
    assert_eq!(ok["event"], "execute");
    assert_eq!(ok["user"], "alice");
    assert_eq!(ok["tool"], "public.echo");
    assert_eq!(ok["exit_code"], 0);
    assert_eq!(ok["bytes_out"], 2);
    assert_eq!(ok["params"], json!({"message": "hi"}));

    let failed = find("failure");
    assert_eq!(failed["tool"], "admin.shell");
    assert_eq!(failed["exit_code"], 3);
    assert_eq!(failed["params"], json!({"command": "exit 3"}));

    assert_eq!(find("unknown")["tool"], "nope.tool");
    let invalid = find("invalid");
    assert_eq!(invalid["tool"], "public.greet");
    assert!(invalid.get("exit_code").is_none());
    let refused = find("rate_limited");
    assert_eq!(refused["tool"], "public.ctx");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .starts_with("Rate limit exceeded for public.ctx — retry in "),
        "{refused}"
    );
    let denied = find("unauthorized");
    assert_eq!(denied["user"], "bob");
    assert_eq!(denied["tool"], "admin.shell");
    assert!(denied.get("params").is_none(), "{denied}");

    for s in servers {
        s.stop().await;
    }
}

#[tokio::test]
async fn a_stream_that_cannot_be_written_fails_no_call_and_counts_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path(), "dev-admin", None);
    s.audit.stream = Some("mcc:audit".into());
    s.audit.redis_url = Some(format!("redis://127.0.0.1:{}", replica::free_port()));
    let server = start_with(s, dir).await;
    let client = stateless(&server.url, TestClient::plain()).await;
    let started = std::time::Instant::now();
    for i in 0..5 {
        let message = format!("m{i}");
        let out = call_text(
            &client,
            "execute",
            json!({"key": "public.echo", "params": {"message": message}}),
        )
        .await;
        assert_eq!(out, message);
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "calls waited for the sink"
    );
    let wanted = r#"mcc_audit_events_dropped_total{sink="redis",reason="write_error"} 5"#;
    for _ in 0..100 {
        if server.gateway_shared.metrics.render().contains(wanted) {
            server.stop().await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "dropped events not counted:\n{}",
        server.gateway_shared.metrics.render()
    );
}

#[tokio::test]
async fn the_binary_writes_events_to_stdout_and_its_log_as_json() {
    let dir = tempfile::tempdir().unwrap();
    settings(dir.path(), "dev-admin", None); // writes the tool and users files
    let port = replica::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcc-gateway"))
        .arg("serve")
        .env_remove("REDIS_URL")
        .env("MCC_TOOL_FILES", dir.path().join("tools"))
        .env("MCC_USERS_FILE", dir.path().join("users.yaml"))
        .env("MCC_SERVER__PORT", port.to_string())
        .env("MCC_LOG__FORMAT", "json")
        .env("MCC_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out_tx, out_rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = out_tx.send(line);
        }
    });
    let (err_tx, err_rx) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = err_tx.send(line);
        }
    });
    let url = format!("http://127.0.0.1:{port}/mcp");
    let http = mcp_support::http_client();
    let mut ready = false;
    for _ in 0..300 {
        if let Ok(r) = http
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .await
            && r.status().is_success()
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "gateway never became ready");
    let client = stateless(&url, TestClient::plain()).await;
    call_text(
        &client,
        "execute",
        json!({"key": "public.echo", "params": {"message": "to stdout"}}),
    )
    .await;
    let event: Value = loop {
        let line = out_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("an audit line on stdout");
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if v["event"] == "execute" {
            break v;
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(event["tool"], "public.echo");
    assert_eq!(event["outcome"], "success");
    assert_eq!(event["user"], "alice");
    assert!(event.get("params").is_none(), "params are off by default");
    let log: Vec<String> = err_rx.try_iter().collect();
    assert!(!log.is_empty());
    for line in &log {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v.get("level").is_some(), "{line}");
    }
}

#[tokio::test]
async fn api_key_callers_are_recorded_by_their_public_prefix_only() {
    use mcc_gateway::auth::api_key;
    use mcc_gateway::auth::{AuthSettings, Authenticator, Directory, SharedDirectory, UserEntry};
    let key = api_key::mint(None).unwrap();
    let users = SharedDirectory::new(
        Directory::new(vec![UserEntry {
            user: mcc_catalog::User {
                username: "alice".into(),
                ..Default::default()
            },
            api_keys: vec![key.entry.clone()],
            ..UserEntry::default()
        }])
        .unwrap(),
    );
    let auth = Authenticator::new(
        &AuthSettings {
            backend: "api_key".into(),
            ..AuthSettings::default()
        },
        users,
    )
    .unwrap();
    let mut headers = http::HeaderMap::new();
    headers.insert("x-api-key", key.raw.expose().parse().unwrap());
    let identity = auth.authenticate(&headers).await.unwrap();
    let event = mcc_gateway::audit::AuditEvent::new("execute", &identity);
    let prefix = mcc_catalog::apikey::prefix_of(key.raw.expose()).unwrap();
    assert_eq!(event.credential, "api_key");
    assert_eq!(event.key_prefix, Some(format!("mcc_{prefix}")));
    let text = serde_json::to_string(&event).unwrap();
    let secret = key.raw.expose().rsplit('_').next().unwrap();
    assert!(!text.contains(secret), "{text}");
}
