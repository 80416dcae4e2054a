//! Unit tests of `curl:` rendering (the shell-level ones run real /bin/sh:
//! catalog/tests/it/template_escape.rs).

use super::*;
use serde_json::json;

fn run(src: &str, params: serde_json::Value) -> Result<String, Error> {
    render_curl(src, params.as_object().unwrap())
}

fn ok(src: &str, params: serde_json::Value) -> String {
    run(src, params).unwrap()
}

#[test]
fn benign_values_render_as_mcc_does() {
    let mcc = "curl -sL -o - 'https://api.example.com/v1/users/42?q=rust&n=5'";
    let src = "curl -sL -o - 'https://api.example.com/v1/users/{{ id }}?q={{ q }}&n={{ n }}'";
    assert_eq!(ok(src, json!({"id": 42, "q": "rust", "n": 5})), mcc);
    let src = "curl -sL -o - 'https://api.example.com/v1/users/{{ id | quote }}?q={{ q | quote }}&n={{ n }}'";
    assert_eq!(ok(src, json!({"id": 42, "q": "rust", "n": 5})), mcc);
    let flags = "curl -sL -o - -H \"Authorization: Bearer $API_TOKEN\" https://x/{{ p }}";
    assert_eq!(
        ok(flags, json!({"p": "a/b"})),
        "curl -sL -o - -H \"Authorization: Bearer $API_TOKEN\" https://x/a/b"
    );
    assert_eq!(
        ok(
            "curl -d {{ d | quote }} -H \"X: {{ h }}\" https://x",
            json!({"d": "a b", "h": "v1"})
        ),
        "curl -d 'a b' -H \"X: v1\" https://x"
    );
}

#[test]
fn url_values_are_encoded_by_part() {
    let src = "curl 'https://{{ h }}/p/{{ p }}?q={{ q }}#{{ f }}'";
    let out = ok(
        src,
        json!({"h": "x.org:8080", "p": "a b/../c?d", "q": "a&b=c#d/e%", "f": "g h"}),
    );
    assert_eq!(
        out,
        "curl 'https://x.org:8080/p/a%20b/%2E%2E/c%3Fd?q=a%26b%3Dc%23d%2Fe%25#g%20h'"
    );
    assert_eq!(
        ok("curl 'https://{{ h }}/'", json!({"h": "evil.com/x?@y"})),
        "curl 'https://evil.com%2Fx%3F%40y/'"
    );
}

#[test]
fn quote_inside_a_url_sends_no_quotes() {
    let out = ok(
        "curl 'https://x/?q={{ q | quote }}'",
        json!({"q": "it's $(id)"}),
    );
    assert_eq!(out, "curl 'https://x/?q=it%27s%20%24%28id%29'");
}

#[test]
fn values_outside_urls_stay_in_their_word() {
    let v = json!({"v": "a'b\"c $(id) `id` ;&&|\n"});
    assert_eq!(
        ok("curl -d {{ v }} https://x", v.clone()),
        "curl -d 'a'\"'\"'b\"c $(id) `id` ;&&|\n' https://x"
    );
    assert_eq!(
        ok("curl -d '{{ v }}' https://x", v.clone()),
        "curl -d 'a'\"'\"'b\"c $(id) `id` ;&&|\n' https://x"
    );
    assert_eq!(
        ok("curl -H \"X: {{ v | quote }}\" https://x", v.clone()),
        "curl -H \"X: \"'a'\"'\"'b\"c $(id) `id` ;&&|\n'\"\" https://x"
    );
    assert_eq!(
        ok(
            "curl {{ l | quote }} https://x",
            json!({"l": ["-a b", "c"]})
        ),
        "curl '-a b' c https://x"
    );
}

#[test]
fn urlencode_is_not_applied_twice() {
    let p = json!({"q": "a b/c", "d": {"k": "v w", "n": 1}});
    assert_eq!(
        ok(
            "curl 'https://x/?q={{ q | urlencode }}&{{ d | urlencode }}'",
            p.clone()
        ),
        "curl 'https://x/?q=a%20b/c&k=v+w&n=1'"
    );
    assert_eq!(
        ok("curl -d {{ d | urlencode }} --url=https://x/{{ q }}", p),
        "curl -d 'k=v+w&n=1' --url=https://x/a%20b/c"
    );
}

#[test]
fn a_value_that_starts_the_url_decides_the_base() {
    assert_eq!(
        ok(
            "curl {{ base }}/users/{{ id }}",
            json!({"base": "https://api.example.com", "id": "a b?"})
        ),
        "curl https://api.example.com/users/a%20b%3F"
    );
}

#[test]
fn unsafe_positions_are_refused() {
    for src in [
        "curl \"$(echo {{ v }})\" https://x",
        "curl `echo {{ v }}` https://x",
        "curl \"${X:-{{ v }}}\" https://x",
        "curl https://x \\{{ v }}",
        "curl https://x # {{ v }}",
        "curl https://x --data @- <<EOF\n{{ v }}\nEOF",
        "{% set b %}{{ v }}{% endset %}curl https://x/{{ b }}",
        // bash and busybox expand `$'…'`: `\x27` would end the quoting a value relies on.
        "curl -H $'X: {{ v }}' https://x",
        "curl -H $'a\\'{{ v }}' https://x",
    ] {
        let err = run(src, json!({"v": "x"})).unwrap_err();
        assert!(err.to_string().contains("cannot"), "{src}: {err}");
    }
    assert!(run("curl -d {{ v }} https://x", json!({"v": "a\0b"})).is_err());
    assert_eq!(
        ok("curl 'https://x/{{ v }}'", json!({"v": "a\0b"})),
        "curl 'https://x/a%00b'"
    );
    // Author text in `$'…'` stays as written, and the quoting ends where the shell ends it.
    assert_eq!(
        ok(
            "curl -H $'A:\\tb\\'' {{ v }} https://x",
            json!({"v": "x y"})
        ),
        "curl -H $'A:\\tb\\'' 'x y' https://x"
    );
    // A `#` inside a word is not a comment; text after a nest is placed again.
    assert_eq!(
        ok("curl a#{{ v }} \"$(date)\" {{ v }}", json!({"v": "x y"})),
        "curl a#'x y' \"$(date)\" 'x y'"
    );
}

#[test]
fn shorthand_urls_keep_their_tags() {
    let target = "https://x/{{ p | default('a') }}?it's";
    let src = format!(
        "curl -sL -o - {}",
        super::super::shell_quote_template(target)
    );
    assert_eq!(
        src,
        "curl -sL -o - 'https://x/{{ p | default('a') }}?it'\"'\"'s'"
    );
    assert_eq!(
        ok(&src, json!({"p": "b c"})),
        "curl -sL -o - 'https://x/b%20c?it'\"'\"'s'"
    );
}
