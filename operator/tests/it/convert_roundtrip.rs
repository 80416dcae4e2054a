//! MCC YAML → manifests (as YAML text) → `Tool` resources → catalog equals the catalog
//! the file loader builds from the same YAML, for every field; `env_file` becomes a
//! Secret with the dotenv's variables and an `envFrom` reference to it.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Secret;
use mcc_catalog::crd::{Tool, UserGrant};
use mcc_catalog::document::RefKind;
use mcc_operator::convert::{catalog_tool, tool_resource};
use mcc_operator::manifests::{ConvertOptions, convert, parse_tools};
use serde_json::Value;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn options() -> ConvertOptions {
    ConvertOptions {
        tool_files: vec![examples().join("ops.yaml").display().to_string()],
        users_file: Some(examples().join("users.yaml")),
        namespace: "tools".into(),
        substitute_env: false,
        env_file_base: Some(examples()),
    }
}

/// The manifests as `kubectl apply` would read them back.
fn applied() -> (Vec<Secret>, Vec<Tool>, Vec<UserGrant>) {
    let yaml = convert(&options()).unwrap().to_yaml().unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    let (mut secrets, mut tools, mut grants) = (vec![], vec![], vec![]);
    for doc in docs {
        match doc["kind"].as_str() {
            Some("Secret") => secrets.push(serde_json::from_value(doc).unwrap()),
            Some("Tool") => tools.push(serde_json::from_value(doc).unwrap()),
            Some("UserGrant") => grants.push(serde_json::from_value(doc).unwrap()),
            other => panic!("unexpected kind {other:?}"),
        }
    }
    (secrets, tools, grants)
}

#[test]
fn tools_survive_the_trip_through_resources() {
    let mut warnings = vec![];
    let from_files = parse_tools(&options().tool_files, &|_| None, &mut warnings).unwrap();
    let (secrets, resources, _) = applied();
    assert_eq!(resources.len(), from_files.len());
    for (file_built, resource) in from_files.iter().zip(&resources) {
        let file_tool = &file_built.tool;
        let built = catalog_tool(resource).unwrap();
        assert_eq!(
            built.introspect, file_built.needs_introspection,
            "{}",
            file_tool.key
        );
        assert_eq!(
            built.name_from_callable, file_built.name_from_callable,
            "{}",
            file_tool.key
        );
        let mut expected = file_tool.clone();
        // What legitimately differs: where it came from, and env_file's new form.
        expected.source = built.tool.source.clone();
        expected.env_file = None;
        assert_eq!(built.tool, expected, "{}", file_tool.key);
        assert_eq!(built.namespace, "tools");
        // The env_file is now a Secret reference.
        assert!(file_tool.env_file.is_some());
        assert_eq!(built.env_from.len(), 1);
        assert_eq!(built.env_from[0].source, RefKind::Secret);
        assert_eq!(
            Some(&built.env_from[0].name),
            secrets[0].metadata.name.as_ref()
        );
    }
    let keys: Vec<&str> = from_files.iter().map(|t| t.tool.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "ops.disk_usage",
            "public.ops.ip",
            "ops.post_json",
            "ops.reports.run",
            "ops.summary"
        ]
    );
}

#[test]
fn fn_tools_without_params_are_left_to_the_gateway() {
    let (_, resources, _) = applied();
    let by_fn = |f: &str| {
        resources
            .iter()
            .find(|t| t.spec.func.as_deref() == Some(f))
            .unwrap()
    };
    let summary = by_fn("reports.build:summary");
    assert!(summary.spec.params.is_none());
    assert!(
        summary.spec.name.is_none(),
        "named by introspection, as MCC does"
    );
    let built = catalog_tool(summary).unwrap();
    assert!(built.introspect && built.name_from_callable);
    assert_eq!(
        built.tool.key, "ops.summary",
        "provisional until introspection"
    );
    let run = catalog_tool(by_fn("reports.build:run")).unwrap();
    assert!(!run.introspect, "params and return type declared");
    assert!(!run.name_from_callable);
}

#[test]
fn env_file_becomes_one_secret_with_its_variables() {
    let (secrets, _, _) = applied();
    assert_eq!(secrets.len(), 1, "one Secret per distinct env_file");
    let data = secrets[0].string_data.as_ref().unwrap();
    assert_eq!(data["API_TOKEN"], "change-me");
    assert_eq!(data["DB_URL"], "postgres://db.internal/ops");
    assert_eq!(secrets[0].metadata.namespace.as_deref(), Some("tools"));
}

#[test]
fn users_become_grants() {
    let (_, _, grants) = applied();
    let bob = grants.iter().find(|g| g.spec.username == "bob").unwrap();
    assert_eq!(bob.spec.groups, ["ops"]);
    assert_eq!(bob.spec.tools, ["public.ops.ip", "ops.summary"]);
    let alice = grants.iter().find(|g| g.spec.username == "alice").unwrap();
    assert_eq!(alice.spec.email.as_deref(), Some("alice@example.com"));
}

