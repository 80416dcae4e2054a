//! Tests of [`super`]: one MCC YAML `tools:` entry into a catalog tool (runners, names, params, rate limits, field errors).

use super::*;
use serde_json::json;

fn build(v: Value) -> Result<(Tool, bool), EntryError> {
    build_tool(parse_entry(v)?, "t.yaml").map(|b| (b.tool, b.needs_introspection))
}

#[test]
fn rate_limit_in_any_spelling_or_an_error_naming_it() {
    let (t, _) = build(json!({"name": "t", "exec": "ls", "rate_limit": "5/1hr"})).unwrap();
    assert_eq!(t.rate_limit.map(|r| r.to_string()).as_deref(), Some("5/1h"));
    let (t, _) = build(json!({"name": "t", "exec": "ls", "rate_limit": -1})).unwrap();
    assert_eq!(t.rate_limit, Some(crate::rate::RateLimit::Unlimited));
    let e = build(json!({"name": "t", "exec": "ls", "rate_limit": "often"})).unwrap_err();
    assert_eq!(e.field, "rate_limit");
    assert!(e.message.contains("10/1min"), "{}", e.message);
}

#[test]
fn exactly_one_runner() {
    let e = build(json!({"name": "x", "fn": "m:f", "exec": "ls"})).unwrap_err();
    assert_eq!(
        e.message,
        "Tool must specify either 'fn' or 'exec', not both"
    );
    let e = build(json!({"name": "x", "exec": "ls", "curl": "http://x"})).unwrap_err();
    assert_eq!(
        e.message,
        "Tool must specify only one of 'fn', 'exec', or 'curl'"
    );
    assert_eq!(
        build(json!({"name": "x"})).unwrap_err().message,
        "Tool must specify either 'fn' or 'exec'"
    );
}

#[test]
fn python_only_with_fn_and_exec_needs_name() {
    let e = build(json!({"name": "x", "exec": "ls", "python": "python3"})).unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.message.as_str()),
        ("python", "'python' can only be used with 'fn', not 'exec'")
    );
    assert_eq!(
        build(json!({"exec": "ls"})).unwrap_err().message,
        "Exec tools must specify a 'name'"
    );
}

#[test]
fn fn_name_from_path_and_introspection_flag() {
    let (t, needs) = build(json!({"fn": "pkg.mod:Cls.method", "groups": ["ops"]})).unwrap();
    assert_eq!(
        (t.name.as_str(), t.key.as_str(), needs),
        ("method", "ops.method", true)
    );
    let (t, _) = build(json!({"fn": "pkg.mod.func"})).unwrap();
    assert_eq!(t.name, "func");
    let named = |v: Value| build_tool(parse_entry(v).unwrap(), "t.yaml").unwrap();
    assert!(named(json!({"fn": "m:f"})).name_from_callable);
    assert!(!named(json!({"fn": "m:f", "name": "g"})).name_from_callable);
    let declared = json!({"fn": "m:f", "params": [{"name": "a"}], "return_type": "str"});
    assert!(
        !named(declared).name_from_callable,
        "not introspected: the path's last segment stays the name"
    );
    let (_, needs) =
        build(json!({"fn": "m:f", "params": [{"name": "a"}], "return_type": "str"})).unwrap();
    assert!(!needs);
    let (_, needs) = build(json!({"fn": "m:f", "params": [], "return_type": "str"})).unwrap();
    assert!(needs, "MCC treats `params: []` as undeclared");
}

#[test]
fn curl_shorthand() {
    let (t, _) = build(json!({"name": "ip", "curl": "https://api.ipify.org?format=json"})).unwrap();
    assert_eq!(
        t.kind.command(),
        Some("curl -sL -o - 'https://api.ipify.org?format=json'")
    );
    let (t, _) =
        build(json!({"name": "post", "curl": "-X POST https://x/y", "stdin": true})).unwrap();
    assert_eq!(
        t.kind.command(),
        Some("curl -sL -o - --json @- -X POST https://x/y")
    );
}

#[test]
fn params_types_and_field_errors() {
    let e = build(json!({"name": "x", "exec": "ls", "params": [{"name": "a", "type": "string"}]}))
        .unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.message.as_str()),
        ("params[0]", "Unknown type 'string' for parameter 'a'")
    );
    let e = build(json!({"name": "x", "exec": "ls", "stdin": "sometimes"})).unwrap_err();
    assert_eq!(e.field, "stdin");
    let e = build(json!({"name": "x", "exec": "ls", "limits": {"timeout": "long"}})).unwrap_err();
    assert_eq!(e.field, "limits.timeout");
    let e = build(json!({"name": "x", "exec": "echo {{ a "})).unwrap_err();
    assert_eq!(e.field, "exec");
}

#[test]
fn transform_lists_join_and_env_values_stringify() {
    let (t, _) =
            build(json!({"name": "x", "exec": "ls", "transform": ["sort", "head -n 1"], "env": {"N": 30, "B": true}}))
                .unwrap();
    assert_eq!(t.transform.as_deref(), Some("sort | head -n 1"));
    assert_eq!(t.env["N"], "30");
    assert_eq!(t.env["B"], "True");
}

#[test]
fn keys_are_at_most_253_characters() {
    let long = "n".repeat(250);
    assert!(build(json!({"name": long, "exec": "ls", "groups": ["ab"]})).is_ok());
    let e = build(json!({"name": long, "exec": "ls", "groups": ["abc"]})).unwrap_err();
    assert_eq!(e.field, "name");
    assert!(e.message.contains("254 characters"), "{}", e.message);
}

#[test]
fn override_null_is_an_override() {
    let (t, _) =
        build(json!({"name": "x", "exec": "ls", "params": [{"name": "k", "override": null}]}))
            .unwrap();
    assert_eq!(t.params[0].override_value, Some(Value::Null));
    assert_eq!(t.visible_params().count(), 0);
}

#[test]
fn names_and_boolean_words() {
    assert!(check_name("responsible-get").is_ok());
    assert!(check_name("").is_err());
    assert!(check_name("a b").is_err());
    assert_eq!(path_name("pkg.mod:Cls.method"), "method");
    assert_eq!(path_name("mod.func"), "func");
    assert_eq!(yaml11_bool("Yes"), Some(true));
    assert_eq!(yaml11_bool("OFF"), Some(false));
    assert_eq!(yaml11_bool("y"), None);
    assert_eq!(yaml11_bool("yEs"), None, "PyYAML's exact spellings only");
}

#[test]
fn unknown_param_keys_are_removed_and_reported() {
    let mut entry =
        json!({"params": [{"name": "a", "enum": [1]}, "odd", {"name": "b", "x-ui": 1}]})
            .as_object()
            .cloned()
            .unwrap();
    assert_eq!(
        strip_unknown_param_keys(&mut entry),
        [(0, "enum".to_string())]
    );
    assert_eq!(
        Value::Object(entry),
        json!({"params": [{"name": "a"}, "odd", {"name": "b"}]})
    );
}
