use super::*;
use serde_json::json;

fn memory(ttl: Duration) -> Tickets {
    Tickets {
        backend: Backend::Memory(Mutex::new(HashMap::new())),
        ttl,
    }
}

fn binding(user: &str, arguments: &str) -> Binding {
    Binding {
        user: user.into(),
        key: "ops.restart".into(),
        arguments: arguments.into(),
        session: None,
    }
}

fn request<'a>(
    tickets: &'a Tickets,
    args: &'a Map<String, Value>,
    b: Binding,
) -> ApprovalRequest<'a> {
    ApprovalRequest {
        key: "ops.restart",
        arguments: args,
        binding: b,
        tickets,
    }
}

#[tokio::test]
async fn a_ticket_approves_its_own_call_once() {
    let tickets = memory(Duration::from_secs(60));
    let args = Map::new();
    let asked = request(&tickets, &args, binding("bob", "h1"));
    let issued = asked.issue(None).await.unwrap();
    assert!(is_ticket_id(&issued.id), "{}", issued.id);
    let settled = asked.settle(Some(&issued.id), Answer::Approve).await;
    assert_eq!(settled, Ok(Ok(())));
    // Single use.
    let again = asked.settle(Some(&issued.id), Answer::Approve).await;
    assert_eq!(again.unwrap().unwrap_err().decision, Decision::Expired);
}

#[tokio::test]
async fn a_ticket_for_other_arguments_or_another_user_approves_nothing() {
    let tickets = memory(Duration::from_secs(60));
    let args = Map::new();
    let issued = request(&tickets, &args, binding("bob", "h1"))
        .issue(None)
        .await
        .unwrap();
    let changed = request(&tickets, &args, binding("bob", "h2"));
    let refused = changed
        .settle(Some(&issued.id), Answer::Approve)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(refused.decision, Decision::Mismatch);
    assert!(refused.message.contains("other arguments"), "{refused:?}");
    // Taken by the mismatching call: the original cannot use it either.
    let original = request(&tickets, &args, binding("bob", "h1"));
    let gone = original.settle(Some(&issued.id), Answer::Approve).await;
    assert_eq!(gone.unwrap().unwrap_err().decision, Decision::Expired);

    let issued = original.issue(None).await.unwrap();
    let mallory = request(&tickets, &args, binding("mallory", "h1"));
    let refused = mallory
        .settle(Some(&issued.id), Answer::Approve)
        .await
        .unwrap()
        .unwrap_err();
    assert!(refused.message.contains("another user"), "{refused:?}");
}

#[tokio::test]
async fn declined_expired_and_malformed_tickets_are_refused() {
    let tickets = memory(Duration::from_millis(30));
    let args = Map::new();
    let asked = request(&tickets, &args, binding("bob", "h1"));
    let issued = asked.issue(None).await.unwrap();
    let declined = asked.settle(Some(&issued.id), Answer::Decline).await;
    assert_eq!(
        declined.unwrap().unwrap_err(),
        Refusal::declined("ops.restart")
    );

    let issued = asked.issue(None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    let late = asked.settle(Some(&issued.id), Answer::Approve).await;
    assert_eq!(late.unwrap().unwrap_err().decision, Decision::Expired);

    for bad in [None, Some(""), Some("apv_zz"), Some("../../etc")] {
        let r = asked
            .settle(bad, Answer::Approve)
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(r.decision, Decision::Expired, "{bad:?}");
    }
}

#[tokio::test]
async fn open_tickets_per_user_are_bounded() {
    let tickets = memory(Duration::from_secs(60));
    let args = Map::new();
    let asked = request(&tickets, &args, binding("bob", "h1"));
    for _ in 0..MAX_TICKETS_PER_USER {
        asked.issue(None).await.unwrap();
    }
    assert_eq!(asked.issue(None).await, Err(TicketError::TooMany));
    // Another user is not held up by bob.
    let alice = request(&tickets, &args, binding("alice", "h1"));
    assert!(alice.issue(None).await.is_ok());
}

#[test]
fn the_question_shows_the_key_and_the_exact_arguments() {
    let args = json!({"service": "web", "force": true});
    let q = question("ops.restart", args.as_object().unwrap(), "abc");
    assert_eq!(
        q,
        "Approve running tool 'ops.restart' with these arguments (sha256 abc)?\n{\n  \"service\": \"web\",\n  \"force\": true\n}"
    );
    let big = json!({"blob": "é".repeat(10_000)});
    let q = question("k", big.as_object().unwrap(), "h");
    assert!(q.len() < MAX_SHOWN_ARGUMENTS + 200, "{}", q.len());
    assert!(q.ends_with("bytes in all)"), "{q}");
}
