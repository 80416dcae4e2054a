//! Tests of [`super`]: the `mcp_servers:` entry, and an upstream listing into tools.

use super::*;
use crate::params::validate_arguments;
use serde_json::json;

fn spec(extra: Value) -> UpstreamSpec {
    let mut raw = json!({"name": "up", "url": "http://127.0.0.1:1/mcp"});
    raw.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    parse_server(&raw, &["team".into()], "f.yaml: mcp_servers[0] 'up'").unwrap()
}

fn listed(name: &str, schema: Value) -> Discovered {
    Discovered {
        name: name.into(),
        description: Some(format!("Tool {name}.")),
        input_schema: schema,
        ..Default::default()
    }
}

fn object() -> Value {
    json!({"type": "object", "properties": {}})
}

#[test]
fn entries_take_file_groups_first_and_refuse_unknown_keys() {
    let s = spec(json!({"groups": ["public", "team"], "x-note": 1}));
    assert_eq!(s.groups, ["team", "public"]);
    assert_eq!(s.max_concurrency, DEFAULT_CONCURRENCY);
    let e = parse_server(
        &json!({"name": "up", "url": "http://h/mcp", "exlude": ["a"]}),
        &[],
        "s",
    )
    .unwrap_err();
    assert_eq!(e.field, "exlude");
    assert!(e.message.contains("unknown field `exlude`"), "{e:?}");
    let e = parse_server(&json!({"name": "Up", "url": "http://h"}), &[], "s").unwrap_err();
    assert_eq!(e.field, "name");
    let e = parse_server(&json!({"name": "up", "url": "file:///etc"}), &[], "s").unwrap_err();
    assert_eq!(e.field, "url");
    let e = parse_server(
        &json!({"name": "up", "url": "http://h", "timeout": "soon"}),
        &[],
        "s",
    )
    .unwrap_err();
    assert_eq!(e.field, "timeout");
}

#[test]
fn header_values_are_never_echoed_or_shown() {
    let e = parse_server(
        &json!({"name": "up", "url": "http://h", "headers": {"Authorization": "Bearer s3cret\r\nX: y"}}),
        &[],
        "s",
    )
    .unwrap_err();
    assert_eq!(e.field, "headers.Authorization");
    assert!(!e.message.contains("s3cret"), "{e:?}");
    let s = spec(json!({"headers": {"Authorization": "Bearer s3cret"}}));
    let shown = format!("{s:?}");
    assert!(
        shown.contains("Authorization") && !shown.contains("s3cret"),
        "{shown}"
    );
}

#[test]
fn listings_become_keyed_tools_with_params_from_the_schema() {
    let s = spec(json!({"groups": ["public"], "prefix": "ev_", "timeout": 5}));
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"type": "number", "description": "First"},
            "tags": {"type": "array"},
            "mode": {"enum": ["x", "y"], "default": "x"}
        },
        "required": ["a"]
    });
    let mut d = listed("get-sum", schema.clone());
    d.output_schema = Some(json!({"type": "object", "properties": {"n": {"type": "number"}}}));
    d.annotations.read_only_hint = Some(true);
    let out = convert(&s, &[d]);
    assert!(out.refused.is_empty(), "{:?}", out.refused);
    let t = &out.tools[0];
    assert_eq!(t.key, "public.team.ev_get-sum");
    assert_eq!(t.groups, ["team", "public"]);
    assert_eq!(
        t.kind,
        ToolKind::Mcp {
            server: "up".into(),
            tool: "get-sum".into(),
            input_schema: schema.into()
        }
    );
    let params: Vec<(&str, ParamType, bool)> = t
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.ty, p.required))
        .collect();
    assert_eq!(
        params,
        [
            ("a", ParamType::Float, true),
            ("tags", ParamType::List, false),
            ("mode", ParamType::Dict, false)
        ]
    );
    assert_eq!(t.params[0].description, "First");
    assert_eq!(t.params[2].default, Some(json!("x")));
    assert_eq!(t.limits.timeout, Some(5.0));
    assert_eq!(t.annotations.read_only_hint, Some(true));
    assert_eq!(t.signature_return_type(), "dict");
    assert_eq!(t.source, "f.yaml: mcp_servers[0] 'up': tool 'get-sum'");
}

