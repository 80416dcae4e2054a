//! The loader's file rules on real files: anchors and merges, the file-level cascade,
//! load-time substitution, skipped files, directory and glob expansion, and the error for
//! every kind of bad input (each naming file, tool and field). No Python runs here: the
//! tools are exec/curl tools or fn tools with everything declared.

use std::path::{Path, PathBuf};

use mcc_catalog::introspect::Introspector;
use mcc_catalog::load::{LoadError, ParsedFile, expand, parse_file, substitute};
use mcc_catalog::{EnvPassthrough, Tool, load};

fn parse(text: &str) -> Result<ParsedFile, LoadError> {
    parse_file(Path::new("t.yaml"), text, &|_| None)
}

fn tools(text: &str) -> Vec<Tool> {
    parse(text)
        .unwrap_or_else(|e| panic!("{e}"))
        .tools
        .into_iter()
        .map(|b| b.tool)
        .collect()
}

fn error(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, text).unwrap();
    path
}

fn load_paths(paths: &[&Path]) -> Result<mcc_catalog::Loaded, LoadError> {
    let entries: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    load(&entries, &Introspector::default())
}

fn key_list(tools: &[Tool]) -> Vec<&str> {
    tools.iter().map(|t| t.key.as_str()).collect()
}

#[test]
fn anchors_and_merge_keys() {
    let t = tools(
        "x-base: &base\n  groups: [ops]\n  limits: {timeout: 5}\n  env: {A: '1'}\n\
         x-more: &more\n  <<: *base\n  stdin: true\n\
         tools:\n\
         \x20 - name: one\n    exec: echo one\n    <<: *base\n\
         \x20 - name: two\n    exec: cat\n    <<: *more\n    env: {B: '2'}\n\
         \x20 - name: three\n    exec: echo\n    <<: [*more]\n    groups: [db]\n",
    );
    assert_eq!(key_list(&t), ["ops.one", "ops.two", "db.three"]);
    assert_eq!(t[0].limits.timeout, Some(5.0));
    assert!(!t[0].stdin && t[1].stdin && t[2].stdin);
    assert_eq!(
        t[1].env.keys().collect::<Vec<_>>(),
        ["B"],
        "a key written in the entry replaces the merged one"
    );
}

#[test]
fn file_level_cascade() {
    let t = tools(
        "groups: [ops, public]\nenv: {A: file, B: file}\nenv_file: /etc/file.env\ntools:\n\
         \x20 - name: one\n    exec: x\n    groups: [admin, ops]\n    env: {B: entry, C: entry}\n\
         \x20 - name: two\n    exec: x\n    env_file: /etc/own.env\n\
         \x20 - name: three\n    exec: x\n    env_file: ''\n",
    );
    assert_eq!(
        t[0].groups,
        ["ops", "public", "admin"],
        "file groups first, no duplicates"
    );
    assert_eq!(t[0].key, "public.admin.ops.one");
    assert_eq!(t[1].key, "public.ops.two");
    let env: Vec<(&str, &str)> = t[0]
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(env, [("A", "file"), ("B", "entry"), ("C", "entry")]);
    assert_eq!(t[1].env.len(), 2);
    assert_eq!(t[0].env_file.as_deref(), Some(Path::new("/etc/file.env")));
    assert_eq!(
        t[1].env_file.as_deref(),
        Some(Path::new("/etc/own.env")),
        "entry wins"
    );
    assert_eq!(
        t[2].env_file.as_deref(),
        Some(Path::new("/etc/file.env")),
        "an empty env_file counts as none, as in MCC"
    );
}