#[test]
fn a_users_file_is_read_by_the_catalogs_reader_with_oidc_subjects_and_key_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.yaml");
    std::fs::write(
        &users,
        "users:\n  - username: dana\n    oidc_subjects: [{issuer: 'https://idp/', subject: s1}, plain]\n    api_keys: [{prefix: 0123456789ab, sha256: '00'}]\n",
    )
    .unwrap();
    let mut opts = options();
    opts.tool_files = vec![];
    opts.users_file = Some(users.clone());
    let converted = convert(&opts).unwrap();
    assert_eq!(
        converted.grants[0].spec.oidc_subjects,
        [
            serde_json::json!({"issuer": "https://idp/", "subject": "s1"}),
            serde_json::json!({"subject": "plain"}),
        ]
    );
    let warnings: Vec<String> = converted.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("'dana': api_keys are not converted")),
        "{warnings:?}"
    );
    // The reader's own rules, as the gateway applies them.
    std::fs::write(&users, "users:\n  - username: a\n  - username: a\n").unwrap();
    let err = convert(&opts).unwrap_err().to_string();
    assert!(
        err.contains("users.yaml") && err.contains("users[1]: user 'a' is listed more than once"),
        "{err}"
    );
}

#[test]
fn bad_input_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "tools:\n  - name: x\n    exec: ls\n    env_file: missing.env\n",
    )
    .unwrap();
    let mut opts = options();
    opts.tool_files = vec![bad.display().to_string()];
    opts.env_file_base = Some(dir.path().to_path_buf());
    let err = convert(&opts).unwrap_err().to_string();
    assert!(
        err.contains("missing.env") && err.contains("cannot read env_file"),
        "{err}"
    );

    std::fs::write(&bad, "tools:\n  - exec: ls\n").unwrap();
    let err = convert(&opts).unwrap_err().to_string();
    assert!(
        err.contains("bad.yaml") && err.contains("Exec tools must specify a 'name'"),
        "{err}"
    );

    let users = dir.path().join("users.yaml");
    std::fs::write(&users, "users:\n  - email: x@y\n").unwrap();
    opts.tool_files = vec![examples().join("ops.yaml").display().to_string()];
    opts.env_file_base = Some(examples());
    opts.users_file = Some(users);
    let err = convert(&opts).unwrap_err().to_string();
    assert!(err.contains("users.yaml"), "{err}");
}

#[test]
fn literal_var_references_are_flagged_or_substituted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("vars.yaml");
    std::fs::write(
        &file,
        "tools:\n  - name: x\n    exec: echo $HOME\n    env: {TOKEN: $MCC_TEST_UNSET_TOKEN}\n    params:\n      - {name: key, override: '${MCC_TEST_UNSET_KEY}'}\n",
    )
    .unwrap();
    let mut opts = options();
    opts.tool_files = vec![file.display().to_string()];
    opts.users_file = None;
    let converted = convert(&opts).unwrap();
    let messages: Vec<String> = converted.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].contains("env TOKEN"), "{messages:?}");
    assert!(messages[1].contains("param key override"), "{messages:?}");
    // The command's `$HOME` belongs to the shell: not flagged, and kept as written.
    assert_eq!(converted.tools[0].spec.exec.as_deref(), Some("echo $HOME"));
}

/// Annotations and output schemas go both ways; a bad schema is refused naming the
/// spec's field (`outputSchema`, not the file's `output_schema`) and the schema path.
#[test]
fn annotations_and_output_schemas_round_trip_and_bad_schemas_name_the_field() {
    let resource = |spec: Value| -> Tool {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "mcc.dev/v1alpha1", "kind": "Tool",
            "metadata": {"name": "t", "namespace": "ns"}, "spec": spec
        }))
        .unwrap()
    };
    let schema = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    let t = catalog_tool(&resource(serde_json::json!({
        "name": "x", "exec": "ls", "title": "Lister", "readOnlyHint": true,
        "openWorldHint": false, "outputSchema": schema
    })))
    .unwrap()
    .tool;
    assert_eq!(t.annotations.title.as_deref(), Some("Lister"));
    assert_eq!(t.annotations.read_only_hint, Some(true));
    assert_eq!(t.annotations.open_world_hint, Some(false));
    assert_eq!(t.output_schema.as_ref(), Some(&schema));
    let back = tool_resource(&t, false, "ns", None).spec;
    assert_eq!(back.title.as_deref(), Some("Lister"));
    assert_eq!(back.read_only_hint, Some(true));
    assert_eq!(back.destructive_hint, None);
    assert_eq!(back.output_schema, Some(schema));

    let e = catalog_tool(&resource(serde_json::json!({
        "name": "x", "exec": "ls",
        "outputSchema": {"type": "object", "properties": {"n": {"type": "integr"}}}
    })))
    .unwrap_err();
    assert_eq!(e.field, "outputSchema");
    assert!(e.message.contains("/properties/n/type"), "{e}");
}

/// `approval: required` goes both ways; any other value is refused naming `approval`.
#[test]
fn approval_round_trips_and_other_values_name_the_field() {
    let resource = |spec: Value| -> Tool {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "mcc.dev/v1alpha1", "kind": "Tool",
            "metadata": {"name": "t", "namespace": "ns"}, "spec": spec
        }))
        .unwrap()
    };
    let spec = serde_json::json!({"name": "x", "exec": "ls", "approval": "required"});
    let t = catalog_tool(&resource(spec)).unwrap().tool;
    assert!(t.approval_required);
    let back = tool_resource(&t, false, "ns", None).spec;
    assert_eq!(back.approval.as_deref(), Some("required"));
    let plain = catalog_tool(&resource(serde_json::json!({"name": "x", "exec": "ls"})))
        .unwrap()
        .tool;
    assert_eq!(tool_resource(&plain, false, "ns", None).spec.approval, None);

    let e = catalog_tool(&resource(
        serde_json::json!({"name": "x", "exec": "ls", "approval": "optional"}),
    ))
    .unwrap_err();
    assert_eq!(e.field, "approval");
    assert_eq!(
        e.message,
        "must be 'required' (or left out), got 'optional'"
    );
}
