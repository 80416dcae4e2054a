//! `mcc-gateway check` as humans and CI run it: the built binary on `examples/` and on
//! broken files.

use std::path::Path;
use std::process::{Command, Output};

fn check(args: &[&str]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    Command::new(env!("CARGO_BIN_EXE_mcc-gateway"))
        .arg("check")
        .args(args)
        .current_dir(root)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn examples_pass_and_every_signature_is_printed() {
    let out = check(&["examples/"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.is_empty(), "no warnings expected: {stderr}");
    assert!(stdout.contains(
        "## public.echo (message:str) -> str | (int, str, str)\n`message` — The text to echo.\n"
    ));
    assert!(stdout.contains("## osint.paginate (page_size:int=3) -> list\n"));
    assert!(stdout.ends_with("10 tools OK\n"), "{stdout}");
    assert_eq!(
        stdout.matches("\n## ").count() + 1,
        10,
        "one heading per tool"
    );
}

#[test]
fn a_broken_file_fails_naming_file_tool_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broken.yaml");
    std::fs::write(
        &file,
        "tools:\n  - name: ok\n    exec: echo\n  - name: bad\n    exec: echo {{ a }}\n    \
         params:\n      - name: a\n        type: string\n",
    )
    .unwrap();
    let out = check(&[&file.display().to_string()]);
    assert!(!out.status.success());
    assert!(
        out.stdout.is_empty(),
        "nothing is printed for a catalog that does not load"
    );
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {}: tools[1] 'bad': params[0]: Unknown type 'string' for parameter 'a'\n",
            file.display()
        )
    );
}

#[test]
fn malformed_yaml_and_missing_paths_fail() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(&file, "tools:\n  - name: a\n    exec: [echo\n").unwrap();
    let out = check(&[&file.display().to_string()]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.starts_with(&format!("error: {}: invalid YAML: ", file.display())),
        "{stderr}"
    );
    assert!(stderr.contains("line 3"), "{stderr}");

    let out = check(&["no/such/dir/tools.yaml"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).starts_with("error: no/such/dir/tools.yaml: "));

    let out = check(&[]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("no tool files given"));
}

#[test]
fn warnings_go_to_stderr_and_do_not_fail() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.yaml");
    std::fs::write(
        &file,
        "tools:\n  - name: t\n    exec: echo\n    timeout: 5\n",
    )
    .unwrap();
    let out = check(&[&file.display().to_string()]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stderr),
        format!(
            "warning: {}: tools[0] 't': unknown key 'timeout' ignored\n",
            file.display()
        )
    );
    assert_eq!(
        text(&out.stdout),
        "## t () -> str | (int, str, str)\n\n1 tool OK\n"
    );
}

#[test]
fn annotations_are_printed_and_a_bad_output_schema_fails_naming_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.yaml");
    std::fs::write(
        &file,
        "tools:\n  - name: t\n    exec: echo\n    title: The T\n    destructive_hint: yes\n    \
         output_schema: {type: object}\n",
    )
    .unwrap();
    let out = check(&[&file.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "## t () -> str | (int, str, str)\nTitle: The T\nHints: destructiveHint=true\n\
         Output schema: {\"type\":\"object\"}\n\n1 tool OK\n"
    );

    std::fs::write(
        &file,
        "tools:\n  - name: t\n    exec: echo\n    output_schema:\n      type: object\n      \
         properties:\n        n: {type: integr}\n",
    )
    .unwrap();
    let out = check(&[&file.display().to_string()]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "error: {}: tools[0] 't': output_schema: not a valid JSON Schema at /properties/n/type: ",
            file.display()
        )),
        "{stderr}"
    );
}
