//! Tests of [`super`].

use super::*;
use serde_json::json;

const IDP: &str = "https://idp.example.com/";

/// The directory Kubernetes mode builds from an operator document holding both forms
/// of `oidcSubjects`.
fn published() -> Directory {
    let doc: mcc_catalog::document::CatalogDocument = serde_json::from_value(json!({
        "format": 1, "tools": [],
        "users": [
            {"user": {"username": "alice", "email": "alice@example.com", "groups": ["admin"]},
             "oidcSubjects": [{"issuer": IDP, "subject": "00u-alice"}]},
            {"user": {"username": "bob"}, "oidcSubjects": ["legacy-bob"]}
        ]
    }))
    .unwrap();
    crate::catalog::published::users("mcc/mcc-catalog", &doc.users).directory
}

fn mapping(pinned: Option<&str>, claims: &[&str]) -> Mapping {
    Mapping {
        pinned_issuer: pinned.map(str::to_string),
        require_email_verified: true,
        username_claims: claims.iter().map(|c| c.to_string()).collect(),
    }
}

fn resolve(m: &Mapping, claims: serde_json::Value) -> Result<String, AuthError> {
    let claims: Claims = serde_json::from_value(claims).unwrap();
    m.resolve(&claims, &published()).map(|u| u.username)
}

#[test]
fn the_document_binds_issuer_and_subject() {
    let pinned = mapping(Some(IDP), &["sub"]);
    let alice = json!({"iss": IDP, "sub": "00u-alice"});
    assert_eq!(resolve(&pinned, alice).unwrap(), "alice");
    let bob = json!({"iss": IDP, "sub": "legacy-bob"});
    assert_eq!(resolve(&pinned, bob.clone()).unwrap(), "bob");
    // No pinned issuer: the old plain subject binds nothing.
    let open = mapping(None, &["sub"]);
    assert_eq!(resolve(&open, bob).unwrap(), "legacy-bob");
    let elsewhere = json!({"iss": "https://evil/", "sub": "00u-alice"});
    assert_eq!(resolve(&open, elsewhere).unwrap(), "00u-alice");
}

#[test]
fn email_and_editable_claims_follow_the_settings() {
    let m = mapping(Some(IDP), &["sub"]);
    let said = |v: serde_json::Value| json!({"iss": IDP, "sub": "s", "email": "ALICE@example.com", "email_verified": v});
    assert_eq!(resolve(&m, said(json!(true))).unwrap(), "alice");
    assert_eq!(resolve(&m, said(json!("true"))).unwrap(), "alice");
    assert_eq!(resolve(&m, said(json!(false))).unwrap(), "s");
    assert_eq!(resolve(&m, said(json!("yes"))).unwrap(), "s");
    let unsaid = json!({"iss": IDP, "sub": "s", "email": "alice@example.com"});
    assert_eq!(resolve(&m, unsaid.clone()).unwrap(), "s");
    let lax = Mapping {
        require_email_verified: false,
        ..mapping(Some(IDP), &["sub"])
    };
    assert_eq!(resolve(&lax, unsaid).unwrap(), "alice");

    let editable = json!({"iss": IDP, "sub": "s", "preferred_username": "alice", "name": "alice"});
    assert_eq!(resolve(&m, editable.clone()).unwrap(), "s");
    let trusting = mapping(Some(IDP), &["preferred_username"]);
    assert_eq!(resolve(&trusting, editable).unwrap(), "alice");
}

#[test]
fn an_unmapped_subject_never_takes_a_catalog_name() {
    let m = mapping(Some(IDP), &[]);
    let err = resolve(&m, json!({"iss": IDP, "sub": "alice"})).unwrap_err();
    assert!(
        matches!(&err, AuthError::Forbidden(m) if m.contains("oidcSubjects")),
        "{err:?}"
    );
    let err = resolve(&m, json!({"iss": IDP, "preferred_username": "x"})).unwrap_err();
    assert!(matches!(err, AuthError::InvalidToken(_)), "{err:?}");
}

#[test]
fn a_blank_username_claim_is_a_setup_error() {
    let settings = JwtSettings {
        hs256_secret: Some("x".repeat(32).into()),
        audience: vec!["a".into()],
        issuer: Some(IDP.into()),
        username_claims: vec![" sub".into()],
        ..JwtSettings::default()
    };
    let err = JwtVerifier::new(&settings).err().unwrap();
    assert_eq!(
        err.to_string(),
        "auth.jwt.username_claims: ' sub' is not a claim name"
    );
}

#[test]
fn the_issuer_is_required() {
    for issuer in [None, Some(" ".to_string())] {
        let settings = JwtSettings {
            hs256_secret: Some("x".repeat(32).into()),
            audience: vec!["a".into()],
            issuer,
            ..JwtSettings::default()
        };
        let err = JwtVerifier::new(&settings).err().unwrap().to_string();
        assert!(err.starts_with("auth.jwt.issuer: required"), "{err}");
    }
}

/// The settings file and the environment give secrets as plain strings (unchanged by
/// [`Secret`]); the loaded settings hold them but never print them.
#[test]
fn settings_with_secrets_load_and_never_print_them() {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        "auth:\n  backend: jwt\n  jwt:\n    hs256_secret: file-secret-0123456789abcdef0123456789\n    issuer: i\n    audience: a\nsearch:\n  embeddings_api_key: file-api-key\nmetrics:\n  token: metrics-token\n",
    )
    .unwrap();
    let env = |k: &str| (k == "MCC_SEARCH__EMBEDDINGS_API_KEY").then(|| "env-api-key".to_string());
    let s = crate::config::load(Some(file.path()), &env).unwrap();
    let jwt = &s.auth.jwt;
    assert_eq!(
        jwt.hs256_secret.as_ref().map(Secret::expose),
        Some("file-secret-0123456789abcdef0123456789")
    );
    assert_eq!(
        s.search.embeddings_api_key.as_ref().map(Secret::expose),
        Some("env-api-key")
    );
    assert_eq!(
        s.metrics.token.as_ref().map(Secret::expose),
        Some("metrics-token")
    );
    JwtVerifier::new(jwt).unwrap();
    let shown = format!("{s:?} {s:#?}");
    for secret in ["file-secret", "api-key", "metrics-token"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("<redacted>"));
}
