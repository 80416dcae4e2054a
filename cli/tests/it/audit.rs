//! `mcc audit` and `GET /v1/audit` over a real `mcc-gateway serve` process writing its
//! audit events to a real Redis stream: calls made through the gateway (`mcc tool …
//! --url`), read back by the `mcc` binary from Redis and through the gateway as an
//! admin; filters, the four formats, paging, a non-admin's 403 that tells nothing, and
//! bad filter values refused naming the flag or parameter.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{fails, mcc, ok, root, spawn_gateway};

fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// GET `path` of the gateway with `key`: the status and the JSON body.
fn get(base: &str, path: &str, key: Option<&str>) -> (u16, Value) {
    mcc_gateway::tls::install_crypto_provider();
    let mut request = reqwest::blocking::Client::new().get(format!("{base}{path}"));
    if let Some(k) = key {
        request = request.bearer_auth(k);
    }
    let response = request.send().unwrap();
    let status = response.status().as_u16();
    let body = response.text().unwrap();
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

#[test]
fn reads_the_trail_from_redis_and_through_the_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let stream = format!("mcc-test-cli-audit-{}-{nanos}", std::process::id());
    let users = dir.path().join("users.yaml");
    std::fs::write(
        &users,
        "users:\n  - username: alice\n    groups: [admin]\n  - username: bob\n    groups: [osint]\n",
    )
    .unwrap();
    let users_arg = users.to_str().unwrap();
    let alice = ok(mcc(&["key", "mint", "alice", "--users", users_arg]));
    let bob = ok(mcc(&["key", "mint", "bob", "--users", users_arg]));
    let (alice, bob) = (alice.trim(), bob.trim());
    let public = root().join("examples/public.yaml").display().to_string();
    let gateway = spawn_gateway(&[
        ("MCC_AUTH", "api_key".into()),
        ("MCC_TOOL_FILES", public.clone()),
        ("MCC_USERS_FILE", users.display().to_string()),
        ("REDIS_URL", redis_url()),
        ("MCC_SESSION__KEY_PREFIX", stream.clone()),
        ("MCC_AUDIT__STREAM", stream.clone()),
        ("MCC_AUDIT__STDOUT", "false".into()),
    ]);
    let url = gateway.url.as_str();
    let base = url.trim_end_matches("/mcp");
    let as_user = |key: &str, args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--url", url, "--token", key]);
        mcc(&all)
    };

    // The calls, through the gateway's own code path: 5 events.
    ok(as_user(bob, &["tool", "call", "public.echo", "message=hi"]));
    fails(as_user(bob, &["tool", "call", "public.nope"]));
    ok(as_user(
        alice,
        &["tool", "call", "public.word_count", "text=a b"],
    ));
    ok(as_user(alice, &["tool", "info", "public.echo"])); // a search
    ok(as_user(
        bob,
        &["tool", "call", "public.echo", "message=last"],
    ));

    // Local: the gateway's settings name the stream and its Redis.
    let settings = dir.path().join("settings.yaml");
    std::fs::write(
        &settings,
        format!(
            "tools: [{public}]\nsession:\n  backend: redis\n  redis_url: {}\naudit:\n  stream: {stream}\n",
            redis_url()
        ),
    )
    .unwrap();
    let cfg = settings.to_str().unwrap();
    let local = |args: &[&str]| {
        let mut all = vec!["audit", "--config", cfg];
        all.extend(args);
        mcc(&all)
    };
    // The Redis sink writes in the background: wait for the 5 events.
    let deadline = Instant::now() + Duration::from_secs(10);
    let all = loop {
        let all = lines(&ok(local(&["-f", "jsonl", "--limit", "100"])));
        if all.len() >= 5 || Instant::now() > deadline {
            break all;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(all.len(), 5, "{all:#?}");
    // Newest first.
    assert!(all[0]["params_hash"].is_string(), "{all:#?}");
    assert_eq!(all[0]["user"], "bob");
    assert_eq!(all[4]["tool"], "public.echo");
    let text = serde_json::to_string(&all).unwrap();
    assert!(
        !text.contains(alice) && !text.contains(bob),
        "a key in the trail"
    );
    assert!(text.contains("mcc_"), "key prefixes recorded: {text}");

    // Filters.
    let bobs = lines(&ok(local(&["-f", "jsonl", "--user", "bob"])));
    assert_eq!(bobs.len(), 3);
    assert!(bobs.iter().all(|e| e["user"] == "bob"));
    let unknown: Value =
        serde_json::from_str(&ok(local(&["tool", "--outcome", "unknown", "-f", "json"]))).unwrap();
    assert_eq!(unknown.as_array().unwrap().len(), 1, "{unknown}");
    assert_eq!(unknown[0]["tool"], "public.nope");
    let searches = lines(&ok(local(&["search", "-f", "jsonl"])));
    assert_eq!(searches.len(), 1);
    assert_eq!(searches[0]["user"], "alice");
    assert!(lines(&ok(local(&["search", "--query", "ECHO", "-f", "jsonl"]))).len() == 1);
    assert!(lines(&ok(local(&["search", "--query", "zebra", "-f", "jsonl"]))).is_empty());
    let echoes = lines(&ok(local(&["--tool-key", "public.echo", "-f", "jsonl"])));
    assert_eq!(echoes.len(), 2);
    assert_eq!(
        lines(&ok(local(&["--since", "1h", "-f", "jsonl"]))).len(),
        5
    );
    assert!(lines(&ok(local(&["--until", "2020-01-01", "-f", "jsonl"]))).is_empty());
    let newest = lines(&ok(local(&["--limit", "1", "-f", "jsonl"])));
    assert_eq!(newest, all[..1]);
    let skipped = lines(&ok(local(&[
        "--offset", "1", "--limit", "2", "-f", "jsonl",
    ])));
    assert_eq!(skipped, all[1..3]);

    // Formats: table (default), CSV, JSON with --json, to a file.
    let table = ok(local(&["--user", "alice"]));
    let rows: Vec<&str> = table.lines().collect();
    assert!(
        rows[0].starts_with("TIME") && rows[0].contains("OUTCOME"),
        "{table}"
    );
    assert_eq!(rows.len(), 3, "{table}");
    assert!(
        rows[1].contains("search") && rows[2].contains("public.word_count"),
        "{table}"
    );
    let csv = ok(local(&["tool", "--user", "bob", "-f", "csv"]));
    let csv: Vec<&str> = csv.lines().collect();
    assert!(
        csv[0].starts_with("time,event,user,credential,key_prefix,tool,outcome"),
        "{csv:?}"
    );
    assert_eq!(csv.len(), 4, "{csv:?}");
    assert!(csv[1].contains(",execute,bob,api_key,mcc_"), "{csv:?}");
    let json: Value = serde_json::from_str(&ok(local(&["--json", "--limit", "2"]))).unwrap();
    assert_eq!(json.as_array().unwrap()[..], all[..2]);
    let file = dir.path().join("out.jsonl");
    ok(local(&["-f", "jsonl", "-O", file.to_str().unwrap()]));
    assert_eq!(lines(&std::fs::read_to_string(&file).unwrap()), all);

    // Bad values name the flag.
    for (args, flag) in [
        (&["--outcome", "sucess"][..], "--outcome"),
        (&["--since", "yesterday"][..], "--since"),
        (&["--since", "1h", "--until", "2h"][..], "--until"),
        (&["--limit", "0"][..], "--limit"),
        (&["--user", ""][..], "--user"),
        (&["-f", "xml"][..], "--format"),
    ] {
        let err = fails(local(args));
        assert!(err.contains(flag), "{args:?}: {err}");
    }

    // Through the gateway as an admin: the same events.
    let remote = |key: &str, args: &[&str]| {
        let mut all = vec!["audit", "--url", url, "--token", key];
        all.extend(args);
        mcc(&all)
    };
    assert_eq!(
        lines(&ok(remote(alice, &["-f", "jsonl", "--limit", "100"]))),
        all
    );
    assert_eq!(
        lines(&ok(remote(alice, &["-f", "jsonl", "--user", "bob"]))),
        bobs
    );
    assert_eq!(
        lines(&ok(remote(
            alice,
            &["--offset", "1", "--limit", "2", "-f", "jsonl"]
        ))),
        skipped
    );
    assert_eq!(
        lines(&ok(remote(
            alice,
            &["search", "-f", "jsonl", "--since", "1h"]
        ))),
        searches
    );

    // Pages: one event each, following `next`.
    let (status, first) = get(base, "/v1/audit?limit=1", Some(alice));
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["events"][0], all[0]);
    let next = first["next"].as_str().unwrap();
    let (_, second) = get(
        base,
        &format!("/v1/audit?limit=1&cursor={next}"),
        Some(alice),
    );
    assert_eq!(second["events"][0], all[1]);
    let (_, end) = get(base, "/v1/audit?limit=1000", Some(alice));
    assert_eq!(end["events"].as_array().unwrap().len(), 5);
    assert!(end.get("next").is_none(), "{end}");

    // Bad REST values name the parameter.
    for (query, param) in [
        ("usr=bob", "usr"),
        ("limit=5000", "limit"),
        ("since=yesterday", "since"),
        ("outcome=sucess", "outcome"),
        ("cursor=%2B", "cursor"),
    ] {
        let (status, body) = get(base, &format!("/v1/audit?{query}"), Some(alice));
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"], "invalid_query");
        assert!(
            body["message"].as_str().unwrap().contains(param),
            "{query}: {body}"
        );
    }

    // A non-admin learns nothing: one 403, whatever they ask.
    let err = fails(remote(bob, &["--user", "alice"]));
    assert!(err.contains("403") && err.contains("admin group"), "{err}");
    let (status, plain) = get(base, "/v1/audit", Some(bob));
    assert_eq!(status, 403);
    for query in [
        "?user=alice&since=1h",
        "?usr=x",
        "?limit=99999",
        "?cursor=1-0",
    ] {
        assert_eq!(
            get(base, &format!("/v1/audit{query}"), Some(bob)),
            (403, plain.clone())
        );
    }
    assert!(!plain.to_string().contains(&stream), "{plain}");
    let (status, _) = get(base, "/v1/audit", None);
    assert_eq!(status, 401);
    // MCC has no /audit route: no unversioned alias.
    let (status, _) = get(base, "/audit", Some(alice));
    assert_eq!(status, 404);

    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let _: () = redis::cmd("DEL").arg(&stream).query(&mut conn).unwrap();
}

#[test]
fn without_a_stream_it_says_which_setting() {
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join("settings.yaml");
    let public = root().join("examples/public.yaml").display().to_string();
    std::fs::write(&settings, format!("tools: [{public}]\n")).unwrap();
    let err = fails(mcc(&["audit", "--config", settings.to_str().unwrap()]));
    assert!(err.contains("audit.stream"), "{err}");
}
