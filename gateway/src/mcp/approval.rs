//! Asking an MCP client's person to approve an `execute` call ([`crate::calls::approval`]
//! decides which calls, binds the answer and words the refusals):
//!
//! - legacy clients that declared form elicitation get an `elicitation/create` request
//!   in the call itself (bound to it by construction), a form with no fields whose
//!   message shows the key and the exact arguments; accept runs the call;
//! - 2026-07-28 clients that declared elicitation get an `input_required` result with
//!   the question under [`APPROVAL`] and a single-use ticket as `requestState`; the
//!   retry must carry both, for exactly the same call;
//! - other clients are refused: a call that needs approval never runs unasked (unlike
//!   missing params, where MCC goes on without asking).

use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, InputResponses,
};
use rmcp::service::{ElicitationMode, RequestContext};
use serde_json::json;

use super::input::{APPROVAL, MISSING_PARAMS, stateless};
use crate::calls::approval::{Answer, ApprovalRequest, Decision, Refusal};
use crate::calls::executed::Approval;

/// A form without fields: the person only accepts or declines.
fn confirmation() -> Option<ElicitationSchema> {
    let raw = json!({"type": "object", "properties": {}});
    ElicitationSchema::from_json_schema(raw.as_object().cloned()?).ok()
}

/// Asks (or reads the retry's answer) as described above.
pub async fn approve(
    request: &ApprovalRequest<'_>,
    ctx: &RequestContext<RoleServer>,
    answers: Option<&InputResponses>,
    state: Option<&str>,
) -> Approval<InputRequiredResult> {
    let key = request.key;
    let Some(requested_schema) = confirmation() else {
        return Approval::Refused(Refusal::unsupported(key));
    };
    let question = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: request.question(),
        requested_schema,
    };
    if stateless(ctx) {
        if let Some(answer) = answers.and_then(|a| a.get(APPROVAL)) {
            let read = serde_json::from_value::<ElicitResult>(answer.clone()).ok();
            let answer = match &read {
                Some(r) if r.action == ElicitationAction::Accept => Answer::Approve,
                _ => Answer::Decline,
            };
            // The ticket is taken whatever the answer says: it never serves twice.
            return match request.settle(state, answer).await {
                Ok(Ok(())) => Approval::Approved,
                Ok(Err(r)) if r.decision == Decision::Declined && read.is_none() => {
                    Approval::Refused(Refusal::unreadable(key))
                }
                Ok(Err(r)) => Approval::Refused(r),
                Err(e) => Approval::Failed(e),
            };
        }
        let declared = ctx
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        if !declared {
            return Approval::Refused(Refusal::unsupported(key));
        }
        // The missing params answered in this request, for the retry (see
        // `Tickets::answered`).
        let answered = answers
            .and_then(|a| a.get(MISSING_PARAMS))
            .and_then(|a| serde_json::from_value::<ElicitResult>(a.clone()).ok())
            .filter(|r| r.action == ElicitationAction::Accept)
            .and_then(|r| match r.content {
                Some(serde_json::Value::Object(content)) => Some(content),
                _ => None,
            });
        return match request.issue(answered).await {
            Ok(ticket) => {
                let mut requests = InputRequests::new();
                requests.insert(
                    APPROVAL.to_string(),
                    InputRequest::Elicitation(ElicitRequest::new(question)),
                );
                Approval::Pending(InputRequiredResult::new(Some(requests), Some(ticket.id)))
            }
            Err(e) => Approval::Failed(e),
        };
    }
    if !ctx
        .peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return Approval::Refused(Refusal::unsupported(key));
    }
    match ctx
        .peer
        .create_elicitation_with_timeout(question, Some(request.tickets.ttl()))
        .await
    {
        Ok(result) if result.action == ElicitationAction::Accept => Approval::Approved,
        Ok(_) => Approval::Refused(Refusal::declined(key)),
        Err(e) => {
            tracing::warn!(tool = key, error = %e, "approval question not answered");
            Approval::Refused(Refusal {
                decision: Decision::Expired,
                message: format!(
                    "Execution refused: the approval of '{key}' was not answered ({e})"
                ),
            })
        }
    }
}