#[test]
fn substitution_set_unset_and_escapes() {
    let text = "env:\n  $A: key\ntools:\n\
                \x20 - name: s\n    exec: 'echo $A ${A} $A_B ${A}_B $UNSET ${UNSET} $$A ${A|x} $1 $ $HOME'\n\
                \x20   description: \"pre-${A}-post\"\n    env_passthrough: [\"$A\"]\n";
    let lookup = |name: &str| match name {
        "A" => Some("va".to_string()),
        "HOME" => Some("/home/gw".to_string()),
        _ => None,
    };
    let file = parse_file(Path::new("t.yaml"), text, &lookup).unwrap();
    let t = &file.tools[0].tool;
    assert_eq!(
        t.kind.command(),
        Some("echo va va $A_B va_B $UNSET ${UNSET} $A ${A|x} $1 $ /home/gw")
    );
    assert_eq!(t.description, "pre-va-post");
    assert_eq!(t.env_passthrough, EnvPassthrough::Globs(vec!["va".into()]));
    assert!(t.env.contains_key("$A"), "keys are never substituted");
}

#[test]
fn substitution_from_the_process_environment_at_load() {
    // SAFETY (test): the variable name is unique to this test; nothing else reads it.
    unsafe { std::env::set_var("MCC_LOADER_TEST_TOKEN", "s3cret") };
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "t.yaml",
        "tools:\n  - name: t\n    exec: echo\n    params:\n      - name: token\n        \
         override: $MCC_LOADER_TEST_TOKEN\n      - name: other\n        \
         override: ${MCC_LOADER_TEST_NEVER_SET}\n",
    );
    let loaded = load_paths(&[&file]).unwrap();
    let params = &loaded.tools[0].params;
    assert_eq!(params[0].override_value, Some("s3cret".into()));
    assert_eq!(
        params[1].override_value,
        Some("${MCC_LOADER_TEST_NEVER_SET}".into())
    );
}

#[test]
fn substitution_unit_cases() {
    let lookup = |n: &str| (n == "X").then(|| "1".to_string());
    for (input, want) in [
        ("$X", "1"),
        ("${X}", "1"),
        ("$X$X", "11"),
        ("a$", "a$"),
        ("${X", "${X"),
        ("${}", "${}"),
        ("$$", "$"),
        ("$$$X", "$1"),
        ("$Xy", "$Xy"),
        ("é$X€", "é1€"),
    ] {
        assert_eq!(substitute(input, &lookup), want, "{input}");
    }
}

#[test]
fn files_without_tools_are_skipped_with_a_warning() {
    for text in [
        "",
        "groups: [a]\n",
        "- a\n- b\n",
        "just text\n",
        "# only a comment\n",
    ] {
        let file = parse(text).unwrap();
        assert!(file.tools.is_empty());
        assert_eq!(
            file.warnings
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>(),
            ["t.yaml: skipping, not a tool file (no 'tools' key)"],
            "{text:?}"
        );
    }
}

#[test]
fn unknown_keys_warn_with_key_and_file_and_x_keys_are_silent() {
    let file = parse(
        "x-anchors: {}\ntimeout: 3\ntools:\n  - name: t\n    exec: x\n    timeout: 5\n    x-note: hi\n\
         \x20   params:\n      - name: a\n        enum: [1, 2]\n        x-ui: wide\n",
    )
    .unwrap();
    let warnings: Vec<String> = file.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(
        warnings,
        [
            "t.yaml: unknown file-level key 'timeout' ignored",
            "t.yaml: tools[0] 't': unknown key 'timeout' ignored",
            "t.yaml: tools[0] 't': params[0]: unknown key 'enum' ignored",
        ]
    );
    assert_eq!(file.tools[0].tool.params[0].name, "a");
}

#[test]
fn directory_expansion_sorted_yaml_only_not_recursive() {
    let dir = tempfile::tempdir().unwrap();
    let tool = |name: &str| format!("tools:\n  - name: {name}\n    exec: echo\n");
    write(dir.path(), "b.yml", &tool("b"));
    write(dir.path(), "a.yaml", &tool("a"));
    write(dir.path(), "c.yaml.bak", &tool("c"));
    write(dir.path(), "notes.txt", "not yaml");
    write(dir.path(), "sub/d.yaml", &tool("d"));
    let names = |paths: Vec<PathBuf>| -> Vec<String> {
        paths
            .iter()
            .map(|p| p.strip_prefix(dir.path()).unwrap().display().to_string())
            .collect()
    };
    assert_eq!(
        names(expand(&dir.path().display().to_string()).unwrap()),
        ["a.yaml", "b.yml"]
    );
    let loaded = load_paths(&[dir.path()]).unwrap();
    assert_eq!(key_list(&loaded.tools), ["a", "b"]);

    let glob = format!("{}/**/*.yaml", dir.path().display());
    assert_eq!(names(expand(&glob).unwrap()), ["a.yaml", "sub/d.yaml"]);
    let glob = format!("{}/?.y*ml", dir.path().display());
    assert_eq!(names(expand(&glob).unwrap()), ["a.yaml", "b.yml"]);

    let none = format!("{}/*.json", dir.path().display());
    assert_eq!(
        expand(&none).unwrap_err().to_string(),
        format!("{none}: no tool files match")
    );
    let missing = dir.path().join("missing.yaml");
    assert!(
        expand(&missing.display().to_string())
            .unwrap_err()
            .to_string()
            .starts_with(&format!("{}: ", missing.display()))
    );
}

