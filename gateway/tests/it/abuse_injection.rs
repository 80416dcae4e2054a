//! Abuse suite, injection: a caller with a valid credential sends hostile param values
//! through `execute` of a real gateway (real HTTP, sessions in the real Redis) and real
//! subprocesses (`/bin/sh`, `printf`, `curl` against a local HTTP server that records
//! every request). Whatever the value, it reaches the process as data: one argument for
//! exec's `{{ v | quote }}`, one request with the value percent-encoded in its URL part for
//! `curl:` (shorthand URL and flag-style, with and without `| quote`), and no injected
//! command ever runs (a marker file is never created). Also: an overridden param ignores
//! the caller's value without a word, an unknown param is still an error.

use crate::mcp_support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use mcp_support::*;
use serde_json::{Value, json};

/// A local HTTP server that answers `ok` to everything and records each request head.
fn recorder() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 1 << 20 {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            log.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head).into_owned());
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    (port, seen)
}

/// The tool file (JSON is YAML): every template form a value can be placed with.
fn tools(port: u16, out_dir: &Path) -> Value {
    let base = format!("http://127.0.0.1:{port}");
    let v = json!([{"name": "v", "type": "str", "required": true}]);
    json!({"tools": [
        {"name": "exec_quoted", "params": v, "exec": "printf '%s\\0' {{ v | quote }}"},
        {"name": "exec_raw", "params": v, "exec": "printf '%s\\0' {{ v }}"},
        {"name": "curl_plain", "params": v, "curl": format!("{base}/p/{{{{ v }}}}?q={{{{ v }}}}")},
        {"name": "curl_quoted", "params": v,
         "curl": format!("{base}/p/{{{{ v | quote }}}}?q={{{{ v | quote }}}}")},
        {"name": "curl_flags", "params": v, "env": {"API_TOKEN": "tok-123"},
         "curl": format!("-H \"X-Token: $$API_TOKEN\" -G --data-urlencode \"q={{{{ v }}}}\" {base}/f/{{{{ v | quote }}}}")},
        {"name": "forced", "params": [
            {"name": "secret", "type": "str", "override": "forced-value"},
            {"name": "q", "type": "str"}],
         "exec": format!("printf '%s|%s' {{{{ secret | quote }}}} {{{{ q | quote }}}}; touch {}/forced-ran", out_dir.display())},
    ]})
}

/// Values an attacker would send; `MARK` is replaced by the marker file's path.
const HOSTILE: &[&str] = &[
    "x'; touch MARK; echo '",
    "x\"; touch MARK; echo \"",
    "$(touch MARK)",
    "`touch MARK`",
    "a\nb; touch MARK",
    "; touch MARK",
    "&& touch MARK",
    "| touch MARK #",
    "a b  c",
    "?&#/%20",
    "../../admin",
    "{a,b}[1-3]",
    "$API_TOKEN ${HOME} ~",
    "' \" \\",
    "",
    "-o/tmp/x",
    "é 日本",
];

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).expect("ascii hex");
            out.push(u8::from_str_radix(hex, 16).expect("hex"));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("utf-8")
}

/// Runs `key` with `v` and returns the result text and the requests it caused.
async fn execute(
    client: &Client,
    seen: &Mutex<Vec<String>>,
    key: &str,
    v: &str,
) -> (String, Vec<String>) {
    let before = seen.lock().unwrap().len();
    let r = call(client, "execute", json!({"key": key, "params": {"v": v}})).await;
    // curl has exited before the result came back, so its request is recorded.
    let requests = seen.lock().unwrap()[before..].to_vec();
    (text(&r), requests)
}

