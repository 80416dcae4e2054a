//! Approval on the REST surface ([`crate::calls::approval`] owns the rule, the binding and
//! the tickets): a call that needs approval and carries no ticket is answered `428`
//! `approval_required` with a ticket, the question and its expiry; the client shows the
//! question to its person and repeats the same request with
//! `?approval_ticket=<ticket>&approval=approve` (or `decline`). The ticket is single-use
//! and bound to the user, the key, the exact arguments and the session handle.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::calls::approval::{Answer, ApprovalRequest};
use crate::calls::executed::{Approval, Ask, Asked};

/// `428 approval_required`: what to show and how to answer.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ApprovalTicket {
    /// Send it back as `approval_ticket` with the same key, params and session.
    pub ticket: String,
    /// Seconds the ticket stays answerable.
    pub expires_in: u64,
    /// The question for the person: the key and the exact arguments.
    pub question: String,
    /// SHA-256 of the arguments' canonical JSON: what the approval is bound to.
    pub params_hash: String,
}

/// The person's decision on a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RestDecision {
    Approve,
    Decline,
}

/// The REST surface's [`Ask`]: never asks for missing params (validation names them);
/// approval through tickets as above.
pub struct RestAsk {
    pub ticket: Option<String>,
    pub decision: Option<RestDecision>,
}

#[async_trait::async_trait]
impl Ask for RestAsk {
    type Pending = ApprovalTicket;

    async fn missing_params(
        &self,
        _tool: &mcc_catalog::Tool,
        _key: &str,
        params: serde_json::Map<String, serde_json::Value>,
    ) -> Asked<ApprovalTicket> {
        Asked::Proceed(params)
    }

    async fn approve(&self, request: &ApprovalRequest<'_>) -> Approval<ApprovalTicket> {
        if self.ticket.is_some() {
            let answer = match self.decision {
                Some(RestDecision::Approve) => Answer::Approve,
                _ => Answer::Decline,
            };
            return match request.settle(self.ticket.as_deref(), answer).await {
                Ok(Ok(())) => Approval::Approved,
                Ok(Err(refusal)) => Approval::Refused(refusal),
                Err(e) => Approval::Failed(e),
            };
        }
        match request.issue(None).await {
            Ok(issued) => Approval::Pending(ApprovalTicket {
                ticket: issued.id,
                expires_in: issued.expires_in.as_secs(),
                question: request.question(),
                params_hash: request.binding.arguments.clone(),
            }),
            Err(e) => Approval::Failed(e),
        }
    }
}