#[test]
fn every_entry_error_names_file_tool_and_field() {
    let head = "tools:\n  - name: ok\n    exec: echo\n";
    for (entry, want) in [
        (
            "  - name: x\n    exec: echo\n    params:\n      - name: a\n        type: string\n",
            "t.yaml: tools[1] 'x': params[0]: Unknown type 'string' for parameter 'a'",
        ),
        (
            "  - name: x\n    fn: m:f\n    exec: echo\n",
            "t.yaml: tools[1] 'x': fn/exec: Tool must specify either 'fn' or 'exec', not both",
        ),
        (
            "  - name: x\n    description: nothing to run\n",
            "t.yaml: tools[1] 'x': fn/exec: Tool must specify either 'fn' or 'exec'",
        ),
        (
            "  - name: x\n    exec: echo\n    curl: https://e.com\n",
            "t.yaml: tools[1] 'x': fn/exec/curl: Tool must specify only one of 'fn', 'exec', or 'curl'",
        ),
        (
            "  - name: x\n    exec: echo\n    python: python3\n",
            "t.yaml: tools[1] 'x': python: 'python' can only be used with 'fn', not 'exec'",
        ),
        (
            "  - exec: echo\n",
            "t.yaml: tools[1]: name: Exec tools must specify a 'name'",
        ),
        (
            "  - name: a.b\n    exec: echo\n",
            "t.yaml: tools[1] 'a.b': name: 'a.b' must not contain '.': names are joined into keys with dots",
        ),
        (
            "  - name: x\n    exec: echo {{ a\n",
            "t.yaml: tools[1] 'x': exec: template does not compile: ",
        ),
        (
            "  - name: x\n    exec: echo\n    limits: {timeout: soon}\n",
            "t.yaml: tools[1] 'x': limits.timeout: ",
        ),
        (
            "  - name: x\n    exec: echo\n    limits: {memory: 5}\n",
            "t.yaml: tools[1] 'x': limits.memory: unknown field `memory`",
        ),
        (
            "  - name: x\n    exec: echo\n    params:\n      - name: a\n      - name: a\n",
            "t.yaml: tools[1] 'x': params[1]: duplicate parameter 'a'",
        ),
        (
            "  - name: x\n    exec: echo\n    groups: ops\n",
            "t.yaml: tools[1] 'x': groups: expected a list of group names",
        ),
        (
            "  - just a string\n",
            "t.yaml: tools[1]: (entry): expected a mapping",
        ),
    ] {
        let got = error(&format!("{head}{entry}"));
        assert!(got.starts_with(want), "\n got: {got}\nwant: {want}");
    }
}

#[test]
fn file_level_errors_name_file_and_field() {
    for (text, want) in [
        (
            "tools: {a: 1}\n",
            "t.yaml: tools: expected a list of tool entries",
        ),
        ("tools:\n", "t.yaml: tools: expected a list of tool entries"),
        (
            "groups: ops\ntools: []\n",
            "t.yaml: groups: expected a list of group names",
        ),
        ("env: [a]\ntools: []\n", "t.yaml: env: expected a mapping"),
        (
            "env_file: [a]\ntools: []\n",
            "t.yaml: env_file: expected a path",
        ),
    ] {
        assert_eq!(error(text), want, "{text:?}");
    }
}