/// The request target (`/path?query`) of a recorded request head.
fn target(head: &str) -> &str {
    let line = head.lines().next().expect("a request line");
    let target = line
        .strip_prefix("GET ")
        .and_then(|l| l.strip_suffix(" HTTP/1.1"))
        .unwrap_or_else(|| panic!("request line {line:?}"));
    assert!(!target.contains([' ', '\'', '"', '#']), "{line:?}");
    target
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_values_reach_tools_as_data() {
    let (port, seen) = recorder();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(
        dir.path().join("tools").join("tools.yaml"),
        tools(port, dir.path()).to_string(),
    )
    .unwrap();
    let s = settings(dir.path(), "dev-admin", Some(&redis_url()));
    let server = start_with(s, dir).await;
    let client = legacy(&server.url, TestClient::plain()).await;

    for raw in HOSTILE {
        let v = raw.replace("MARK", &marker.display().to_string());
        let v = v.as_str();

        // exec with `| quote` (the documented safe pattern): exactly one argument, the value.
        let (out, _) = execute(&client, &seen, "exec_quoted", v).await;
        assert_eq!(out, format!("{v}\0"), "exec_quoted {v:?}");

        // The shorthand URL, with and without `| quote`: one request, the value encoded in
        // the path (a `/` kept, dot segments encoded) and in the query, no literal quotes.
        for key in ["curl_plain", "curl_quoted"] {
            let (out, requests) = execute(&client, &seen, key, v).await;
            assert_eq!(out, "ok", "{key} {v:?}");
            assert_eq!(requests.len(), 1, "{key} {v:?}: {requests:?}");
            let t = target(&requests[0]);
            let (path, query) = t.split_once('?').unwrap_or_else(|| panic!("{t}"));
            let path = path.strip_prefix("/p/").unwrap_or_else(|| panic!("{t}"));
            assert_eq!(percent_decode(path), v, "{key}: {t}");
            assert!(!path.split('/').any(|s| s == ".."), "{key}: {t}");
            let q = query.strip_prefix("q=").unwrap_or_else(|| panic!("{t}"));
            assert!(!q.contains(['&', '=', '?', '/']), "{key}: {t}");
            assert_eq!(percent_decode(q), v, "{key}: {t}");
        }

        // Flag-style: the author's `$API_TOKEN` still expands (the shell is kept), the value
        // in a double-quoted flag and in the URL stays data.
        let (out, requests) = execute(&client, &seen, "curl_flags", v).await;
        assert_eq!(out, "ok", "curl_flags {v:?}");
        assert_eq!(requests.len(), 1, "curl_flags {v:?}: {requests:?}");
        assert!(
            requests[0].contains("\r\nX-Token: tok-123\r\n"),
            "{}",
            requests[0]
        );
        let t = target(&requests[0]);
        let (path, query) = t.split_once('?').unwrap_or_else(|| panic!("{t}"));
        assert_eq!(percent_decode(path.strip_prefix("/f/").unwrap()), v, "{t}");
        // curl's --data-urlencode writes a space as `+` (form encoding).
        let q = query.strip_prefix("q=").unwrap().replace('+', " ");
        assert_eq!(percent_decode(&q), v, "{t}");

        assert!(!marker.exists(), "an injected command ran for {v:?}");
    }

    // exec without `| quote` is the author's shell text, as in MCC (the documented unsafe
    // form): the shell splits words and runs substitutions the value holds.
    let (out, _) = execute(&client, &seen, "exec_raw", "a b").await;
    assert_eq!(out, "a\0b\0");
    let (out, _) = execute(&client, &seen, "exec_raw", "$(echo substituted)").await;
    assert_eq!(out, "substituted\0");

    // A NUL: percent-encoded in a URL; refused before anything starts everywhere else.
    let (out, requests) = execute(&client, &seen, "curl_plain", "a\0b").await;
    assert_eq!((out.as_str(), requests.len()), ("ok", 1));
    assert!(target(&requests[0]).starts_with("/p/a%00b?q=a%00b"));
    for key in ["exec_quoted", "curl_flags"] {
        let before = seen.lock().unwrap().len();
        let r = call(
            &client,
            "execute",
            json!({"key": key, "params": {"v": "a\0b"}}),
        )
        .await;
        assert_eq!(r.is_error, Some(true), "{key}");
        assert!(text(&r).contains("NUL byte"), "{key}: {}", text(&r));
        assert_eq!(seen.lock().unwrap().len(), before, "{key} sent no request");
    }
    // A value too long for one process argument: refused by name, not E2BIG from spawn.
    for key in ["exec_quoted", "curl_flags"] {
        let before = seen.lock().unwrap().len();
        let long = "a".repeat(200_000);
        let r = call(
            &client,
            "execute",
            json!({"key": key, "params": {"v": long}}),
        )
        .await;
        assert_eq!(r.is_error, Some(true), "{key}");
        let t = text(&r);
        // Stopped while rendering (the text bound), or after (curl quoting may lengthen
        // a line); either way by name.
        assert!(
            t.contains("cannot render its command: ")
                && (t.contains("the rendered text passed 131071 bytes")
                    || t.contains("the rendered command line is ")),
            "{key}: {t}"
        );
        assert!(t.contains("MAX_ARG_STRLEN") && t.len() < 400, "{key}: {t}");
        assert_eq!(seen.lock().unwrap().len(), before, "{key} sent no request");
    }
    assert!(!marker.exists());
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overridden_params_ignore_the_callers_value_silently() {
    let (port, _) = recorder();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_path_buf();
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(
        dir.path().join("tools").join("tools.yaml"),
        tools(port, &out_dir).to_string(),
    )
    .unwrap();
    let s = settings(dir.path(), "dev-admin", Some(&redis_url()));
    let server = start_with(s, dir).await;
    let client = legacy(&server.url, TestClient::plain()).await;

    // As MCC: the forced value wins, no error, nothing that names the hidden param.
    for mine in [
        json!("$(touch pwned)"),
        json!(5),
        json!(null),
        json!({"a": 1}),
    ] {
        let r = call(
            &client,
            "execute",
            json!({"key": "forced", "params": {"secret": mine, "q": "x"}}),
        )
        .await;
        assert_eq!(r.is_error, Some(false));
        assert_eq!(text(&r), "forced-value|x", "{mine}");
    }
    // An unknown param is still refused (our documented difference), naming only the
    // params a caller may pass.
    std::fs::remove_file(out_dir.join("forced-ran")).unwrap();
    let r = text(
        &call(
            &client,
            "execute",
            json!({"key": "forced", "params": {"secrt": "x"}}),
        )
        .await,
    );
    assert!(
        r.contains("Extra inputs are not permitted (accepted: q)"),
        "{r}"
    );
    assert!(!r.contains("secret"), "{r}");
    assert!(!out_dir.join("forced-ran").exists(), "nothing ran");
    client.cancel().await.unwrap();
    server.stop().await;
}