#[test]
fn filters_normalization_and_refusals_say_why() {
    let s = spec(
        json!({"include": ["get-*", "a.*", "x y", "bad*", "dup*"], "exclude": ["get-secret"]}),
    );
    let out = convert(
        &s,
        &[
            listed("get-env", object()),
            listed("get-secret", object()),
            listed("echo", object()),
            listed("a.b", object()),
            listed("x y", object()),
            listed("bad", json!({"type": "array"})),
            listed(
                "bad2",
                json!({"type": "object", "properties": {"n": {"type": "integr"}}}),
            ),
            listed("dup.x", object()),
            listed("dup_x", object()),
        ],
    );
    let names: Vec<&str> = out.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["get-env", "a_b", "x_y", "dup_x"]);
    assert_eq!(
        out.filtered, 2,
        "echo (not included) and get-secret (excluded)"
    );
    let reasons: Vec<(&str, &str)> = out
        .refused
        .iter()
        .map(|r| (r.name.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(
        reasons[0].1.contains("root is not \"type\": \"object\""),
        "{reasons:?}"
    );
    assert!(
        reasons[1].1.contains("not a valid JSON Schema"),
        "{reasons:?}"
    );
    assert_eq!(
        reasons[2],
        (
            "dup_x",
            "its name normalizes to 'dup_x', which upstream tool 'dup.x' already has"
        )
    );
}

#[test]
fn arguments_are_checked_against_the_upstream_schema() {
    let schema = InputSchema::from(json!({
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": false
    }));
    let ok = json!({"a": 1, "b": 2.5});
    assert_eq!(validate_arguments(&schema, ok.as_object().unwrap()), Ok(()));
    let bad = json!({"a": "secret-text", "c": 1});
    let problems = validate_arguments(&schema, bad.as_object().unwrap()).unwrap_err();
    assert!(problems.contains(&(String::new(), "\"b\" is a required property".into())));
    assert!(problems.contains(&("/a".into(), "value is not of type \"number\"".into())));
    let text = format!("{problems:?}");
    assert!(!text.contains("secret-text"), "values are masked: {text}");
}

#[test]
fn a_tool_compiles_its_validator_once_and_clones_share_it() {
    let out = convert(&spec(json!({})), &[listed("get", object())]);
    let ToolKind::Mcp { input_schema, .. } = &out.tools[0].kind else {
        panic!("an upstream tool");
    };
    // Compiled at discovery (the validity check), not again per call or per clone.
    let compiled = input_schema.validator.get().expect("compiled at discovery");
    let copy = out.tools[0].clone();
    let ToolKind::Mcp {
        input_schema: copy, ..
    } = &copy.kind
    else {
        unreachable!()
    };
    assert!(std::ptr::eq(compiled, copy.validator.get().unwrap()));
    assert_eq!(validate_arguments(copy, &Map::new()), Ok(()));

    // From a catalog document: compiled on the first call, then kept.
    let read: InputSchema = serde_json::from_value(object()).unwrap();
    assert!(read.validator.get().is_none());
    assert_eq!(serde_json::to_value(&read).unwrap(), object());
    assert_eq!(validate_arguments(&read, &Map::new()), Ok(()));
    let first: *const _ = read.validator.get().unwrap();
    let _ = validate_arguments(&read, &Map::new());
    assert!(std::ptr::eq(first, read.validator.get().unwrap()));
}

#[test]
fn a_schema_that_does_not_compile_fails_every_call_with_the_same_reason() {
    let broken = InputSchema::from(json!({"type": "object", "properties": {"a": {"type": 5}}}));
    let first = validate_arguments(&broken, &Map::new()).unwrap_err();
    assert_eq!(first.len(), 1);
    assert!(
        first[0]
            .1
            .starts_with("the input schema does not compile: "),
        "{first:?}"
    );
    assert_eq!(validate_arguments(&broken, &Map::new()).unwrap_err(), first);
}

#[test]
fn the_egress_allow_list_matches_hosts_and_prefixes_only() {
    let allowed: Vec<String> = [
        "mcp.internal",
        "*.vendor.example",
        "https://api.example.com/mcp",
    ]
    .map(String::from)
    .to_vec();
    for ok in [
        "http://mcp.internal/mcp",
        "https://MCP.internal:8443/x",
        "https://a.vendor.example/mcp",
        "https://a.b.vendor.example/",
        "https://api.example.com/mcp",
        "https://api.example.com/mcp/v2?x=1",
        "https://api.example.com/mcp?x=1",
    ] {
        assert!(url_allowed(&allowed, ok), "{ok} should be allowed");
    }
    for refused in [
        "http://other.internal/mcp",
        "http://mcp.internal.evil.com/",
        "https://vendor.example/",
        "https://evilvendor.example/",
        "https://api.example.com/mcpx",
        "https://api.example.com/other",
        "https://api.example.com.evil.com/mcp",
        "https://api.example.com/mcp/../admin",
        "https://api.example.com/mcp/%2E%2E/admin",
        "http://mcp.internal@evil.com/",
        "http://evil.com\\.mcp.internal/",
        "http://evil.com\\@mcp.internal/",
        "ftp://mcp.internal/",
        "mcp.internal",
    ] {
        assert!(
            !url_allowed(&allowed, refused),
            "{refused} should be refused"
        );
    }
    assert!(
        !url_allowed(&[], "http://mcp.internal/"),
        "an empty list allows nothing"
    );
}

fn stdio(raw: Value) -> Result<UpstreamSpec, ServerError> {
    parse_server(&raw, &[], "f.yaml: mcp_servers[0] 'time'")
}

#[test]
fn a_command_entry_is_a_stdio_upstream() {
    let s = stdio(json!({"name": "time", "command": ["uvx", "mcp-server-time"], "args": ["--local-timezone", "UTC"], "env": {"TZ": "UTC"}, "env_passthrough": ["AWS_*"]})).unwrap();
    assert_eq!(s.url, "");
    let c = s.command.clone().unwrap();
    assert_eq!(c.program, "uvx");
    assert_eq!(c.args, ["mcp-server-time", "--local-timezone", "UTC"]);
    let env = c.env_spec(&["PATH".into()]);
    assert_eq!(env.floor, ["PATH"]);
    assert_eq!(env.set.get("TZ").map(String::as_str), Some("UTC"));
    assert!(env.passthrough.admits("AWS_REGION") && !env.passthrough.admits("HOME"));
    // A bare string is one program, never split by a shell.
    let s = stdio(json!({"name": "time", "command": "mcp server"})).unwrap();
    assert_eq!(s.command.unwrap().program, "mcp server");
    // Values of env never show.
    let s = stdio(json!({"name": "time", "command": "x", "env": {"TOKEN": "s3cret"}})).unwrap();
    assert!(!format!("{s:?}").contains("s3cret"), "{s:?}");
    // No context variable can be granted (a server serves every caller).
    let s =
        stdio(json!({"name": "time", "command": "x", "env": {"MCC_CTX_USER": "alice"}})).unwrap();
    assert!(s.command.unwrap().env_spec(&[]).set.is_empty());
}

#[test]
fn exactly_one_of_url_and_command_each_with_its_own_fields() {
    let field = |raw: Value| stdio(raw).unwrap_err();
    let e = field(json!({"name": "time"}));
    assert_eq!(e.field, "url");
    assert!(
        e.message.contains("either url") && e.message.contains("or command"),
        "{e:?}"
    );
    let e = field(json!({"name": "time", "url": "http://h/mcp", "command": "x"}));
    assert_eq!(e.field, "command");
    assert!(e.message.contains("not both"), "{e:?}");
    let e = field(json!({"name": "time", "command": "x", "headers": {"A": "b"}}));
    assert_eq!(e.field, "headers");
    assert!(e.message.contains("this one has a command"), "{e:?}");
    let e = field(json!({"name": "time", "command": "x", "ca_file": "/ca.pem"}));
    assert_eq!(e.field, "ca_file");
    for key in ["args", "env", "env_passthrough"] {
        let mut raw = json!({"name": "time", "url": "http://h/mcp"});
        raw[key] = match key {
            "args" => json!(["a"]),
            "env" => json!({"A": "b"}),
            _ => json!(true),
        };
        let e = field(raw);
        assert_eq!(e.field, key);
        assert!(e.message.contains("this one has a url"), "{e:?}");
    }
    let e = field(json!({"name": "time", "command": []}));
    assert_eq!(e.field, "command");
    let e = field(json!({"name": "time", "command": " "}));
    assert_eq!(e.field, "command");
    let e = field(json!({"name": "time", "command": "x", "env": {"A=B": "c"}}));
    assert_eq!(e.field, "env.A=B");
    let e = field(json!({"name": "time", "command": "x", "env": {"A": "s3cret\u{0}"}}));
    assert_eq!(e.field, "env.A");
    assert!(!e.message.contains("s3cret"), "{e:?}");
    let e = field(json!({"name": "time", "command": "x", "args": ["a\u{0}b"]}));
    assert_eq!(e.field, "args");
    let many: Vec<String> = (0..200).map(|i| i.to_string()).collect();
    let e = field(json!({"name": "time", "command": "x", "args": many}));
    assert_eq!(e.field, "args");
    let e = field(json!({"name": "time", "command": 5}));
    assert_eq!(e.field, "command");
}

#[test]
fn a_ca_file_is_for_an_https_url_only() {
    let raw = json!({"name": "up", "url": "http://h/mcp", "ca_file": "/ca.pem"});
    let e = parse_server(&raw, &[], "f.yaml").unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.message.as_str()),
        ("ca_file", "a CA applies to an https:// url only")
    );
    let raw = json!({"name": "up", "url": "https://h/mcp", "ca_file": "/ca.pem"});
    let s = parse_server(&raw, &[], "f.yaml").unwrap();
    assert_eq!(s.ca_file.as_deref(), Some(std::path::Path::new("/ca.pem")));
}
