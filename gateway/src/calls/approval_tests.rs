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

fn at(call: &str) -> HeldRef {
    HeldRef {
        replica: "r1".into(),
        call: call.into(),
    }
}

#[tokio::test]
async fn an_upstream_questions_ticket_resumes_its_own_call_once_and_approves_nothing() {
    let tickets = memory(Duration::from_secs(60));
    let ttl = Duration::from_secs(30);
    let issued = tickets
        .issue_held(binding("bob", "h1"), None, at("c1"), ttl)
        .await
        .unwrap();
    assert!(is_ticket_id(&issued.id), "{}", issued.id);
    assert_eq!(issued.expires_in, ttl);
    // Another user, other arguments: refused, and spent either way.
    let other = tickets
        .issue_held(binding("bob", "h1"), None, at("c2"), ttl)
        .await
        .unwrap();
    assert_eq!(
        tickets.take_held(&other.id, &binding("eve", "h1")).await,
        Ok(Err(Some("another user")))
    );
    assert_eq!(
        tickets.take_held(&other.id, &binding("bob", "h1")).await,
        Ok(Err(None))
    );
    let changed = tickets
        .issue_held(binding("bob", "h1"), None, at("c3"), ttl)
        .await
        .unwrap();
    assert_eq!(
        tickets.take_held(&changed.id, &binding("bob", "h2")).await,
        Ok(Err(Some("other arguments")))
    );
    // Its own call, once.
    let taken = tickets.take_held(&issued.id, &binding("bob", "h1")).await;
    assert_eq!(taken.unwrap().unwrap().held, at("c1"));
    assert_eq!(
        tickets.take_held(&issued.id, &binding("bob", "h1")).await,
        Ok(Err(None))
    );

    // An upstream question's ticket approves nothing; an approval's resumes nothing.
    let args = Map::new();
    let asked = request(&tickets, &args, binding("bob", "h1"));
    let held = tickets
        .issue_held(binding("bob", "h1"), None, at("c4"), ttl)
        .await
        .unwrap();
    let settled = asked.settle(Some(&held.id), Answer::Approve).await;
    assert_eq!(settled.unwrap().unwrap_err().decision, Decision::Expired);
    let approval = asked.issue(None).await.unwrap();
    assert_eq!(
        tickets.take_held(&approval.id, &binding("bob", "h1")).await,
        Ok(Err(None))
    );
}
