//! `mcc mcp install CLIENT`: each client's documented shape, merged into an existing
//! file without losing its other servers and settings.

use crate::support;

use serde_json::{Value, json};
use support::{fails, mcc_in, ok};

const URL: &str = "https://mcc.example.com/mcp";
const KEY: &str = "mcc_0123456789ab_secret";

fn install(dir: &std::path::Path, args: &[&str]) -> String {
    let mut all = vec!["mcp", "install"];
    all.extend(args);
    all.extend(["--url", URL]);
    ok(mcc_in(dir, &all))
}

fn read(path: std::path::PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn each_client_gets_its_documented_shape() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bearer = json!({"Authorization": format!("Bearer {KEY}")});

    // Claude Code: .mcp.json, mcpServers, type http (as `claude mcp add --transport http`).
    install(d, &["claude-code", "--token", KEY]);
    let v = read(d.join(".mcp.json"));
    assert_eq!(
        v["mcpServers"]["mcc"],
        json!({"type": "http", "url": URL, "headers": bearer})
    );

    // Cursor: .cursor/mcp.json, mcpServers with url + headers; ${env:VAR} references.
    install(d, &["cursor", "--token-env", "MCC_KEY"]);
    let v = read(d.join(".cursor/mcp.json"));
    assert_eq!(
        v["mcpServers"]["mcc"],
        json!({"url": URL, "headers": {"Authorization": "Bearer ${env:MCC_KEY}"}})
    );

    // VS Code: .vscode/mcp.json, `servers`, type http; without a key, a password input.
    install(d, &["vscode"]);
    let v = read(d.join(".vscode/mcp.json"));
    assert_eq!(v["servers"]["mcc"]["type"], "http");
    assert_eq!(v["servers"]["mcc"]["url"], URL);
    assert_eq!(
        v["servers"]["mcc"]["headers"]["Authorization"],
        "Bearer ${input:mcc-api-key}"
    );
    assert_eq!(
        v["inputs"],
        json!([{"type": "promptString", "id": "mcc-api-key", "description": "MCC API key", "password": true}])
    );
    assert!(v.get("mcpServers").is_none());

    // Claude Desktop: stdio servers only, so the mcp-remote bridge with the header.
    let file = d.join("claude_desktop_config.json");
    install(
        d,
        &[
            "claude-desktop",
            "--token",
            KEY,
            "--file",
            file.to_str().unwrap(),
        ],
    );
    let e = &read(file)["mcpServers"]["mcc"];
    assert_eq!(e["command"], "npx");
    assert_eq!(
        e["args"],
        json!([
            "-y",
            "mcp-remote",
            URL,
            "--header",
            "Authorization:${AUTH_HEADER}"
        ])
    );
    assert_eq!(e["env"]["AUTH_HEADER"], format!("Bearer {KEY}"));

    // Gemini CLI: httpUrl for streamable HTTP (`url` would be SSE there).
    install(d, &["gemini-cli", "--token", KEY]);
    let v = read(d.join(".gemini/settings.json"));
    assert_eq!(
        v["mcpServers"]["mcc"],
        json!({"httpUrl": URL, "headers": bearer})
    );

    // goose: extensions in YAML, type streamable_http.
    let file = d.join("goose.yaml");
    std::fs::write(&file, "GOOSE_PROVIDER: openai\nextensions:\n  developer:\n    enabled: true\n    type: builtin\n    name: developer\n").unwrap();
    install(
        d,
        &["goose", "--token", KEY, "--file", file.to_str().unwrap()],
    );
    let v: Value = serde_saphyr::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["GOOSE_PROVIDER"], "openai");
    assert_eq!(v["extensions"]["developer"]["type"], "builtin");
    let g = &v["extensions"]["mcc"];
    assert_eq!(
        (g["type"].as_str(), g["uri"].as_str()),
        (Some("streamable_http"), Some(URL))
    );
    assert_eq!(g["headers"], bearer);
    assert_eq!(g["enabled"], true);

    // Plain JSON (MCC's mcp-json) prints.
    let out = install(d, &["mcp-json", "--token", KEY]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["mcpServers"]["mcc"],
        json!({"type": "http", "url": URL, "headers": bearer})
    );
}

#[test]
fn merges_into_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join(".mcp.json");
    let before = json!({
        "mcpServers": {"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}},
        "other": {"kept": true}
    });
    std::fs::write(&file, serde_json::to_string_pretty(&before).unwrap()).unwrap();
    let out = install(d, &["claude-code", "--token", KEY]);
    assert!(out.contains("added MCP server 'mcc'"), "{out}");
    let v = read(file.clone());
    assert_eq!(v["mcpServers"]["github"], before["mcpServers"]["github"]);
    assert_eq!(v["other"], before["other"]);
    assert_eq!(v["mcpServers"]["mcc"]["url"], URL);
    // Again: replaced, not duplicated.
    let out = install(d, &["claude-code", "--token", "mcc_ffffffffffff_new"]);
    assert!(out.contains("replaced"), "{out}");
    let v = read(file.clone());
    assert_eq!(v["mcpServers"].as_object().unwrap().len(), 2);
    assert_eq!(
        v["mcpServers"]["mcc"]["headers"]["Authorization"],
        "Bearer mcc_ffffffffffff_new"
    );

    // --print leaves the file alone.
    let printed = install(
        d,
        &["claude-code", "--token", KEY, "--print", "--name", "other"],
    );
    assert!(serde_json::from_str::<Value>(&printed).unwrap()["mcpServers"]["other"].is_object());
    assert!(read(file).get("mcpServers").unwrap().get("other").is_none());

    // VS Code: an existing input is not added twice; other servers stay.
    let vs = d.join(".vscode/mcp.json");
    std::fs::create_dir_all(vs.parent().unwrap()).unwrap();
    std::fs::write(
        &vs,
        r#"{"servers": {"x": {"type": "stdio", "command": "x"}}, "inputs": []}"#,
    )
    .unwrap();
    install(d, &["vscode"]);
    install(d, &["vscode"]);
    let v = read(vs);
    assert_eq!(v["inputs"].as_array().unwrap().len(), 1);
    assert_eq!(v["servers"]["x"]["command"], "x");
}

#[test]
fn bad_files_and_flags_are_named_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join(".mcp.json");
    std::fs::write(&file, "{not json").unwrap();
    let e = fails(mcc_in(d, &["mcp", "install", "claude-code", "--url", URL]));
    assert!(e.contains(".mcp.json") && e.contains("not JSON"), "{e}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{not json");
    std::fs::write(&file, r#"{"mcpServers": []}"#).unwrap();
    let e = fails(mcc_in(d, &["mcp", "install", "claude-code", "--url", URL]));
    assert!(e.contains("`mcpServers` is not an object"), "{e}");
    let e = fails(mcc_in(
        d,
        &["mcp", "install", "cursor", "--url", "mcc.example.com"],
    ));
    assert!(e.contains("--url mcc.example.com"), "{e}");
    let e = fails(mcc_in(d, &["mcp", "install", "emacs"]));
    assert!(e.contains("emacs"), "{e}");
}
