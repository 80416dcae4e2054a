//! One `tools/call` to an upstream: sent by the gateway itself in a legacy HTTP session
//! ([`direct`]) or by rmcp's client, waited for while the relay carries the upstream's
//! progress and questions to the caller, cancelled upstream when the caller stops
//! waiting, and why it failed.

use mcc_catalog::upstream::direct;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, RequestId, ServerResult};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient};

use super::connect::{self, Session};
use super::relay;

/// Sends one `tools/call` and waits for its result, relaying the upstream's progress
/// and questions about it to the caller ([`relay`]). The request carries a progress
/// token of the gateway's own; the caller's token never leaves the gateway. Dropping
/// the future sends `notifications/cancelled` for the request.
///
/// In a legacy HTTP session the gateway posts the request itself
/// ([`direct`]: about half the CPU rmcp's client spends on it); otherwise (2026-07-28
/// upstreams, stdio), and when the upstream no longer knows the session (it
/// restarted), rmcp's client sends it: it opens a new session and sends it again.
pub(super) async fn send(
    session: &Session,
    params: CallToolRequestParams,
) -> Result<ServerResult, CallFailed> {
    if let Some(legacy) = session.service().seen.legacy() {
        let id = direct::next_id();
        let (senders, events) = connect::call_events();
        let answer = direct::call(&legacy, &id, &params, senders);
        match drive(session, id.clone(), answer, events).await {
            Err(CallFailed::Lost(LostBy::Direct(direct::DirectError::SessionGone))) => {}
            other => return other,
        }
    }
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = session
        .peer()
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await?;
    let (_route, events) = session
        .service()
        .calls
        .register(handle.id.clone(), handle.progress_token.clone());
    drive(session, handle.id.clone(), handle.await_response(), events).await
}

/// Waits for request `id`'s `answer` in `session`, relaying `events` to the caller
/// ([`relay::drive`]); `notifications/cancelled` goes to the upstream if the caller stops
/// waiting first.
async fn drive<E: Into<CallFailed>>(
    session: &Session,
    id: RequestId,
    answer: impl Future<Output = Result<ServerResult, E>>,
    events: connect::CallEvents,
) -> Result<ServerResult, CallFailed> {
    let mut abandoned = CancelOnDrop {
        peer: session.peer().clone(),
        id: Some(id),
    };
    // None: a held call's question was abandoned; dropping `abandoned` sends
    // notifications/cancelled.
    let result = relay::drive(answer, events)
        .await
        .ok_or(CallFailed::Abandoned)?;
    abandoned.id = None;
    result.map_err(Into::into)
}

/// Why a `tools/call` has no result.
pub(super) enum CallFailed {
    /// The upstream's JSON-RPC error.
    Refused(rmcp::ErrorData),
    /// The caller's answer to the upstream's question will not come ([`held`]).
    Abandoned,
    /// The exchange failed (logged in full): the session is suspect.
    Lost(LostBy),
}

/// How an exchange failed: in rmcp's client, or in a call posted directly.
#[derive(Debug, thiserror::Error)]
pub(super) enum LostBy {
    #[error(transparent)]
    Rmcp(rmcp::ServiceError),
    #[error(transparent)]
    Direct(direct::DirectError),
}

impl From<rmcp::ServiceError> for CallFailed {
    fn from(e: rmcp::ServiceError) -> Self {
        match e {
            rmcp::ServiceError::McpError(e) => CallFailed::Refused(e),
            e => CallFailed::Lost(LostBy::Rmcp(e)),
        }
    }
}

impl From<direct::DirectError> for CallFailed {
    fn from(e: direct::DirectError) -> Self {
        match e {
            direct::DirectError::Mcp(e) => CallFailed::Refused(e),
            e => CallFailed::Lost(LostBy::Direct(e)),
        }
    }
}

/// Sends `notifications/cancelled` for a request whose caller stopped waiting for it.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        let params = rmcp::model::CancelledNotificationParam::new(
            Some(id),
            Some("the caller cancelled the call".into()),
        );
        let note = rmcp::model::CancelledNotification::new(params);
        // Best effort, after the call's future is gone: a closed session needs none.
        tokio::spawn(async move {
            let _ = peer.send_notification(note.into()).await;
        });
    }
}
