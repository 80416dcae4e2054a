//! MCC's own tool files (verbatim, `tests/fixtures/mcc/`) read unchanged: keys, groups from
//! anchors and `<<` merges, overrides, curl-less exec shapes, legacy keys as warnings. The
//! `mcc.*` modules they name do not exist here, so these files are parsed without
//! introspection; `example/tools.yaml` is loaded for real (its `example.py` is beside it).

use std::path::{Path, PathBuf};

use mcc_catalog::introspect::Introspector;
use mcc_catalog::load::{ParsedFile, parse_file};
use mcc_catalog::{EnvPassthrough, ParamType, Tool, ToolKind};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcc")
        .join(name)
}

fn parse_with(name: &str, lookup: &dyn Fn(&str) -> Option<String>) -> ParsedFile {
    let path = fixture(name);
    let text = std::fs::read_to_string(&path).unwrap();
    parse_file(&path, &text, lookup).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn parse(name: &str) -> ParsedFile {
    parse_with(name, &|_| None)
}

fn keys(file: &ParsedFile) -> Vec<&str> {
    file.tools.iter().map(|b| b.tool.key.as_str()).collect()
}

fn tool<'a>(file: &'a ParsedFile, key: &str) -> &'a Tool {
    &file
        .tools
        .iter()
        .find(|b| b.tool.key == key)
        .unwrap_or_else(|| panic!("no tool {key} in {:?}", keys(file)))
        .tool
}

#[test]
fn admin_yaml_anchors_and_merge_keys() {
    let file = parse("admin.yaml");
    assert_eq!(
        keys(&file),
        [
            "admin.auth.users.create_user",
            "admin.auth.users.list_users",
            "admin.auth.users.delete_user",
            "admin.auth.users.get_user_by_username",
            "admin.auth.users.get_user_by_email",
            "admin.auth.groups.remove_group",
            "admin.auth.groups.add_group",
            "admin.auth.tools.add_tool",
            "admin.auth.tools.remove_tool",
            "admin.loader.list_all",
        ]
    );
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
    for built in &file.tools {
        let t = &built.tool;
        assert_eq!(
            t.env_passthrough,
            EnvPassthrough::Globs(vec!["MCC_ELASTICSEARCH_URL".into()]),
            "{}: the nested `<<: *defaults` must reach every tool",
            t.key
        );
        assert!(built.needs_introspection && built.name_from_callable);
        assert!(t.kind.is_fn());
    }
    let create = tool(&file, "admin.auth.users.create_user");
    assert_eq!(create.groups, ["admin", "auth", "users"]);
    assert_eq!(
        create.example,
        r#"create_user(username="alice", email="alice@example.com", groups=["osint"])"#
    );
    assert_eq!(
        tool(&file, "admin.loader.list_all").kind,
        ToolKind::Fn {
            path: "mcc.loader:loader.list_all".into(),
            python: None
        }
    );
}

#[test]
fn public_yaml() {
    let file = parse("public.yaml");
    assert_eq!(keys(&file), ["public.auth.tools.list_tools"]);
    let t = tool(&file, "public.auth.tools.list_tools");
    assert_eq!(t.example, "list_tools(text=True)");
    assert!(t.allows(None), "public tools are open to anonymous callers");
}

#[test]
fn http_yaml_overrides_folded_exec_and_substitution() {
    let file = parse_with("http.yaml", &|name| {
        (name == "DNSDUMPSTER_API_KEY").then(|| "k3y".to_string())
    });
    assert_eq!(
        keys(&file),
        [
            "admin.http.request",
            "public.http.responsible-get",
            "public.http.geolocate",
            "public.http.dnsdumpster",
        ]
    );
    let get = tool(&file, "public.http.responsible-get");
    let visible: Vec<&str> = get.visible_params().map(|p| p.name.as_str()).collect();
    assert_eq!(visible, ["url"], "overridden params are hidden");
    assert_eq!(get.params[1].override_value, Some(serde_json::json!(true)));
    let geo = tool(&file, "public.http.geolocate");
    assert_eq!(geo.params[1].ty, ParamType::List);
    assert_eq!(geo.params[1].default, Some(serde_json::json!([])));
    assert_eq!(
        mcc_catalog::signature(geo).lines().next().unwrap(),
        "## public.http.geolocate (query:str=\"\", fields:list=[]) -> str | (int, str, str)"
    );
    let dns = tool(&file, "public.http.dnsdumpster");
    assert_eq!(
        dns.kind.command(),
        Some(
            "curl -s -o - -H 'X-API-Key: k3y' 'https://api.dnsdumpster.com/domain/{{ domain }}' \n"
        ),
        "a folded scalar keeps its final newline; ${{VAR}} is substituted inside it"
    );
    let unset = parse("http.yaml");
    assert!(
        tool(&unset, "public.http.dnsdumpster")
            .kind
            .command()
            .unwrap()
            .contains("X-API-Key: ${DNSDUMPSTER_API_KEY}"),
        "an unset variable stays literal"
    );
}

