//! Tests of [`super`]: event ids and their streams, hash slots, oversize responses, and resuming a call (against real Redis).

use super::*;

#[test]
fn event_ids_name_their_stream_and_refuse_anything_else() {
    let id = event_id("6f1c0e4a-1b2c-4d5e-8f90-0123456789ab", "1733500000000-3");
    assert_eq!(
        parse_event_id(&id),
        Some(("6f1c0e4a-1b2c-4d5e-8f90-0123456789ab", "1733500000000-3"))
    );
    let common = event_id("abc:common", "1-0");
    assert_eq!(parse_event_id(&common), Some(("abc:common", "1-0")));
    for bad in [
        "0",
        "3/17",
        "x/1-0/",
        "/1-0",
        "a b/1-0",
        "s/1-",
        "s/-1",
        "s/unkept-ab",
    ] {
        assert_eq!(parse_event_id(bad), None, "{bad}");
    }
    let long = format!("{}/1-0", "a".repeat(129));
    assert_eq!(parse_event_id(&long), None);
}

#[test]
fn every_key_of_a_stream_is_in_its_hash_slot() {
    let keys = StreamKeys::new("mcc", "s1:common");
    for key in [keys.events, keys.bytes, keys.session] {
        assert!(key.ends_with(":{s1:common}"), "{key}");
    }
}

#[test]
fn an_oversize_response_is_kept_as_an_error_for_its_request() {
    let response: ServerJsonRpcMessage = serde_json::from_value(serde_json::json!(
            {"jsonrpc": "2.0", "id": 7, "result": {"content": []}}))
    .unwrap();
    let kept: Stored = serde_json::from_str(&substitute(Some(&response), 9, 8)).unwrap();
    let m = kept.m.unwrap();
    assert_eq!(m["id"], 7);
    assert!(m["error"]["message"].as_str().unwrap().contains("9 bytes"));
    let note: ServerJsonRpcMessage = serde_json::from_value(serde_json::json!(
            {"jsonrpc": "2.0", "method": "notifications/message",
             "params": {"level": "info", "data": "x"}}))
    .unwrap();
    assert_eq!(substitute(Some(&note), 9, 8), "");
    assert_eq!(substitute(None, 9, 8), "");
}

/// Real Redis (`REDIS_URL`, else 127.0.0.1:6379), keys under a fresh prefix.
#[tokio::test]
async fn a_call_resumed_from_its_unwritten_priming_event_gets_its_answer() {
    use futures::StreamExt;
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
    let bounds = Bounds {
        poll: Duration::from_millis(20),
        ..Bounds::default()
    };
    let store = EventStore::new(conn.clone(), &prefix, bounds);
    let stream = uuid::Uuid::new_v4().to_string();
    let priming = store
        .store_event(&stream, &ServerSseMessage::retry(Duration::from_secs(3)))
        .await
        .unwrap();
    assert_eq!(priming, event_id(&stream, PRIMING_ENTRY));
    let keys = store.keys(&stream);
    let written: bool = redis::cmd("EXISTS")
        .arg(&keys.events)
        .query_async(&mut conn.clone())
        .await
        .unwrap();
    assert!(!written, "a call's priming event is not written");
    // Not bound yet: nobody resumes it.
    assert!(matches!(
        store.resume("s1", &priming).await,
        Err(ResumeError::OtherSession)
    ));
    store.bind("s1", &priming).await;
    assert!(matches!(
        store.resume("s2", &priming).await,
        Err(ResumeError::OtherSession)
    ));
    // Bound, before any event is written: the resume waits for the call's answer.
    let mut resumed = store.resume("s1", &priming).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let answer: ServerJsonRpcMessage = serde_json::from_value(serde_json::json!(
            {"jsonrpc": "2.0", "id": 4, "result": {"content": []}}))
    .unwrap();
    let answer_id = store
        .store_event(&stream, &ServerSseMessage::from_message(answer))
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), resumed.next())
        .await
        .unwrap()
        .expect("the answer is replayed");
    assert_eq!(got.event_id.as_deref(), Some(answer_id.as_str()));
    assert!(is_answer(&got));
    let end = tokio::time::timeout(Duration::from_secs(5), resumed.next()).await;
    assert!(matches!(end, Ok(None)), "the resume ends with the answer");
    // A standalone stream's priming events are written as before.
    let common = standalone_stream("s1");
    let id = store
        .store_event(&common, &ServerSseMessage::retry(Duration::from_secs(3)))
        .await
        .unwrap();
    assert_ne!(id, event_id(&common, PRIMING_ENTRY));
    assert!(parse_event_id(&id).is_some());
    let _: () = redis::cmd("DEL")
        .arg(&keys.events)
        .arg(&keys.bytes)
        .arg(&keys.session)
        .arg(&store.keys(&common).events)
        .arg(&store.keys(&common).bytes)
        .query_async(&mut conn.clone())
        .await
        .unwrap();
}
