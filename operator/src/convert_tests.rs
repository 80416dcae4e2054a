//! Tests of [`super`]: a `Tool` resource into a catalog tool (the file loader's rules, size limits, env references, raw fields) and object names.

use super::*;
use k8s_openapi::api::core::v1::{EnvVarSource, SecretKeySelector};
use serde_json::json;

fn resource(spec: serde_json::Value) -> crd::Tool {
    serde_json::from_value(json!({
        "apiVersion": "mcc.dev/v1alpha1", "kind": "Tool",
        "metadata": {"name": "t", "namespace": "ns"}, "spec": spec
    }))
    .unwrap()
}

#[test]
fn spec_rules_come_from_the_file_loader() {
    let e = catalog_tool(&resource(json!({"name": "x", "exec": "ls", "fn": "m:f"}))).unwrap_err();
    assert_eq!(
        e.message,
        "Tool must specify either 'fn' or 'exec', not both"
    );
    let e = catalog_tool(&resource(json!({"name": "x", "exec": "echo {{ a "}))).unwrap_err();
    assert_eq!(e.field, "exec");
    let e = catalog_tool(&resource(
        json!({"name": "x", "exec": "ls", "params": [{"name": "a", "type": "string"}]}),
    ))
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.params[0]: Unknown type 'string' for parameter 'a'"
    );
}

/// A Tool stored before the CRD had its size limits is refused as the API server now
/// would refuse it, naming the field and the limit.
#[test]
fn objects_over_the_size_limits_are_invalid() {
    let long = "x".repeat(mcc_catalog::limits::DESCRIPTION + 1);
    let e = catalog_tool(&resource(
        json!({"name": "x", "exec": "ls", "description": long}),
    ))
    .unwrap_err();
    assert_eq!(e.field, "description");
    assert_eq!(
        e.to_string(),
        "spec.description: 16385 characters, over the limit of 16384 characters"
    );
    let e = catalog_tool(&resource(json!({"name": "x", "exec": "ls",
            "params": [{"name": "a", "override": "v".repeat(20_000)}]})))
    .unwrap_err();
    assert_eq!(e.field, "params[0].override");
}

#[test]
fn env_references_stay_references() {
    let mut r = resource(json!({"name": "x", "groups": ["ops"], "exec": "env"}));
    r.spec.env = vec![
        EnvVar {
            name: "PLAIN".into(),
            value: Some("1".into()),
            value_from: None,
        },
        EnvVar {
            name: "TOKEN".into(),
            value: None,
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: "creds".into(),
                    key: "token".into(),
                    optional: None,
                }),
                ..Default::default()
            }),
        },
    ];
    let t = catalog_tool(&r).unwrap();
    assert_eq!(t.tool.key, "ops.x");
    assert_eq!(t.tool.env.get("PLAIN").map(String::as_str), Some("1"));
    assert!(!t.tool.env.contains_key("TOKEN"));
    assert_eq!(t.env_value_from[0].name, "creds");
    assert_eq!(t.env_value_from[0].source, RefKind::Secret);

    r.spec.env.push(r.spec.env[0].clone());
    assert_eq!(catalog_tool(&r).unwrap_err().field, "env[2]");
    r.spec.env.pop();
    r.spec.env[1].value_from = Some(EnvVarSource::default());
    assert_eq!(catalog_tool(&r).unwrap_err().field, "env[1].valueFrom");
}

#[test]
fn raw_fields_are_checked_by_the_catalog_types() {
    let t = catalog_tool(&resource(
        json!({"name": "x", "exec": "ls", "envPassthrough": ["A*"], "transform": ["a", "b"]}),
    ))
    .unwrap();
    assert_eq!(
        t.tool.env_passthrough,
        EnvPassthrough::Globs(vec!["A*".into()])
    );
    assert_eq!(t.tool.transform.as_deref(), Some("a | b"));
    let e = catalog_tool(&resource(
        json!({"name": "x", "exec": "ls", "envPassthrough": "yes"}),
    ))
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.envPassthrough: must be true, false or a list of strings"
    );
    let e = catalog_tool(&resource(
        json!({"name": "x", "exec": "ls", "transform": 3}),
    ))
    .unwrap_err();
    assert_eq!(e.field, "transform");
}

#[test]
fn rate_limits_take_every_spelling_and_name_the_field() {
    let limit = |v: serde_json::Value| {
        catalog_tool(&resource(
            json!({"name": "x", "exec": "ls", "rateLimit": v}),
        ))
        .map(|t| t.tool.rate_limit)
    };
    assert_eq!(
        limit(json!("10/1min")).unwrap().unwrap().to_string(),
        "10/1min"
    );
    assert_eq!(
        limit(json!("60/1hr")).unwrap().unwrap().to_string(),
        "60/1h"
    );
    assert_eq!(limit(json!(-1)).unwrap(), Some(RateLimit::Unlimited));
    assert_eq!(
        limit(json!("unlimited")).unwrap(),
        Some(RateLimit::Unlimited)
    );
    let e = limit(json!("10 per minute")).unwrap_err();
    assert_eq!(e.field, "rateLimit");
    assert!(e.to_string().contains("10/1min"), "{e}");
    let none = catalog_tool(&resource(json!({"name": "x", "exec": "ls"}))).unwrap();
    assert_eq!(none.tool.rate_limit, None);
}

#[test]
fn object_names_are_dns_safe_and_distinct() {
    assert_eq!(object_name("public.greet"), "public.greet");
    let upper = object_name("ops.Deploy_Now");
    assert!(upper.starts_with("ops.deploy-now-"), "{upper}");
    assert_ne!(object_name("ops.deploy_now"), object_name("ops.deploy-now"));
    assert!(object_name(&"a".repeat(400)).len() <= 253);
    assert!(object_name("__").starts_with("x-"));
}
