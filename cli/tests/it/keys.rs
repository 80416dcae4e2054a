//! `mcc key mint|list|revoke` on a users file: what is written is what the gateway's
//! reader and key check accept; the key itself is only printed.

use crate::support;

use chrono::Utc;
use mcc_gateway::auth::api_key;
use mcc_gateway::catalog::load_users;
use serde_json::Value;
use support::{fails, mcc, ok};

#[test]
fn a_minted_key_logs_in_at_the_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.yaml");
    std::fs::write(&users, "# our users\n# (file mode)\nusers:\n  - username: alice\n    email: a@example.com\n    groups: [osint]\n  - username: bob\n").unwrap();
    let u = users.to_str().unwrap();

    let raw = ok(mcc(&["key", "mint", "alice", "--users", u]));
    let raw = raw.trim();
    let text = std::fs::read_to_string(&users).unwrap();
    assert!(text.starts_with("# our users\n# (file mode)\n"), "{text}");
    assert!(!text.contains(raw), "the raw key is never stored");
    let dir_now = load_users(&users).unwrap().directory;
    assert_eq!(api_key::verify(&dir_now, raw, Utc::now()).unwrap(), "alice");
    assert_eq!(
        dir_now.by_username("alice").unwrap().email.as_deref(),
        Some("a@example.com")
    );

    // MCC's spelling; a new key replaces the old one (one key per user) unless --keep.
    let json: Value = serde_json::from_str(&ok(mcc(&[
        "--json",
        "user",
        "key",
        "add",
        "alice",
        "--users",
        u,
        "--expires",
        "never",
    ])))
    .unwrap();
    let second = json["key"].as_str().unwrap().to_string();
    assert!(json["expires_at"].is_null());
    let d = load_users(&users).unwrap().directory;
    assert!(api_key::verify(&d, raw, Utc::now()).is_err());
    assert_eq!(api_key::verify(&d, &second, Utc::now()).unwrap(), "alice");
    let third = ok(mcc(&[
        "key",
        "mint",
        "alice",
        "--users",
        u,
        "--keep",
        "--expires",
        "30",
    ]));
    let d = load_users(&users).unwrap().directory;
    assert_eq!(
        api_key::verify(&d, third.trim(), Utc::now()).unwrap(),
        "alice"
    );
    assert_eq!(api_key::verify(&d, &second, Utc::now()).unwrap(), "alice");

    // A new user with --group.
    let carol = ok(mcc(&["key", "mint", "carol", "-g", "ops", "--users", u]));
    let d = load_users(&users).unwrap().directory;
    assert_eq!(
        api_key::verify(&d, carol.trim(), Utc::now()).unwrap(),
        "carol"
    );
    assert_eq!(d.by_username("carol").unwrap().groups, ["ops"]);

    let list: Value =
        serde_json::from_str(&ok(mcc(&["key", "list", "--users", u, "-o", "json"]))).unwrap();
    let rows = list.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert!(
        rows.iter()
            .all(|r| r.get("key").is_none() && r["prefix"].as_str().unwrap().len() == 12)
    );
    let text = ok(mcc(&["user", "key", "list", "--users", u]));
    assert!(text.starts_with("USER"), "{text}");
    let text = ok(mcc(&["key", "ls", "--users", u]));
    assert!(
        text.contains("alice") && text.contains("never") && text.contains("carol"),
        "{text}"
    );

    // Revoke one key by prefix, then all.
    let prefix = &third.trim()[4..16];
    ok(mcc(&[
        "key", "revoke", "alice", "--prefix", prefix, "--users", u,
    ]));
    let d = load_users(&users).unwrap().directory;
    assert!(api_key::verify(&d, third.trim(), Utc::now()).is_err());
    assert!(api_key::verify(&d, &second, Utc::now()).is_ok());
    ok(mcc(&["user", "key", "revoke", "alice", "--users", u]));
    let d = load_users(&users).unwrap().directory;
    assert!(api_key::verify(&d, &second, Utc::now()).is_err());
    let e = fails(mcc(&["key", "revoke", "alice", "--users", u]));
    assert!(
        e.contains("No key found for user 'alice'") && e.contains("users.yaml"),
        "{e}"
    );
}

#[test]
fn bad_input_names_the_user_flag_or_file() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.yaml");
    std::fs::write(&users, "users:\n  - username: a\n    grups: [x]\n").unwrap();
    let u = users.to_str().unwrap();
    let e = fails(mcc(&["key", "mint", "a", "--users", u]));
    assert!(e.contains(u) && e.contains("unknown key 'grups'"), "{e}");
    std::fs::write(&users, "users:\n  - username: a\n").unwrap();
    let e = fails(mcc(&["key", "mint", "zed", "--users", u]));
    assert!(
        e.contains("user 'zed' is not in") && e.contains("--group"),
        "{e}"
    );
    let e = fails(mcc(&[
        "key",
        "mint",
        "a",
        "--users",
        u,
        "--expires",
        "soon",
    ]));
    assert!(e.contains("--expires soon"), "{e}");
    let e = fails(mcc(&[
        "key",
        "revoke",
        "a",
        "--prefix",
        "ffffffffffff",
        "--users",
        u,
    ]));
    assert!(e.contains("--prefix ffffffffffff"), "{e}");
    let e = fails(mcc(&["key", "list", "--users", "nope.yaml"]));
    assert!(e.contains("--users nope.yaml"), "{e}");
}

#[test]
fn kubernetes_mode_prints_a_user_grant() {
    let out = ok(mcc(&[
        "key",
        "mint",
        "alice",
        "--kubernetes",
        "-n",
        "team",
        "-g",
        "osint",
        "--expires",
        "30",
    ]));
    let grant: Value = serde_saphyr::from_str(&out).unwrap();
    assert_eq!(grant["kind"], "UserGrant");
    assert_eq!(grant["apiVersion"], "mcc.dev/v1alpha1");
    assert_eq!(grant["metadata"]["namespace"], "team");
    assert_eq!(grant["spec"]["username"], "alice");
    assert_eq!(grant["spec"]["apiKey"]["enabled"], true);
    assert_eq!(grant["spec"]["apiKey"]["ttlDays"], 30);
    let out = ok(mcc(&[
        "key",
        "revoke",
        "alice",
        "--kubernetes",
        "-n",
        "team",
    ]));
    assert!(
        out.starts_with("kubectl patch usergrants.mcc.dev alice -n team"),
        "{out}"
    );
    let out = ok(mcc(&["key", "list", "--kubernetes"]));
    assert!(
        out.starts_with("kubectl get usergrants.mcc.dev -n default"),
        "{out}"
    );
    let e = fails(mcc(&["key", "list", "--apply"]));
    assert!(e.contains("--kubernetes"), "{e}");
}