#[test]
fn malformed_yaml_names_file_and_line() {
    let text = "tools:\n  - name: a\n    exec: echo\n  - name: b\n    exec: [unclosed\n";
    let err = error(text);
    assert!(err.starts_with("t.yaml: invalid YAML: "), "{err}");
    assert!(
        err.starts_with("t.yaml: invalid YAML: line 5 column 11: "),
        "{err}"
    );
    let err = error("tools:\n  - name: a\n   bad indent: here\n");
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn duplicate_keys_name_both_places_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "a.yaml",
        "groups: [ops, public]\ntools:\n  - name: one\n    exec: echo\n    groups: [admin, ops]\n",
    );
    let b = write(
        dir.path(),
        "b.yaml",
        "tools:\n  - name: two\n    exec: echo\n  - name: one\n    exec: echo 2\n    groups: [public, admin, ops]\n",
    );
    let err = load_paths(&[&a, &b]).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "Duplicate tool one in groups ['public', 'admin', 'ops']: key 'public.admin.ops.one' \
             is defined twice, in {}: tools[0] 'one' and in {}: tools[1] 'one'",
            a.display(),
            b.display()
        )
    );
    // MCC's own words come first, with the groups as Python prints a list.
    assert!(err.starts_with("Duplicate tool one in groups ['public', 'admin', 'ops']"));
}

#[test]
fn curl_entries_become_the_curl_command() {
    let t = tools(
        "tools:\n  - name: ip\n    curl: https://api.ipify.org?format=json\n\
         \x20 - name: post\n    curl: -X POST https://httpbin.org/post\n    stdin: true\n",
    );
    assert_eq!(
        t[0].kind.command(),
        Some("curl -sL -o - 'https://api.ipify.org?format=json'")
    );
    assert_eq!(
        t[1].kind.command(),
        Some("curl -sL -o - --json @- -X POST https://httpbin.org/post")
    );
    assert_eq!(
        mcc_catalog::signature(&t[0]),
        "## ip () -> str | (int, str, str)\n"
    );
}

#[test]
fn booleans_as_pyyaml_reads_them() {
    let t = tools(
        "tools:\n  - name: y\n    exec: echo {{ n }} {{ b }}\n    stdin: yes\n    params:\n\
         \x20     - name: n\n        default: n\n        required: off\n\
         \x20     - name: b\n        type: bool\n        default: On\n        override: NO\n",
    );
    let t = &t[0];
    assert_eq!(t.name, "y", "`y` and `n` are strings, as in PyYAML");
    assert!(t.stdin);
    assert_eq!(t.params[0].name, "n");
    assert_eq!(t.params[0].default, Some("n".into()));
    assert_eq!(t.params[1].default, Some(true.into()));
    assert_eq!(t.params[1].override_value, Some(false.into()));
    let err = error("tools:\n  - name: x\n    exec: echo\n    stdin: maybe\n");
    assert!(
        err.starts_with("t.yaml: tools[0] 'x': stdin: expected a boolean"),
        "{err}"
    );
    let err = error("tools:\n  - name: x\n    exec: a\n    name: y\n");
    assert!(
        err.starts_with("t.yaml: invalid YAML: "),
        "duplicate keys are refused: {err}"
    );
}

