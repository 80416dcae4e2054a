//! Properties: the loader never panics, whatever the file holds (YAML-ish text or any
//! JSON-shaped document, including ones shaped like tool files), and keys always put
//! `public`, then `admin`, first and keep the other groups in declared order.

use std::path::Path;

use mcc_catalog::key::{sorted_groups, tool_key};
use mcc_catalog::load::parse_file;
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Fragments of tool files, so random text often gets deep into the loader.
fn yamlish() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("tools:".to_string()),
        Just("groups: [public, admin, ops]".to_string()),
        Just("\n".to_string()),
        Just("\n  - ".to_string()),
        Just("\n    ".to_string()),
        Just("name: ".to_string()),
        Just("exec: ".to_string()),
        Just("fn: ".to_string()),
        Just("curl: ".to_string()),
        Just("params:".to_string()),
        Just("type: ".to_string()),
        Just("env: ".to_string()),
        Just("limits: ".to_string()),
        Just("<<: ".to_string()),
        Just("&a ".to_string()),
        Just("*a".to_string()),
        Just("{{ x | quote }}".to_string()),
        Just("{% if".to_string()),
        Just("${HOME}".to_string()),
        Just("$$".to_string()),
        Just("|\n".to_string()),
        Just(">-\n".to_string()),
        Just("'".to_string()),
        Just("\"".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just(": ".to_string()),
        Just("- ".to_string()),
        Just("# c".to_string()),
        Just("!!str ".to_string()),
        Just("---\n".to_string()),
        "[a-z0-9_.:]{0,8}",
        "\\PC{0,4}",
    ];
    prop::collection::vec(token, 0..48).prop_map(|t| t.concat())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop_oneof![
            "[a-z_:.]{0,10}",
            Just("str".to_string()),
            Just("m:f".to_string()),
            Just("{{ a }}".to_string()),
            Just("$X".to_string()),
            "\\PC{0,6}",
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let key = prop_oneof![
            Just("tools".to_string()),
            Just("groups".to_string()),
            Just("env".to_string()),
            Just("env_file".to_string()),
            Just("name".to_string()),
            Just("fn".to_string()),
            Just("exec".to_string()),
            Just("curl".to_string()),
            Just("python".to_string()),
            Just("params".to_string()),
            Just("type".to_string()),
            Just("default".to_string()),
            Just("override".to_string()),
            Just("required".to_string()),
            Just("stdin".to_string()),
            Just("limits".to_string()),
            Just("timeout".to_string()),
            Just("transform".to_string()),
            Just("env_passthrough".to_string()),
            Just("cache_ttl".to_string()),
            "[a-z_]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn groups() -> impl Strategy<Value = Vec<String>> {
    let group = prop_oneof![
        Just("public".to_string()),
        Just("admin".to_string()),
        "[a-z]{1,5}",
    ];
    prop::collection::vec(group, 0..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parse_file_never_panics_on_yamlish_text(text in yamlish()) {
        let _ = parse_file(Path::new("p.yaml"), &text, &|n| (n == "HOME").then(|| "/h".into()));
    }

    #[test]
    fn parse_file_never_panics_on_json_documents(doc in json_value(), entries in prop::collection::vec(json_value(), 0..4)) {
        let _ = parse_file(Path::new("p.yaml"), &doc.to_string(), &|_| None);
        // The same values as tool entries, so they reach the entry rules.
        let file = serde_json::json!({"groups": ["ops"], "tools": entries});
        let _ = parse_file(Path::new("p.yaml"), &file.to_string(), &|_| None);
    }

    #[test]
    fn keys_put_public_then_admin_first_and_keep_the_rest_in_order(groups in groups(), name in "[a-z]{1,6}") {
        let sorted = sorted_groups(&groups);
        let others: Vec<&str> = groups.iter().map(String::as_str).filter(|g| *g != "public" && *g != "admin").collect();
        let mut expected: Vec<&str> = groups.iter().map(String::as_str).filter(|g| *g == "public").collect();
        expected.extend(groups.iter().map(String::as_str).filter(|g| *g == "admin"));
        expected.extend(&others);
        prop_assert_eq!(&sorted, &expected);
        let mut parts = expected.clone();
        parts.push(&name);
        prop_assert_eq!(tool_key(&groups, &name), parts.join("."));
    }
}
