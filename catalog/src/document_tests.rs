//! Tests of [`super`]: encoding and decoding the catalog document (plain and gzipped, bounded), identities, and decoding that leaves out only unreadable entries.

use super::*;

#[test]
fn a_gzip_bomb_is_refused_at_the_bound() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&vec![b' '; 64 << 10]).unwrap();
    let bomb = gz.finish().unwrap();
    assert!(bomb.len() < 1024, "{} bytes of gzip", bomb.len());
    let err = gunzip_bounded(&bomb[..], 4096).unwrap_err();
    assert!(err.to_string().contains("more than 4096 bytes"), "{err}");
    assert_eq!(gunzip_bounded(&bomb[..], 64 << 10).unwrap().len(), 64 << 10);
}
use serde_json::json;

fn tool(key: &str) -> CatalogTool {
    CatalogTool {
        tool: serde_json::from_value(
            json!({"key": key, "name": key, "kind": "exec", "command": "echo"}),
        )
        .unwrap(),
        namespace: "ns".into(),
        resource: key.into(),
        env_from: vec![],
        env_value_from: vec![],
        runtime: Runtime::Local,
        introspect: false,
        name_from_callable: false,
        session: Default::default(),
    }
}

#[test]
fn small_documents_are_plain_json_and_round_trip() {
    let doc = CatalogDocument {
        tools: vec![tool("b"), tool("a")],
        ..Default::default()
    };
    let enc = encode(&doc).unwrap();
    let Payload::Json(text) = &enc.payload else {
        panic!("expected plain JSON")
    };
    let back = decode(Some(text), None).unwrap();
    assert_eq!(back.tools[0].tool.key, "a", "normalized order");
    let mut reordered = doc.clone();
    reordered.tools.reverse();
    assert_eq!(encode(&reordered).unwrap().hash, enc.hash);
}

#[test]
fn a_normalized_document_encodes_as_itself() {
    let mut doc = CatalogDocument {
        tools: vec![tool("b"), tool("a")],
        users: vec![CatalogUser {
            service_accounts: vec![
                ServiceAccountRef {
                    namespace: "n".into(),
                    name: "b".into(),
                },
                ServiceAccountRef {
                    namespace: "n".into(),
                    name: "a".into(),
                },
            ],
            ..Default::default()
        }],
        ..Default::default()
    };
    assert!(!doc.is_normalized());
    let unsorted = encode(&doc).unwrap();
    doc.tools.reverse();
    assert!(!doc.is_normalized(), "a user's list is not sorted");
    doc.normalize();
    assert!(doc.is_normalized());
    let sorted = encode(&doc).unwrap();
    assert_eq!(sorted, unsorted);
    let Payload::Json(text) = &sorted.payload else {
        panic!("expected plain JSON")
    };
    assert_eq!(text, &serde_json::to_string(&doc).unwrap());
    // A duplicated service account is not normalized (normalize removes it).
    let sa = doc.users[0].service_accounts[0].clone();
    doc.users[0].service_accounts.insert(1, sa);
    assert!(!doc.is_normalized());
}

#[test]
fn large_documents_are_gzipped() {
    let mut doc = CatalogDocument::default();
    for i in 0..2000 {
        let mut t = tool(&format!("tool{i:05}"));
        t.tool.description = "a fairly long description ".repeat(8);
        doc.tools.push(t);
    }
    let enc = encode(&doc).unwrap();
    let Payload::Gzip(bytes) = &enc.payload else {
        panic!("expected gzip")
    };
    assert_eq!(decode(None, Some(bytes)).unwrap().tools.len(), 2000);
}

#[test]
fn an_older_operators_plain_subjects_still_read() {
    let old: CatalogUser = serde_json::from_value(serde_json::json!(
        {"user": {"username": "bob"}, "oidcSubjects": ["sub-2"]}
    ))
    .unwrap();
    assert_eq!(
        old.oidc_subjects,
        [OidcSubject {
            issuer: None,
            subject: "sub-2".into()
        }]
    );
}

#[test]
fn decode_entries_leaves_out_only_the_entries_it_cannot_read() {
    let raw = crate::apikey::format_key(&[0xab; 6], &[1; 32]);
    let record = crate::apikey::ApiKeyRecord::of(&raw, None).unwrap();
    let mut doc = serde_json::to_value(CatalogDocument {
        tools: vec![tool("a"), tool("b")],
        users: vec![CatalogUser {
            user: User {
                username: "alice".into(),
                ..Default::default()
            },
            ..Default::default()
        }],
        ..Default::default()
    })
    .unwrap();
    doc["tools"][1]["runtime"] = json!({"wasm": {}});
    doc["users"]
        .as_array_mut()
        .unwrap()
        .push(json!({"user": {"username": "bob", "groups": "not-a-list"}, "apiKeys": [record]}));
    let text = doc.to_string();
    assert!(
        decode(Some(&text), None).is_err(),
        "the strict form refuses it all"
    );
    let (read, skipped) = decode_entries(Some(&text), None).unwrap();
    assert_eq!(read.tools.len(), 1);
    assert_eq!(read.tools[0].tool.key, "a");
    assert_eq!(read.users.len(), 1);
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert_eq!(skipped[0].entry, "tools[1] 'b' (Tool ns/b)");
    assert!(skipped[0].reason.contains("wasm"), "{skipped:?}");
    assert_eq!(skipped[1].entry, "users[1] 'bob'");
    assert_eq!((skipped[1].list, skipped[1].api_keys), ("users", 1));
    let e = decode_entries(Some(r#"{"format": 2, "tools": [], "users": []}"#), None);
    assert!(matches!(e, Err(DocumentError::Format { found: 2 })));
}

#[test]
fn decode_names_what_is_wrong() {
    assert!(matches!(decode(None, None), Err(DocumentError::Missing)));
    let e = decode(Some(r#"{"format": 99, "tools": [], "users": []}"#), None).unwrap_err();
    assert!(e.to_string().contains("format 99"), "{e}");
}