#[test]
fn text_system_fs_archive_yaml() {
    let text = parse("text.yaml");
    assert_eq!(
        keys(&text),
        [
            "public.text.base64_encode",
            "public.text.base64_decode",
            "public.text.hash",
            "public.text.diff",
            "public.text.regex_search",
            "public.text.regex_replace",
            "public.text.jq",
        ]
    );
    let regex = &text.tools[4];
    assert!(
        regex.needs_introspection && !regex.name_from_callable,
        "declared params without return_type still introspect, but the name stays"
    );
    let jq = tool(&text, "public.text.jq");
    assert!(
        jq.description
            .starts_with("jq is a tool for processing JSON inputs")
    );
    // The file ends inside this `|` block without a newline: PyYAML keeps no final line
    // break there, serde-saphyr adds one (the only difference seen in these files).
    assert!(jq.description.trim_end().ends_with("standard output."));
    assert_eq!(
        mcc_catalog::signature(jq).lines().next().unwrap(),
        "## public.text.jq (filter:str=\".content\", content:str=\"\", opts:str=\"\") -> str | (int, str, str)"
    );

    let system = parse("system.yaml");
    assert_eq!(
        keys(&system),
        [
            "admin.system.get_env",
            "admin.system.list_env",
            "admin.system.platform",
            "admin.system.pythonpath",
            "admin.system.set_env",
            "admin.system.bash",
            "admin.system.python",
            "admin.system.man",
            "admin.system.uname",
        ]
    );
    assert!(tool(&system, "admin.system.python").stdin);

    let fs = parse("fs.yaml");
    assert_eq!(
        keys(&fs),
        [
            "admin.fs.read.read_file",
            "admin.fs.read.stat",
            "admin.fs.read.list_dir",
            "admin.fs.write.move",
            "admin.fs.write.write_file",
        ]
    );
    assert_eq!(
        tool(&fs, "admin.fs.read.stat").groups,
        ["admin", "fs", "read"]
    );

    let archive = parse("archive.yaml");
    assert_eq!(
        keys(&archive),
        [
            "admin.archive.list",
            "admin.archive.extract",
            "admin.archive.create"
        ]
    );
}

#[test]
fn legacy_tools_yaml_keys_are_warnings_naming_key_and_file() {
    let file = parse("tools.yaml");
    assert_eq!(keys(&file), ["echo", "datetime"]);
    let warnings: Vec<String> = file.warnings.iter().map(|w| w.to_string()).collect();
    let path = fixture("tools.yaml").display().to_string();
    assert_eq!(
        warnings,
        [
            format!("{path}: unknown file-level key 'group' ignored"),
            format!("{path}: tools[0] 'echo': unknown key 'parameters' ignored"),
            format!("{path}: tools[1] 'datetime': unknown key 'parameters' ignored"),
        ]
    );
}

/// An introspector that finds `example.py` through PYTHONPATH (the file sets no `cwd`).
fn fixture_introspector() -> Introspector {
    let mut introspector = Introspector::default();
    introspector.floor.push("PYTHONPATH".into());
    introspector.parent_env = vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("PYTHONPATH".into(), fixture("").display().to_string()),
    ];
    introspector
}

#[test]
fn example_tools_yaml_fails_on_datetime_with_pythons_last_line() {
    let path = fixture("tools.yaml").display().to_string();
    let err = mcc_catalog::load(std::slice::from_ref(&path), &fixture_introspector())
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "{path}: tools[1] 'datetime': fn: Failed to load tool 'datetime.datetime': \
             ValueError: no signature found for builtin type <class 'datetime.datetime'>"
        )
    );
}

#[test]
fn example_echo_introspected_from_example_py() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("echo.yaml");
    let text = std::fs::read_to_string(fixture("tools.yaml")).unwrap();
    let echo_only = text.split("  - name: datetime").next().unwrap();
    std::fs::write(&file, echo_only).unwrap();
    let loaded = mcc_catalog::load(&[file.display().to_string()], &fixture_introspector()).unwrap();
    assert_eq!(
        mcc_catalog::signature(&loaded.tools[0]),
        "## echo (message:str) -> list[str]\nEchoes back the provided message\n"
    );
    assert!(loaded.tools[0].params[0].required);
}
