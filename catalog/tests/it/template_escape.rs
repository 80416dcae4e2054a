//! Whatever a param value holds, it reaches the process as the data it is: rendered
//! templates are run by the real `/bin/sh`, which prints the arguments it got (`printf
//! '%s\0'`). Covered: the `curl:` shorthand URL (host, path, query, fragment, with and
//! without `| quote`), values in flag-style curl targets (bare, single- and double-quoted)
//! and the safe exec patterns (`{{ v | quote }}` as a whole word, `{{ v | urlencode }}`
//! in a URL). A marker file shows
//! that no injected command ran.

use std::path::Path;
use std::process::Command;

use mcc_catalog::spec::curl_command;
use mcc_catalog::template::{environment, render, render_curl};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// The arguments `/bin/sh -c line` passes to `printf '%s\0'` (run in `dir`).
fn args_of(line: &str, dir: &Path) -> Vec<String> {
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(line)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("sh runs");
    assert!(out.status.success(), "{line}: {:?}", out);
    let text = String::from_utf8(out.stdout).expect("utf-8 args");
    let mut args: Vec<String> = text.split('\0').map(str::to_string).collect();
    assert_eq!(args.pop().as_deref(), Some(""), "NUL-terminated: {text:?}");
    args
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

fn params(v: &str) -> Map<String, Value> {
    json!({"v": v}).as_object().unwrap().clone()
}

/// The values an attacker would try, plus the characters that matter to a URL.
const HOSTILE: &[&str] = &[
    "x'; touch pwned; echo '",
    "x\"; touch pwned; echo \"",
    "$(touch pwned)",
    "`touch pwned`",
    "a\nb; touch pwned",
    "; touch pwned",
    "&& touch pwned",
    "| touch pwned",
    "a b  c",
    "?&#/%",
    "../../etc/passwd",
    "{a,b}[1-3]*",
    "$HOME ${HOME} ~",
    "\\' \\\" \\",
    "",
    "-o/tmp/x",
    "é ü 日本",
];

/// Checks every template form with `v`, in `dir`.
fn check_value(v: &str, dir: &Path) {
    let printf = "printf '%s\\0'";
    // The shorthand URL, as `curl_command` builds it, with every placement and `| quote`.
    for q in ["", " | quote"] {
        let target =
            format!("https://h.test/p/{{{{ v{q} }}}}/x?q={{{{ v{q} }}}}&r=1#{{{{ v{q} }}}}");
        let command = curl_command(&target, false).replacen("curl -sL -o -", printf, 1);
        let line = render_curl(&command, &params(v)).unwrap();
        let args = args_of(&line, dir);
        assert_eq!(args.len(), 1, "{line}");
        let url = &args[0];
        let rest = url.strip_prefix("https://h.test/p/").expect(url);
        let (path, rest) = rest.split_once("/x?q=").expect(url);
        let (query, fragment) = rest.split_once("&r=1#").expect(url);
        for part in [path, query, fragment] {
            assert_eq!(percent_decode(part), v, "{url}");
            assert!(!part.contains(['?', '#', '&', '\'', '"', ' ']), "{url}");
        }
        assert!(!path.split('/').any(|s| s == ".."), "{url}");
        // In a flag-style target: bare, single- and double-quoted words.
        for (src, expected) in [
            (
                format!("{printf} pre{{{{ v{q} }}}}post"),
                format!("pre{v}post"),
            ),
            (format!("{printf} '{{{{ v{q} }}}}'"), v.to_string()),
            (format!("{printf} \"H: {{{{ v{q} }}}}\""), format!("H: {v}")),
        ] {
            let line = render_curl(&src, &params(v)).unwrap();
            assert_eq!(args_of(&line, dir), vec![expected], "{line}");
        }
    }
    // exec's safe patterns (MCC's own rendering): a quoted value as a whole word, and a
    // `| urlencode`d string anywhere, even inside double quotes.
    let line = render(&environment(), "printf '%s\\0' {{ v | quote }}", &params(v)).unwrap();
    assert_eq!(args_of(&line, dir), vec![v.to_string()], "{line}");
    let src = "printf '%s\\0' \"https://h.test/?q={{ v | urlencode }}\"";
    let line = render(&environment(), src, &params(v)).unwrap();
    let args = args_of(&line, dir);
    let q = args[0].strip_prefix("https://h.test/?q=").expect(&line);
    assert_eq!(
        (args.len(), percent_decode(q)),
        (1, v.to_string()),
        "{line}"
    );
    // `| urlencode` in a curl URL is not encoded a second time.
    let command = curl_command("https://h.test/?q={{ v | urlencode }}", false).replacen(
        "curl -sL -o -",
        printf,
        1,
    );
    let line = render_curl(&command, &params(v)).unwrap();
    let args = args_of(&line, dir);
    let q = args[0].strip_prefix("https://h.test/?q=").expect(&line);
    assert_eq!(
        (args.len(), percent_decode(q)),
        (1, v.to_string()),
        "{line}"
    );
    assert!(
        !dir.join("pwned").exists(),
        "an injected command ran for {v:?}"
    );
}

#[test]
fn hostile_values_stay_data_in_every_form() {
    let dir = tempfile::tempdir().unwrap();
    for v in HOSTILE {
        check_value(v, dir.path());
    }
}

#[test]
fn a_nul_is_encoded_in_urls_and_refused_elsewhere() {
    let target = "https://h.test/{{ v }}";
    let line = render_curl(&curl_command(target, false), &params("a\0b")).unwrap();
    assert_eq!(line, "curl -sL -o - 'https://h.test/a%00b'");
    assert!(render_curl("curl -d {{ v }} https://h.test", &params("a\0b")).is_err());
}

/// Characters that matter to the shell or to a URL, and any others.
fn value() -> impl Strategy<Value = String> {
    let special = prop::sample::select(
        "'\"$`\\;&|<>(){}[]*?#%/~=+@:!\n\t .-_\u{7f}é"
            .chars()
            .collect::<Vec<_>>(),
    );
    let plain = any::<char>().prop_filter("no NUL, no placeholder marks", |c| {
        !matches!(*c, '\0' | '\u{FDD0}' | '\u{FDD1}')
    });
    prop::collection::vec(prop_oneof![3 => special, 1 => plain], 0..24)
        .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn any_value_stays_data(v in value()) {
        let dir = tempfile::tempdir().unwrap();
        check_value(&v, dir.path());
    }
}
