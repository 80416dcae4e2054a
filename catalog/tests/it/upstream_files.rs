//! `mcp_servers:` in tool files: beside `tools:` or alone, file groups cascaded, `$VAR`
//! in header values, errors naming file, entry and field; `tools:` errors unchanged.

use std::path::Path;

use mcc_catalog::introspect::Introspector;
use mcc_catalog::load::{LoadError, ParsedFile, parse_file};

fn parse(text: &str) -> Result<ParsedFile, LoadError> {
    parse_file(Path::new("t.yaml"), text, &|name| {
        (name == "UP_TOKEN").then(|| "tok-123".to_string())
    })
}

#[test]
fn servers_beside_tools_take_the_file_groups() {
    let f = parse(
        "groups: [team]\ntools:\n  - name: local\n    exec: echo\nmcp_servers:\n  - name: ev\n    url: http://h:1/mcp\n    groups: [public]\n    headers: {Authorization: Bearer $UP_TOKEN}\n",
    )
    .unwrap();
    assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    assert_eq!(f.tools.len(), 1);
    let s = &f.servers[0];
    assert_eq!(
        (s.name.as_str(), s.groups.clone()),
        ("ev", vec!["team".to_string(), "public".into()])
    );
    assert_eq!(s.headers["Authorization"], "Bearer tok-123");
    assert_eq!(s.source, "t.yaml: mcp_servers[0] 'ev'");
}

#[test]
fn a_file_of_servers_only_is_a_tool_file() {
    let f = parse("mcp_servers:\n  - name: ev\n    url: https://h/mcp\n").unwrap();
    assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    assert!(f.tools.is_empty());
    assert_eq!(f.servers.len(), 1);
}

#[test]
fn server_errors_name_the_file_entry_and_field() {
    let e = parse("mcp_servers:\n  - name: ev\n    url: ftp://h\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.yaml: mcp_servers[0] 'ev': url: expected an http:// or https:// URL"
    );
    let e = parse("mcp_servers:\n  - url: http://h\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.yaml: mcp_servers[0]: (entry): missing field `name`"
    );
    let e = parse("mcp_servers: {name: ev}\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.yaml: mcp_servers: expected a list of upstream MCP servers"
    );
}

#[test]
fn tool_entry_errors_stay_byte_identical() {
    let e = parse("tools:\n  - name: t\n    exec: echo\n    fn: m:f\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.yaml: tools[0] 't': fn/exec: Tool must specify either 'fn' or 'exec', not both"
    );
    let e = parse("mcp_servers: []\ntools:\n  - name: t\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.yaml: tools[0] 't': fn/exec: Tool must specify either 'fn' or 'exec'"
    );
}

#[test]
fn a_server_name_declared_twice_names_both_places() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.yaml");
    let b = dir.path().join("b.yaml");
    std::fs::write(&a, "mcp_servers:\n  - name: ev\n    url: http://h/mcp\n").unwrap();
    std::fs::write(&b, "mcp_servers:\n  - name: ev\n    url: http://h2/mcp\n").unwrap();
    let entries = vec![a.display().to_string(), b.display().to_string()];
    let e = mcc_catalog::load(&entries, &Introspector::default()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.ends_with(&format!(
            "upstream 'ev' is declared twice, in {}: mcp_servers[0] 'ev' and in {}: mcp_servers[0] 'ev'",
            a.display(),
            b.display()
        )),
        "{text}"
    );
}

#[test]
fn a_stdio_server_takes_command_args_and_granted_env() {
    let f = parse(
        "mcp_servers:\n  - name: time\n    command: [uvx, mcp-server-time]\n    args: [--local-timezone, UTC]\n    env: {API_TOKEN: $UP_TOKEN}\n",
    )
    .unwrap();
    let c = f.servers[0].command.as_ref().expect("a stdio server");
    assert_eq!(
        (c.program.as_str(), c.args.as_slice()),
        (
            "uvx",
            &[
                "mcp-server-time".to_string(),
                "--local-timezone".into(),
                "UTC".into()
            ][..]
        )
    );
    assert_eq!(c.env["API_TOKEN"], "tok-123");
    let e = parse("mcp_servers:\n  - name: time\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.yaml: mcp_servers[0] 'time': url: expected either url (a streamable HTTP endpoint) or command (a stdio server)"
    );
    let e = parse("mcp_servers:\n  - name: time\n    url: http://h/mcp\n    command: [x]\n")
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.yaml: mcp_servers[0] 'time': command: give either url (a streamable HTTP endpoint) or command (a stdio server), not both"
    );
    let e =
        parse("mcp_servers:\n  - name: time\n    command: x\n    headers: {A: b}\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.yaml: mcp_servers[0] 'time': headers: only an upstream with a url takes this field (this one has a command)"
    );
}