#[test]
fn every_field_of_an_entry() {
    let t = tools(
        "tools:\n  - name: full\n    exec: cat\n    groups: [ops]\n    description: Does it all.\n\
         \x20   example: full(n=1)\n    stdin: true\n    limits: {timeout: 0.5, mem_mb: 64, cpu_sec: 2, fsize_mb: 1, nofile: 32}\n\
         \x20   cwd: /tmp\n    env: {N: 30, B: true}\n    env_file: /etc/x.env\n    env_passthrough: true\n\
         \x20   transform: [sort, head -n 1]\n    cache_ttl: 60\n    return_type: str\n\
         \x20   params:\n      - name: n\n        type: int\n        required: true\n        description: How many.\n\
         \x20       example: 3\n      - name: f\n        type: float\n        default: 1.5\n",
    );
    let t = &t[0];
    assert_eq!(t.key, "ops.full");
    assert_eq!(
        (t.description.as_str(), t.example.as_str()),
        ("Does it all.", "full(n=1)")
    );
    assert!(t.stdin);
    assert_eq!(
        (
            t.limits.timeout,
            t.limits.mem_mb,
            t.limits.cpu_sec,
            t.limits.fsize_mb,
            t.limits.nofile
        ),
        (Some(0.5), Some(64), Some(2), Some(1), Some(32))
    );
    assert_eq!(t.cwd.as_deref(), Some(Path::new("/tmp")));
    assert_eq!((t.env["N"].as_str(), t.env["B"].as_str()), ("30", "True"));
    assert_eq!(t.env_passthrough, EnvPassthrough::All(true));
    assert_eq!(t.transform.as_deref(), Some("sort | head -n 1"));
    assert_eq!(t.cache_ttl, Some(60));
    assert_eq!(t.params[0].example, Some(serde_json::json!(3)));
    assert!(
        !t.params[1].required,
        "required defaults to false, as MCC's code does"
    );
    assert_eq!(
        mcc_catalog::signature(t),
        "## ops.full (n:int, f:float=1.5) -> str | (int, str, str)\n`n` — How many.\nDoes it all.\nfull(n=1)\n"
    );
}

#[test]
fn alias_bombs_are_refused_not_expanded() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let p = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    text.push_str("tools: *a9\n");
    let started = std::time::Instant::now();
    let err = error(&text);
    assert!(err.starts_with("t.yaml: invalid YAML: "), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn annotations_and_output_schemas_are_read_and_checked() {
    let t = &tools(
        "tools:\n  - name: t\n    exec: ls\n    title: List\n    read_only_hint: true\n    \
         destructive_hint: no\n    open_world_hint: null\n    output_schema:\n      \
         type: object\n      properties: {n: {type: integer}}\n",
    )[0];
    assert_eq!(t.annotations.title.as_deref(), Some("List"));
    assert_eq!(t.annotations.read_only_hint, Some(true));
    assert_eq!(t.annotations.destructive_hint, Some(false));
    assert_eq!(t.annotations.idempotent_hint, None);
    assert_eq!(t.annotations.open_world_hint, None);
    assert_eq!(
        t.output_schema,
        Some(serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
    );
    let plain = &tools("tools:\n  - name: t\n    exec: ls\n")[0];
    assert!(plain.annotations.is_empty() && plain.output_schema.is_none());

    let entry = |extra: &str| format!("tools:\n  - name: t\n    exec: ls\n{extra}");
    let e = error(&entry("    idempotent_hint: maybe\n"));
    assert!(
        e.starts_with("t.yaml: tools[0] 't': idempotent_hint: "),
        "{e}"
    );
    assert_eq!(
        error(&entry("    title: \"a\\nb\"\n")),
        "t.yaml: tools[0] 't': title: must be one line"
    );
    let e = error(&entry(
        "    output_schema:\n      type: object\n      properties: {n: {type: 5}}\n",
    ));
    assert!(
        e.starts_with(
            "t.yaml: tools[0] 't': output_schema: not a valid JSON Schema at /properties/n/type"
        ),
        "{e}"
    );
    let e = error(&entry("    output_schema: {type: string}\n"));
    assert!(e.contains("output_schema: the root must be"), "{e}");
}

#[test]
fn approval_is_required_or_left_out() {
    let t = &tools("tools:\n  - name: t\n    exec: ls\n    approval: required\n")[0];
    assert!(t.approval_required);
    let t = &tools("tools:\n  - name: t\n    exec: ls\n")[0];
    assert!(!t.approval_required);
    assert_eq!(
        error("tools:\n  - name: t\n    exec: ls\n    approval: never\n"),
        "t.yaml: tools[0] 't': approval: must be 'required' (or left out), got 'never'"
    );
    // No way to opt out, not even with a boolean.
    assert_eq!(
        error("tools:\n  - name: t\n    exec: ls\n    approval: false\n"),
        "t.yaml: tools[0] 't': approval: must be 'required' (or left out), got 'false'"
    );
}
