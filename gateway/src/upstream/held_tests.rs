//! Held calls with a stand-in upstream: a call that asks questions through the same
//! relay ([`super::super::relay::drive`]) the real calls use, and records the answers
//! it hears.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use serde_json::json;
use tokio::sync::{mpsc, oneshot, watch};

use super::*;
use crate::upstream::connect::CallEvents;
use crate::upstream::relay;

type Heard = Arc<Mutex<Vec<ElicitationAction>>>;

fn form(message: &str) -> ElicitRequestParams {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}});
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message.into(),
        requested_schema: ElicitationSchema::from_json_schema(schema.as_object().cloned().unwrap())
            .unwrap(),
    }
}

/// A call whose upstream asks `questions` questions in turn, records each answer's
/// action, and returns them as its text.
async fn asking(questions: usize, heard: Heard) -> Result<UpstreamReply, UpstreamError> {
    let (ask, questions_rx) = mpsc::channel(1);
    let (_progress, progress_rx) = watch::channel(None);
    let events = CallEvents {
        progress: progress_rx,
        questions: questions_rx,
    };
    let upstream = async move {
        let mut said = Vec::new();
        for i in 0..questions {
            let (to, answer) = oneshot::channel();
            ask.send((form(&format!("question {i}")), to))
                .await
                .unwrap();
            let answer = answer.await.expect("every question is answered");
            heard.lock().unwrap().push(answer.action.clone());
            said.push(format!("{:?}", answer.action));
        }
        Ok(UpstreamReply {
            content: vec![json!({"type": "text", "text": said.join(",")})],
            structured: None,
            is_error: false,
        })
    };
    relay::drive(upstream, events)
        .await
        .unwrap_or(Err(UpstreamError::QuestionClosed {
            server: "abandoned".into(),
        }))
}

fn asked(result: Result<UpstreamReply, UpstreamError>) -> Asked {
    match result {
        Err(UpstreamError::Asked { asked, .. }) => *asked,
        other => panic!("expected a question, got {other:?}"),
    }
}

fn accept(name: &str) -> ElicitResult {
    ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": name}))
}

async fn until(what: &str, check: impl Fn() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}");
}

#[tokio::test]
async fn a_question_is_held_until_the_answer_resumes_the_call() {
    let held = Held::default();
    let heard = Heard::default();
    let first = asked(held.start("up", asking(2, heard.clone())).await);
    let question = match &first.question {
        ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(question, "question 0");
    assert_eq!(first.held.replica, held.replica());
    let (_, at) = first.keep();
    assert_eq!(held.len(), 1);

    // The answer resumes it; its next question is held under the same call.
    let second = asked(held.resume("up", &at.call, accept("Ada")).await);
    assert_eq!(second.held, at);
    second.keep();
    let reply = held
        .resume(
            "up",
            &at.call,
            ElicitResult::new(ElicitationAction::Decline),
        )
        .await
        .unwrap();
    assert_eq!(reply.text(), "Accept,Decline");
    assert!(held.is_empty());

    // Spent: the same call resumes no more.
    let again = held.resume("up", &at.call, accept("x")).await;
    assert!(
        matches!(again, Err(UpstreamError::QuestionClosed { .. })),
        "{again:?}"
    );
}

#[tokio::test]
async fn a_call_without_questions_returns_its_result() {
    let held = Held::default();
    let reply = held.start("up", asking(0, Heard::default())).await.unwrap();
    assert_eq!(reply.text(), "");
    assert!(held.is_empty());
}

#[tokio::test]
async fn an_abandoned_question_is_answered_cancel_and_closed() {
    let held = Held::with_question_timeout(Duration::from_millis(200));
    let heard = Heard::default();
    let (_, at) = asked(held.start("up", asking(1, heard.clone())).await).keep();
    until("the upstream heard cancel", || {
        heard.lock().unwrap().as_slice() == [ElicitationAction::Cancel]
    })
    .await;
    until("the question left the table", || held.is_empty()).await;
    let late = held.resume("up", &at.call, accept("late")).await;
    assert!(
        matches!(late, Err(UpstreamError::QuestionClosed { .. })),
        "{late:?}"
    );
}

#[tokio::test]
async fn a_question_nobody_got_a_ticket_for_is_answered_cancel() {
    let held = Held::default();
    let heard = Heard::default();
    drop(asked(held.start("up", asking(1, heard.clone())).await));
    until("the upstream heard cancel", || {
        heard.lock().unwrap().as_slice() == [ElicitationAction::Cancel]
    })
    .await;
    assert!(held.is_empty());
}

#[tokio::test]
async fn a_cancelled_wait_cancels_the_held_call() {
    let held = Held::default();
    let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
    struct Ended(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Ended {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let flag = Ended(ended.clone());
    let call = async move {
        let _flag = flag;
        std::future::pending::<()>().await;
        Ok(UpstreamReply {
            content: vec![],
            structured: None,
            is_error: false,
        })
    };
    let waiting = tokio::time::timeout(Duration::from_millis(100), held.start("up", call)).await;
    assert!(waiting.is_err(), "the call never ends by itself");
    until("the held call was dropped", || {
        ended.load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;
}

#[test]
fn an_answer_slot_answers_once_and_cancel_when_dropped() {
    let (to, mut answer) = oneshot::channel();
    AnswerSlot::new(to).answer(accept("a"));
    assert_eq!(answer.try_recv().unwrap().action, ElicitationAction::Accept);
    let (to, mut answer) = oneshot::channel();
    drop(AnswerSlot::new(to));
    assert_eq!(answer.try_recv().unwrap().action, ElicitationAction::Cancel);
}
